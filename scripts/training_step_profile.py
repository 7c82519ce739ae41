"""One training step of the Multi30k recipe's model shape, timed and profiled, and the vocabulary products alone.

    python scripts/training_step_profile.py --precision fp32          # as `train.precision: auto` runs d_model 128
    python scripts/training_step_profile.py --precision vocab-bf16    # only the output projection under bf16 autocast
    python scripts/training_step_profile.py --products                # [M,128] x [128,V] and its two gradients

The step is `aiayn bench training`'s (synthetic length-bucketed batch, fused Adam, the trainer's fast paths); the
model is `tiny` with d_ff 256 and dropout 0.2 (configs/multi30k-wu-tok-dff256.yaml). Prints best and median
seconds of 5 steps after 3 untimed ones, then torch.profiler's table over 2 more. Figures: docs/benchmarks/training.md.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from aiayn.benchmarks.training import build, synthetic_batch
from aiayn.config import preset
from aiayn.cpu import keep_freed_memory
from aiayn.kernels import onednn_linear, prepare_for_training
from aiayn.kernels.cpu_features import cpu_features


def best_of(f, repeats: int = 7) -> float:
    f()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - start)
    return best


def products(M: int = 3300, d: int = 128, V: int = 8000) -> None:
    for dtype in (torch.float32, torch.bfloat16):
        print(products_line(dtype, M, d, V))


def products_line(dtype: torch.dtype, M: int, d: int, V: int) -> str:
    flops = 2 * M * d * V / 1e9
    x, w, g = torch.randn(M, d, dtype=dtype), torch.randn(V, d, dtype=dtype), torch.randn(M, V, dtype=dtype)
    forward, grad_x, grad_w = best_of(lambda: x @ w.T), best_of(lambda: g @ w), best_of(lambda: g.T @ x)
    line = f"{str(dtype):<15} x W^T {forward * 1e3:6.1f} ms {flops / forward:4.0f} GFLOP/s"
    line += f" | G W {grad_x * 1e3:6.1f} ms {flops / grad_x:4.0f}"
    line += f" | G^T x {grad_w * 1e3:6.1f} ms {flops / grad_w:4.0f}"
    if dtype == torch.float32:
        onednn = best_of(lambda: onednn_linear(x, w))
        line += f" | oneDNN x W^T {onednn * 1e3:6.1f} ms {flops / onednn:4.0f}"
    return line


def step_profile(precision: str) -> None:
    keep_freed_memory()
    torch.manual_seed(0)
    low = torch.bfloat16 if precision == "bf16" else None
    c = preset("tiny", src_vocab_size=8000, tgt_vocab_size=8000, d_ff=256, P_drop=0.2)
    model, loss_fn = build("aiayn", c)
    model.train()
    print(prepare_for_training(model, precision=low or torch.float32, max_keys=33).describe())
    if precision == "vocab-bf16":  # the vocabulary projection alone in bf16; autocast casts the tied weight
        proj = model.output_proj

        def bf16_projection(x: torch.Tensor) -> torch.Tensor:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return F.linear(x, proj.weight, proj.bias)

        proj.forward = bf16_projection
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    batch = synthetic_batch(110, 32, 8000)

    def step() -> None:
        with torch.autocast("cpu", dtype=low, enabled=low is not None):
            loss = loss_fn(*batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    tokens = int((batch[2] != 0).sum())
    print(f"{precision}: {tokens} target tokens, best {min(times):.3f} s/step, median {sorted(times)[2]:.3f}")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=["fp32", "bf16", "vocab-bf16"], default="fp32")
    parser.add_argument("--products", action="store_true", help="time the vocabulary products alone instead")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_features().describe()}, torch {torch.__version__}, {args.threads} threads")
    products() if args.products else step_profile(args.precision)


if __name__ == "__main__":
    main()
