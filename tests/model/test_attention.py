"""Eq. (1) as written against closed forms and the fused kernel; multi-head split/merge (3.2.2); weights are
distributions."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.model.attention import MultiHeadAttention, fused_attention, scaled_dot_product_attention
from aiayn.model.masks import causal_mask, key_padding_mask


def qkv(generator: torch.Generator, batch=3, heads=2, tq=5, tk=7, d=8):
    return (torch.randn(batch, heads, t, d, generator=generator) for t in (tq, tk, tk))


def test_explicit_path_is_equation_one(generator: torch.Generator) -> None:
    q, k, v = qkv(generator)
    out, weights = scaled_dot_product_attention(q, k, v)
    by_hand = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(weights, by_hand)
    torch.testing.assert_close(out, torch.einsum("bhqk,bhkd->bhqd", by_hand, v))


@pytest.mark.parametrize("kind", ["none", "padding", "causal", "both"])
def test_fast_and_explicit_paths_agree(kind: str, generator: torch.Generator) -> None:
    q, k, v = qkv(generator, tq=7, tk=7)
    real = torch.ones(3, 7, dtype=torch.bool)
    real[1, 4:] = False
    real[2, 6:] = False
    mask = None
    if kind in ("padding", "both"):
        mask = key_padding_mask(real)
    if kind in ("causal", "both"):
        causal = causal_mask(7, 7)
        mask = causal if mask is None else mask & causal
    fast, none = fused_attention(q, k, v, mask)
    slow, weights = scaled_dot_product_attention(q, k, v, mask)
    assert none is None
    assert (fast - slow).abs().max() <= 1e-5
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    if mask is not None:
        blocked = ~mask.expand_as(weights)
        assert blocked.any() and (weights[blocked] == 0).all()


def test_is_causal_equals_explicit_causal_mask(generator: torch.Generator) -> None:
    q, k, v = qkv(generator, tq=6, tk=6)
    fast, _ = fused_attention(q, k, v, causal=True)
    slow, weights = scaled_dot_product_attention(q, k, v, causal=True)
    assert (fast - slow).abs().max() <= 1e-5
    assert (weights.triu(1) == 0).all()


def test_fully_masked_row_gives_zero_weights_not_nan(generator: torch.Generator) -> None:
    q, k, v = qkv(generator, batch=1, heads=1, tq=2, tk=3)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not weights.isnan().any() and (weights[0, 0, 1] == 0).all()


def test_multi_head_split_merge_equals_per_head_projections(generator: torch.Generator) -> None:
    """MultiHead(Q,K,V) = Concat(head_1..head_h) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, h=4, d_k=3, d_v=5).eval()
    x = torch.randn(2, 6, 16, generator=generator)
    out, _ = mha(x, x)
    W = torch.cat([mha.w_q.weight, mha.w_k.weight, mha.w_v.weight])
    b = torch.cat([mha.w_q.bias, mha.w_k.bias, mha.w_v.bias])
    heads = []
    for i in range(4):
        wq, bq = W[i * 3 : (i + 1) * 3], b[i * 3 : (i + 1) * 3]
        wk, bk = W[12 + i * 3 : 12 + (i + 1) * 3], b[12 + i * 3 : 12 + (i + 1) * 3]
        wv, bv = W[24 + i * 5 : 24 + (i + 1) * 5], b[24 + i * 5 : 24 + (i + 1) * 5]
        qi, ki, vi = x @ wq.T + bq, x @ wk.T + bk, x @ wv.T + bv
        heads.append(torch.softmax(qi @ ki.transpose(1, 2) / math.sqrt(3), -1) @ vi)
    expected = mha.w_o(torch.cat(heads, dim=-1))
    assert (out - expected).abs().max() <= 1e-5
