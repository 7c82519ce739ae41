"""bf16 matrix products for decoding, float32 everywhere else (as autocast would do it, without a context).

`Bf16Linear` holds a bf16 copy of an `nn.Linear`'s weight and bias; its input is rounded to bf16, the product
runs in bf16 (native on CPUs with AMX or AVX-512 BF16, and on GPUs) and the result comes back as float32. The
residual stream, layer normalisation, attention softmax, log-softmax and the search's scores stay float32, so
rounding enters only through the products' inputs and outputs. `prepare_for_inference` swaps the encoder's and
decoder's linear layers and keeps the vocabulary projection in float32 (greedy agreement with float32 on the
trained Multi30k model, either way: docs/benchmarks/precision.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.kernels.modules import is_plain_linear, replace_modules


class Bf16Linear(nn.Module):
    """y = x W^T + b with x, W, b rounded to bf16; float32 in, float32 out. Inference only (no gradients)."""

    weight: Tensor
    bias: Tensor | None

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("weight", linear.weight.detach().to(torch.bfloat16))
        bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)
        self.register_buffer("bias", bias)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x.to(torch.bfloat16), self.weight, self.bias).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def swap_bf16_linears(module: nn.Module) -> int:
    """Replace every plain `nn.Linear` inside `module` by a `Bf16Linear` (in place); returns how many."""
    return replace_modules(module, is_plain_linear, Bf16Linear)


__all__ = ["Bf16Linear", "swap_bf16_linears"]
