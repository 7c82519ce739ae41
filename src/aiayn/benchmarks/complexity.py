"""`aiayn bench complexity`: Table 1 of section 4, measured on this machine.

Table 1 gives the cost of one layer over a sequence of n positions of width d: self-attention O(n^2 d),
recurrent O(n d^2), convolutional O(k n d^2); self-attention is the cheaper when n < d. This benchmark times
forward + backward of one layer of each kind at the same d_model over growing n (batch fixed): the model's own
`MultiHeadAttention` (projections + eq. (1) + W^O), eq. (1) alone (`scaled_dot_product_attention`), `torch.nn.LSTM` and
`torch.nn.Conv1d` (kernel k = 3). It fits the growth exponent p of time ~ n^p over the large-n range and finds
the length where attention becomes slower than the LSTM.

The generation side (section 4's last paragraph of Table 1's discussion, and 3.2.3): a decoder that re-runs
`decode` over the whole prefix at each step pays a cost growing with the prefix; `step` with the KV cache
computes only the new position. Both are timed per generated token as the output grows.

Writes complexity.json (each field documented under its "fields" key), complexity.md and complexity.png/.svg.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from aiayn.benchmarks.timing import crossover, fit_exponent, machine, time_call
from aiayn.config import ModelConfig
from aiayn.io import atomic_write_json, atomic_write_text
from aiayn.model import MultiHeadAttention, Transformer, scaled_dot_product_attention

LAYERS = ("self_attention", "attention_scores_only", "recurrent_lstm", "convolution")
TABLE_1 = {  # layer: (complexity per layer, sequential operations, maximum path length, exponent in n)
    "self_attention": ("O(n^2 d)", "O(1)", "O(1)", 2),
    "attention_scores_only": ("O(n^2 d)", "O(1)", "O(1)", 2),
    "recurrent_lstm": ("O(n d^2)", "O(n)", "O(n)", 1),
    "convolution": ("O(k n d^2)", "O(1)", "O(log_k n)", 1),
}
FORMAT_VERSION = 1

FIELDS = {
    "benchmark": "always 'complexity'",
    "format_version": "version of this JSON layout",
    "command": "the command line that produced the file",
    "machine": "where it ran: platform, processor, python, torch version, torch CPU threads",
    "config.d_model": "width d of every layer (the d of Table 1)",
    "config.h": "attention heads; d_k = d_v = d_model / h",
    "config.batch": "sentences per timed call",
    "config.kernel": "convolution kernel width k",
    "config.lengths": "sequence lengths n timed",
    "config.fit_from": "smallest n used to fit the large-n exponents",
    "config.seed": "torch random seed for weights and inputs",
    "config.threads": "torch CPU threads used",
    "config.rounds": "interleaved timing rounds over all (layer, n)",
    "config.quick": "true for the reduced test configuration",
    "layers.*.description": "what is timed: forward + backward of one layer on [batch, n, d_model]",
    "layers.*.table1_complexity": "the paper's Table 1 complexity per layer",
    "layers.*.table1_sequential_operations": "Table 1: minimum number of sequential operations",
    "layers.*.table1_max_path_length": "Table 1: maximum path length between positions",
    "layers.*.expected_exponent": "p in time ~ n^p implied by Table 1 once n dominates",
    "layers.*.seconds": "per n: minimum seconds of one forward + backward over all timed calls",
    "layers.*.median_seconds": "per n: median over rounds of each round's minimum",
    "layers.*.repeats": "per n: number of timed calls over all rounds",
    "layers.*.forward_flops": "per n: forward floating-point operations (2 per multiply-add) of the layer",
    "layers.*.exponent_large_n": "fitted p over n >= config.fit_from (log-log least squares)",
    "layers.*.r2_large_n": "R^2 of that fit",
    "layers.*.flop_exponent_large_n": "the same fit to forward_flops: the growth the FLOP count predicts over "
    "that range (below 2 for the attention layer while its O(n d^2) projections still count)",
    "layers.*.exponent_small_n": "fitted p over n < config.fit_from (null if fewer than two points)",
    "crossover.measured_n": "first n (log-log interpolated) where the attention layer is slower than the LSTM; "
    "null if attention is cheaper over the whole range",
    "crossover.table1_n": "where Table 1's n^2 d meets n d^2: n = d",
    "crossover.flop_n": "where the forward FLOP counts meet (attention 8 n d^2 + 4 n^2 d, LSTM 16 n d^2): n = 2d",
    "crossover.attention_over_lstm": "per n: attention seconds / LSTM seconds",
    "generation.config": "the decoder timed: N, d_model, h, d_ff, vocabulary, source length, batch",
    "generation.steps": "number of tokens generated",
    "generation.checkpoints": "output lengths t at which per-token times are summarised",
    "generation.cached_seconds_per_token": "per checkpoint: median seconds of one `step` with the KV cache, "
    "over the steps in (t/2, t]",
    "generation.uncached_seconds_per_token": "per checkpoint: the same for re-running `decode` on the prefix",
    "generation.cached_total_seconds": "seconds to generate all steps with the cache (sum of per-step minima)",
    "generation.uncached_total_seconds": "the same without the cache",
    "generation.speedup_last_checkpoint": "uncached / cached seconds per token at the last checkpoint",
    "generation.cached_exponent": "fitted p of cached per-token time ~ t^p over the upper half of checkpoints",
    "generation.uncached_exponent": "the same for the uncached decoder",
    "generation.max_abs_logit_difference": "largest |cached - uncached| next-token logit: the cache is exact",
    "fields": "this documentation of every field",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--d-model", type=int, default=256, help="layer width d (default: 256)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads h (default: 4)")
    parser.add_argument("--batch", type=int, default=4, help="sentences per call (default: 4)")
    parser.add_argument("--kernel", type=int, default=3, help="convolution kernel width k (default: 3)")
    parser.add_argument("--min-n", type=int, default=16, help="shortest length (default: 16)")
    parser.add_argument("--max-n", type=int, default=2048, help="longest length, by doubling (default: 2048)")
    parser.add_argument("--fit-from", type=int, help="fit large-n exponents over n >= this (default: max-n / 8)")
    parser.add_argument("--gen-steps", type=int, default=256, help="tokens generated (default: 256)")
    parser.add_argument("--gen-layers", type=int, default=3, help="decoder layers N for generation (default: 3)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default: 5)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default: 1, steady on a shared machine; 0: torch's)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="small sizes for tests (a few seconds)")


def _layer_call(name: str, d: int, h: int, batch: int, n: int, kernel: int):
    """A closure running forward + backward of one layer on fresh-gradient inputs."""
    if name == "self_attention":
        layer: nn.Module = MultiHeadAttention(d, h, d // h, d // h)
        x = torch.randn(batch, n, d, requires_grad=True)

        def run() -> None:
            out, _ = layer(x, x)  # projections, eq. (1) per head, W^O
            out.sum().backward()

    elif name == "attention_scores_only":
        q, k, v = (torch.randn(batch, h, n, d // h, requires_grad=True) for _ in range(3))

        def run() -> None:
            out, _ = scaled_dot_product_attention(q, k, v)  # softmax(Q K^T / sqrt(d_k)) V
            out.sum().backward()

    elif name == "recurrent_lstm":
        layer = nn.LSTM(d, d, batch_first=True)
        x = torch.randn(batch, n, d, requires_grad=True)

        def run() -> None:
            out, _ = layer(x)
            out.sum().backward()

    elif name == "convolution":
        layer = nn.Conv1d(d, d, kernel, padding=kernel // 2)
        x = torch.randn(batch, d, n, requires_grad=True)  # Conv1d is channels-first: [B, d, n]

        def run() -> None:
            layer(x).sum().backward()

    else:
        raise ValueError(name)
    return run


def forward_flops(name: str, n: int, d: int, h: int, kernel: int) -> float:
    """Forward FLOPs of one layer for one sequence (2 per multiply-add)."""
    if name == "self_attention":
        return 2 * 4 * n * d * d + 2 * 2 * n * n * d  # Q, K, V, W^O projections; Q K^T and weights @ V
    if name == "attention_scores_only":
        return 2 * 2 * n * n * d
    if name == "recurrent_lstm":
        return 2 * 8 * n * d * d  # 4 gates, each W x + U h
    return 2 * kernel * n * d * d


def measure_layers(args: argparse.Namespace, lengths: list[int]) -> dict[str, dict[str, Any]]:
    """Time every (layer, n) in `args.rounds` interleaved rounds and keep each one's minimum, so that a burst of
    load from other processes spoils one round of every layer rather than all repeats of one."""
    jobs = {}
    for name in LAYERS:
        for n in lengths:
            torch.manual_seed(args.seed)
            jobs[name, n] = _layer_call(name, args.d_model, args.heads, args.batch, n, args.kernel)
    for call in jobs.values():  # first calls pay for lazy initialisation and allocation
        call()
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in jobs}
    repeats = dict.fromkeys(jobs, 0)
    with tqdm(total=args.rounds * len(jobs), desc="layers", unit="run", file=sys.stderr) as bar:
        for _ in range(args.rounds):
            for key, call in jobs.items():  # short calls repeat within a round until 20 ms have passed
                timing = time_call(call, min_repeats=1, min_total_s=0.02, warmup=0)
                samples[key].append(timing["min_s"])
                repeats[key] += int(timing["repeats"])
                bar.update()
    results: dict[str, dict[str, Any]] = {}
    for (name, n), values in samples.items():
        entry = results.setdefault(name, {"seconds": [], "median_seconds": [], "repeats": [], "forward_flops": []})
        entry["seconds"].append(min(values))
        entry["median_seconds"].append(sorted(values)[len(values) // 2])
        entry["repeats"].append(repeats[name, n])
        entry["forward_flops"].append(args.batch * forward_flops(name, n, args.d_model, args.heads, args.kernel))
    for name, entry in results.items():
        complexity, sequential, path, exponent = TABLE_1[name]
        large = [(n, t) for n, t in zip(lengths, entry["seconds"]) if n >= args.fit_from]
        small = [(n, t) for n, t in zip(lengths, entry["seconds"]) if n < args.fit_from]
        fit = fit_exponent(*zip(*large))
        results[name] = {
            "description": {
                "self_attention": "MultiHeadAttention: projections, eq. (1) (fused kernel), W^O",
                "attention_scores_only": "eq. (1) alone: softmax(Q K^T / sqrt(d_k)) V, written out",
                "recurrent_lstm": "torch.nn.LSTM, one layer, hidden size d",
                "convolution": f"torch.nn.Conv1d, d -> d channels, kernel {args.kernel}",
            }[name],
            "table1_complexity": complexity,
            "table1_sequential_operations": sequential,
            "table1_max_path_length": path,
            "expected_exponent": exponent,
            **entry,
            "exponent_large_n": fit["exponent"],
            "r2_large_n": fit["r2"],
            "flop_exponent_large_n": fit_exponent(
                [n for n in lengths if n >= args.fit_from],
                [f for n, f in zip(lengths, entry["forward_flops"]) if n >= args.fit_from],
            )["exponent"],
            "exponent_small_n": fit_exponent(*zip(*small))["exponent"] if len(small) >= 2 else None,
        }
    return results


def measure_generation(args: argparse.Namespace) -> dict[str, Any]:
    """Per-token time of `step` with the cache and of `decode` over the whole prefix, as the output grows."""
    d, steps = args.d_model, args.gen_steps
    vocab, src_len, batch = 1000 if args.quick else 8000, 20, 1
    config = ModelConfig(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        N=args.gen_layers,
        d_model=d,
        d_ff=4 * d,
        h=args.heads,
        d_k=d // args.heads,
        d_v=d // args.heads,
        P_drop=0.0,
    )
    torch.manual_seed(args.seed)
    model = Transformer(config).eval()
    src = torch.randint(4, vocab, (batch, src_len))
    tokens = torch.cat([torch.full((batch, 1), config.bos_id), torch.randint(4, vocab, (batch, steps - 1))], dim=1)
    repeats = 2 if args.quick else 3
    cached = [math.inf] * steps
    uncached = [math.inf] * steps
    max_diff = 0.0
    with torch.no_grad():
        memory = model.encode(src)
        for _ in tqdm(range(repeats), desc="generation", unit="pass", file=sys.stderr):
            cache = model.init_cache(memory, capacity=steps)  # preallocated: no growth inside the timing
            for t in range(steps):
                t0 = time.perf_counter()
                logits_cached = model.step(tokens[:, t], cache).logits[:, -1]
                t1 = time.perf_counter()
                logits_full = model.decode(tokens[:, : t + 1], memory).logits[:, -1]
                t2 = time.perf_counter()
                cached[t] = min(cached[t], t1 - t0)
                uncached[t] = min(uncached[t], t2 - t1)
                max_diff = max(max_diff, float((logits_cached - logits_full).abs().max()))
    checkpoints = [t for t in (2**i for i in range(1, 20)) if t <= steps]

    def window(series: list[float], t: int) -> float:
        values = sorted(series[t // 2 : t])  # steps (t/2, t], 1-based
        return values[len(values) // 2]

    cached_at = [window(cached, t) for t in checkpoints]
    uncached_at = [window(uncached, t) for t in checkpoints]
    upper = [i for i, t in enumerate(checkpoints) if t >= checkpoints[-1] // 8] or list(range(len(checkpoints)))
    return {
        "config": {
            "N": config.N,
            "d_model": d,
            "h": config.h,
            "d_ff": config.d_ff,
            "vocab": vocab,
            "source_length": src_len,
            "batch": batch,
        },
        "steps": steps,
        "checkpoints": checkpoints,
        "cached_seconds_per_token": cached_at,
        "uncached_seconds_per_token": uncached_at,
        "cached_total_seconds": sum(cached),
        "uncached_total_seconds": sum(uncached),
        "speedup_last_checkpoint": uncached_at[-1] / cached_at[-1],
        "cached_exponent": fit_exponent([checkpoints[i] for i in upper], [cached_at[i] for i in upper])["exponent"],
        "uncached_exponent": fit_exponent([checkpoints[i] for i in upper], [uncached_at[i] for i in upper])["exponent"],
        "max_abs_logit_difference": max_diff,
    }


def command(args: argparse.Namespace) -> str:
    if args.quick:
        return f"aiayn bench complexity --quick --threads {torch.get_num_threads()}"
    return (
        f"aiayn bench complexity --d-model {args.d_model} --heads {args.heads} --batch {args.batch} "
        f"--kernel {args.kernel} --rounds {args.rounds} --min-n {args.min_n} --max-n {args.max_n} "
        f"--fit-from {args.fit_from} "
        f"--gen-steps {args.gen_steps} --gen-layers {args.gen_layers} --threads {torch.get_num_threads()} "
        f"--seed {args.seed}"
    )


def _apply_quick(args: argparse.Namespace) -> None:
    if args.quick:
        args.d_model, args.heads, args.batch = 64, 4, 2
        args.min_n, args.max_n = 32, 512
        args.gen_steps, args.gen_layers, args.rounds = 32, 1, 3


def run(args: argparse.Namespace) -> int:
    _apply_quick(args)
    threads = torch.get_num_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads)


def _run(args: argparse.Namespace) -> int:
    from aiayn.benchmarks.complexity_report import markdown, plot

    if args.d_model % args.heads:
        raise ValueError(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")
    if not 1 <= args.min_n <= args.max_n:
        raise ValueError(f"need 1 <= --min-n <= --max-n, got {args.min_n} and {args.max_n}")
    lengths = [args.min_n * 2**i for i in range(int(math.log2(args.max_n / args.min_n)) + 1)]
    args.fit_from = args.fit_from or max(lengths[0], args.max_n // 8)
    if sum(n >= args.fit_from for n in lengths) < 2:
        raise ValueError(f"--fit-from {args.fit_from} leaves fewer than two lengths to fit")
    layers = measure_layers(args, lengths)
    attention, lstm = layers["self_attention"]["seconds"], layers["recurrent_lstm"]["seconds"]
    report = {
        "benchmark": "complexity",
        "format_version": FORMAT_VERSION,
        "command": command(args),
        "machine": machine(),
        "config": {
            "d_model": args.d_model,
            "h": args.heads,
            "batch": args.batch,
            "kernel": args.kernel,
            "lengths": lengths,
            "fit_from": args.fit_from,
            "seed": args.seed,
            "threads": torch.get_num_threads(),
            "rounds": args.rounds,
            "quick": bool(args.quick),
        },
        "layers": layers,
        "crossover": {
            "measured_n": crossover(lengths, attention, lstm),
            "table1_n": args.d_model,
            "flop_n": 2 * args.d_model,
            "attention_over_lstm": [a / b for a, b in zip(attention, lstm)],
        },
        "generation": measure_generation(args),
        "fields": FIELDS,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out / "complexity.json", report)
    text = markdown(report)
    atomic_write_text(args.out / "complexity.md", text)
    written = plot(report, args.out)
    print(text)
    print(
        json.dumps(
            {"files": [str(args.out / "complexity.json"), str(args.out / "complexity.md"), *map(str, written)]},
            indent=2,
        )
    )
    return 0
