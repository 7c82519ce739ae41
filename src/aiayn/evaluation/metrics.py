"""Scores of section 6: corpus BLEU (Papineni et al., 2002) and chrF through sacrebleu, and perplexity.

sacrebleu's default BLEU ("13a" tokenization, mixed case) on detokenized text is the comparable number;
`tokenize="none"` (optionally `lowercase=True`) scores text that is already tokenized, such as Multi30k's
lowercased, Moses-tokenized `tok/` files, which is how most Multi30k papers report BLEU. Every score carries
sacrebleu's signature so it can be reproduced.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass(frozen=True)
class Score:
    """A corpus-level score: `score` (0-100), sacrebleu's `signature`, and its one-line `text`."""

    name: str
    score: float
    signature: str
    text: str

    def __str__(self) -> str:
        return f"{self.text}  ({self.signature})"


def _reference_streams(hyps: Sequence[str], refs: Sequence[str] | Sequence[Sequence[str]]) -> list[list[str]]:
    """One reference per hypothesis (list of str) or several streams (list of lists); lengths must match."""
    if isinstance(hyps, str):
        raise TypeError("hyps must be a sequence of sentences, not one string")
    streams = [list(refs)] if refs and isinstance(refs[0], str) else [list(stream) for stream in refs]
    if not streams:
        raise ValueError("no references given")
    for k, stream in enumerate(streams):
        if len(stream) != len(hyps):
            raise ValueError(f"reference stream {k} has {len(stream)} sentences but there are {len(hyps)} hypotheses")
    return streams


def corpus_bleu(
    hyps: Sequence[str],
    refs: Sequence[str] | Sequence[Sequence[str]],
    tokenize: str = "13a",
    lowercase: bool = False,
) -> Score:
    """sacrebleu corpus BLEU of detokenized hypotheses against one or more reference streams."""
    metric = BLEU(tokenize=tokenize, lowercase=lowercase)
    result = metric.corpus_score(list(hyps), _reference_streams(hyps, refs))
    signature = str(metric.get_signature())
    return Score("BLEU", float(result.score), signature, str(result))


def corpus_chrf(hyps: Sequence[str], refs: Sequence[str] | Sequence[Sequence[str]], word_order: int = 0) -> Score:
    """sacrebleu chrF (word_order=2 gives chrF++)."""
    metric = CHRF(word_order=word_order)
    result = metric.corpus_score(list(hyps), _reference_streams(hyps, refs))
    signature = str(metric.get_signature())
    return Score(result.name, float(result.score), signature, str(result))


def perplexity(loss: float) -> float:
    """exp(loss) for a per-token loss in nats; inf where that overflows."""
    return math.exp(loss) if loss < 700 else math.inf


__all__ = ["Score", "corpus_bleu", "corpus_chrf", "perplexity"]
