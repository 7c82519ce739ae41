"""What a search returns per sentence (section 6.1): hypotheses with their scores, best first."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class Hypothesis:
    """One finished output.

    tokens: subword ids without BOS and EOS.
    score: log_prob / lp(len(tokens) + 1), the length-normalised score the search ranks by.
    log_prob: log P(tokens + [EOS] | source) under the model (sampling records the model's, not the tempered,
        log-probabilities).
    attention: [len(tokens) + 1, S] encoder-decoder attention of the last decoder layer, averaged over heads,
        one row per predicted token (EOS included), over the S real source positions (EOS included); or None.
    """

    tokens: list[int]
    score: float
    log_prob: float
    attention: Tensor | None = None


def insert_nbest(kept: list[Hypothesis], hypothesis: Hypothesis, nbest: int) -> None:
    """Insert into a best-first list holding at most `nbest`; on equal scores the earlier one stays first."""
    position = len(kept)
    while position > 0 and kept[position - 1].score < hypothesis.score:
        position -= 1
    if position < nbest:
        kept.insert(position, hypothesis)
        del kept[nbest:]


__all__ = ["Hypothesis", "insert_nbest"]
