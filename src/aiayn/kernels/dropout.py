"""Dropout (section 5.4) with the keep mask drawn as `torch.rand_like(x) >= p`: another kernel for `nn.Dropout`,
the same distribution (each element kept with probability 1 - p and scaled by 1 / (1 - p)), another random
stream. On CPU, `F.dropout` draws its mask with `bernoulli_`, which costs about twice `rand_like` there
(docs/benchmarks/training.md); the mask is kept for backward as bool, one byte per element.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.kernels.modules import replace_modules


class _RandMaskDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        keep = torch.rand_like(x) >= p  # P(keep) = 1 - p
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


def rand_mask_dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """`F.dropout(x, p, training)` with the mask from `rand_like` (CPU floating tensors; elsewhere F.dropout)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not x.is_floating_point() or not 0.0 < p < 1.0:
        return F.dropout(x, p, training)
    return _RandMaskDropout.apply(x, p)


class RandMaskDropout(nn.Dropout):
    """nn.Dropout whose mask comes from `rand_like` (see the module docstring)."""

    def forward(self, x: Tensor) -> Tensor:
        return rand_mask_dropout(x, self.p, self.training)


def swap_dropout(module: nn.Module) -> int:
    """Replace every plain `nn.Dropout` inside `module` by a `RandMaskDropout` with the same p (in place)."""
    return replace_modules(module, lambda m: type(m) is nn.Dropout, lambda m: RandMaskDropout(m.p))


__all__ = ["RandMaskDropout", "rand_mask_dropout", "swap_dropout"]
