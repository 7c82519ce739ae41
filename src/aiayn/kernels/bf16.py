"""bf16 matrix products for decoding, float32 everywhere else (as autocast would do it, without a context).

`Bf16Linear` holds a bf16 copy of an `nn.Linear`'s weight and bias; its input is rounded to bf16, the product
runs in bf16 (native on CPUs with AMX or AVX-512 BF16, and on GPUs) and the result comes back as float32. The
residual stream, layer normalisation, attention softmax, log-softmax and the search's scores stay float32, so
rounding enters only through the products' inputs and outputs. `prepare_for_inference` swaps the encoder's and
decoder's linear layers and keeps the vocabulary projection in float32 (greedy agreement with float32 on the
trained Multi30k model, either way: docs/benchmarks/precision.md).

On CPU the product is oneDNN's, as `F.linear` on bf16 computes it, with the weight packed once into oneDNN's
blocked layout (`F.linear` repacks it at every call). `Bf16FeedForward` is eq. (2) with ReLU on the same
products: max(0, x W_1 + b_1) stays bf16 between the two (ReLU of a bf16 value is that value or 0, so the
result is the same as two `Bf16Linear` with float32 in between, without two casts of the d_ff-wide tensor).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.kernels.modules import is_plain_linear, replace_modules
from aiayn.kernels.onednn import PackedWeight
from aiayn.model.feed_forward import PositionwiseFeedForward


@functools.cache
def bf16_packing_available() -> bool:
    """This torch build packs bf16 weights for oneDNN on this CPU, and the packed product equals F.linear's."""
    try:
        x = torch.linspace(-2, 2, 24).view(3, 8).bfloat16()
        w, b = torch.linspace(-1, 1, 40).view(5, 8).bfloat16(), torch.linspace(-1, 1, 5).bfloat16()
        packed = torch.ops.mkldnn._reorder_linear_weight(w, 3)
        fast = torch.ops.mkldnn._linear_pointwise(x, packed, b, "relu", [], "")
        return bool(torch.equal(fast, F.relu(F.linear(x, w, b))))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


class _Bf16Product(nn.Module):
    """x W^T + b in bf16 (bf16 in, bf16 out), on a packed oneDNN weight for CPU tensors where torch has it."""

    weight: Tensor
    bias: Tensor | None

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("weight", linear.weight.detach().to(torch.bfloat16))
        bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)
        self.register_buffer("bias", bias)
        self.packed = PackedWeight()  # remade when the weight is replaced or changed in place

    def product(self, x: Tensor, relu: bool = False) -> Tensor:
        if x.device.type != "cpu" or x.numel() == 0 or not bf16_packing_available():
            y = F.linear(x, self.weight, self.bias)
            return F.relu(y) if relu else y
        flat = x.reshape(-1, self.in_features)
        post = "relu" if relu else "none"
        y = torch.ops.mkldnn._linear_pointwise(flat, self.packed.get(self.weight), self.bias, post, [], "")
        return y.view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bf16Linear(_Bf16Product):
    """y = x W^T + b with x, W, b rounded to bf16; float32 in, float32 out. Inference only (no gradients)."""

    def forward(self, x: Tensor) -> Tensor:
        return self.product(x.to(torch.bfloat16)).to(x.dtype)


class Bf16FeedForward(nn.Module):
    """Eq. (2), FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, both products in bf16, the hidden layer kept bf16."""

    def __init__(self, ffn: PositionwiseFeedForward) -> None:
        super().__init__()
        self.w_1, self.w_2 = _Bf16Product(ffn.w_1), _Bf16Product(ffn.w_2)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2.product(self.w_1.product(x.to(torch.bfloat16), relu=True)).to(x.dtype)


def _fusable_ffn(module: nn.Module) -> bool:
    return isinstance(module, PositionwiseFeedForward) and module.activation == "relu" and not module.training


def swap_bf16_linears(module: nn.Module) -> int:
    """Replace every ReLU feed-forward network inside `module` by a `Bf16FeedForward` and every other plain
    `nn.Linear` by a `Bf16Linear` (in place); returns how many linear layers now run in bf16."""
    ffns = replace_modules(module, _fusable_ffn, Bf16FeedForward)
    return 2 * ffns + replace_modules(module, is_plain_linear, Bf16Linear)


__all__ = ["Bf16FeedForward", "Bf16Linear", "bf16_packing_available", "swap_bf16_linears"]
