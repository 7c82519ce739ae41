"""Dropout (section 5.4) with the keep mask drawn from 16 random bits per element: another kernel for
`nn.Dropout`, the same distribution up to p's rounding to a multiple of 2^-16, another random stream.

Each element is dropped when its 16 bits, read as a signed integer, fall below -2^15 + k with k = round(p * 2^16),
so P(drop) = k / 2^16 (within 2^-17 of p) and the kept elements are scaled by 1 / (1 - k / 2^16): E[output] = x
exactly. The bits come four elements at a time from full-range 64-bit draws of the global generator (seeds and
checkpoints cover it): a quarter of the draws `rand_like` makes (one 32-bit float per element; `F.dropout` draws
one `bernoulli_`), about half its time forward + backward on CPU (docs/benchmarks/training.md). The mask is kept
for backward as bool.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.kernels.modules import replace_modules

_LEVELS = 1 << 16  # the bits drawn per element


def dropped_levels(p: float) -> int:
    """k: an element is dropped with probability k / 2^16, the multiple of 2^-16 nearest to p."""
    return round(p * _LEVELS)


def keep_mask(x: Tensor, p: float) -> Tensor:
    """A bool tensor shaped like x, each element True with probability 1 - dropped_levels(p) / 2^16."""
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(1 << 63), None)  # 64 bits each
    bits = words.view(torch.int16)[:n].view(x.shape)  # 16 uniform bits per element
    return bits >= dropped_levels(p) - _LEVELS // 2


class _BitMaskDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        keep = keep_mask(x, p)
        ctx.save_for_backward(keep)
        ctx.scale = _LEVELS / (_LEVELS - dropped_levels(p))  # 1 / (1 - P(drop))
        return x * keep.to(x.dtype).mul_(ctx.scale)  # a float mask: multiplying by a bool one is slower

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (keep,) = ctx.saved_tensors
        return grad * keep.to(grad.dtype).mul_(ctx.scale), None


def rand_mask_dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """`F.dropout(x, p, training)` with the mask from 16 random bits per element (CPU floating tensors whose p
    rounds to neither 0 nor 1 in steps of 2^-16; elsewhere F.dropout)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not x.is_floating_point() or not 0 < dropped_levels(p) < _LEVELS:
        return F.dropout(x, p, training)
    return _BitMaskDropout.apply(x, p)


class RandMaskDropout(nn.Dropout):
    """nn.Dropout whose mask comes from 16 random bits per element (see the module docstring)."""

    def forward(self, x: Tensor) -> Tensor:
        return rand_mask_dropout(x, self.p, self.training)


def swap_dropout(module: nn.Module) -> int:
    """Replace every plain `nn.Dropout` inside `module` by a `RandMaskDropout` with the same p (in place)."""
    return replace_modules(module, lambda m: type(m) is nn.Dropout, lambda m: RandMaskDropout(m.p))


__all__ = ["RandMaskDropout", "dropped_levels", "keep_mask", "rand_mask_dropout", "swap_dropout"]
