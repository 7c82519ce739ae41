"""The Transformer model (section 3 of the paper). Imports only `aiayn.config` and torch."""

from aiayn.model.attention import MultiHeadAttention, explicit_attention, scaled_dot_product_attention
from aiayn.model.cache import KVCache
from aiayn.model.pretrained import ModelDirectoryError
from aiayn.model.transformer import DecoderOutput, EncoderOutput, Transformer

__all__ = [
    "DecoderOutput",
    "EncoderOutput",
    "KVCache",
    "ModelDirectoryError",
    "MultiHeadAttention",
    "Transformer",
    "explicit_attention",
    "scaled_dot_product_attention",
]
