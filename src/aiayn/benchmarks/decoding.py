"""`aiayn bench decoding` (also `python -m aiayn.benchmarks.decoding`): decoding throughput (section 6.1's
beam search) against peers, on real Multi30k test sentences.

For each model size (random weights: only speed is measured) and each search (beam 4, greedy), every system
decodes the same batch of sentences with the output length forced to L (EOS forbidden before, so all systems
do the same work: L decoder steps per sentence), L in --lengths, and reports output tokens per second:

    ours            generate() with the KV cache on the model prepared by `prepare_for_inference` with every
                    setting auto (this CPU's precision: bf16, int8 or oneDNN-packed float32), as `Translator` runs it
    ours-plain      the same search on the model as built, without `prepare_for_inference` or the allocator
                    setting (torch's default float32 matmul path): a plain PyTorch program
    ours-uncached   ours re-running the decoder over the whole prefix at every step (no KV cache)
    ours-float32    ours with precision float32 (oneDNN-packed weights), whatever auto picks
    ours-bf16       bf16 weights (float32 log-softmax and scores); fast only on CPUs with native bf16 matmuls
    ours-int8       `prepare_for_inference(precision="int8")`: int8 linears, per-row weight and input scales (fbgemm)
    hf              Hugging Face MarianMTModel.generate (same shape, KV cache)
    ct2-float32     CTranslate2 on the converted Marian model
    ct2-int8        the same, int8 weights

Each system runs in a fresh process of its own (--isolate, the default), --repeats times, interleaved with the
others; each figure is the best of those runs (the least disturbed on a shared machine). Separate processes
matter: CTranslate2 and torch each bring an OpenMP runtime, and once CTranslate2 has translated in a process,
torch's worker threads there sleep at every barrier instead of spinning (measured: the main thread's voluntary
context switches during one of our beam searches 0 -> ~1,400, a small elementwise op 4 -> 18 us, ours 20%
slower), while CTranslate2 right after one of ours also ran 8% slower. --no-isolate measures every system in
this process instead. Ours runs as `Translator.from_pretrained` sets it up: model prepared by
`prepare_for_inference`, allocator keeping freed memory (`aiayn.cpu.keep_freed_memory`); the peers run as
their users run them, or, with --tune-peers, with the same allocator setting. The same run
measures the machine's matmul rate on the decoder's shapes and reports the floor: decoder FLOPs per output
token (x beam) over that rate. --profile adds where ours spends its time (torch.profiler, by kind of op).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from aiayn.benchmarks.decoding_peers import CTranslate2Marian, HuggingFaceMarian, available, timed
from aiayn.benchmarks.timing import machine
from aiayn.config import DecodeConfig, ModelConfig, preset
from aiayn.cpu import keep_freed_memory
from aiayn.data import Tokenizer, resolve_data_dir
from aiayn.decoding import generate
from aiayn.io import read_text_file
from aiayn.kernels import Bf16Linear, Int8Linear, onednn_available, prepare_for_inference
from aiayn.kernels.int8 import int8_available, int8_product
from aiayn.model import Transformer

SYSTEMS = (
    "ours", "ours-plain", "ours-uncached", "ours-float32", "ours-bf16", "ours-int8", "hf", "ct2-float32", "ct2-int8"
)  # fmt: skip
# as Translator.from_pretrained sets them up
OURS_REUSING_MEMORY = ("ours", "ours-uncached", "ours-float32", "ours-bf16", "ours-int8")
PINNED_PRECISION = {"ours-float32": "float32", "ours-bf16": "bf16", "ours-int8": "int8"}  # the rest of ours: auto
PEER_PACKAGES = {"hf": "transformers", "ct2-float32": "ctranslate2", "ct2-int8": "ctranslate2"}
OP_KINDS = {  # torch.profiler op name -> kind of work, for the profile summary
    "matmul, oneDNN packed": ("mkldnn::_linear_pointwise",),
    "matmul, torch default (MKL)": ("aten::addmm", "aten::mm"),
    "matmul, int8": ("quantized::linear_with_input_q_dq_qweight_dq_output_fp32", "quantized::linear_dynamic"),
    "int8 input scales (abs, amax, div, addcmul)": ("aten::abs", "aten::amax", "aten::div", "aten::addcmul"),
    "attention: eq. (1) products and softmax": (
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::bmm",
        "aten::matmul",
        "aten::_softmax",
    ),
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
    parser.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="each system in a fresh process of its own (default); --no-isolate: all in this process",
    )
    parser.add_argument("--tune-peers", action="store_true", help="give the peers our allocator setting too")
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)  # internal: measure one system
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
    lines = read_text_file(path, args.sentences)
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


def _linear(weight: torch.Tensor) -> torch.nn.Linear:
    layer = torch.nn.Linear(weight.size(1), weight.size(0), bias=False)
    layer.weight.data = weight
    return layer


def _product(path: str, x: torch.Tensor, weight: torch.Tensor):
    """x @ weight^T through torch's default float32 path, through oneDNN with the weight packed once, or
    fbgemm's int8 product (`aiayn.kernels.int8`, the row scaling around it not counted)."""
    if path in ("torch", "bf16"):
        return lambda: torch.nn.functional.linear(x, weight)
    if path == "int8":
        packed, unit = Int8Linear(_linear(weight)).packed, x / x.abs().amax(1, keepdim=True)
        return lambda: int8_product(unit, packed)
    packed = torch.ops.mkldnn._reorder_linear_weight(weight, x.size(0))
    return lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


def matmul_rate(rows: int, d_model: int, d_ff: int, vocab: int, repeats: int = 20) -> dict[str, float]:
    """GFLOP/s of the decoder's largest products, [rows, d_model] x [d_model, d_ff] and x [d_model, V], through
    torch's default float32 path ("torch": MKL on x86), oneDNN with packed weights ("onednn": what
    `prepare_for_inference` chooses for float32 on CPU), bf16 ("bf16": torch's bf16 product) and int8 ("int8":
    fbgemm, where this build has it), each the best of `repeats`."""
    rates = {}
    paths = ["torch", *(["onednn"] if onednn_available() else []), "bf16", *(["int8"] if int8_available() else [])]
    for path in paths:
        seconds = 0.0
        for n in (d_ff, vocab):
            dtype = torch.bfloat16 if path == "bf16" else torch.float32
            fn = _product(path, torch.randn(rows, d_model, dtype=dtype), torch.randn(n, d_model, dtype=dtype))
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


def build_system(system: str, config: ModelConfig, tokenizer: Tokenizer, args: argparse.Namespace) -> Any:
    """One system with weights from --seed (ours: the same weights in every process)."""
    torch.manual_seed(args.seed)
    if system.startswith("ours"):
        model = Transformer(config).eval()
        if system == "ours-plain":
            return model
        precision = PINNED_PRECISION.get(system, "auto")  # ours: what auto picks
        model, runtime = prepare_for_inference(model, precision=precision)
        print(f"{system}: {runtime.describe()}", file=sys.stderr)
        return model
    marian = HuggingFaceMarian(config, seed=args.seed)
    if system == "hf":
        return marian
    return CTranslate2Marian(marian, tokenizer, system.removeprefix("ct2-"), args.threads)


def size_config(size: str, tokenizer: Tokenizer) -> ModelConfig:
    return preset(size, src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, P_drop=0.0)


def call(system: str, built: Any, sources: list[list[int]], src, beam: int, length: int):
    if system.startswith("ours"):
        return lambda: run_ours(built, src, beam, length, use_cache=system != "ours-uncached")
    return lambda: built.generate(sources, beam, length)


Figures = dict[tuple[int, int], tuple[float, int]]  # (beam, L) -> (seconds, output tokens) of one run


def measure_system(
    system: str, built: Any, sources: list[list[int]], args: argparse.Namespace, size: str, warm: bool = True
) -> Figures:
    """One timed run of `system` per (beam, L); with `warm`, each after an untimed run of the same call (first
    calls at a new size pay one-off costs: allocator growth, kernel selection)."""
    n = args.uncached_sentences if system == "ours-uncached" else len(sources)
    src = source_tensor(sources[:n])
    figures: Figures = {}
    for beam in _ints(args.beams):
        for length in _ints(args.lengths):
            run = call(system, built, sources[:n], src, beam, length)
            if warm and system != "ours-uncached":  # uncached: one run, its cost dwarfs first-call effects
                run()
            figures[(beam, length)] = timed(run)
            seconds, count = figures[(beam, length)]
            print(f"  {size} beam={beam} L={length} {system}: {count / seconds:,.0f} tok/s", file=sys.stderr)
    return figures


def reuses_memory(system: str, args: argparse.Namespace) -> bool:
    return system in OURS_REUSING_MEMORY or (args.tune_peers and system in PEER_PACKAGES)


def worker(args: argparse.Namespace) -> int:
    """--worker SYSTEM: measure one system of one size in this (fresh) process; figures as JSON on stdout."""
    torch.set_num_threads(args.threads)
    if reuses_memory(args.worker, args):
        keep_freed_memory()
    tokenizer = Tokenizer.from_file(args.tokenizer)
    sources = load_sentences(args, tokenizer)
    built = build_system(args.worker, size_config(args.sizes, tokenizer), tokenizer, args)
    figures = measure_system(args.worker, built, sources, args, args.sizes)
    print(json.dumps([[beam, length, seconds, count] for (beam, length), (seconds, count) in figures.items()]))
    return 0


def run_worker(system: str, size: str, tokenizer_path: Path, args: argparse.Namespace) -> Figures:
    """`worker` in a child process with this run's settings."""
    argv = [sys.executable, "-m", "aiayn.benchmarks.decoding", "--worker", system, "--sizes", size]
    argv += ["--tokenizer", str(tokenizer_path), "--lengths", args.lengths, "--beams", args.beams]
    argv += ["--sentences", str(args.sentences), "--uncached-sentences", str(args.uncached_sentences)]
    argv += ["--threads", str(args.threads), "--src-lang", args.src_lang, "--seed", str(args.seed)]
    argv += ["--data-dir", str(resolve_data_dir(args.data_dir))] + (["--tune-peers"] if args.tune_peers else [])
    done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench decoding: the {system} worker ({size}) failed with exit code {done.returncode}")
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    return {(beam, length): (seconds, count) for beam, length, seconds, count in rows}


def measure_size(
    size: str, wanted: list[str], tokenizer: Tokenizer, sources: list[list[int]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """All figures of one model size: best of --repeats interleaved runs per (search, length, system)."""
    config = size_config(size, tokenizer)
    built = {} if args.isolate else {system: build_system(system, config, tokenizer, args) for system in wanted}
    best: dict[tuple[int, int, str], tuple[float, int]] = {}  # (beam, L, system) -> the fastest run
    for repeat in range(args.repeats):
        for system in wanted:
            if system == "ours-uncached" and repeat > 0:
                continue  # one run: it is slow, and its noise is small next to its cost
            if args.isolate:
                figures = run_worker(system, size, args.tokenizer, args)
            else:
                figures = measure_system(system, built[system], sources, args, size, warm=repeat == 0)
            for (beam, length), figure in figures.items():
                if figure[0] < best.get((beam, length, system), (float("inf"), 0))[0]:
                    best[(beam, length, system)] = figure
    lengths, beams, few = _ints(args.lengths), _ints(args.beams), args.uncached_sentences
    ours = built.get("ours") or build_system("ours", config, tokenizer, args)
    picked = {type(m) for m in ours.modules()}  # what auto picked for "ours"
    ours_precision = "bf16" if Bf16Linear in picked else "int8" if Int8Linear in picked else "float32"
    precision = {**PINNED_PRECISION, "ct2-int8": "int8", "ours": ours_precision}  # the others: float32
    rows = []
    mean_src = round(statistics.fmean(map(len, sources))) + 1
    for beam in beams:
        rates = matmul_rate(len(sources) * beam, config.d_model, config.d_ff, config.tgt_vocab_size)
        float32 = max(v for k, v in rates.items() if k in ("torch", "onednn"))  # the faster float32 path
        for length in lengths:
            flops = ours.flops_per_token(mean_src, length)["decoder_per_target_token"]
            for system in wanted:
                seconds, count = best[(beam, length, system)]
                rate = rates.get(precision.get(system, "float32"), float32)  # the floor at the precision it ran in
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
        src = source_tensor(sources)
        rows[-1]["profile"] = profile_ours(ours, src, beams[0], lengths[len(lengths) // 2])
    return rows


def run(args: argparse.Namespace) -> int:
    if args.worker:
        return worker(args)
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # as ours runs (workers set their own; --no-isolate: every system gets it)
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
        if args.tokenizer is None:
            args.tokenizer = Path(workdir) / "tokenizer.model"  # the file `load_tokenizer` trained, for workers
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
