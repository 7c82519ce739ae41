"""int8 linear layers as CTranslate2's int8 mode runs them: every linear layer of both stacks and the vocabulary
projection, weights quantized once with one symmetric scale per output row, each input row quantized with its
own scale at run time, so that a row's result does not depend on the other rows of its batch (torch.ao's
dynamic quantization takes one scale per batch: a sentence's translation would change with its neighbours).
Approximate; embeddings, layer norms, softmax and the search's scores stay float32. fbgemm kernels (x86)."""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn

from aiayn.kernels.modules import is_plain_linear, replace_modules

# fbgemm's AVX2 kernel sums pairs of u8 x s8 products in int16: inputs take 7 bits (as torch.ao's reduce_range),
# [-1, 1] -> round(63 u) + 64 in [1, 127]
_INPUT_SCALE, _INPUT_ZERO = 1.0 / 63.0, 64
_TINY = torch.finfo(torch.float32).tiny


def int8_available() -> bool:
    """This torch build has the fbgemm int8 kernels (x86)."""
    return "fbgemm" in torch.backends.quantized.supported_engines


def int8_product(x: Tensor, packed: object) -> Tensor:
    """W_q x for 2-D x in [-1, 1] (rows already divided by their scale), x quantized with the fixed 7-bit scale
    above, the weight packed by fbgemm (`Int8Linear.packed`); float32 out."""
    return torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(x, _INPUT_SCALE, _INPUT_ZERO, packed)


class Int8Linear(nn.Module):
    """y = s * (W_q (x / s)) + b, s = max_j |x_j| of each row: x / s in [-1, 1] quantized with one fixed scale
    (per-row symmetric quantization), W_q the int8 weight with one scale per output row."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        self.in_features, self.out_features = weight.size(1), weight.size(0)
        scales = (weight.abs().amax(1) / 127.0).clamp_min(_TINY).double()
        zeros = torch.zeros(self.out_features, dtype=torch.long)
        with warnings.catch_warnings():  # torch.ao announces its move to torchao; the kernels still work
            warnings.simplefilter("ignore")
            qweight = torch.quantize_per_channel(weight, scales, zeros, 0, torch.qint8)
            self.packed = torch.ops.quantized.linear_prepack(qweight, None)
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.register_buffer("bias", bias)

    def quantized_weight(self) -> Tensor:
        """The quantized weight (a per-channel qint8 tensor), as torch.ao's modules expose it."""
        return torch.ops.quantized.linear_unpack(self.packed)[0]

    def forward(self, x: Tensor) -> Tensor:
        rows = x.reshape(-1, self.in_features)
        scale = rows.abs().amax(1, keepdim=True).clamp_min_(_TINY)
        product = int8_product(rows / scale, self.packed)
        y = product.mul_(scale) if self.bias is None else torch.addcmul(self.bias, scale, product)
        return y.reshape(*x.shape[:-1], self.out_features)

    def __deepcopy__(self, memo: dict) -> Int8Linear:
        clone = copy.copy(self)  # the packed weight is immutable: shared
        clone.__dict__ = {k: copy.deepcopy(v, memo) if k != "packed" else v for k, v in self.__dict__.items()}
        return clone

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def int8_layer_names(model: nn.Module) -> set[str]:
    """The linear layers quantized: both stacks' and the output projection (plain `nn.Linear` only)."""
    stacks = ("encoder.", "decoder.", "output_proj")
    return {name for name, m in model.named_modules() if is_plain_linear(m) and name.startswith(stacks)}


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of `model` whose linear layers (`int8_layer_names`) are `Int8Linear`."""
    if not int8_available():
        raise ValueError("precision int8 needs torch's fbgemm kernels (an x86 CPU build); use float32 or bf16")
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ValueError("precision int8 runs on the CPU (fbgemm); on a GPU use bf16 or float32")
    quantized = copy.deepcopy(model)
    targets = {id(quantized.get_submodule(name)) for name in int8_layer_names(quantized)}
    replace_modules(quantized, lambda m: id(m) in targets, Int8Linear)
    return quantized


__all__ = ["Int8Linear", "int8_available", "int8_layer_names", "int8_product", "quantize_int8"]
