"""Dropout masks on CPU, forward + backward, three kernels in one run: torch's `F.dropout` (`bernoulli_`), the mask
from `rand_like(x) >= p` (the kernel before 2026-12-07) and `aiayn.kernels.dropout` (16 random bits per element).

    python scripts/bench_dropout.py       # [2048, 128], [2048, 256] (the recipe's) and [4096, 512], p = 0.2, float32

Prints the machine, then per shape the median of each kernel's forward + backward over rounds that alternate the
kernels (min over 20 calls in each round), and the ratios to F.dropout. Figures: docs/benchmarks/training.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.benchmarks.timing import machine
from aiayn.cpu import keep_freed_memory
from aiayn.kernels.dropout import rand_mask_dropout


class _RandLikeDropout(torch.autograd.Function):
    """The kernel this file's comparison replaces: mask rand_like(x) >= p, kept as bool."""

    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        keep = torch.rand_like(x) >= p
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


KERNELS: dict[str, Callable[[Tensor, float], Tensor]] = {
    "F.dropout (bernoulli_)": lambda x, p: F.dropout(x, p, True),
    "rand_like >= p": _RandLikeDropout.apply,
    "aiayn (16-bit)": rand_mask_dropout,
}


def fwd_bwd_ms(kernel: Callable[[Tensor, float], Tensor], x: Tensor, grad: Tensor, p: float, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        x.grad = None
        t0 = time.perf_counter()
        kernel(x, p).backward(grad)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def shapes(text: str) -> list[tuple[int, int]]:
    """--shapes: "2048x128,2048x256" -> [(2048, 128), (2048, 256)]."""
    try:
        out = [tuple(int(v) for v in shape.split("x")) for shape in text.split(",")]
    except ValueError:
        out = []
    if not out or any(len(shape) != 2 or min(shape) < 1 for shape in out):
        raise argparse.ArgumentTypeError(f"expected comma-separated ROWSxCOLS of positive integers, got {text!r}")
    return out  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=shapes, default="2048x128,2048x256,4096x512", help="comma-separated RxC")
    parser.add_argument("--p", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # as training runs
    print(machine())
    print(f"float32, p = {args.p}, forward + backward in ms (median over {args.rounds} rounds of min over 20 calls)")
    print(f"{'shape':>10}  " + "  ".join(f"{name:>22}" for name in KERNELS) + "  ratio to F.dropout")
    for rows, cols in args.shapes:
        shape = f"{rows}x{cols}"
        x = torch.randn(rows, cols, requires_grad=True)
        grad = torch.randn(rows, cols)
        times: dict[str, list[float]] = {name: [] for name in KERNELS}
        for _ in range(args.rounds):
            for name, kernel in KERNELS.items():
                times[name].append(fwd_bwd_ms(kernel, x, grad, args.p, 20))
        med = {name: statistics.median(t) for name, t in times.items()}
        base = med["F.dropout (bernoulli_)"]
        ratios = " / ".join(f"{base / m:.2f}x" for m in med.values())
        print(f"{shape:>10}  " + "  ".join(f"{m:>22.3f}" for m in med.values()) + f"  {ratios}")


if __name__ == "__main__":
    main()
