"""Teacher-forced scoring (aiayn.decoding.forced, Translator.score) and reranking with a second model
(aiayn.decoding.rerank).

The reference for the forced log-probabilities is the incremental decoder: beam search records log P(Y | X) of
each hypothesis it finds step by step through the KV cache, so the full teacher-forced pass must give the same
numbers. The reranker is checked on what each direction must feed the second model (the candidate reversed; the
candidate as the source and the source as the output) against that model's own scoring, on its ordering, and on
keeping the first model's best when the second has no weight.
"""

from __future__ import annotations

import pytest
import torch

from aiayn.cli import main
from aiayn.config import DecodeConfig
from aiayn.decoding import LongInputError, Translator, generate
from aiayn.decoding.forced import sequence_log_probs
from aiayn.decoding.rerank import nbest, rerank, reverse_words
from tests.decoding.conftest import peaky_model, random_sources
from tests.decoding.model_dir import another_model_dir, multi30k_test_sentences

SEARCH = dict(beam=4, max_len_b=8, lenpen_form="power", lenpen=1.0)


def test_forced_log_probs_equal_what_the_search_recorded():
    model = peaky_model(12, seed=7, eos_shift=1.0).eval()
    src = random_sources(5, 6, 12, seed=3)
    found = generate(model, src, DecodeConfig(**SEARCH, nbest=4))
    rows, targets, expected = [], [], []
    for row, hypotheses in enumerate(found):
        for hypothesis in hypotheses:
            rows.append(row)
            targets.append(hypothesis.tokens)
            expected.append(hypothesis.log_prob)
    assert len({len(t) for t in targets}) > 1  # targets of several lengths share a padded batch
    together = sequence_log_probs(model, src[rows], targets)
    torch.testing.assert_close(together, torch.tensor(expected), rtol=0, atol=1e-4)
    alone = torch.stack([sequence_log_probs(model, src[[r]], [t])[0] for r, t in zip(rows, targets)])
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-5)  # padding changes nothing


def test_forced_log_probs_refuse_mismatched_batches():
    model = peaky_model(12).eval()
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        sequence_log_probs(model, random_sources(2, 4, 12), [[5, 6]])


@pytest.fixture(scope="module")
def dirs(model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("rerank")  # sinusoidal positions: outputs of any length score
    return another_model_dir(model_dir, root / "first", 8, eos_shift=2.0), another_model_dir(
        model_dir, root / "second", 9, eos_shift=2.0
    )


@pytest.fixture(scope="module")
def pair(dirs):
    return Translator.from_pretrained(dirs[0]), Translator.from_pretrained(dirs[1])


def _stepwise_log_prob(model, source_ids, target_ids):
    """log P(target + EOS | source) one token at a time through the KV cache (the search's path)."""
    c = model.config
    with torch.inference_mode():
        cache = model.init_cache(model.encode(torch.tensor([[*source_ids, c.eos_id]])))
        token, total = c.decoder_start_id, 0.0
        for next_id in [*target_ids, c.eos_id]:
            logits = model.step(torch.tensor([token]), cache).logits[0, -1].float()
            total += float(torch.log_softmax(logits, dim=-1)[next_id])
            token = next_id
    return total


def test_translator_scores_text_as_the_incremental_decoder_does(pair):
    first, _ = pair
    sentences = multi30k_test_sentences(6)
    outputs = [text for result in first.translate_detailed(sentences, **SEARCH, nbest=3) for text in result.hypotheses]
    sources = [s for s in sentences for _ in range(3)][: len(outputs)]
    sources, outputs = [*sources, sentences[0]], [*outputs, "Ein Hund."]  # any text scores
    scored = first.score(sources, outputs)
    for source, text, (log_prob, length) in zip(sources, outputs, scored):
        ids = first.target_tokenizer.encode(text)
        assert length == len(ids) + 1
        expected = _stepwise_log_prob(first.model, first.tokenizer.encode(source), ids)
        assert log_prob == pytest.approx(expected, abs=1e-4)


def test_translator_score_takes_one_model_and_pairs(model_dir, pair):
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        pair[0].score(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="not an ensemble"):
        Translator.from_pretrained([model_dir, model_dir]).score(["a"], ["b"])


def test_translator_score_refuses_an_output_past_learned_positions(model_dir):
    learned = Translator.from_pretrained(model_dir)  # max_positions 24
    with pytest.raises(LongInputError, match="output sentence 2 has .* subword tokens, more than the limit of 23"):
        learned.score(["a", "b"], ["c", " ".join(multi30k_test_sentences(3))])


def _normalised(translator, source, target):
    (log_prob, length), = translator.score([source], [target])
    return log_prob / length


def test_right_to_left_rescoring_reads_each_candidate_reversed(pair):
    first, second = pair
    sentences = multi30k_test_sentences(5)
    own = nbest(second, sentences, beam=3)
    ranked = rerank(first, second, sentences, "r2l", beam=3, pool="both", weights=(1.0, 0.5), second_nbest=own)
    multiword = 0
    for source, candidates, found in zip(sentences, ranked, own):
        texts = [c.text for c in candidates]
        assert {reverse_words(t) for t in found} <= set(texts)  # the second model's n-best, turned back, joined
        for candidate in candidates:
            forced = _normalised(second, source, reverse_words(candidate.text))
            if reverse_words(candidate.text) in found:  # its own search's score, where that was better
                assert candidate.scores[1] >= forced - 1e-5
            else:
                assert candidate.scores[1] == pytest.approx(forced, abs=1e-5)
            multiword += len(candidate.text.split()) > 1
            assert candidate.score == pytest.approx(candidate.scores[0] + 0.5 * candidate.scores[1], abs=1e-6)
        assert [c.score for c in candidates] == sorted((c.score for c in candidates), reverse=True)
    assert multiword  # reversal changed what the second model read


def test_channel_rescoring_reads_the_candidate_as_the_source(pair):
    first, second = pair
    sentences = multi30k_test_sentences(4)
    ranked = rerank(first, second, sentences, "channel", beam=3)
    for source, candidates in zip(sentences, ranked):
        texts = [c.text for c in candidates]
        assert texts and set(texts) <= set(t for t in nbest(first, [source], beam=3)[0])  # the first's n-best only
        for candidate in candidates:
            assert candidate.scores[1] == pytest.approx(_normalised(second, candidate.text, source), abs=1e-5)
            assert candidate.scores[1] != pytest.approx(_normalised(second, source, candidate.text), abs=1e-5)


def test_no_weight_on_the_second_model_keeps_the_first_models_best(pair):
    first, second = pair
    sentences = [*multi30k_test_sentences(6), "   "]
    ranked = rerank(first, second, sentences, "channel", beam=4, weights=(1.0, 0.0))
    best = first.translate(sentences, beam=4, lenpen_form="power", lenpen=1.0)
    assert [candidates[0].text for candidates in ranked] == best
    assert [c.text for c in ranked[-1]] == [""]  # an empty source: the empty output, as translate gives
    moved = rerank(first, second, sentences, "channel", beam=4)
    assert [c[0].text for c in moved] != best  # and with its weight, the second model does move something


def test_rerank_refuses_an_unknown_direction_or_pool(pair):
    with pytest.raises(ValueError, match="direction must be one of r2l, channel"):
        rerank(*pair, ["a"], "l2r")
    with pytest.raises(ValueError, match="pool must be"):
        rerank(*pair, ["a"], "r2l", pool="all")


def _lines(path):
    """Lines split at "\\n" only (a random model writes control characters that str.splitlines splits at)."""
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_cli_translates_with_a_reranker(dirs, pair, tmp_path):
    first, second = pair
    sentences = multi30k_test_sentences(5)
    source = tmp_path / "in.en"
    source.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    out = tmp_path / "out.de"
    flags = ["--input", str(source), "--output", str(out), "--beam", "3", "--quiet", "--threads", "1"]
    argv = ["translate", "--model", str(dirs[0]), *flags, "--rerank-with", str(dirs[1])]
    assert main([*argv, "--rerank-direction", "r2l", "--rerank-weight", "0.5"]) == 0
    expected = rerank(first, second, sentences, "r2l", beam=3, weights=(1.0, 0.5))
    assert _lines(out) == [candidates[0].text.replace("\n", " ") for candidates in expected]
    assert main([*argv, "--rerank-direction", "channel", "--nbest", "2"]) == 0
    expected = rerank(first, second, sentences, "channel", beam=3)
    best2 = [(i, c.text.replace("\n", " "), c.score) for i, cs in enumerate(expected) for c in cs[:2]]
    assert _lines(out) == [f"{i} ||| {text} ||| {score:.4f}" for i, text, score in best2]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--rerank-direction", "r2l"], "--rerank-direction needs --rerank-with"),
        (["--rerank-with", "SECOND"], "--rerank-with needs --rerank-direction"),
        (["--rerank-with", "SECOND", "--rerank-direction", "r2l", "--greedy"], "drop --greedy"),
        (["--rerank-with", "MISSING", "--rerank-direction", "r2l"], "--rerank-with MISSING: no such directory"),
        (["--model", "FIRST", "FIRST", "--rerank-with", "SECOND", "--rerank-direction", "r2l"], "not an ensemble"),
    ],
)
def test_cli_refuses_mismatched_rerank_flags_in_one_line(dirs, tmp_path, capsys, extra, message):
    source = tmp_path / "in.en"
    source.write_text("A dog runs.\n", encoding="utf-8")
    out = tmp_path / "out.de"
    missing = tmp_path / "MISSING"
    names = {"FIRST": str(dirs[0]), "SECOND": str(dirs[1]), "MISSING": str(missing)}
    extra = [names.get(e, e) for e in extra]
    message = message.replace("MISSING", str(missing))
    argv = ["translate", "--model", str(dirs[0]), "--input", str(source), "--output", str(out), "--quiet"]
    assert main([*argv, *extra]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


def test_cli_evaluate_scores_the_reranked_output(dirs, tmp_path, capsys):
    import sacrebleu

    source, reference = tmp_path / "in.en", tmp_path / "ref.de"
    source.write_text("\n".join(multi30k_test_sentences(5)) + "\n", encoding="utf-8")
    references = ["Ein Hund läuft .", "Ein Mann .", "Zwei Frauen .", "Ein Kind .", "Es regnet ."]
    reference.write_text("\n".join(references) + "\n", encoding="utf-8")
    translated, hyp_out = tmp_path / "out.de", tmp_path / "hyp.de"
    flags = ["--beam", "3", "--quiet", "--threads", "1", "--rerank-with", str(dirs[1]), "--rerank-direction", "r2l"]
    model = ["--model", str(dirs[0])]
    assert main(["translate", *model, "--input", str(source), "--output", str(translated), *flags]) == 0
    capsys.readouterr()
    argv = ["evaluate", *model, "--src", str(source), "--ref", str(reference), "--hyp-out", str(hyp_out), *flags]
    assert main(argv) == 0
    assert _lines(hyp_out) == _lines(translated)  # evaluate scores what translate writes
    bleu = sacrebleu.corpus_bleu(_lines(hyp_out), [references])
    assert capsys.readouterr().out.splitlines()[0].startswith(f"BLEU = {bleu.score:.2f}")
