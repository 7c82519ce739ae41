"""Issue 2, check 2: the fused and explicit attention paths compute eq. (1) alike; weights are distributions."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.model.attention import MultiHeadAttention, explicit_attention, scaled_dot_product_attention
from aiayn.model.masks import causal_mask, key_padding_mask


def qkv(generator: torch.Generator, batch=3, heads=2, tq=5, tk=7, d=8):
    return (torch.randn(batch, heads, t, d, generator=generator) for t in (tq, tk, tk))


def test_explicit_path_is_equation_one(generator: torch.Generator) -> None:
    q, k, v = qkv(generator)
    out, weights = explicit_attention(q, k, v)
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
    fast, none = scaled_dot_product_attention(q, k, v, mask)
    slow, weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
    assert none is None
    assert (fast - slow).abs().max() <= 1e-5
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    if mask is not None:
        blocked = ~mask.expand_as(weights)
        assert blocked.any() and (weights[blocked] == 0).all()


def test_is_causal_equals_explicit_causal_mask(generator: torch.Generator) -> None:
    q, k, v = qkv(generator, tq=6, tk=6)
    fast, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    slow, weights = scaled_dot_product_attention(q, k, v, need_weights=True, is_causal=True)
    assert (fast - slow).abs().max() <= 1e-5
    assert (weights.triu(1) == 0).all()


def test_fully_masked_row_gives_zero_weights_not_nan(generator: torch.Generator) -> None:
    q, k, v = qkv(generator, batch=1, heads=1, tq=2, tk=3)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    _, weights = explicit_attention(q, k, v, mask)
    assert not weights.isnan().any() and (weights[0, 0, 1] == 0).all()


def test_multi_head_split_merge_equals_per_head_projections(generator: torch.Generator) -> None:
    """MultiHead(Q,K,V) = Concat(head_1..head_h) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, h=4, d_k=3, d_v=5).eval()
    x = torch.randn(2, 6, 16, generator=generator)
    q, k, v = mha.project_qkv(x)
    out, _ = mha.attend(q, k, v)
    W = mha.in_proj.weight
    b = mha.in_proj.bias
    heads = []
    for i in range(4):
        wq, bq = W[i * 3 : (i + 1) * 3], b[i * 3 : (i + 1) * 3]
        wk, bk = W[12 + i * 3 : 12 + (i + 1) * 3], b[12 + i * 3 : 12 + (i + 1) * 3]
        wv, bv = W[24 + i * 5 : 24 + (i + 1) * 5], b[24 + i * 5 : 24 + (i + 1) * 5]
        qi, ki, vi = x @ wq.T + bq, x @ wk.T + bk, x @ wv.T + bv
        heads.append(torch.softmax(qi @ ki.transpose(1, 2) / math.sqrt(3), -1) @ vi)
    expected = mha.out_proj(torch.cat(heads, dim=-1))
    assert (out - expected).abs().max() <= 1e-5


@pytest.mark.parametrize("is_causal", [False, True])
def test_bf16_cpu_training_path_equals_fused_kernel(is_causal: bool, generator: torch.Generator) -> None:
    """bf16 training on CPU takes the explicit formula (faster there); output and gradients match the fused
    kernel's to bf16 precision, with or without the causal mask."""
    import torch.nn.functional as F

    q, k, v = (torch.randn(3, 4, 9, 16, generator=generator).bfloat16().requires_grad_() for _ in range(3))
    mask = None if is_causal else key_padding_mask(torch.arange(9)[None].repeat(3, 1) < torch.tensor([[9], [5], [2]]))
    out, weights = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal)
    assert weights is None and out.dtype == torch.bfloat16
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    assert (out.float() - reference.float()).abs().max() < 2e-2
    upstream = torch.randn(out.shape, generator=generator).bfloat16()
    ours = torch.autograd.grad((out * upstream).sum(), (q, k, v))
    theirs = torch.autograd.grad((reference * upstream).sum(), (q, k, v))
    for a, b in zip(ours, theirs, strict=True):
        assert (a.float() - b.float()).abs().max() < 5e-2 * max(1.0, float(b.float().abs().max()))


@pytest.mark.parametrize("queries", [1, 4])
def test_decode_step_path_equals_fused_kernel(queries: int, generator: torch.Generator) -> None:
    """Inference with a few queries per row takes the explicit formula (faster per decoding step on CPU): same
    output as the fused kernel, on a strided cache slice, with and without a padding mask; a row whose keys are
    all masked gives finite values (no NaN)."""
    import torch.nn.functional as F

    from aiayn.model.attention import _is_decode_step

    q = torch.randn(3, 2, queries, 8, generator=generator)
    cache = torch.randn(2, 3, 2, 12, 8, generator=generator)  # [k/v, B, h, capacity, d]
    k, v = cache[0, :, :, :7], cache[1, :, :, :7]  # filled prefix of a preallocated buffer: not contiguous
    lengths = torch.tensor([[7], [4], [1]])
    for mask in (None, key_padding_mask(torch.arange(7)[None].repeat(3, 1) < lengths)):
        with torch.inference_mode():
            assert _is_decode_step(q, is_causal=False)
            out, weights = scaled_dot_product_attention(q, k, v, mask)
        assert weights is None
        reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert (out - reference).abs().max() < 1e-5
    assert not _is_decode_step(q, is_causal=False)  # gradients enabled (training): the fused kernel
    with torch.no_grad():
        empty = key_padding_mask(torch.zeros(3, 7, dtype=torch.bool))
        out, _ = scaled_dot_product_attention(q, k, v, empty)
    assert torch.isfinite(out).all()
