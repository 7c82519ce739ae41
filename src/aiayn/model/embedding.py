"""Embeddings (section 3.4): learned, multiplied by sqrt(d_model); the same matrix may serve the source
embedding, the target embedding and the pre-softmax linear transformation."""

from __future__ import annotations

import math

from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, pad_id: int, scale: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(nn.init.normal_(nn.Embedding(vocab_size, d_model).weight.data, std=d_model**-0.5))
        self.weight.data[pad_id].zero_()
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model) if scale else 1.0

    def forward(self, tokens: Tensor) -> Tensor:
        """[B,T] ids -> [B,T,d_model] vectors, times sqrt(d_model) (3.4)."""
        return nn.functional.embedding(tokens, self.weight, padding_idx=self.pad_id) * self.scale
