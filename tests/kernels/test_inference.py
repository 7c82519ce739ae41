"""`prepare_for_inference` (oneDNN-packed weights, the chosen attention) computes the same function as the model
as built; `beam_cache.reorder_within` equals a full `KVCache.reorder` on rows that stay in their sentence."""

from __future__ import annotations

import copy

import pytest
import torch

from aiayn.config import DecodeConfig
from aiayn.decoding import generate
from aiayn.decoding.beam_cache import reorder_within
from aiayn.kernels import OneDnnLinear, onednn_available, prepare_for_inference
from aiayn.model import MultiHeadAttention
from tests.decoding.conftest import peaky_model, random_sources

VOCAB = 12
needs_onednn = pytest.mark.skipif(not onednn_available(), reason="this torch build has no oneDNN packed linear")


@pytest.fixture(scope="module")
def models():
    plain = peaky_model(VOCAB, seed=3, eos_shift=4.0)
    return plain, prepare_for_inference(copy.deepcopy(plain))[0]


@needs_onednn
def test_every_linear_and_the_output_projection_are_packed(models):
    plain, fast = models
    assert sum(type(m) is torch.nn.Linear for m in plain.modules()) == sum(
        type(m) is OneDnnLinear for m in fast.modules()
    )
    assert type(fast.output_proj) is OneDnnLinear  # the final linear of 3.4 too
    assert all(m.packed is not None for m in fast.modules() if isinstance(m, OneDnnLinear))  # packed weights
    assert {k: v.shape for k, v in plain.state_dict().items()} == {k: v.shape for k, v in fast.state_dict().items()}
    assert all(torch.equal(v, fast.state_dict()[k]) for k, v in plain.state_dict().items())


@needs_onednn
def test_attention_projections_are_packed_and_copies_pack_their_own(models):
    plain, fast = models
    pairs = [(a, b) for a, b in zip(plain.modules(), fast.modules(), strict=True) if isinstance(a, MultiHeadAttention)]
    x = torch.randn(5, 2, plain.config.d_model)
    for a, b in pairs:
        assert type(b.w_q) is OneDnnLinear and type(b.w_k) is OneDnnLinear  # modules swapped, not methods
        with torch.inference_mode():
            assert torch.allclose(a.w_q(x), b.w_q(x), atol=1e-5)
            assert torch.allclose(a.w_k(x), b.w_k(x), atol=1e-5)
    copied = copy.deepcopy(fast)  # the copy packs its own weights, not the original's
    attention = next(m for m in copied.modules() if isinstance(m, MultiHeadAttention))
    with torch.no_grad():
        attention.w_q.weight.zero_()
        attention.w_q.bias.fill_(1.0)
        assert torch.equal(attention.w_q(x), torch.ones(5, 2, attention.h * attention.d_k))


@pytest.mark.parametrize("config", [DecodeConfig(greedy=True), DecodeConfig(beam=4, nbest=3)], ids=["greedy", "beam"])
def test_same_outputs_as_the_plain_model(models, config):
    plain, fast = models
    src = random_sources(6, 7, VOCAB, seed=2)
    a, b = generate(plain, src, config), generate(fast, src, config)
    assert [[h.tokens for h in x] for x in a] == [[h.tokens for h in x] for x in b]
    assert [h.score for x in a for h in x] == pytest.approx([h.score for x in b for h in x], abs=1e-4)
    with torch.no_grad():
        tgt = torch.randint(4, VOCAB, (6, 5))
        assert torch.allclose(plain(src, tgt), fast(src, tgt), atol=1e-4)


@needs_onednn
def test_gradients_and_changed_weights_fall_back_or_repack(models):
    _, fast = models
    fast = copy.deepcopy(fast)
    layer = next(m for m in fast.modules() if isinstance(m, OneDnnLinear))
    x = torch.randn(3, layer.in_features)
    reference = torch.nn.functional.linear(x, layer.weight, layer.bias)
    assert torch.allclose(layer(x), reference, atol=1e-5)  # grad enabled: the autograd path, differentiable
    layer(x).sum().backward()
    assert layer.weight.grad is not None
    with torch.no_grad():
        layer.weight.mul_(2.0)  # an in-place update must not leave a stale packed copy
        assert torch.allclose(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-5)


def test_int8_variant_decodes(models):
    plain, _ = models
    int8, _ = prepare_for_inference(copy.deepcopy(plain), int8=True)
    results = generate(int8, random_sources(3, 5, VOCAB, seed=1), DecodeConfig(beam=3, nbest=2, max_len_b=6))
    assert all(len(hyps) == 2 for hyps in results)


def test_reorder_within_equals_reorder(models):
    plain, _ = models
    src = random_sources(3, 5, VOCAB, seed=1)
    with torch.no_grad():
        memory = plain.encode(src)
        caches = [plain.init_cache(memory, capacity=8) for _ in range(2)]
        tokens = torch.randint(4, VOCAB, (5, 12), generator=torch.Generator().manual_seed(0))
        for cache in caches:
            cache.reorder(torch.arange(3).repeat_interleave(4))  # 4 beams per sentence
            for step in range(5):
                plain.step(tokens[step], cache)
    index = torch.tensor([0, 0, 2, 3, 5, 4, 4, 7, 8, 9, 10, 11])  # rows stay within their sentence
    caches[0].reorder(index)
    reorder_within(caches[1], index)
    for a, b in zip(caches[0].self_k + caches[0].self_v, caches[1].self_k + caches[1].self_v):
        assert torch.equal(a[:, :, :5], b[:, :, :5])
    assert not torch.equal(caches[0].self_k[0][1, :, :5], caches[0].self_k[0][2, :, :5])  # rows really differ
    with pytest.raises(ValueError, match="batch size"):
        reorder_within(caches[1], index[:6])


@pytest.mark.parametrize("moved", [1, 9])
def test_reorder_within_then_decoding_continues(models, moved: int):
    """After reorder_within (one or most rows moved, twice) the cache equals a full `KVCache.reorder` (which copies
    only the filled positions), and later steps, which grow the buffers past their capacity, give the same
    logits; every layer's buffers grow to one capacity."""
    plain, _ = models
    src = random_sources(3, 5, VOCAB, seed=2)
    tokens = torch.randint(4, VOCAB, (12, 12), generator=torch.Generator().manual_seed(1))
    index = torch.arange(12)
    changed = [1, 2, 3, 5, 6, 7, 9, 10, 11][:moved]
    index[changed] = torch.tensor([(r // 4) * 4 for r in changed])  # moved rows take their sentence's first beam
    with torch.no_grad():
        memory = plain.encode(src)
        caches = [plain.init_cache(memory, capacity=4) for _ in range(2)]
        for cache in caches:
            cache.reorder(torch.arange(3).repeat_interleave(4))
            for step in range(3):
                plain.step(tokens[:, step], cache)
        for _ in range(2):
            caches[0].reorder(index)
            reorder_within(caches[1], index)
        for a, b in zip(caches[0].self_k + caches[0].self_v, caches[1].self_k + caches[1].self_v, strict=True):
            assert torch.equal(a[:, :, :3], b[:, :, :3])
        for step in range(3, 8):  # past capacity 4: the buffers grow
            a, b = (plain.step(tokens[:, step], cache).logits for cache in caches)
            assert torch.equal(a, b), step
    assert caches[1].capacity >= 8 and len({t.size(2) for t in caches[1].self_k + caches[1].self_v}) == 1
