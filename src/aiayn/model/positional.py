"""Positional encodings (section 3.5).

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Sine on even dimensions, cosine on odd ones, exactly as written (interleaved, not concatenated halves).
`LearnedPositionalEmbedding` is the variant of Table 3 row E.

Models made elsewhere use the same sinusoids differently (named settings of `ModelConfig`, docs/INTEROP.md):
`layout="concat"` puts all sines first, then all cosines (tensor2tensor, Marian, fairseq), an exact permutation
of the hidden dimension away from the paper's; `frequencies="fairseq"` uses w_i = 10000^(-i / (d_model/2 - 1))
instead of 10000^(-2i / d_model); `offset` counts positions from a number other than 0 (fairseq: pad + 1).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_encoding(
    num_positions: int,
    d_model: int,
    offset: int = 0,
    dtype: torch.dtype = torch.float32,
    layout: str = "interleaved",
    frequencies: str = "paper",
) -> Tensor:
    """Return PE for positions offset .. offset+num_positions-1 as a [num_positions, d_model] tensor."""
    position = torch.arange(offset, offset + num_positions, dtype=torch.float64).unsqueeze(1)  # [P, 1]
    if frequencies == "paper":  # pos / 10000^(2i / d_model), as written
        two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # [d_model/2]
        angle = position / torch.pow(10000.0, two_i / d_model)  # [P, d_model/2]
    elif frequencies == "fairseq":  # pos * exp(-i * ln(10000) / (half - 1)), fairseq's SinusoidalPositionalEmbedding
        half = d_model // 2
        angle = position * torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))
    else:
        raise ValueError(f"unknown positional frequencies {frequencies!r}; choose 'paper' or 'fairseq'")
    pe = torch.empty(num_positions, d_model, dtype=torch.float64)
    if layout == "interleaved":
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    elif layout == "concat":
        pe[:, : d_model // 2], pe[:, d_model // 2 :] = torch.sin(angle), torch.cos(angle)
    else:
        raise ValueError(f"unknown positional layout {layout!r}; choose 'interleaved' or 'concat'")
    return pe.to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds nothing learned: returns PE rows for positions [start, start + length) (plus `offset`)."""

    def __init__(
        self,
        d_model: int,
        initial_positions: int = 1024,
        layout: str = "interleaved",
        frequencies: str = "paper",
        offset: int = 0,
    ) -> None:
        super().__init__()
        self.d_model, self.layout, self.frequencies, self.offset = d_model, layout, frequencies, offset
        table = self._table(initial_positions)
        self.register_buffer("table", table, persistent=False)

    def _table(self, num_positions: int) -> Tensor:
        return sinusoidal_encoding(num_positions, self.d_model, self.offset, layout=self.layout,
                                   frequencies=self.frequencies)

    def forward(self, length: int, start: int = 0) -> Tensor:
        end = start + length
        if end > self.table.size(0):  # sinusoids extrapolate: grow the table on demand
            grown = self._table(max(end, 2 * self.table.size(0)))
            self.table = grown.to(device=self.table.device, dtype=self.table.dtype)
        return self.table[start:end]  # [length, d_model]


class LearnedPositionalEmbedding(nn.Module):
    """Learned absolute positions (Table 3 row E); positions beyond `max_positions` are an error."""

    def __init__(self, max_positions: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_positions, d_model))
        nn.init.normal_(self.weight, std=d_model**-0.5)

    def forward(self, length: int, start: int = 0) -> Tensor:
        if start + length > self.weight.size(0):
            raise ValueError(
                f"position {start + length - 1} exceeds model.max_positions={self.weight.size(0)} "
                "of the learned positional embedding"
            )
        return self.weight[start : start + length]


def relative_position_matrix(k: int, d_model: int) -> Tensor:
    """The exact linear map M_k with PE(pos + k) = PE(pos) M_k^T (3.5: "a linear function of PE(pos)").

    For each frequency w_i the pair (sin(w_i pos), cos(w_i pos)) is rotated by the angle w_i k.
    """
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(0, d_model, 2):
        w = 1.0 / math.pow(10000.0, i / d_model)
        c, s = math.cos(w * k), math.sin(w * k)
        m[i, i], m[i, i + 1] = c, s  # sin(a + b) = sin a cos b + cos a sin b
        m[i + 1, i], m[i + 1, i + 1] = -s, c  # cos(a + b) = cos a cos b - sin a sin b
    return m.float()


def fit_relative_position_matrix(pe: Tensor, k: int, fit_positions: int = 100) -> Tensor:
    """Least-squares estimate of M_k from PE rows 0..fit_positions-1 alone: PE(pos+k) ~= PE(pos) M_k^T.

    Fitted one frequency at a time (a 2x2 block on each (sin, cos) pair): an unconstrained d_model x d_model fit
    has d_model unknowns per row, more than 100 positions determine when d_model = 512.
    """
    pe = pe.double()
    d_model = pe.size(1)
    x, y = pe[:fit_positions], pe[k : fit_positions + k]
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(0, d_model, 2):
        block = torch.linalg.lstsq(x[:, i : i + 2], y[:, i : i + 2], driver="gelsd").solution  # [2,2]
        m[i : i + 2, i : i + 2] = block.T
    return m
