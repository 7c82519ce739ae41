"""Dynamic int8 quantization (torch.ao, fbgemm kernels), as CTranslate2's int8 mode does it: every linear layer
of both stacks and the vocabulary projection, weights quantized once with one symmetric scale per output row,
activations quantized per batch at run time. Approximate; embeddings, layer norms, softmax and the search's
scores stay float32."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from aiayn.kernels.modules import is_plain_linear


def int8_layer_names(model: nn.Module) -> set[str]:
    """The linear layers quantized: both stacks' and the output projection (plain `nn.Linear` only)."""
    stacks = ("encoder.", "decoder.", "output_proj")
    return {name for name, m in model.named_modules() if is_plain_linear(m) and name.startswith(stacks)}


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of `model` whose linear layers (`int8_layer_names`) run in int8 with per-row weight scales."""
    import torch.ao.quantization as tq

    spec = dict.fromkeys(int8_layer_names(model), tq.per_channel_dynamic_qconfig)
    with warnings.catch_warnings():  # torch.ao announces its move to torchao; the API still works
        warnings.simplefilter("ignore")
        return tq.quantize_dynamic(model, spec, dtype=torch.qint8)


__all__ = ["int8_layer_names", "quantize_int8"]
