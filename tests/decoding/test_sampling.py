"""Sampling: reproducible with a seed, top-k = 1 is greedy, and the top-k / top-p filters keep exactly the
tokens a brute-force reading of their definitions keeps."""

from __future__ import annotations

import pytest
import torch

from aiayn.config import DecodeConfig
from aiayn.decoding import filter_logits, generate
from tests.decoding.conftest import peaky_model, random_sources

VOCAB = 12


@pytest.fixture(scope="module")
def model():
    return peaky_model(VOCAB, seed=3, eos_shift=4.0)


@pytest.fixture(scope="module")
def src():
    return random_sources(5, 6, VOCAB, seed=4)


def outputs(results):
    return [[(h.tokens, round(h.score, 5)) for h in hyps] for hyps in results]


def test_same_seed_same_samples_other_seed_other_samples(model, src):
    config = DecodeConfig(sampling=True, beam=4, nbest=4, temperature=1.5, max_len_b=12, seed=7)
    first = outputs(generate(model, src, config))
    assert first == outputs(generate(model, src, config))
    other = outputs(generate(model, src, DecodeConfig(**{**config.__dict__, "seed": 8})))
    assert other != first


def test_top_k_one_is_greedy(model, src):
    greedy = generate(model, src, DecodeConfig(greedy=True, max_len_b=12))
    sampled = generate(model, src, DecodeConfig(sampling=True, beam=1, top_k=1, temperature=2.0, max_len_b=12))
    assert [h[0].tokens for h in sampled] == [h[0].tokens for h in greedy]
    assert [h[0].log_prob for h in sampled] == pytest.approx([h[0].log_prob for h in greedy], abs=1e-5)


def test_samples_are_sorted_by_model_score(model, src):
    config = DecodeConfig(sampling=True, beam=5, nbest=5, max_len_b=12)
    for hyps in generate(model, src, config):
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def brute_force_filter(row: list[float], temperature: float, top_k: int, top_p: float) -> set[int]:
    scaled = [x / temperature for x in row]
    order = sorted(range(len(row)), key=lambda i: -scaled[i])
    keep = set(order[:top_k]) if top_k else set(order)
    kept_order = [i for i in order if i in keep]
    total = sum(torch.tensor([scaled[i] for i in kept_order]).exp().tolist())
    nucleus, mass = set(), 0.0
    for i in kept_order:
        if mass >= top_p:
            break
        nucleus.add(i)
        mass += float(torch.tensor(scaled[i]).exp()) / total
    return nucleus


@pytest.mark.parametrize("top_k,top_p", [(0, 1.0), (3, 1.0), (0, 0.5), (4, 0.8), (1, 0.9), (0, 0.01)])
def test_filters_keep_what_their_definitions_say(top_k, top_p):
    logits = torch.randn(20, 15, generator=torch.Generator().manual_seed(0)) * 2
    filtered = filter_logits(logits, temperature=0.7, top_k=top_k, top_p=top_p)
    for row, out in zip(logits.tolist(), filtered):
        kept = set(torch.isfinite(out).nonzero().squeeze(1).tolist())
        assert kept == brute_force_filter(row, 0.7, top_k, top_p)
