"""Searches against each other: beam 1 vs greedy, cached vs recomputed decoding, a batch vs
each sentence alone, n-best order, length limits, attention weights."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aiayn.config import DecodeConfig
from aiayn.decoding import Hypothesis, generate, length_penalty
from aiayn.decoding.encoding import encode_by_length
from tests.decoding.conftest import peaky_model, random_sources

VOCAB = 12


def tokens(results: list[list[Hypothesis]]) -> list[list[list[int]]]:
    return [[h.tokens for h in hyps] for hyps in results]


def scores(results: list[list[Hypothesis]]) -> list[float]:
    return [h.score for hyps in results for h in hyps]


def teacher_forced_log_prob(model, src_row: torch.Tensor, output: list[int]) -> float:
    """log P(output + EOS | src) from one full forward pass: an independent check of a search's scores."""
    src = src_row[src_row != 0][None]
    tgt_in = torch.tensor([[1, *output]])
    tgt_out = torch.tensor([*output, 2])
    with torch.no_grad():
        lprobs = model.log_probs(src, tgt_in)[0]
    return float(lprobs.gather(1, tgt_out[:, None]).sum())


@pytest.fixture(scope="module")
def model():
    return peaky_model(VOCAB, seed=3, eos_shift=4.0)


@pytest.fixture(scope="module")
def src():
    return random_sources(6, 7, VOCAB, seed=2)


def test_the_test_model_ends_sentences_at_different_lengths(model, src):
    # Guards the other tests' strength: outputs that end by EOS, at several lengths, not only at the limit.
    lengths = [len(h.tokens) for hyps in generate(model, src, DecodeConfig(beam=4, nbest=4)) for h in hyps]
    assert len(set(lengths)) >= 4 and min(lengths) < max(lengths) < 50


def test_beam_one_with_alpha_zero_equals_greedy(model, src):
    config = DecodeConfig(lenpen=0.0, max_len_b=12)
    greedy = generate(model, src, dataclasses.replace(config, greedy=True))
    beam = generate(model, src, dataclasses.replace(config, beam=1))
    assert tokens(greedy) == tokens(beam)
    assert scores(greedy) == pytest.approx(scores(beam), abs=1e-5)


def test_beam_one_with_length_penalty_never_scores_below_greedy(model, src):
    # With alpha > 0, beam 1 keeps searching after its first EOS while a longer hypothesis could still win.
    config = DecodeConfig(lenpen=1.0, max_len_b=12)
    greedy = generate(model, src, dataclasses.replace(config, greedy=True))
    beam = generate(model, src, dataclasses.replace(config, beam=1))
    for g, b in zip(greedy, beam):
        assert b[0].score >= g[0].score - 1e-6


@pytest.mark.parametrize(
    "config",
    [
        DecodeConfig(greedy=True, max_len_b=10),
        DecodeConfig(beam=4, nbest=4, lenpen=0.6, max_len_b=10),
        DecodeConfig(beam=3, nbest=2, lenpen=1.0, lenpen_form="power", max_len_b=10),
        DecodeConfig(beam=3, nbest=3, min_len=4, max_len_a=0.5, max_len_b=6),
    ],
    ids=["greedy", "beam4-gnmt", "beam3-power", "min-len"],
)
def test_cached_equals_recomputed_decoding(model, src, config):
    cached = generate(model, src, config)
    recomputed = generate(model, src, dataclasses.replace(config, use_cache=False))
    assert tokens(cached) == tokens(recomputed)
    assert scores(cached) == pytest.approx(scores(recomputed), abs=1e-4)


@pytest.mark.parametrize("config", [DecodeConfig(greedy=True), DecodeConfig(beam=5, nbest=3)], ids=["greedy", "beam"])
def test_batch_equals_each_sentence_alone(model, src, config):
    together = generate(model, src, config)
    for row in range(src.size(0)):
        alone_src = src[row : row + 1, : int((src[row] != 0).sum())]
        alone = generate(model, alone_src, config)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in together[row]]
        assert [h.score for h in alone] == pytest.approx([h.score for h in together[row]], abs=1e-4)


def test_nbest_sorted_distinct_and_scored_by_the_model(model, src):
    config = DecodeConfig(beam=6, nbest=6, lenpen=0.6, max_len_b=10)
    for row, hyps in enumerate(generate(model, src, config)):
        assert len(hyps) == 6
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 6
        for h in hyps:
            assert h.log_prob == pytest.approx(teacher_forced_log_prob(model, src[row], h.tokens), abs=1e-4)
            assert h.score == pytest.approx(h.log_prob / length_penalty(len(h.tokens) + 1, 0.6, "gnmt"))
            assert all(t not in (0, 1, 2) for t in h.tokens)  # no PAD, BOS or EOS inside an output


@pytest.mark.parametrize("greedy", [True, False])
def test_length_limits(model, src, greedy):
    # a * |x| + b with |x| the source length without EOS; min_len holds EOS back.
    config = DecodeConfig(greedy=greedy, nbest=1, max_len_a=0.5, max_len_b=2, min_len=2)
    for row, hyps in enumerate(generate(model, src, config)):
        source_length = int((src[row] != 0).sum()) - 1
        assert 2 <= len(hyps[0].tokens) <= int(0.5 * source_length + 2)
    forced = generate(model, src, dataclasses.replace(config, max_len_a=0.0, max_len_b=5, min_len=5))
    assert all(len(h.tokens) == 5 for hyps in forced for h in hyps)


@pytest.mark.parametrize("config", [DecodeConfig(greedy=True), DecodeConfig(beam=3, nbest=2)], ids=["greedy", "beam"])
def test_attention_rows_are_distributions_over_real_source_positions(model, src, config):
    config = dataclasses.replace(config, need_attention=True, max_len_b=8)
    for row, hyps in enumerate(generate(model, src, config)):
        source_length = int((src[row] != 0).sum())
        for h in hyps:
            assert h.attention.shape == (len(h.tokens) + 1, source_length)
            assert torch.allclose(h.attention.sum(dim=1), torch.ones(len(h.tokens) + 1), atol=1e-5)
    plain = generate(model, src, dataclasses.replace(config, need_attention=False))
    assert tokens(plain) == tokens(generate(model, src, config))


def test_generate_rejects_bad_input(model):
    with pytest.raises(ValueError, match="padding"):
        generate(model, torch.tensor([[0, 0], [5, 2]]))
    model.train()
    try:
        with pytest.raises(ValueError, match="eval"):
            generate(model, torch.tensor([[5, 2]]))
    finally:
        model.eval()


def test_length_sorted_chunked_encoding_equals_one_padded_pass(model):
    src = random_sources(20, 9, VOCAB, seed=5)
    with torch.no_grad():
        whole = model.encode(src)
        chunked = encode_by_length(model, src, chunk=3)
    assert torch.equal(whole.mask, chunked.mask)
    assert torch.allclose(whole.hidden[whole.mask], chunked.hidden[chunked.mask], atol=1e-5)
    config = DecodeConfig(beam=3, nbest=2, max_len_b=8)
    together = generate(model, src, config)  # 20 sentences: encoded in chunks of 16
    alone = [generate(model, src[row : row + 1, : int((src[row] != 0).sum())], config)[0] for row in range(20)]
    assert [[h.tokens for h in hyps] for hyps in together] == [[h.tokens for h in hyps] for hyps in alone]
