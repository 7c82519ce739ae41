"""`aiayn bench decoding` (also `python -m aiayn.benchmarks.decoding`): decoding throughput (section 6.1's
beam search) against peers, on real Multi30k test sentences.

For each model size (random weights: only speed is measured) and each search (beam 4, greedy), every system
decodes the same batch of sentences with the output length forced to L (EOS forbidden before, so all systems
do the same work: L decoder steps per sentence), L in --lengths, and reports output tokens per second:

    ours            generate() with the KV cache on the model prepared by `optimize_for_inference` (oneDNN-packed
                    float32 weights), as `Translator.from_pretrained` runs it
    ours-plain      the same without `optimize_for_inference` (torch's default float32 matmul path)
    ours-uncached   ours re-running the decoder over the whole prefix at every step (no KV cache)
    ours-int8       `optimize_for_inference(int8=True)`: dynamic int8 decoder linear layers (torch.ao, fbgemm)
    hf              Hugging Face MarianMTModel.generate (same shape, KV cache)
    ct2-float32     CTranslate2 on the converted Marian model
    ct2-int8        the same, int8 weights

Each figure is the best of --repeats interleaved runs (the least disturbed on a shared machine). The same run
measures the machine's matmul rate on the decoder's shapes and reports the floor: decoder FLOPs per output
token (x beam) over that rate. --profile adds where ours spends its time (torch.profiler, by kind of op).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from aiayn.benchmarks.decoding_peers import CTranslate2Marian, HuggingFaceMarian, available, timed
from aiayn.benchmarks.timing import machine
from aiayn.config import DecodeConfig, preset
from aiayn.data import Tokenizer, resolve_data_dir
from aiayn.decoding import generate
from aiayn.decoding.inference import onednn_available, optimize_for_inference
from aiayn.model import Transformer

SYSTEMS = ("ours", "ours-plain", "ours-uncached", "ours-int8", "hf", "ct2-float32", "ct2-int8")
PEER_PACKAGES = {"hf": "transformers", "ct2-float32": "ctranslate2", "ct2-int8": "ctranslate2"}
OP_KINDS = {  # torch.profiler op name -> kind of work, for the profile summary
    "matmul, oneDNN packed": ("mkldnn::_linear_pointwise",),
    "matmul, torch default (MKL)": ("aten::addmm", "aten::mm", "aten::bmm", "aten::matmul"),
    "matmul, int8": ("quantized::linear_dynamic",),
    "attention (SDPA)": ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_softmax"),
    "cache copies (append, reorder)": ("aten::index_select", "aten::index_copy_", "aten::copy_", "aten::cat"),
    "search (softmax, top-k)": ("aten::_log_softmax", "aten::topk", "aten::logsumexp", "aten::argmax"),
    "layer norm, residual, ReLU": ("aten::native_layer_norm", "aten::add", "aten::clamp_min", "aten::mul"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="small,base", help="model presets (small: d_model 256, 3+3 layers)")
    parser.add_argument("--lengths", default="20,40,80", help="forced output lengths L")
    parser.add_argument("--beams", default="4,1", help="beam sizes; 1 = greedy search")
    parser.add_argument("--sentences", type=int, default=64, help="Multi30k test2016 sentences in the batch")
    parser.add_argument("--uncached-sentences", type=int, default=16, help="batch of ours-uncached (it is slow)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"any of {', '.join(SYSTEMS)}")
    parser.add_argument("--threads", type=int, default=2, help="torch / CTranslate2 CPU threads (default: 2)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="joint BPE vocabulary (default: 8000)")
    parser.add_argument("--tokenizer", type=Path, help="a tokenizer.model (default: train one on Multi30k train)")
    parser.add_argument("--data-dir", type=Path, help="corpora directory (default: $AIAYN_DATA_DIR, ../shared/data)")
    parser.add_argument("--src-lang", default="en")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved runs per figure; the best is kept")
    parser.add_argument("--profile", action="store_true", help="profile ours (first beam, middle length) per size")
    parser.add_argument("--json", type=Path, help="write all figures here")
    parser.add_argument("--markdown", type=Path, help="write the tables here")
    parser.add_argument("--seed", type=int, default=0)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def load_sentences(args: argparse.Namespace, tokenizer: Tokenizer) -> list[list[int]]:
    path = resolve_data_dir(args.data_dir) / "multi30k" / f"test2016.{args.src_lang}"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: Multi30k test set not found (set --data-dir or AIAYN_DATA_DIR)")
    lines = path.read_text(encoding="utf-8").splitlines()[: args.sentences]
    return tokenizer.encode_batch(lines)


def load_tokenizer(args: argparse.Namespace, workdir: Path) -> Tokenizer:
    if args.tokenizer is not None:
        return Tokenizer.from_file(args.tokenizer)
    folder = resolve_data_dir(args.data_dir) / "multi30k"
    files = [folder / "train.en", folder / "train.de"]
    return Tokenizer.train(files, args.vocab_size, workdir / "tokenizer.model", threads=args.threads)


def source_tensor(sources: list[list[int]]) -> torch.Tensor:
    src = torch.zeros(len(sources), max(map(len, sources)) + 1, dtype=torch.long)
    for row, ids in enumerate(sources):
        src[row, : len(ids)] = torch.tensor(ids)
        src[row, len(ids)] = 2
    return src


def forced_length(beam: int, length: int, use_cache: bool = True) -> DecodeConfig:
    """L decoder steps: L - 1 tokens with EOS forbidden, then the EOS forced at the maximum length."""
    return DecodeConfig(
        beam=beam, greedy=beam == 1, max_len_a=0.0, max_len_b=length - 1, min_len=length - 1, use_cache=use_cache
    )


def run_ours(model: Transformer, src: torch.Tensor, beam: int, length: int, use_cache: bool = True) -> int:
    results = generate(model, src, forced_length(beam, length, use_cache))
    produced = {len(hyps[0].tokens) + 1 for hyps in results}
    if produced != {length}:
        raise RuntimeError(f"ours produced {sorted(produced)} tokens per sentence, expected {length}")
    return length * src.size(0)


def _product(path: str, x: torch.Tensor, weight: torch.Tensor):
    """x @ weight^T through torch's default float32 path or through oneDNN with the weight packed once."""
    if path == "torch":
        return lambda: torch.nn.functional.linear(x, weight)
    packed = torch.ops.mkldnn._reorder_linear_weight(weight, x.size(0))
    return lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


def matmul_rate(rows: int, d_model: int, d_ff: int, vocab: int, repeats: int = 20) -> dict[str, float]:
    """GFLOP/s of the decoder's largest products, [rows, d_model] x [d_model, d_ff] and x [d_model, V], through
    torch's default float32 path ("torch": MKL on x86) and oneDNN with packed weights ("onednn": what
    `optimize_for_inference` uses), each the best of `repeats`."""
    rates = {}
    for path in ("torch", "onednn") if onednn_available() else ("torch",):
        seconds = 0.0
        for n in (d_ff, vocab):
            fn = _product(path, torch.randn(rows, d_model), torch.randn(n, d_model))
            fn()
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            seconds += min(times)
        rates[path] = sum(2 * rows * d_model * n for n in (d_ff, vocab)) / seconds / 1e9
    return rates


def profile_ours(model: Transformer, src: torch.Tensor, beam: int, length: int) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    config = forced_length(beam, length)
    generate(model, src[:4], config)
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        generate(model, src, config)
    wall = time.perf_counter() - start
    totals: dict[str, float] = defaultdict(float)
    ops = []
    for event in prof.key_averages():
        ops.append((event.key, event.self_cpu_time_total / 1e6, event.count))
        kind = next((k for k, names in OP_KINDS.items() if event.key in names), "other ops")
        totals[kind] += event.self_cpu_time_total / 1e6
    ops.sort(key=lambda op: -op[1])
    return {
        "beam": beam,
        "length": length,
        "wall_s": wall,
        "by_kind_s": dict(totals),
        "top_ops": [list(op) for op in ops[:15]],
    }


def build_systems(name: str, wanted: list[str], tokenizer: Tokenizer, args: argparse.Namespace) -> dict[str, Any]:
    config = preset(name, src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, P_drop=0.0)
    torch.manual_seed(args.seed)
    plain = Transformer(config).eval()
    systems: dict[str, Any] = {"config": config, "ours-plain": plain}
    systems["ours"] = optimize_for_inference(copy.deepcopy(plain))
    if "ours-int8" in wanted:
        systems["ours-int8"] = optimize_for_inference(copy.deepcopy(plain), int8=True)
    if any(s in wanted for s in PEER_PACKAGES):
        marian = HuggingFaceMarian(config, seed=args.seed)
        systems["hf"] = marian
        for compute_type in ("float32", "int8"):
            if f"ct2-{compute_type}" in wanted:
                systems[f"ct2-{compute_type}"] = CTranslate2Marian(marian, tokenizer, compute_type, args.threads)
    return systems


def call(system: str, systems: dict[str, Any], sources: list[list[int]], src, beam: int, length: int):
    if system in ("ours", "ours-plain", "ours-int8"):
        return lambda: run_ours(systems[system], src, beam, length)
    if system == "ours-uncached":
        return lambda: run_ours(systems["ours"], src, beam, length, use_cache=False)
    return lambda: systems[system].generate(sources, beam, length)


def measure_size(
    size: str, wanted: list[str], tokenizer: Tokenizer, sources: list[list[int]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """All figures of one model size: best of --repeats interleaved runs per (search, length, system)."""
    systems = build_systems(size, wanted, tokenizer, args)
    config: Any = systems["config"]
    lengths, beams, few = _ints(args.lengths), _ints(args.beams), args.uncached_sentences
    src = source_tensor(sources)
    for beam in beams:  # warm-up: one short call per system
        for system in wanted:
            call(system, systems, sources[:4], src[:4], beam, 4)()
    best: dict[tuple[int, int, str], tuple[float, int]] = {}
    for repeat in range(args.repeats):
        for beam in beams:
            for length in lengths:
                for system in wanted:
                    if system == "ours-uncached" and repeat > 0:
                        continue  # one run: it is slow, and its noise is small next to its cost
                    n = few if system == "ours-uncached" else len(sources)
                    seconds, count = timed(call(system, systems, sources[:n], src[:n], beam, length))
                    if seconds < best.get((beam, length, system), (float("inf"), 0))[0]:
                        best[(beam, length, system)] = (seconds, count)
                    print(f"  {size} beam={beam} L={length} {system}: {count / seconds:,.0f} tok/s", file=sys.stderr)
    rows = []
    mean_src = round(statistics.fmean(map(len, sources))) + 1
    for beam in beams:
        rates = matmul_rate(len(sources) * beam, config.d_model, config.d_ff, config.tgt_vocab_size)
        rate = max(rates.values())  # the machine's: the faster of the two float32 paths
        for length in lengths:
            flops = systems["ours"].flops_per_token(mean_src, length)["decoder_per_target_token"]
            for system in wanted:
                seconds, count = best[(beam, length, system)]
                rows.append(
                    {
                        "size": size,
                        "d_model": config.d_model,
                        "layers": f"{config.N}+{config.decoder_layers}",
                        "vocab": config.tgt_vocab_size,
                        "search": "greedy" if beam == 1 else f"beam {beam}",
                        "length": length,
                        "system": system,
                        "sentences": few if system == "ours-uncached" else len(sources),
                        "tokens_per_s": count / seconds,
                        "seconds": seconds,
                        "matmul_gflops": rate,
                        "matmul_gflops_by_path": rates,
                        "decoder_flops_per_token": flops,
                        "floor_tokens_per_s": rate * 1e9 / (beam * flops),
                    }
                )
    if args.profile:
        rows[-1]["profile"] = profile_ours(systems["ours"], src, beams[0], lengths[len(lengths) // 2])
    return rows


def run(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)
    wanted = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(wanted) - set(SYSTEMS))
    if unknown:
        raise ValueError(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    missing = sorted({PEER_PACKAGES[s] for s in wanted if s in PEER_PACKAGES and not available(PEER_PACKAGES[s])})
    if missing:
        print(f"bench decoding: skipping peers needing {', '.join(missing)} ('peers' extra)", file=sys.stderr)
        wanted = [s for s in wanted if PEER_PACKAGES.get(s) not in missing]
    report: dict[str, Any] = {
        "benchmark": "decoding",
        "command": " ".join(sys.argv),
        "machine": {**machine(), "loadavg_start": os.getloadavg()},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if not k.startswith("_")},
        "results": [],
        "profile": {},
    }
    with tempfile.TemporaryDirectory(prefix="aiayn-bench-") as workdir:
        tokenizer = load_tokenizer(args, Path(workdir))
        sources = load_sentences(args, tokenizer)
        report["sentences"] = {"count": len(sources), "mean_subwords": statistics.fmean(map(len, sources))}
        for size in args.sizes.split(","):
            rows = measure_size(size, wanted, tokenizer, sources, args)
            if "profile" in rows[-1]:
                report["profile"][size] = rows[-1].pop("profile")
            report["results"] += rows
    report["machine"]["loadavg_end"] = os.getloadavg()
    text = markdown(report)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 0


def markdown(report: dict[str, Any]) -> str:
    rows = report["results"]
    lines = [
        f"machine: {report['machine']['processor']}, torch {report['machine']['torch']}, "
        f"{report['machine']['torch_threads']} threads, load average {report['machine']['loadavg_start'][0]:.2f} "
        f"at start, {report['machine']['loadavg_end'][0]:.2f} at end",
        "",
    ]
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["size"], row["search"])].append(row)
    for (size, search), group in groups.items():
        first = group[0]
        systems = list(dict.fromkeys(r["system"] for r in group))
        lengths = list(dict.fromkeys(r["length"] for r in group))
        lines.append(
            f"### {size} (d_model={first['d_model']}, {first['layers']} layers, V={first['vocab']}), {search}; "
            "matmul rate "
            + ", ".join(f"{path} {gflops:.0f}" for path, gflops in first["matmul_gflops_by_path"].items())
            + " GFLOP/s"
        )
        lines.append("")
        lines.append("| system | " + " | ".join(f"L={n} tok/s" for n in lengths) + " | ours / system at each L |")
        lines.append("|---|" + "---|" * (len(lengths) + 1))
        cell = {(r["system"], r["length"]): r for r in group}
        for system in systems:
            values = [cell[(system, n)]["tokens_per_s"] for n in lengths]
            ratios = [cell[("ours", n)]["tokens_per_s"] / cell[(system, n)]["tokens_per_s"] for n in lengths]
            lines.append(
                f"| {system} | "
                + " | ".join(f"{v:,.0f}" for v in values)
                + " | "
                + " / ".join(f"{r:.2f}" for r in ratios)
                + " |"
            )
        floors = [cell[("ours", n)]["floor_tokens_per_s"] for n in lengths]
        ours = [cell[("ours", n)]["tokens_per_s"] for n in lengths]
        lines.append(
            "| floor: decoder FLOPs / faster matmul rate | " + " | ".join(f"{f:,.0f}" for f in floors) + " | |"
        )
        lines.append(
            "| ours as a share of the floor | " + " | ".join(f"{o / f:.0%}" for o, f in zip(ours, floors)) + " | |"
        )
        lines.append("")
    for size, profile in report.get("profile", {}).items():
        lines.append(
            f"### where ours spends its time ({size}, beam {profile['beam']}, L={profile['length']}): "
            f"{profile['wall_s']:.2f} s wall under the profiler"
        )
        lines.append("")
        lines.append("| kind of op | self CPU s | share |")
        lines.append("|---|---|---|")
        total = sum(profile["by_kind_s"].values())
        for kind, seconds in sorted(profile["by_kind_s"].items(), key=lambda kv: -kv[1]):
            lines.append(f"| {kind} | {seconds:.3f} | {seconds / total:.0%} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiayn.benchmarks.decoding", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
