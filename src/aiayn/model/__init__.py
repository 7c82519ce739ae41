"""The Transformer model (section 3 of the paper). Imports only `aiayn.config`, `aiayn.io` and torch."""

from aiayn.model.attention import MultiHeadAttention, fused_attention, scaled_dot_product_attention
from aiayn.model.cache import KVCache
from aiayn.model.pretrained import ModelDirectoryError
from aiayn.model.transformer import DecoderOutput, EncoderOutput, StepOutput, Transformer

__all__ = [
    "DecoderOutput",
    "EncoderOutput",
    "KVCache",
    "ModelDirectoryError",
    "MultiHeadAttention",
    "StepOutput",
    "Transformer",
    "fused_attention",
    "scaled_dot_product_attention",
]
