"""Reranking one model's n-best with a second model that reads the sentence another way.

A second model of the same direction (another seed, aiayn.decoding.ensemble) sees the sentence much as the first
does. Two classic second models see it differently:

    r2l:      P(reverse(Y) | X), a model trained on the targets in reverse word order (Sennrich et al. 2016,
              Liu et al. 2016); its own n-best, turned back, joins the candidates (`pool="both"`)
    channel:  P(X | Y), a model of the opposite direction: how well a candidate explains the source
              (Yee et al. 2019, without the language model)

Each candidate Y of a source X gets

    score(Y) = w_1 * log P_1(Y | X) / |Y|_1  +  w_2 * log P_2(...) / |.|_2

each model's log-probability over its own subwords and EOS (fairseq's log P / |Y|, what the beam ranks by with
`--lenpen-form power --lenpen 1`). A model scores a candidate it found itself by the better of its search's
log-probability and the tokenizer's segmentation teacher forced (aiayn.decoding.forced); a search may find a
candidate through a segmentation the tokenizer would not write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from tqdm import tqdm

from aiayn.decoding.translator import Translator

Direction = Literal["r2l", "channel"]
DIRECTIONS: tuple[str, ...] = ("r2l", "channel")
Pool = Literal["both", "first"]
Found = dict[str, tuple[float, int]]  # a source's n-best: {text: (log P, |Y|)}, best first


def reverse_words(text: str) -> str:
    """The words of `text` (split on whitespace) in reverse order: what a right-to-left model reads and writes."""
    return " ".join(reversed(text.split()))


@dataclass
class Candidate:
    """One output for a source, with each model's log P / |Y| and the combined score."""

    text: str
    scores: list[float] = field(default_factory=list)  # [first model, second model]
    score: float = 0.0


def _best(found: Found, text: str, forced: tuple[float, int]) -> float:
    """log P / |Y| of `text`: the better of the search's (when it found `text`) and the teacher-forced one."""
    log_prob, length = forced
    value = log_prob / length
    if text in found:
        searched, searched_length = found[text]
        value = max(value, searched / searched_length)
    return value


def nbest(translator: Translator, sources: Sequence[str], beam: int = 5, progress: bool = False) -> list[Found]:
    """Each source's n-best (n = beam) by beam search with log P / |Y| (two segmentations of one text: the
    better)."""
    results = translator.translate_detailed(
        sources, progress=progress, beam=beam, nbest=beam, lenpen_form="power", lenpen=1.0
    )
    found: list[Found] = []
    for result in results:
        hypotheses: Found = {}
        for text, log_prob, pieces in zip(result.hypotheses, result.log_probs, result.pieces):
            length = len(pieces) + 1
            if text not in hypotheses or log_prob / length > hypotheses[text][0] / hypotheses[text][1]:
                hypotheses[text] = (log_prob, length)
        found.append(hypotheses)
    return found


def rerank(
    first: Translator,
    second: Translator,
    sources: Sequence[str],
    direction: Direction,
    beam: int = 5,
    pool: Pool = "both",
    weights: tuple[float, float] = (1.0, 1.0),
    progress: bool = False,
    first_nbest: list[Found] | None = None,
    second_nbest: list[Found] | None = None,
) -> list[list[Candidate]]:
    """Per source, the candidates best first by the combined score (module docstring). The candidates are the
    first model's n-best (n = beam) and, with `direction="r2l"` and `pool="both"`, the second model's n-best turned
    back to left-to-right; a source that is empty (or all whitespace) gets the single candidate "". `first_nbest` and
    `second_nbest` (from `nbest`; the second's in its own word order) save searching again."""
    if direction not in DIRECTIONS:
        raise ValueError(f"rerank direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if pool not in ("both", "first"):
        raise ValueError(f"rerank pool must be 'both' or 'first', got {pool!r}")
    sources = list(sources)
    first_found = first_nbest if first_nbest is not None else nbest(first, sources, beam, progress)
    second_found: list[Found] = [{} for _ in sources]
    if direction == "r2l" and pool == "both":
        own = second_nbest if second_nbest is not None else nbest(second, sources, beam, progress)
        second_found = [{reverse_words(text): value for text, value in found.items()} for found in own]
    texts = [
        list(dict.fromkeys([*first_found[i], *second_found[i]])) if sources[i].strip() else [""]
        for i in range(len(sources))
    ]
    pairs = [(i, text) for i in range(len(sources)) for text in texts[i]]
    with tqdm(total=2, disable=not progress, desc="rescore", unit="model") as bar:
        forced_first = first.score([sources[i] for i, _ in pairs], [text for _, text in pairs])
        bar.update(1)
        if direction == "r2l":
            forced_second = second.score([sources[i] for i, _ in pairs], [reverse_words(t) for _, t in pairs])
        else:  # channel: the candidate is the source, the source is the output
            forced_second = second.score([text for _, text in pairs], [sources[i] for i, _ in pairs])
        bar.update(1)
    ranked: list[list[Candidate]] = [[] for _ in sources]
    for (i, text), f1, f2 in zip(pairs, forced_first, forced_second):
        scores = [_best(first_found[i], text, f1), _best(second_found[i], text, f2)]
        ranked[i].append(Candidate(text, scores, weights[0] * scores[0] + weights[1] * scores[1]))
    for candidates in ranked:
        candidates.sort(key=lambda c: -c.score)  # stable: on a tie the first model's earlier candidate stays first
    return ranked


__all__ = ["DIRECTIONS", "Candidate", "Direction", "Found", "Pool", "nbest", "rerank", "reverse_words"]
