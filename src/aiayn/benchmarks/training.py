"""Training throughput (section 5.2 reports the paper's step times: 0.4 s base, 1.0 s big on 8 P100s).

For each model size, one training step (forward, label-smoothed loss, backward, Adam update) on the same
synthetic batch of ~4,096 target tokens is timed for

    aiayn                  this package's Transformer, set up as `aiayn train` runs it (fused Adam; on CPU the
                           allocator keeps freed memory, `aiayn.cpu`, and float32 linear layers run
                           on oneDNN, `aiayn.kernels`; the loss projects only non-padding targets)
    torch.nn.Transformer   the same architecture assembled from PyTorch's module (tied embeddings, sinusoids)
    hf-marian              Hugging Face `MarianMTModel` of the same size (if transformers is installed)

the peers as they run by default (torch.optim.Adam, default allocator, torch's float32 GEMM), or with
`--tune-peers` with our fused Adam and allocator setting, and with `--onednn-peers` with their `nn.Linear` layers
swapped to `aiayn.kernels.OneDnnLinear` too. Each model lives in its own fresh process (so peak memory is
its own); the processes take turns, one step each, `--steps` times, and each keeps its fastest step: on a shared
CPU a busy spell then slows all of them alike, and the least disturbed step is the most faithful. Reported: target
and total (source + target) tokens/s, peak memory (RSS on CPU, max allocated on CUDA), and model FLOPs
utilisation: 3 x forward FLOPs (`flops_per_token`) per second over the machine's matmul rate in the same precision
(float32: the faster of torch's default GEMM and oneDNN's), measured in the same run (best of 3 before and 3 after
the models). All models of a size are in memory at once (base: ~15 GB on CPU).

    aiayn bench training --sizes tiny,base --threads 2
    python -m aiayn.benchmarks.training --sizes tiny --steps 3 --precision bf16
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from typing import Any

import torch
from torch import nn

from aiayn.config import ModelConfig, preset

IMPLEMENTATIONS = ("aiayn", "torch.nn.Transformer", "hf-marian")


def model_config(size: str, vocab: int) -> ModelConfig:
    return preset(size, src_vocab_size=vocab, tgt_vocab_size=vocab)


def synthetic_batch(batch: int, length: int, vocab: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """src, tgt_in, tgt_out [batch, length]: ids in [4, vocab), lengths length-4..length as in a
    length-bucketed batch, right-padded with 0; tgt_in starts with BOS=1, tgt_out ends with EOS=2."""
    g = torch.Generator().manual_seed(seed)
    positions = torch.arange(length)[None, :]

    def side(shift: int) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.randint(length - 4, length + 1, (batch,), generator=g)
        ids = torch.randint(4, vocab, (batch, length + shift), generator=g)
        return ids, lengths

    src_ids, src_len = side(0)
    src_ids[positions == (src_len[:, None] - 1)] = 2
    src = src_ids.masked_fill(positions >= src_len[:, None], 0)
    body, tgt_len = side(0)
    tgt_in = torch.cat([torch.ones(batch, 1, dtype=torch.long), body[:, :-1]], 1).masked_fill(
        positions >= tgt_len[:, None], 0
    )
    tgt_out = body.clone()
    tgt_out[positions == (tgt_len[:, None] - 1)] = 2
    tgt_out = tgt_out.masked_fill(positions >= tgt_len[:, None], 0)
    return src, tgt_in, tgt_out


class TorchNNTransformer(nn.Module):
    """The paper's model assembled from `torch.nn.Transformer` (post-norm), tied embeddings, sinusoids."""

    def __init__(self, c: ModelConfig, max_len: int = 512) -> None:
        super().__init__()
        self.d_model = c.d_model
        self.embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        nn.init.normal_(self.embed.weight, std=c.d_model**-0.5)
        position = torch.arange(max_len)[:, None]
        inv = torch.exp(torch.arange(0, c.d_model, 2) * (-torch.log(torch.tensor(10000.0)) / c.d_model))
        pe = torch.zeros(max_len, c.d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * inv), torch.cos(position * inv)
        self.register_buffer("pe", pe, persistent=False)
        self.dropout = nn.Dropout(c.P_drop)
        self.core = nn.Transformer(
            c.d_model, c.h, c.N, c.decoder_layers, c.d_ff, c.P_drop, batch_first=True, norm_first=c.norm_first
        )

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embed(ids) * self.d_model**0.5 + self.pe[: ids.size(1)])

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        pad = src == 0
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1))
        hidden = self.core(
            self._embed(src), self._embed(tgt_in), tgt_mask=causal, src_key_padding_mask=pad,
            memory_key_padding_mask=pad, tgt_is_causal=True,
        )  # fmt: skip
        return hidden @ self.embed.weight.T


def aiayn_loss(model: nn.Module, c: ModelConfig, kernel: str) -> Any:
    """Ours as the trainer computes it (`transduction_loss` with the trainer's loss kernel)."""
    from aiayn.training.loss import transduction_loss

    def ours(s: torch.Tensor, ti: torch.Tensor, to: torch.Tensor) -> torch.Tensor:
        return transduction_loss(model, model, s, ti, to, c.eps_ls, c.pad_id, kernel)[0]

    return ours


def build(impl: str, c: ModelConfig) -> tuple[nn.Module, Any]:
    """The model and a function (src, tgt_in, tgt_out) -> summed label-smoothed loss."""
    import torch.nn.functional as F

    if impl == "aiayn":
        from aiayn.model import Transformer

        model: nn.Module = Transformer(c)
        return model, aiayn_loss(model, c, "logits")

    def smoothed(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        V = logits.size(-1)
        return F.cross_entropy(logits.reshape(-1, V).float(), target.reshape(-1), ignore_index=c.pad_id,
                               label_smoothing=c.eps_ls, reduction="sum")  # fmt: skip

    if impl == "torch.nn.Transformer":
        model = TorchNNTransformer(c)
        return model, lambda s, ti, to: smoothed(model(s, ti), to)
    if impl == "hf-marian":
        from transformers import MarianConfig, MarianMTModel

        config = MarianConfig(
            vocab_size=c.src_vocab_size, decoder_vocab_size=c.tgt_vocab_size, d_model=c.d_model,
            encoder_layers=c.N, decoder_layers=c.decoder_layers, encoder_attention_heads=c.h,
            decoder_attention_heads=c.h, encoder_ffn_dim=c.d_ff, decoder_ffn_dim=c.d_ff, dropout=c.P_drop,
            attention_dropout=0.0, activation_dropout=0.0, activation_function="relu", max_position_embeddings=512,
            scale_embedding=True, pad_token_id=c.pad_id, eos_token_id=c.eos_id, decoder_start_token_id=c.bos_id,
            share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
        )  # fmt: skip
        model = MarianMTModel(config)

        def loss(s: torch.Tensor, ti: torch.Tensor, to: torch.Tensor) -> torch.Tensor:
            return smoothed(model(input_ids=s, attention_mask=s != c.pad_id, decoder_input_ids=ti).logits, to)

        return model, loss
    raise ValueError(f"unknown implementation {impl!r}; choose from {', '.join(IMPLEMENTATIONS)}")


def worker(impl: str, size: str, args: dict[str, Any], conn: Any) -> None:
    """A fresh process holding one model: on "step" it runs one training step and replies its seconds; on
    "stop" it replies its peak memory (MiB) and exits."""
    import resource

    torch.set_num_threads(args["threads"])
    device = torch.device(args["device"])
    tuned = impl == "aiayn" or args["tune_peers"]
    if tuned and device.type == "cpu":
        from aiayn.cpu import keep_freed_memory

        keep_freed_memory()
    torch.manual_seed(0)
    model, loss_fn = build(impl, model_config(size, args["vocab"]))
    model.to(device).train()
    low = {"fp32": None, "bf16": torch.bfloat16}[args["precision"]]
    if impl == "aiayn":  # the fast paths the trainer chooses (aiayn.kernels, train.*_impl=auto)
        from aiayn.kernels import prepare_for_training

        runtime = prepare_for_training(model, precision=low or torch.float32, max_keys=args["length"] + 1)
        loss_fn = aiayn_loss(model, model.config, runtime.loss)
        print(f"aiayn {size}: {runtime.describe()}", file=sys.stderr)
    elif device.type == "cpu" and args["precision"] == "fp32" and args["onednn_peers"]:
        from aiayn.kernels import onednn_available, swap_linears

        if onednn_available():
            swap_linears(model)
    if args["compile"]:
        loss_fn = torch.compile(loss_fn)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=tuned or None)
    batch = [t.to(device) for t in synthetic_batch(args["batch"], args["length"], args["vocab"])]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    conn.send("ready")
    while conn.recv() == "step":
        sync()
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=low, enabled=low is not None):
            loss = loss_fn(*batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        conn.send(time.perf_counter() - start)
    if device.type == "cuda":
        conn.send(torch.cuda.max_memory_allocated(device) / 2**20)
    else:
        conn.send(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # KiB on Linux -> MiB


def measure_interleaved(size: str, impls: list[str], args: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Start one worker per implementation, then step them in turn (warmup + steps rounds), so that a busy
    spell on a shared machine slows all of them alike; keep each one's fastest step."""
    spawn = multiprocessing.get_context("spawn")
    workers = {}
    for impl in impls:
        parent, child = spawn.Pipe()
        process = spawn.Process(target=worker, args=(impl, size, args, child), daemon=True)
        process.start()
        workers[impl] = (process, parent)
    try:
        for _, conn in workers.values():
            conn.recv()  # ready
        times: dict[str, list[float]] = {impl: [] for impl in impls}
        for k in range(args["warmup"] + args["steps"]):
            for impl, (_, conn) in workers.items():
                conn.send("step")
                seconds = conn.recv()
                if k >= args["warmup"]:
                    times[impl].append(seconds)
                    print(f"  {size:<5} {impl:<21} {seconds:.3f} s/step", file=sys.stderr, flush=True)
        results = {}
        for impl, (process, conn) in workers.items():
            conn.send("stop")
            results[impl] = {"step_s": min(times[impl]), "median_s": statistics.median(times[impl]),
                             "peak_mib": conn.recv()}  # fmt: skip
            process.join()
        return results
    finally:
        for process, _ in workers.values():
            if process.is_alive():
                process.kill()


def matmul_gflops(threads: int, device: str, precision: str = "fp32", n: int = 2048, repeats: int = 5) -> float:
    """The machine's matmul rate in `precision`: best of `repeats` n x n x n products (2 n^3 FLOPs each); for
    float32 on CPU the faster of torch's default GEMM and oneDNN's (`aiayn.kernels`)."""
    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    products = [lambda: a @ b]
    if device == "cpu" and precision == "fp32":
        from aiayn.kernels import onednn_available, onednn_linear

        if onednn_available():
            products.append(lambda: onednn_linear(a, b))
    best = float("inf")
    for product in products:
        for _ in range(repeats + 1):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            product()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def _available(impl: str) -> bool:
    if impl != "hf-marian":
        return True
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="tiny,base", help="comma-separated presets (default: tiny,base)")
    parser.add_argument("--impls", default=",".join(IMPLEMENTATIONS), help="comma-separated implementations")
    parser.add_argument("--vocab", type=int, default=8000, help="shared vocabulary size (default: 8000)")
    parser.add_argument("--batch", type=int, default=128, help="sentences per batch (default: 128)")
    parser.add_argument("--length", type=int, default=32, help="longest sentence; lengths vary by 4 (default: 32)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument(
        "--precision", choices=("auto", "fp32", "bf16"), default="fp32",
        help="autocast for every implementation (default: fp32; auto: what train.precision=auto picks here)",
    )  # fmt: skip
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per measurement (default: 1)")
    parser.add_argument("--steps", type=int, default=6, help="timed steps of each model, in turn (default: 6)")
    parser.add_argument("--compile", action="store_true", help="torch.compile every model's forward + loss")
    parser.add_argument("--tune-peers", action="store_true", help="give the peers fused Adam and our allocator setting")
    parser.add_argument("--onednn-peers", action="store_true", help="run the peers' float32 nn.Linear on oneDNN too")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def precision_for(setting: str, device: str, size: str, vocab: int) -> str:
    """fp32 | bf16 for one size: an explicit setting as given; auto what train.precision=auto picks for its width."""
    if setting != "auto":
        return setting
    from aiayn.kernels import resolve_precision

    d_model = model_config(size, vocab).d_model
    return "bf16" if resolve_precision("auto", torch.device(device), d_model=d_model) == torch.bfloat16 else "fp32"


def run(args: argparse.Namespace) -> int:
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    precisions = {size: precision_for(args.precision, args.device, size, args.vocab) for size in sizes}
    if args.precision == "auto":
        picks = ", ".join(f"{size} {p}" for size, p in precisions.items())
        print(f"bench training: precision auto -> {picks}", file=sys.stderr)
    impls = [i.strip() for i in args.impls.split(",") if i.strip() and _available(i.strip())]
    keys = ("vocab", "batch", "length", "threads", "device", "warmup", "steps")
    settings = {k: getattr(args, k) for k in keys}
    settings.update(compile=args.compile, tune_peers=args.tune_peers, onednn_peers=args.onednn_peers)
    src, _, tgt_out = synthetic_batch(args.batch, args.length, args.vocab)
    src_tokens, tgt_tokens = int((src != 0).sum()), int((tgt_out != 0).sum())
    used = sorted(set(precisions.values()))
    rate = {p: [matmul_gflops(args.threads, args.device, p) for _ in range(3)] for p in used}
    best = {}
    for size in sizes:
        measured = measure_interleaved(size, impls, {**settings, "precision": precisions[size]})
        best.update({(size, impl): r for impl, r in measured.items()})
    gflops = {p: max(rate[p] + [matmul_gflops(args.threads, args.device, p) for _ in range(3)]) for p in used}
    rows = []
    for size in sizes:
        c = model_config(size, args.vocab)
        with torch.device("meta"):
            from aiayn.model import Transformer

            flops = Transformer(c).flops_per_token(args.length - 2, args.length - 2)
        forward = flops["encoder_per_source_token"] * src_tokens + flops["decoder_per_target_token"] * tgt_tokens
        step_flops = 3 * forward
        fastest_peer = min((best[(size, i)]["step_s"] for i in impls if i != "aiayn"), default=None)
        for impl in impls:
            r = best[(size, impl)]
            rows.append({
                "size": size, "impl": impl, "precision": precisions[size], "step_s": r["step_s"],
                "tgt_tokens_per_s": tgt_tokens / r["step_s"], "tokens_per_s": (src_tokens + tgt_tokens) / r["step_s"],
                "median_step_s": r["median_s"], "peak_mib": r["peak_mib"],
                "mfu": step_flops / r["step_s"] / (gflops[precisions[size]] * 1e9),
                "speedup_vs_fastest_peer": fastest_peer / r["step_s"] if fastest_peer else None,
            })  # fmt: skip
    from aiayn.kernels import cpu_features

    report = {"cpu": cpu_features().describe(), "torch": torch.__version__, "matmul_gflops": gflops,
              "src_tokens": src_tokens, "tgt_tokens": tgt_tokens, **settings, "precision": args.precision,
              "precisions": precisions, "rows": rows}  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    rates = ", ".join(f"{p} {g:.0f}" for p, g in gflops.items())
    print(f"machine: {report['cpu']}, torch {report['torch']}")
    print(f"matmul: {rates} GFLOP/s ({args.threads} threads, {args.device}); "
          f"batch {args.batch} x {args.length}: {src_tokens} source + {tgt_tokens} target tokens; vocab {args.vocab}; "
          f"autocast {args.precision}; peers {'tuned' if args.tune_peers else 'as by default'}"
          f"{', oneDNN linears' if args.onednn_peers else ''}")  # fmt: skip
    print(f"{'size':<6}{'implementation':<22}{'precision':>10}{'s/step':>8}{'tgt tok/s':>11}{'tok/s':>9}"
          f"{'peak MiB':>10}{'MFU':>7}{'vs fastest peer':>17}")  # fmt: skip
    for r in rows:
        ratio = f"{r['speedup_vs_fastest_peer']:.2f}x" if r["speedup_vs_fastest_peer"] else "-"
        print(f"{r['size']:<6}{r['impl']:<22}{r['precision']:>10}{r['step_s']:>8.3f}{r['tgt_tokens_per_s']:>11.0f}"
              f"{r['tokens_per_s']:>9.0f}{r['peak_mib']:>10.0f}{r['mfu']:>7.1%}{ratio:>17}")  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m aiayn.benchmarks.training", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
