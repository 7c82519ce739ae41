"""Ensemble decoding (`aiayn.decoding.ensemble`): every search over the members' mean next-token probability.

The reference is independent of the incremental decoder: each member's teacher-forced log-probabilities from full
forward passes (`Transformer.log_probs`), mixed as log((P_1 + P_2) / 2) (or, for the geometric mean, as
log_softmax((log P_1 + log P_2) / 2)), then the brute-force and textbook beam searches of test_exhaustive.py over
that mixture.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from aiayn.cli import main
from aiayn.config import ConfigError, DecodeConfig
from aiayn.data import TOKENIZER_FILENAME, Tokenizer
from aiayn.decoding import Translator, generate
from aiayn.decoding.ensemble import Ensemble
from tests.decoding.conftest import peaky_model, random_sources
from tests.decoding.model_dir import MAX_POSITIONS, another_model_dir, multi30k_test_sentences
from tests.decoding.test_exhaustive import CONTENT, VOCAB, exhaustive, reference_beam_search


class Mixture:
    """log((1/M) sum_m P_m(y_t | y_<t, x)) by teacher forcing, for the reference searches; with `geometric`,
    the normalised exp((1/M) sum_m log P_m(y_t | y_<t, x)) instead."""

    def __init__(self, models, geometric: bool = False) -> None:
        self.models = models
        self.geometric = geometric

    def log_probs(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        stacked = torch.stack([m.log_probs(src, tgt_in) for m in self.models])
        if self.geometric:
            mean = stacked.mean(dim=0)
            return mean - torch.logsumexp(mean, dim=-1, keepdim=True)
        return torch.logsumexp(stacked, dim=0) - math.log(len(self.models))


@pytest.fixture(scope="module")
def members():
    return [peaky_model(VOCAB, seed=5, scale=2.0, eos_shift=1.0), peaky_model(VOCAB, seed=6, scale=2.0)]


@pytest.fixture(scope="module")
def src():
    return random_sources(3, 5, VOCAB, seed=7)


def outputs(results):
    return [[(h.tokens, h.score, h.log_prob) for h in hyps] for hyps in results]


@pytest.mark.parametrize("alpha,form", [(0.6, "gnmt"), (1.0, "power")])
def test_wide_beam_equals_exhaustive_search_over_the_mixture(members, src, alpha, form):
    L, n = 4, 3
    config = DecodeConfig(beam=(len(CONTENT) + 1) ** L, nbest=n, lenpen=alpha, lenpen_form=form, max_len_a=0.0,
                          max_len_b=L)  # fmt: skip
    results = generate(Ensemble(members), src, config)
    for row, hyps in enumerate(results):
        expected = exhaustive(Mixture(members), src[row], L, 0, alpha, form, n)
        assert [h.tokens for h in hyps] == [y for _, y in expected]
        assert [h.score for h in hyps] == pytest.approx([s for s, _ in expected], abs=1e-4)
    # the mixture is not either member: some sentence's best output differs from a member's
    alone = [generate(m, src, config) for m in members]
    assert any([h.tokens for h in results[r]] != [h.tokens for h in a[r]] for a in alone for r in range(len(src)))


def test_the_geometric_mean_equals_exhaustive_search_over_the_product_of_experts(members, src):
    L, n = 4, 3
    config = DecodeConfig(beam=(len(CONTENT) + 1) ** L, nbest=n, lenpen=1.0, lenpen_form="power", max_len_a=0.0,
                          max_len_b=L, ensemble_mean="geometric")  # fmt: skip
    results = generate(Ensemble(members), src, config)
    for row, hyps in enumerate(results):
        expected = exhaustive(Mixture(members, geometric=True), src[row], L, 0, 1.0, "power", n)
        assert [h.tokens for h in hyps] == [y for _, y in expected]
        assert [h.score for h in hyps] == pytest.approx([s for s, _ in expected], abs=1e-4)
    # the two means are different searches: their scores differ
    arithmetic = generate(Ensemble(members), src, replace(config, ensemble_mean="arithmetic"))
    assert [h.score for hyps in results for h in hyps] != pytest.approx(
        [h.score for hyps in arithmetic for h in hyps], abs=1e-3
    )


def test_an_unknown_ensemble_mean_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="ensemble_mean"):
        DecodeConfig(ensemble_mean="harmonic")  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [1, 3])
def test_beam_search_equals_a_textbook_search_over_the_mixture(members, src, k):
    L = 6
    config = DecodeConfig(beam=k, nbest=k, lenpen=0.6, max_len_a=0.0, max_len_b=L)
    results = generate(Ensemble(members), src, config)
    for row, hyps in enumerate(results):
        expected = reference_beam_search(Mixture(members), src[row], k, L, 0.6, "gnmt", k)
        assert [h.tokens for h in hyps] == [y for _, _, y in expected]
        assert [h.log_prob for h in hyps] == pytest.approx([lp for _, lp, _ in expected], abs=1e-4)


@pytest.mark.parametrize("search", ["beam", "greedy", "sampling"])
def test_one_member_is_the_model_itself(members, src, search):
    config = DecodeConfig(beam=3, nbest=2 if search != "greedy" else 1, greedy=search == "greedy",
                          sampling=search == "sampling", seed=11, max_len_a=0.0, max_len_b=6)  # fmt: skip
    torch.manual_seed(0)
    alone = outputs(generate(members[0], src, config))
    torch.manual_seed(0)
    assert outputs(generate(Ensemble(members[:1]), src, config)) == alone


@pytest.mark.parametrize("mean", ["arithmetic", "geometric"])
def test_a_model_twice_decodes_as_the_model(members, src, mean):
    config = DecodeConfig(beam=4, nbest=2, max_len_a=0.0, max_len_b=6, ensemble_mean=mean)
    alone, twice = generate(members[1], src, config), generate(Ensemble([members[1], members[1]]), src, config)
    assert [[h.tokens for h in hyps] for hyps in twice] == [[h.tokens for h in hyps] for hyps in alone]
    flat = [h.score for hyps in twice for h in hyps]
    assert flat == pytest.approx([h.score for hyps in alone for h in hyps], abs=1e-5)


def test_cache_and_recompute_agree_with_attention(members, src):
    config = DecodeConfig(beam=3, nbest=3, max_len_a=0.0, max_len_b=6, need_attention=True)
    cached = generate(Ensemble(members), src, config)
    recomputed = generate(Ensemble(members), src, replace(config, use_cache=False))
    for a, b in zip(cached, recomputed):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        for x, y in zip(a, b):
            assert x.score == pytest.approx(y.score, abs=1e-5)
            assert x.attention is not None and torch.allclose(x.attention, y.attention, atol=1e-5)
            assert torch.allclose(x.attention.sum(-1), torch.ones(x.attention.size(0)), atol=1e-5)  # a distribution


def test_members_must_share_vocabularies_and_ids():
    with pytest.raises(ValueError, match="model 2 of the ensemble has src_vocab_size=7 but model 1 has 6"):
        Ensemble([peaky_model(6), peaky_model(6, src_vocab_size=7, tgt_vocab_size=7)])
    with pytest.raises(ValueError, match="eos_id"):
        Ensemble([peaky_model(6), peaky_model(6, eos_id=3, unk_id=2)])
    with pytest.raises(ValueError, match="at least one"):
        Ensemble([])


def test_learned_positions_limit_the_ensemble_to_the_shortest_table():
    ensemble = Ensemble([peaky_model(6, positional="learned", max_positions=30), peaky_model(6)])
    assert ensemble.config.positional == "learned" and ensemble.config.max_positions == 30


@pytest.fixture(scope="module")
def second_model_dir(model_dir, tmp_path_factory):
    """Another model over the same tokenizer (a copy of the file)."""
    root = tmp_path_factory.mktemp("ensemble") / "model-b"
    return another_model_dir(model_dir, root, 4, eos_shift=3.0, positional="learned", max_positions=MAX_POSITIONS)


def test_cli_translates_with_an_ensemble_of_model_directories(model_dir, second_model_dir, tmp_path):
    sentences = multi30k_test_sentences(6)
    source = tmp_path / "in.en"
    source.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    flags = ["--input", str(source), "--beam", "3", "--max-len-b", "8", "--quiet", "--threads", "1"]

    def translate(*dirs):
        out = tmp_path / f"out-{len(dirs)}-{dirs[-1].name}.de"
        assert main(["translate", "--model", *map(str, dirs), "--output", str(out), *flags]) == 0
        return out.read_text(encoding="utf-8").splitlines()

    expected = Translator.from_pretrained([model_dir, second_model_dir], beam=3, max_len_b=8).translate(sentences)
    assert translate(model_dir, second_model_dir) == expected
    assert translate(model_dir, model_dir) == translate(model_dir)  # a model with itself is the model
    assert expected != translate(model_dir) or expected != translate(second_model_dir)
    flags += ["--ensemble-mean", "geometric"]
    pair = [model_dir, second_model_dir]
    geometric = Translator.from_pretrained(pair, beam=3, max_len_b=8, ensemble_mean="geometric")
    assert translate(model_dir, second_model_dir) == geometric.translate(sentences)


def test_cli_refuses_members_with_another_tokenizer(model_dir, tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    sample = tmp_path / "sample.txt"
    sample.write_text("".join(f"{s}\n" for s in multi30k_test_sentences(200)), encoding="utf-8")
    tokenizer = Tokenizer.train([sample], vocab_size=400, model_path=other / TOKENIZER_FILENAME, threads=1)
    peaky_model(tokenizer.vocab_size, seed=4, positional="learned", max_positions=MAX_POSITIONS).save_pretrained(other)
    source = tmp_path / "in.en"
    source.write_text("A dog runs.\n", encoding="utf-8")
    out = tmp_path / "out.de"
    argv = ["translate", "--model", str(model_dir), str(other), "--input", str(source), "--output", str(out)]
    assert main([*argv, "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(other) in err[0] and "tokenizer" in err[0]
    assert not out.exists()


def test_search_memory_counts_every_member(monkeypatch):
    import aiayn.decoding.limits as limits
    from aiayn.config import ModelConfig
    from aiayn.decoding.limits import SearchTooLargeError, check_search_budget, search_bytes

    model, config = ModelConfig(src_vocab_size=8000, tgt_vocab_size=8000), DecodeConfig(beam=5)
    one = search_bytes(config, model, 64, 50)
    monkeypatch.setattr(limits, "available_memory", lambda device: int(1.5 * one))
    check_search_budget(config, model, 64, 50, "cpu")  # one model fits
    with pytest.raises(SearchTooLargeError, match="needs about"):
        check_search_budget(config, [model, model], 64, 50, "cpu")  # two members keep two sets of caches
