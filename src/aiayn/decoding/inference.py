"""Inference-only speedups for a loaded model (section 6.1's decoding); the function computed is unchanged.

`optimize_for_inference(model)` makes the float32 matrix products of decoding run on oneDNN with weights
packed once into its blocked layout, instead of re-reading plain row-major weights at every step. On this
project's CPUs (AMD Zen 5) oneDNN's float32 GEMM uses AVX-512 and runs about 2.3x faster than the MKL path
`torch.nn.functional.linear` takes on AMD processors (measured: ~250 vs ~110 GFLOP/s per core on decoder
shapes). What changes:

- every `nn.Linear` becomes a `PackedLinear` sharing the same parameters (state_dict keys and values are
  unchanged), which multiplies with the packed copy when no gradient is needed and repacks if the weight
  was modified since;
- the encoder-decoder attention's query and key/value products, which use row blocks of the fused `in_proj`
  (`MultiHeadAttention.linear_q` / `linear_kv`), get packed copies of those blocks through instance
  attributes shadowing the two methods;
- the model's final projection (the pre-softmax linear of 3.4, tied to the embeddings) gets the same packed
  treatment through an instance attribute `project` that shadows `Transformer.project` (the tied weight is
  the embedding's parameter, so no module of its own holds it).

With `int8=True` the decoder's linear layers are quantized dynamically to int8 (torch.ao, fbgemm kernels)
instead: faster and approximate, for comparison with CTranslate2's int8 mode.

Only CPU float32 models are affected; elsewhere, or when oneDNN's packed linear is unavailable in this
torch build, the model is returned as it is.
"""

from __future__ import annotations

import copy
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model import MultiHeadAttention, Transformer

_PACK_BATCH_HINT = 256  # rows oneDNN tunes its packed layout for (beam 4 x 64 sentences); any row count works


def onednn_available() -> bool:
    """Whether this torch build has oneDNN's packed float32 linear (the op Inductor uses on CPU)."""
    try:
        weight = torch.ones(2, 2)
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
        out = torch.ops.mkldnn._linear_pointwise(torch.ones(1, 2), packed, None, "none", [], "")
        return bool(torch.equal(out, torch.full((1, 2), 2.0)))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


class _Packed:
    """A oneDNN-packed copy of a [out, in] weight, refreshed when the weight changes in place."""

    def __init__(self, weight: Tensor) -> None:
        self.weight = weight
        self._pack()

    def __deepcopy__(self, memo: dict) -> _Packed:
        return _Packed(copy.deepcopy(self.weight, memo))  # oneDNN's opaque tensors cannot be copied: repack

    def _pack(self) -> None:
        with torch.no_grad():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), _PACK_BATCH_HINT)
        self.version = self.weight._version

    @staticmethod
    def usable(x: Tensor) -> bool:
        """Whether the packed product applies: no gradient wanted, float32 on CPU."""
        return not torch.is_grad_enabled() and x.dtype == torch.float32 and x.device.type == "cpu"

    def __call__(self, x: Tensor, bias: Tensor | None) -> Tensor:
        if self.weight._version != self.version:
            self._pack()
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, bias, "none", [], "")


class PackedLinear(nn.Linear):
    """nn.Linear whose forward uses a oneDNN-packed weight when no gradient is needed (same parameters)."""

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> PackedLinear:
        packed = cls.__new__(cls)
        nn.Module.__init__(packed)
        packed.in_features, packed.out_features = linear.in_features, linear.out_features
        packed.weight, packed.bias = linear.weight, linear.bias  # shared, not copied
        packed._packed = _Packed(linear.weight)
        return packed

    def forward(self, x: Tensor) -> Tensor:
        if self._packed.usable(x):
            return self._packed(x, self.bias)
        return F.linear(x, self.weight, self.bias)


class _PackedProjection:
    """Stands in for `Transformer.project` (3.4's final linear, [.., d_model] -> [.., V] logits)."""

    def __init__(self, model: Transformer) -> None:
        self.model = model
        self.weight = model.output_weight()
        self._packed = _Packed(self.weight)

    def __call__(self, hidden: Tensor) -> Tensor:
        if self.model.output_weight() is self.weight and self._packed.usable(hidden):
            return self._packed(hidden, None)
        return Transformer.project(self.model, hidden)


class _PackedRows:
    """Stands in for `MultiHeadAttention.linear_q` / `linear_kv`: x times rows [start, stop) of `in_proj`,
    packed on first use (and again if `in_proj` gets a new weight)."""

    def __init__(self, attention: MultiHeadAttention, start: int, stop: int) -> None:
        self.attention, self.start, self.stop = attention, start, stop
        self.source: Tensor | None = None  # the `in_proj.weight` the packed copy was made from
        self._packed: _Packed | None = None

    def __deepcopy__(self, memo: dict) -> _PackedRows:
        return _PackedRows(copy.deepcopy(self.attention, memo), self.start, self.stop)  # repacks when used

    def __call__(self, x: Tensor) -> Tensor:
        in_proj = self.attention.in_proj
        weight = in_proj.weight[self.start : self.stop]  # a view: the packed copy tracks in-place updates
        bias = None if in_proj.bias is None else in_proj.bias[self.start : self.stop]
        if not _Packed.usable(x):
            return F.linear(x, weight, bias)
        if self._packed is None or in_proj.weight is not self.source:
            self.source, self._packed = in_proj.weight, _Packed(weight)
        return self._packed(x, bias)


def _pack_attention_rows(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, MultiHeadAttention) and type(module.in_proj) in (nn.Linear, PackedLinear):
            hk, rows = module.h * module.d_k, module.in_proj.out_features
            module.linear_q = _PackedRows(module, 0, hk)  # shadows the method on this instance only
            module.linear_kv = _PackedRows(module, hk, rows)


def _swap_linears(module: nn.Module, skip: tuple[str, ...] = ()) -> None:
    for name, child in module.named_children():
        if type(child) is nn.Linear and name not in skip:
            setattr(module, name, PackedLinear.from_linear(child))
        else:
            _swap_linears(child, skip)


def quantize_int8(model: Transformer) -> Transformer:
    """Dynamic int8 quantization (torch.ao) of the decoder's nn.Linear layers that are called as modules (the
    encoder-decoder attention's fused in_proj is sliced by the model, so it stays float)."""
    names = {
        name
        for name, module in model.named_modules()
        if type(module) is nn.Linear and name.startswith("decoder.") and not name.endswith("cross_attn.in_proj")
    }
    with warnings.catch_warnings():  # torch.ao announces its move to torchao; the API still works
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, names, dtype=torch.qint8)


def optimize_for_inference(model: Transformer, int8: bool = False) -> Transformer:
    """Prepare `model` (in place) for fast decoding on CPU; returns it in eval mode. See the module docstring."""
    model.eval()
    if next(model.parameters()).device.type != "cpu" or model.output_weight().dtype != torch.float32:
        return model
    if int8:
        model = quantize_int8(model)
    if onednn_available():
        _swap_linears(model)
        _pack_attention_rows(model)
        model.project = _PackedProjection(model)  # shadows Transformer.project on this instance only
    return model


__all__ = ["PackedLinear", "onednn_available", "optimize_for_inference", "quantize_int8"]
