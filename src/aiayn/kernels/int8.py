"""Dynamic int8 quantization of the decoder's linear layers (torch.ao, fbgemm kernels): weights quantized per
tensor once, activations per batch at run time. Approximate; for comparison with CTranslate2's int8 mode."""

from __future__ import annotations

import warnings

from torch import nn


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of `model` whose decoder `nn.Linear` layers run in int8 (the output projection stays float)."""
    import torch.ao.quantization

    names = {name for name, m in model.named_modules() if type(m) is nn.Linear and name.startswith("decoder.")}
    with warnings.catch_warnings():  # torch.ao announces its move to torchao; the API still works
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, names, dtype=torch.qint8)


__all__ = ["quantize_int8"]
