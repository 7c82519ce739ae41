"""Attention (section 3.2).

Scaled dot-product attention, eq. (1):

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Two paths compute this same function: the fast one calls `torch.nn.functional.scaled_dot_product_attention`
(fused kernels: flash / memory-efficient on GPU); the explicit one writes the formula out and can return the
attention weights. Masks are boolean with one convention everywhere: True = may attend.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def explicit_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Eq. (1) written out. q [B,h,Tq,d_k], k [B,h,Tk,d_k], v [B,h,Tk,d_v], mask broadcastable to [B,h,Tq,Tk].

    Returns (output [B,h,Tq,d_v], weights [B,h,Tq,Tk]); masked positions get weight exactly 0 (3.2.3: illegal
    connections are set to -inf before the softmax).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B,h,Tq,Tk]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # also turns a fully masked row into zeros, not NaN
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0.0 else weights
    return dropped @ v, weights


_EXPLICIT_MAX_KEYS = 256  # bf16 CPU training: up to this many keys the explicit formula is faster (see below)


def _explicit_is_faster(q: Tensor, k: Tensor) -> bool:
    """bf16 training on CPU with sentence-length keys, where the fused kernel's backward pass is slow."""
    return (
        q.device.type == "cpu"
        and q.dtype == torch.bfloat16
        and torch.is_grad_enabled()
        and k.size(-2) <= _EXPLICIT_MAX_KEYS
    )


_DECODE_MAX_QUERIES = 16  # incremental decoding: one query per row (self-attention), a few beams (cross)


def _is_decode_step(q: Tensor, is_causal: bool) -> bool:
    """Inference on CPU with a handful of queries per row, where the fused kernel's per-call work dominates."""
    return (
        q.device.type == "cpu" and not torch.is_grad_enabled() and not is_causal and q.size(-2) <= _DECODE_MAX_QUERIES
    )


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Eq. (1). Uses the fused kernel unless the weights are wanted; `is_causal` needs Tq == Tk and no mask.

    Two exceptions, measured on CPU with 2 threads. Decoding steps (no gradient, at most 16 queries per row):
    the fused kernel's per-call work dominates, and the explicit formula is faster (small model, 256 rows x 4
    heads: encoder-decoder attention over 33 source positions 468 -> 149 us per call, self-attention over 20
    decoded positions 254 -> 158 us; a whole beam-4 search 6-11% faster, greedy 3%). And bfloat16 training
    with sentence-length keys, where the fused kernel's backward pass is slow (base model, batch of 128 x 32
    tokens: 2.53 s per training step with it, 2.08 s with the explicit formula; in float32 the two are equal).
    """
    if need_weights or _explicit_is_faster(q, k) or _is_decode_step(q, is_causal):
        if is_causal:
            mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        out, weights = explicit_attention(q, k, v, mask, dropout_p)
        return out, weights if need_weights else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
    return out, None


class MultiHeadAttention(nn.Module):
    """Multi-head attention (3.2.2): MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The h projections W_i^Q, W_i^K, W_i^V are stored fused as one matrix `in_proj` with rows
    [W^Q (h*d_k); W^K (h*d_k); W^V (h*d_v)], the same function as h separate ones. This module only projects,
    splits and merges heads; caching is the caller's business (see `aiayn.model.cache`).
    """

    def __init__(self, d_model: int, h: int, d_k: int, d_v: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.h, self.d_k, self.d_v = h, d_k, d_v
        self.in_proj = nn.Linear(d_model, h * (2 * d_k + d_v))
        self.out_proj = nn.Linear(h * d_v, d_model)  # W^O
        self.dropout = dropout
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.out_proj.bias)

    def _split_heads(self, x: Tensor, d: int) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.h, d).transpose(1, 2)  # [B,T,h*d] -> [B,h,T,d]

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention projections of x [B,T,d_model] -> q, k [B,h,T,d_k], v [B,h,T,d_v]."""
        hk = self.h * self.d_k
        q, k, v = self.in_proj(x).split([hk, hk, self.h * self.d_v], dim=-1)
        return self._split_heads(q, self.d_k), self._split_heads(k, self.d_k), self._split_heads(v, self.d_v)

    def linear_q(self, x: Tensor) -> Tensor:
        """x W^Q (+ bias): the first h*d_k rows of `in_proj`. (Inference code may shadow this per instance with a
        faster kernel computing the same product; see `aiayn.decoding.inference`.)"""
        hk = self.h * self.d_k
        return F.linear(x, self.in_proj.weight[:hk], self.in_proj.bias[:hk])

    def linear_kv(self, x: Tensor) -> Tensor:
        """[x W^K, x W^V] (+ biases): the remaining rows of `in_proj`."""
        hk = self.h * self.d_k
        return F.linear(x, self.in_proj.weight[hk:], self.in_proj.bias[hk:])

    def project_q(self, x: Tensor) -> Tensor:
        """Encoder-decoder attention queries from the decoder state [B,T,d_model] -> [B,h,T,d_k] (3.2.3)."""
        return self._split_heads(self.linear_q(x), self.d_k)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder-decoder attention keys and values from the encoder output [B,S,d_model] (3.2.3)."""
        k, v = self.linear_kv(memory).split([self.h * self.d_k, self.h * self.d_v], dim=-1)
        return self._split_heads(k, self.d_k), self._split_heads(v, self.d_v)

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
        query_groups: int = 1,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention per head, Concat, W^O. Returns ([B,Tq,d_model], weights [B,h,Tq,Tk] or None).

        `query_groups` = g: q has g rows per row of k, v and mask (q [B*g,h,Tq,d_k], k [B,h,Tk,d_k]), e.g. the
        beams of one sentence over its encoder output. Each group is attended as g*Tq queries of its row: the
        same result as repeating k and v g times, without the copies.
        """
        p = self.dropout if self.training else 0.0
        rows, length = q.size(0), q.size(2)
        if query_groups > 1:
            q = _merge_groups(q, query_groups)
        heads, weights = scaled_dot_product_attention(q, k, v, mask, p, need_weights, is_causal)
        if query_groups > 1:
            heads = _split_groups(heads, query_groups, length)
            weights = None if weights is None else _split_groups(weights, query_groups, length)
        concat = heads.transpose(1, 2).reshape(rows, length, self.h * self.d_v)  # [B,h,T,d_v] -> [B,T,h*d_v]
        return self.out_proj(concat), weights


def _merge_groups(x: Tensor, g: int) -> Tensor:
    """[B*g, h, T, d] -> [B, h, g*T, d]: the g rows of a group become consecutive query positions."""
    rows, h, length, d = x.shape
    return x.view(rows // g, g, h, length, d).transpose(1, 2).reshape(rows // g, h, g * length, d)


def _split_groups(x: Tensor, g: int, length: int) -> Tensor:
    """Inverse of `_merge_groups`: [B, h, g*T, d] -> [B*g, h, T, d]."""
    batch, h, _, d = x.shape
    return x.view(batch, h, g, length, d).transpose(1, 2).reshape(batch * g, h, length, d)
