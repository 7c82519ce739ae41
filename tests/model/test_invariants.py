"""Causality, padding invariance, and cached incremental decoding equal to the full pass (3.2.3)."""

from __future__ import annotations

import pytest
import torch

from aiayn.decoding.beam_cache import reorder_within
from aiayn.model import KVCache, StepOutput, Transformer
from tests.conftest import PAD, random_batch, tiny_config


@pytest.fixture(params=[False, True], ids=["post-norm", "pre-norm"])
def model(request) -> Transformer:
    torch.manual_seed(3)
    return Transformer(tiny_config(norm_first=request.param)).eval()


def test_causality(model: Transformer, generator: torch.Generator) -> None:
    src, _ = random_batch(3, 6, 37, generator)
    tgt = torch.randint(4, 37, (3, 8), generator=generator)
    with torch.no_grad():
        before = model.log_probs(src, tgt)
        for t in range(8):
            changed = tgt.clone()
            changed[:, t + 1 :] = torch.randint(4, 37, changed[:, t + 1 :].shape, generator=generator)
            after = model.log_probs(src, changed)
            assert (after[:, : t + 1] - before[:, : t + 1]).abs().max() <= 1e-5
            if t < 7:  # the changed positions themselves do change
                assert (after[:, t + 1 :] - before[:, t + 1 :]).abs().max() > 1e-3


def test_padding_invariance(model: Transformer, generator: torch.Generator) -> None:
    src, _ = random_batch(4, 7, 37, generator)
    tgt, _ = random_batch(4, 5, 37, generator)
    with torch.no_grad():
        memory = model.encode(src)
        logits = model.log_probs(src, tgt)
        src_padded = torch.cat([src, torch.full((4, 5), PAD)], dim=1)
        tgt_padded = torch.cat([tgt, torch.full((4, 3), PAD)], dim=1)
        memory_padded = model.encode(src_padded)
        logits_padded = model.log_probs(src_padded, tgt_padded)
    real = src.ne(PAD)
    assert (memory.hidden[real] - memory_padded.hidden[:, :7][real]).abs().max() <= 1e-5
    tgt_real = tgt.ne(PAD)
    assert (logits[tgt_real] - logits_padded[:, :5][tgt_real]).abs().max() <= 1e-5


def test_source_padding_is_ignored_whatever_the_pad_position_holds(model: Transformer, generator) -> None:
    """Changing the encoder output at padded positions must not move any target log-probability."""
    src, lengths = random_batch(3, 8, 37, generator, min_length=3)
    tgt = torch.randint(4, 37, (3, 4), generator=generator)
    with torch.no_grad():
        memory = model.encode(src)
        base = model.decode(tgt, memory).logits
        memory.hidden[~memory.mask] = 1e3
        poked = model.decode(tgt, memory).logits
    assert (base - poked).abs().max() <= 1e-5


def last(out: StepOutput) -> tuple[torch.Tensor, KVCache]:
    """The next-token logits [B,V] of a step and its cache."""
    return out.logits[:, -1], out.cache


def full_logits(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    return model.decode(tgt, model.encode(src)).logits


def test_incremental_decoding_equals_full_pass(model: Transformer, generator: torch.Generator) -> None:
    src, _ = random_batch(4, 9, 37, generator)
    tgt = torch.randint(4, 37, (4, 12), generator=generator)
    with torch.no_grad():
        expected = full_logits(model, src, tgt)
        cache = model.init_cache(model.encode(src), capacity=3)  # small: the buffers must grow
        for t in range(12):
            logits, cache = last(model.step(tgt[:, t], cache))
            assert (logits - expected[:, t]).abs().max() <= 1e-5, f"step {t}"
        assert cache.length == 12


def test_multi_token_step_equals_full_pass(model: Transformer, generator: torch.Generator) -> None:
    src, _ = random_batch(2, 5, 37, generator)
    tgt = torch.randint(4, 37, (2, 9), generator=generator)
    with torch.no_grad():
        expected = full_logits(model, src, tgt)
        cache = model.init_cache(model.encode(src))
        first = model.step(tgt[:, :4], cache, need_weights=True)  # a forced prefix at once
        rest = model.step(tgt[:, 4:], cache, need_weights=True)
    assert (torch.cat([first.logits, rest.logits], 1) - expected).abs().max() <= 1e-5


@pytest.mark.parametrize("source_changed", [False, True])
def test_cache_reorder_equals_full_pass_of_reordered_prefixes(model, generator, source_changed: bool) -> None:
    """Beam search: after k steps rows are re-ranked; decoding continues as if the prefixes had been reordered."""
    beam, sentences = 3, 2
    src, _ = random_batch(sentences, 6, 37, generator)
    src = src.repeat_interleave(beam, dim=0)  # [sentences*beam, S], beams of one sentence adjacent
    tgt = torch.randint(4, 37, (sentences * beam, 10), generator=generator)
    if source_changed:  # rows may move to any sentence (e.g. dropping finished ones then reshuffling)
        index = torch.tensor([5, 0, 0, 3, 1, 2])
    else:  # back-pointers within each sentence's beam, with repeats, as beam search makes them
        index = torch.tensor([1, 1, 0, 5, 3, 3])
    with torch.no_grad():
        cache = model.init_cache(model.encode(src))
        for t in range(4):
            _, cache = last(model.step(tgt[:, t], cache))
        cache.reorder(index) if source_changed else reorder_within(cache, index)
        reordered = torch.cat([tgt[index, :4], tgt[:, 4:]], dim=1)
        expected = full_logits(model, src[index], reordered)
        for t in range(4, 10):
            logits, cache = last(model.step(reordered[:, t], cache))
            assert (logits - expected[:, t]).abs().max() <= 1e-5, f"step {t}"


def test_grouped_cross_attention_weights_equal_per_row(model, generator) -> None:
    src, _ = random_batch(2, 7, 37, generator)
    tgt = torch.randint(4, 37, (4, 3), generator=generator)
    with torch.no_grad():
        expected = model.decode(tgt, model.encode(src.repeat_interleave(2, 0)), need_weights=True)
        cache = model.init_cache(model.encode(src), group=2)
        out = model.step(tgt, cache, need_weights=True)
    for got, want in zip(out.cross_attentions, expected.cross_attentions, strict=True):
        assert got.shape == want.shape == (4, 4, 3, 7)
        assert (got - want).abs().max() <= 1e-6


def test_cache_shrinks_to_live_rows(model: Transformer, generator: torch.Generator) -> None:
    src, _ = random_batch(4, 6, 37, generator)
    tgt = torch.randint(4, 37, (4, 7), generator=generator)
    with torch.no_grad():
        cache = model.init_cache(model.encode(src))
        for t in range(3):
            _, cache = last(model.step(tgt[:, t], cache))
        alive = torch.tensor([0, 2])
        cache.reorder(alive)
        expected = full_logits(model, src[alive], tgt[alive])
        for t in range(3, 7):
            logits, cache = last(model.step(tgt[alive, t], cache))
            assert (logits - expected[:, t]).abs().max() <= 1e-5
    assert cache.batch_size == 2


def test_attention_weights_returned_for_every_layer_and_head(model: Transformer, generator) -> None:
    src, _ = random_batch(2, 6, 37, generator, min_length=2)
    tgt = torch.randint(4, 37, (2, 5), generator=generator)
    with torch.no_grad():
        memory = model.encode(src, need_weights=True)
        out = model.decode(tgt, memory, need_weights=True)
        fast = model.decode(tgt, model.encode(src)).logits
    c = model.config
    assert (out.logits - fast).abs().max() <= 1e-5  # asking for weights does not change the function
    assert len(memory.attentions) == c.N and memory.attentions[0].shape == (2, c.h, 6, 6)
    assert len(out.cross_attentions) == c.N and out.cross_attentions[0].shape == (2, c.h, 5, 6)
    for weights in memory.attentions + out.self_attentions + out.cross_attentions:
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    for weights in memory.attentions + out.cross_attentions:
        assert (weights.transpose(1, 3)[~memory.mask] == 0).all()  # padded source keys get exactly 0
    for weights in out.self_attentions:
        assert (weights.triu(1) == 0).all()


def test_projecting_selected_hidden_states_equals_full_logits(model: Transformer, generator) -> None:
    src, _ = random_batch(3, 6, 37, generator)
    tgt, _ = random_batch(3, 5, 37, generator)
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory).logits
        hidden = model.decode(tgt, memory, project=False)
        assert hidden.logits is None
        real = tgt.ne(PAD)
        assert (model.project(hidden.hidden[real]) - full[real]).abs().max() <= 1e-5
        selected = model(src, tgt, real)  # the trainer's path: forward with a selection
        assert selected.shape == (int(real.sum()), 37)
        assert (selected - full[real]).abs().max() <= 1e-5
