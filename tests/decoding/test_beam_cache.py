"""The searches' cache operations (`aiayn.decoding.beam_cache`): encoder-decoder keys/values shared by a
sentence's rows, expanded, re-ranked and shrunk, keep incremental decoding equal to the full pass per row."""

from __future__ import annotations

import pytest
import torch

from aiayn.decoding.beam_cache import expand, reorder_rows
from aiayn.model import Transformer
from tests.conftest import random_batch, tiny_config
from tests.model.test_invariants import full_logits, last


@pytest.fixture(params=[False, True], ids=["post-norm", "pre-norm"])
def model(request) -> Transformer:
    torch.manual_seed(3)
    return Transformer(tiny_config(norm_first=request.param)).eval()


@pytest.mark.parametrize(
    ("index", "grouped"),
    [
        (torch.tensor([1, 1, 0, 5, 3, 3]), True),  # beams re-ranked within their sentences
        (torch.tensor([4, 3, 3]), True),  # sentence 0 finished: whole groups kept, the cache shrinks
        (torch.tensor([3, 4, 5, 0, 2, 2]), True),  # sentences swapped
        (torch.tensor([5, 0, 0, 3, 1, 2]), False),  # rows leave their sentence: per-row keys/values
    ],
)
def test_grouped_cache_equals_full_pass(model, generator, index: torch.Tensor, grouped: bool) -> None:
    """Encoder-decoder keys/values stored once per sentence (group = beams) give the per-row results, through
    steps and every kind of reorder."""
    beam, sentences = 3, 2
    src, _ = random_batch(sentences, 6, 37, generator, min_length=2)
    rows_src = src.repeat_interleave(beam, dim=0)  # what each row reads
    tgt = torch.randint(4, 37, (sentences * beam, 10), generator=generator)
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), group=beam)
        assert cache.batch_size == sentences * beam and cache.cross_k[0].size(0) == sentences
        expected = full_logits(model, rows_src, tgt)
        for t in range(4):
            logits, cache = last(model.step(tgt[:, t], cache))
            assert (logits - expected[:, t]).abs().max() <= 1e-5, f"step {t}"
        reorder_rows(cache, index)
        assert (cache.group == beam) == grouped and cache.batch_size == index.numel()
        reordered = torch.cat([tgt[index, :4], tgt[index, 4:]], dim=1)
        expected = full_logits(model, rows_src[index], reordered)
        for t in range(4, 10):
            logits, cache = last(model.step(reordered[:, t], cache))
            assert (logits - expected[:, t]).abs().max() <= 1e-5, f"step {t}"


def test_expanded_cache_equals_full_pass(model, generator) -> None:
    """A first step run once per sentence, then each row expanded into `beam` rows (group grows, encoder-decoder
    keys/values not copied), continues exactly like per-row decoding of the copied prefix."""
    beam, sentences = 3, 2
    src, _ = random_batch(sentences, 6, 37, generator, min_length=2)
    first = torch.randint(4, 37, (sentences, 2), generator=generator)
    later = torch.randint(4, 37, (sentences * beam, 5), generator=generator)
    tgt = torch.cat([first.repeat_interleave(beam, dim=0), later], dim=1)  # [sentences * beam, 7]
    with torch.no_grad():
        expected = full_logits(model, src.repeat_interleave(beam, dim=0), tgt)
        cache = model.init_cache(model.encode(src), capacity=4)  # grows past 4 after expanding
        for t in range(2):
            logits, cache = last(model.step(first[:, t], cache))
            assert (logits - expected[::beam, t]).abs().max() <= 1e-5
        cross = cache.cross_k[0]
        expand(cache, beam)
        assert cache.group == beam and cache.batch_size == sentences * beam and cache.cross_k[0] is cross
        for t in range(2, 7):
            logits, cache = last(model.step(tgt[:, t], cache))
            assert (logits - expected[:, t]).abs().max() <= 1e-5, f"step {t}"
