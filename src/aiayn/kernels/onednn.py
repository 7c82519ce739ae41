"""oneDNN float32 matrix products on CPU: another kernel for `nn.Linear`, the same function.

torch computes a float32 `F.linear` on CPU with MKL, which on AMD processors takes an AVX2 path; oneDNN uses
AVX-512 where the CPU has it (figures in docs/benchmarks/training.md and decoding.md). `OneDnnLinear` is an
`nn.Linear` with the same parameters whose products run on oneDNN:

- with gradients (training): an autograd function whose forward and input-gradient products call oneDNN; the
  weight gradient dL/dy^T x is a `torch.mm` of transposed operands (oneDNN would first copy both transposes,
  which for the vocabulary projection costs more than the product itself);
- with `packed=True` (inference only) and no gradient: a copy of the weight packed once into oneDNN's blocked
  layout, repacked when the weight is replaced or changed in place. (Not for training: an optimizer's fused
  in-place update need not bump the version counter the repacking watches.) A oneDNN call has a fixed cost
  that `F.linear` does not pay, so for few rows or a small weight `F.linear` is faster: products of fewer than
  `min_rows` rows (`packed_min_rows`, by the weight's shape) run on `F.linear`.

Anything else (autocast active, another dtype or device) falls back to `F.linear`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.kernels.modules import is_plain_linear, replace_modules

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
            grad_w = torch.mm(grad_flat.t(), x.reshape(-1, x.size(-1)))  # dL/dy^T x: [out, in], no copies
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


class PackedWeight:
    """A oneDNN-packed copy of a weight, remade when the weight is replaced or changed in place. A deep copy
    starts empty (oneDNN's opaque tensors cannot be copied)."""

    def __init__(self) -> None:
        self.key: tuple[int, int] | None = None
        self.packed: Tensor | None = None

    def __deepcopy__(self, memo: dict) -> PackedWeight:
        return PackedWeight()

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
        module.packed = PackedWeight() if packed else None
        # packed products of fewer rows run on F.linear
        module.min_rows = packed_min_rows(linear.out_features, linear.in_features) if packed else 0
        return module

    def forward(self, x: Tensor) -> Tensor:
        if not _usable(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        if self.packed is None or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)):
            return _OneDnnLinearFunction.apply(x, self.weight, self.bias)
        if x.numel() < self.min_rows * self.in_features:
            return F.linear(x, self.weight, self.bias)
        return _mm(x, self.packed.get(self.weight), self.bias)


# A oneDNN call costs a fixed ~40 us that F.linear does not pay (2 AVX2 cores, docs/benchmarks/decoding-zen3.md):
# packed products pay off from about 2^20 multiply-adds when the weight is large enough to profit from the packed
# layout (>= 2^18 entries, e.g. 512 x 512), and for any weight from 2^24 (large batches).
_PACKED_MIN_WEIGHT = 1 << 18
_PACKED_MIN_MACS = 1 << 20
_ANY_WEIGHT_MIN_MACS = 1 << 24


def packed_min_rows(out_features: int, in_features: int) -> int:
    """The fewest rows from which a packed oneDNN product of this weight shape runs instead of F.linear."""
    weight = out_features * in_features
    macs = _PACKED_MIN_MACS if weight >= _PACKED_MIN_WEIGHT else _ANY_WEIGHT_MIN_MACS
    return -(-macs // weight)


def describe_min_rows(module: nn.Module) -> str:
    """The packed modules' weight shapes with the rows from which they run on oneDNN, '512x128 from 128 rows'."""
    shapes = sorted({(m.out_features, m.in_features, m.min_rows) for m in module.modules()
                     if isinstance(m, OneDnnLinear) and m.packed is not None})
    return ", ".join(f"{o}x{i} {'onednn' if r <= 1 else f'onednn from {r} rows'}" for o, i, r in shapes)


def swap_linears(module: nn.Module, packed: bool = False) -> int:
    """Replace every plain `nn.Linear` inside `module` by a `OneDnnLinear` sharing its parameters (in place;
    `packed` for inference); returns how many were swapped."""
    return replace_modules(module, is_plain_linear, lambda linear: OneDnnLinear.from_linear(linear, packed))


__all__ = [
    "OneDnnLinear",
    "PackedWeight",
    "describe_min_rows",
    "onednn_available",
    "onednn_linear",
    "packed_min_rows",
    "swap_linears",
]
