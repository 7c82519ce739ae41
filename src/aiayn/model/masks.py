"""Masks (3.2.3). One convention: a boolean True means "may attend"; shapes broadcast to [B, h, Tq, Tk]."""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """[B,T] token ids -> [B,T] bool, True at real (non-padding) tokens."""
    return tokens.ne(pad_id)


def key_padding_mask(real: Tensor) -> Tensor:
    """[B,Tk] bool (True = real token) -> [B,1,1,Tk], broadcast over heads and queries."""
    return real[:, None, None, :]


def causal_mask(q_len: int, k_len: int, device: torch.device | None = None) -> Tensor:
    """[Tq,Tk] bool: the query at position i (counted from the end of the keys) sees keys 0..i only.

    With a cache the queries are the last Tq of Tk positions: query j sits at position Tk - Tq + j
    ("position i sees only positions < i + 1", 3.1).
    """
    offset = k_len - q_len
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=offset)
