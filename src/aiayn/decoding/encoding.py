"""The encoder side of a search: encode a batch in length-sorted chunks (as section 5.1 batches "by
approximate sequence length"), so the encoder does little work on padding, then lay the outputs back into one
padded batch for the decoder. Real positions get the same values as one padded pass (up to float rounding);
padded positions are zeros, and masked out of the encoder-decoder attention as always.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.decoding.ensemble import Ensemble, EnsembleMemory
from aiayn.model import EncoderOutput, Transformer

CHUNK_SENTENCES = 16  # sentences per encoder call: enough rows for efficient matrix products


def encode_by_length(model: Transformer, src: Tensor, chunk: int = CHUNK_SENTENCES) -> EncoderOutput:
    """model.encode(src) for src [B,S] (PAD-padded), computed on length-sorted chunks of `chunk` sentences."""
    if src.size(0) <= chunk:
        return model.encode(src)
    lengths = src.ne(model.config.pad_id).sum(dim=1)
    order = torch.argsort(lengths, descending=True, stable=True)
    hidden = None
    mask = torch.zeros(src.shape, dtype=torch.bool, device=src.device)
    for start in range(0, src.size(0), chunk):
        rows = order[start : start + chunk]
        width = int(lengths[rows[0]])  # the longest of the chunk: sorted longest first
        out = model.encode(src.index_select(0, rows)[:, :width])
        if hidden is None:
            hidden = out.hidden.new_zeros(src.size(0), src.size(1), out.hidden.size(2))  # [B,S,d_model]
        hidden[rows, :width] = out.hidden
        mask[rows, :width] = out.mask
    return EncoderOutput(hidden, mask, [])


def encode_sources(model: Transformer | Ensemble, src: Tensor) -> EncoderOutput | EnsembleMemory:
    """What a search starts from: the model's encoder output of src [B,S], or each ensemble member's."""
    if isinstance(model, Ensemble):
        return EnsembleMemory([encode_by_length(member, src) for member in model.members])
    return encode_by_length(model, src)


__all__ = ["CHUNK_SENTENCES", "encode_by_length", "encode_sources"]
