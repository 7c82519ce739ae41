"""Fast paths: other implementations of the same functions, chosen in one place (`aiayn.kernels.select`).

Below training and decoding, above the model: they swap ordinary modules for faster ones with the same
parameters (`OneDnnLinear`) and set which implementation of eq. (1) the attention modules use.
"""

from aiayn.kernels.bf16 import Bf16FeedForward, Bf16Linear, swap_bf16_linears
from aiayn.kernels.cpu_features import CpuFeatures, cpu_features
from aiayn.kernels.int8 import Int8Linear, quantize_int8
from aiayn.kernels.onednn import OneDnnLinear, onednn_available, onednn_linear, swap_linears
from aiayn.kernels.select import (
    Runtime,
    choose_attention,
    choose_decode_precision,
    choose_linear,
    choose_loss,
    choose_orthogonalization_dtype,
    precision_candidates,
    prepare_for_inference,
    prepare_for_training,
    resolve_precision,
)

__all__ = [
    "Bf16FeedForward",
    "Bf16Linear",
    "CpuFeatures",
    "Int8Linear",
    "OneDnnLinear",
    "Runtime",
    "choose_attention",
    "choose_decode_precision",
    "choose_linear",
    "choose_loss",
    "choose_orthogonalization_dtype",
    "cpu_features",
    "onednn_available",
    "onednn_linear",
    "precision_candidates",
    "prepare_for_inference",
    "prepare_for_training",
    "quantize_int8",
    "resolve_precision",
    "swap_bf16_linears",
    "swap_linears",
]
