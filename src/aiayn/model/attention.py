"""Attention (section 3.2). Masks are boolean with one convention everywhere: True = may attend.

Scaled dot-product attention, eq. (1):

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Multi-head attention (3.2.2):

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,   head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

`scaled_dot_product_attention` is eq. (1) as written. `fused_attention` computes the same function with
PyTorch's fused kernel; which one a module uses is its `impl` ("explicit" | "sdpa"), set by
`Transformer.set_attention` (`aiayn.kernels` chooses it for a workload; see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0, causal: bool = False
) -> tuple[Tensor, Tensor]:
    """Eq. (1). q [B,h,Tq,d_k], k [B,h,Tk,d_k], v [B,h,Tk,d_v], mask broadcastable to [B,h,Tq,Tk].

    Returns (output [B,h,Tq,d_v], weights [B,h,Tq,Tk]). Masked positions get weight exactly 0 (3.2.3: illegal
    connections are set to -inf before the softmax); a fully masked row gives zeros, not NaN.
    """
    if causal:  # query i sees keys 0..i (Tq == Tk)
        mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B,h,Tq,Tk]
    illegal = None if mask is None else ~mask
    if illegal is not None:
        scores = scores.masked_fill(illegal, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if illegal is not None:
        weights = weights.masked_fill(illegal, 0.0)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0.0 else weights
    return dropped @ v, weights


def fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0, causal: bool = False
) -> tuple[Tensor, None]:
    """Eq. (1) by `torch.nn.functional.scaled_dot_product_attention` (no weights returned)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal), None


ATTENTION = {"explicit": scaled_dot_product_attention, "sdpa": fused_attention}


class MultiHeadAttention(nn.Module):
    """Projects, splits into h heads, attends (eq. 1), concatenates and applies W^O (3.2.2).

    The h per-head matrices W_i^Q are stored side by side as one [h*d_k, d_model] linear map `w_q` (likewise
    `w_k`, `w_v`): head i uses rows i*d_k .. (i+1)*d_k.
    """

    def __init__(self, d_model: int, h: int, d_k: int, d_v: int, dropout: float = 0.0, impl: str = "sdpa") -> None:
        super().__init__()
        self.h, self.d_k, self.d_v, self.dropout, self.impl = h, d_k, d_v, dropout, impl
        # Xavier-uniform over [W^Q; W^K; W^V] as one matrix, as torch.nn.MultiheadAttention initialises it.
        fused = nn.Linear(d_model, h * (2 * d_k + d_v))
        self.w_o = nn.Linear(h * d_v, d_model)
        for linear in (fused, self.w_o):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)
        sizes = [h * d_k, h * d_k, h * d_v]
        for name, weight, bias in zip(("w_q", "w_k", "w_v"), fused.weight.split(sizes), fused.bias.split(sizes)):
            linear = nn.Linear(d_model, weight.size(0), device="meta")  # parameters replaced just below
            linear.weight, linear.bias = nn.Parameter(weight.detach().clone()), nn.Parameter(bias.detach().clone())
            setattr(self, name, linear)

    def split_heads(self, x: Tensor, d: int) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.h, d).transpose(1, 2)  # [B,T,h*d] -> [B,h,T,d]

    def project_q(self, x: Tensor) -> Tensor:
        """Q W^Q for all heads: [B,T,d_model] -> [B,h,T,d_k]."""
        return self.split_heads(self.w_q(x), self.d_k)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """K W^K and V W^V for all heads: [B,S,d_model] -> [B,h,S,d_k], [B,h,S,d_v]."""
        return self.split_heads(self.w_k(x), self.d_k), self.split_heads(self.w_v(x), self.d_v)

    def forward(
        self,
        x_q: Tensor,
        x_kv: Tensor | None = None,
        mask: Tensor | None = None,
        cache: tuple[Tensor, Tensor] | None = None,
        causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """MultiHead(x_q W^Q, x_kv W^K, x_kv W^V) -> ([B,Tq,d_model], weights [B,h,Tq,Tk] or None).

        `cache` gives the keys/values instead of x_kv: k [B/g,h,Tk,d_k], v [B/g,h,Tk,d_v], where g consecutive
        query rows share one row of keys (the beams of one sentence over its encoder output). `causal` (Tq == Tk)
        masks the keys after each query's own position (3.2.3).
        """
        q = self.project_q(x_q)  # [B,h,Tq,d_k]
        k, v = cache if cache is not None else self.project_kv(x_q if x_kv is None else x_kv)
        rows, length = q.shape[0], q.shape[2]
        g = rows // k.size(0)
        if g > 1:  # [B,h,Tq,d] -> [B/g,h,g*Tq,d]: a group's queries attend to their shared keys together
            q = q.view(rows // g, g, self.h, length, self.d_k).transpose(1, 2).reshape(rows // g, self.h, -1, self.d_k)
        attend = scaled_dot_product_attention if need_weights else ATTENTION[self.impl]
        heads, weights = attend(q, k, v, mask, self.dropout if self.training else 0.0, causal)
        if g > 1:  # back to [B,h,Tq,d]
            heads = heads.view(rows // g, self.h, g, length, -1).transpose(1, 2).reshape(rows, self.h, length, -1)
            if weights is not None:
                weights = weights.view(rows // g, self.h, g, length, -1).transpose(1, 2).flatten(0, 1)
        concat = heads.transpose(1, 2).reshape(rows, length, self.h * self.d_v)  # [B,h,T,d_v] -> [B,T,h*d_v]
        return self.w_o(concat), weights
