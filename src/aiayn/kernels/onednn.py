"""oneDNN float32 matrix products on CPU: another kernel for `nn.Linear`, the same function.

torch computes a float32 `F.linear` on CPU with MKL, which on AMD processors takes an AVX2 path; oneDNN uses
AVX-512 where the CPU has it (figures in docs/benchmarks/training.md and decoding.md). `OneDnnLinear` is an
`nn.Linear` with the same parameters whose products run on oneDNN:

- with gradients (training): an autograd function whose forward and both backward products call oneDNN;
- with `packed=True` (inference only) and no gradient: a copy of the weight packed once into oneDNN's blocked
  layout, repacked when the weight is replaced or changed in place. (Not for training: an optimizer's fused
  in-place update need not bump the version counter the repacking watches.)

Anything else (autocast active, another dtype or device) falls back to `F.linear`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_PACK_BATCH_HINT = 256  # rows oneDNN tunes its packed layout for (beam 4 x 64 sentences); any row count works


def onednn_available() -> bool:
    """Whether this torch build has oneDNN's float32 linear ops (plain and packed) and they agree with F.linear."""
    try:
        x, w = torch.arange(6.0).view(2, 3), torch.arange(12.0).view(4, 3)
        packed = torch.ops.mkldnn._reorder_linear_weight(w, 1)
        plain = torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
        fast = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        return bool(torch.equal(plain, F.linear(x, w)) and torch.equal(fast, F.linear(x, w)))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def _mm(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [N, in] @ weight[out, in]^T (+ bias) on oneDNN; `weight` may be a strided view or a packed weight."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _OneDnnLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        flat = x.reshape(-1, x.size(-1))
        return _mm(flat, weight, bias).view(*x.shape[:-1], weight.size(0))

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:  # type: ignore[override]
        x, weight = ctx.saved_tensors
        grad_flat = grad.reshape(-1, grad.size(-1))  # [N, out]
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = _mm(grad_flat, weight.t()).view(x.shape)  # dL/dy W
        if ctx.needs_input_grad[1]:
            grad_w = _mm(grad_flat.t(), x.reshape(-1, x.size(-1)).t())  # dL/dy^T x: [out, in]
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_flat.sum(dim=0)
        return grad_x, grad_w, grad_b


def _usable(x: Tensor, weight: Tensor) -> bool:
    return (
        x.device.type == "cpu"
        and x.dtype == weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
        and x.numel() > 0
    )


def onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`F.linear(x, weight, bias)`, differentiable, on oneDNN when x and weight are float32 on CPU."""
    if _usable(x, weight):
        return _OneDnnLinearFunction.apply(x, weight, bias)
    return F.linear(x, weight, bias)


class _PackedWeight:
    """A oneDNN-packed copy of a weight, remade when the weight is replaced or changed in place. A deep copy
    starts empty (oneDNN's opaque tensors cannot be copied)."""

    def __init__(self) -> None:
        self.key: tuple[int, int] | None = None
        self.packed: Tensor | None = None

    def __deepcopy__(self, memo: dict) -> _PackedWeight:
        return _PackedWeight()

    def get(self, weight: Tensor) -> Tensor:
        key = (weight.data_ptr(), weight._version)
        if key != self.key:
            with torch.no_grad():
                self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _PACK_BATCH_HINT)
            self.key = key
        return self.packed  # type: ignore[return-value]


class OneDnnLinear(nn.Linear):
    """nn.Linear whose products run on oneDNN (same parameters, same function)."""

    @classmethod
    def from_linear(cls, linear: nn.Linear, packed: bool = False) -> OneDnnLinear:
        module = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        module.weight, module.bias = linear.weight, linear.bias  # shared, not copied (the meta ones are dropped)
        module.packed = _PackedWeight() if packed else None
        return module

    def forward(self, x: Tensor) -> Tensor:
        if not _usable(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        if self.packed is None or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)):
            return _OneDnnLinearFunction.apply(x, self.weight, self.bias)
        return _mm(x, self.packed.get(self.weight), self.bias)


def swap_linears(module: nn.Module, packed: bool = False) -> int:
    """Replace every plain `nn.Linear` inside `module` by a `OneDnnLinear` sharing its parameters (in place;
    `packed` for inference); returns how many were swapped."""
    swapped = 0
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, OneDnnLinear.from_linear(child, packed))
            swapped += 1
        else:
            swapped += swap_linears(child, packed)
    return swapped


__all__ = ["OneDnnLinear", "onednn_available", "onednn_linear", "swap_linears"]
