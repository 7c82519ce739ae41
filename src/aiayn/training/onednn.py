"""oneDNN float32 matrix products for training on CPU: a kernel choice, the function computed is unchanged.

torch computes a float32 `F.linear` on CPU with MKL's GEMM, which on AMD processors takes its AVX2 path; oneDNN's
float32 GEMM uses AVX-512 there. Measured on this project's AMD Zen 5 VM, one thread, [4096 x 512] x [512 x 2048]:
forward MKL 116 ms vs oneDNN 73 ms, weight gradient 119 vs 74 ms (`docs/benchmarks/training.md` has the whole-step
figures). torch uses oneDNN for bf16 products already, so this matters for float32 training only.

`use_onednn_linears(model)` routes every float32 linear map of the model through `onednn_linear`, an autograd
function whose forward and both backward products (dL/dx = dL/dy W, dL/dW = dL/dy^T x) call oneDNN:

- each `nn.Linear` becomes a `OneDnnLinear` sharing its parameters (state_dict keys and values unchanged);
- the encoder-decoder attention's row blocks of `in_proj` (`MultiHeadAttention.linear_q` / `linear_kv`) and the
  tied output projection (`Transformer.project`) are shadowed per instance by callables doing the same.

Anything else (autocast active, another dtype or device) falls back to `F.linear`.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model import MultiHeadAttention, Transformer


def onednn_available() -> bool:
    """Whether this torch build has oneDNN's float32 linear op and it agrees with `F.linear`."""
    try:
        x, w = torch.arange(6.0).view(2, 3), torch.arange(12.0).view(4, 3)
        return bool(torch.equal(_mm(x, w), F.linear(x, w)))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def _mm(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [N, in] @ weight[out, in]^T (+ bias) on oneDNN; `weight` may be a strided view."""
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


def _cpu_autocast() -> bool:
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4 takes no device argument
        return torch.is_autocast_cpu_enabled()


def _usable(x: Tensor, weight: Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32 and not _cpu_autocast() and x.numel() > 0


def onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`F.linear(x, weight, bias)`, differentiable, on oneDNN when x and weight are float32 on CPU."""
    if _usable(x, weight):
        return _OneDnnLinearFunction.apply(x, weight, bias)
    return F.linear(x, weight, bias)


class OneDnnLinear(nn.Linear):
    """nn.Linear whose products run on oneDNN (same parameters, same function)."""

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> OneDnnLinear:
        module = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        module.weight, module.bias = linear.weight, linear.bias  # shared, not copied (the meta ones are dropped)
        return module

    def forward(self, x: Tensor) -> Tensor:
        return onednn_linear(x, self.weight, self.bias)


class _Rows:
    """Stands in for `MultiHeadAttention.linear_q` / `linear_kv`: x times rows [start, stop) of `in_proj`."""

    def __init__(self, attention: MultiHeadAttention, start: int, stop: int) -> None:
        self.attention, self.start, self.stop = attention, start, stop

    def __deepcopy__(self, memo: dict) -> _Rows:
        return _Rows(copy.deepcopy(self.attention, memo), self.start, self.stop)

    def __call__(self, x: Tensor) -> Tensor:
        in_proj = self.attention.in_proj
        bias = None if in_proj.bias is None else in_proj.bias[self.start : self.stop]
        return onednn_linear(x, in_proj.weight[self.start : self.stop], bias)


class _Projection:
    """Stands in for `Transformer.project`: the final linear (3.4) with the model's (tied) output weight."""

    def __init__(self, model: Transformer) -> None:
        self.model = model

    def __deepcopy__(self, memo: dict) -> _Projection:
        return _Projection(copy.deepcopy(self.model, memo))

    def __call__(self, hidden: Tensor) -> Tensor:
        return onednn_linear(hidden, self.model.output_weight())


def swap_linears(module: nn.Module) -> int:
    """Replace every `nn.Linear` inside `module` by a `OneDnnLinear` sharing its parameters; returns how many."""
    swapped = 0
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, OneDnnLinear.from_linear(child))
            swapped += 1
        else:
            swapped += swap_linears(child)
    return swapped


def use_onednn_linears(model: Transformer) -> int:
    """Route the model's float32 linear maps through oneDNN (in place); returns how many `nn.Linear` were swapped."""
    swapped = swap_linears(model)
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            hk = module.h * module.d_k
            module.linear_q = _Rows(module, 0, hk)  # shadows the method on this instance only
            module.linear_kv = _Rows(module, hk, module.in_proj.out_features)
    model.project = _Projection(model)
    return swapped


__all__ = ["OneDnnLinear", "onednn_available", "onednn_linear", "swap_linears", "use_onednn_linears"]
