"""sacrebleu wrappers: scores and signatures equal sacrebleu's own; tokenize="none" scores pre-tokenized text."""

from __future__ import annotations

import math

import pytest
import sacrebleu

from aiayn.evaluation import corpus_bleu, corpus_chrf, perplexity

HYPS = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball im Park."]
REFS = ["Ein Hund rennt über die Wiese.", "Zwei Männer spielen im Park Fußball."]


def test_bleu_equals_sacrebleu() -> None:
    score = corpus_bleu(HYPS, REFS)
    reference = sacrebleu.corpus_bleu(HYPS, [REFS])
    assert score.score == pytest.approx(reference.score)
    assert "tok:13a" in score.signature and "case:mixed" in score.signature and score.name == "BLEU"
    assert corpus_bleu(HYPS, [REFS, REFS]).score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS, REFS]).score)


def test_tokenized_lowercased_variant() -> None:
    tok_hyps = ["ein hund läuft über die wiese .", "zwei männer spielen fußball im park ."]
    tok_refs = ["ein hund rennt über die wiese .", "zwei männer spielen im park fußball ."]
    score = corpus_bleu(tok_hyps, tok_refs, tokenize="none", lowercase=True)
    reference = sacrebleu.corpus_bleu(tok_hyps, [tok_refs], tokenize="none", lowercase=True)
    assert score.score == pytest.approx(reference.score)
    assert "tok:none" in score.signature and "case:lc" in score.signature
    assert corpus_bleu(REFS, REFS).score == pytest.approx(100.0)


def test_chrf_and_errors() -> None:
    assert corpus_chrf(HYPS, REFS).score == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert corpus_chrf(HYPS, REFS, word_order=2).name == "chrF2++"
    with pytest.raises(ValueError, match="reference stream 0 has 1 sentences but there are 2 hypotheses"):
        corpus_bleu(HYPS, REFS[:1])
    with pytest.raises(TypeError):
        corpus_bleu("one string", ["one string"])


def test_perplexity() -> None:
    assert perplexity(0.0) == 1.0
    assert perplexity(math.log(37.0)) == pytest.approx(37.0)
    assert perplexity(1e4) == math.inf
