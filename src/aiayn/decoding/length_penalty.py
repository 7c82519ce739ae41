"""Length normalisation of beam-search scores (section 6.1: "length penalty alpha = 0.6", after Wu et al. 2016).

    gnmt:   lp(Y) = ((5 + |Y|) / 6)^alpha        (Wu et al. 2016, eq. 14; the paper's)
    power:  lp(Y) = |Y|^alpha                    (fairseq's and Hugging Face's `length_penalty`)
    score(Y) = log P(Y | X) / lp(Y)

|Y| counts the output tokens including the final EOS (a predicted token, as in fairseq and Hugging Face), so
a hypothesis of n subwords has |Y| = n + 1. alpha = 0 gives the raw log-probability under both forms.

Early stopping needs an upper bound on the score any continuation of a live hypothesis can reach. Extending
a hypothesis only adds log-probabilities <= 0, so its final log P <= s, its current (<= 0) log P; and its
final length lies in [n_min, n_max]. Hence score <= s / lp(|Y|) <= s / max(lp(n_min), lp(n_max)) because
s <= 0 and lp is positive and monotone in |Y| (increasing for alpha > 0, decreasing for alpha < 0), so its
maximum over the range sits at an end. This bound is exact-safe: a search that stops when every live
hypothesis' bound is <= the worst of the n-best finished ones returns what running to the maximum length
would (fairseq's "stop once beam hypotheses finished" is not: with alpha > 0 a longer one can still win).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

LengthPenaltyForm = Literal["gnmt", "power"]


def length_penalty(length: Tensor | float, alpha: float, form: LengthPenaltyForm = "gnmt") -> Tensor | float:
    """lp(|Y|) for a length (a number or a tensor of lengths, EOS included)."""
    if form == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if form == "power":
        return length**alpha
    raise ValueError(f"unknown length penalty form {form!r}; choose 'gnmt' or 'power'")


def normalised_score(log_prob: float, length: int, alpha: float, form: LengthPenaltyForm = "gnmt") -> float:
    """score(Y) = log P(Y | X) / lp(|Y|); `length` = |Y|, EOS included."""
    return float(log_prob) / float(length_penalty(float(length), alpha, form))


def best_future_score(
    log_prob: Tensor, min_length: Tensor | int, max_length: Tensor, alpha: float, form: LengthPenaltyForm = "gnmt"
) -> Tensor:
    """Upper bound of the normalised score of any finished continuation of live hypotheses (module docstring).

    log_prob: [n] current log P (<= 0, or -inf for dead rows); min_length, max_length: the range of |Y| a
    continuation can finish with (EOS included). Returns [n]; -inf stays -inf.
    """
    low = length_penalty(torch.as_tensor(min_length, dtype=log_prob.dtype), alpha, form)
    high = length_penalty(max_length.to(log_prob.dtype), alpha, form)
    return log_prob / torch.maximum(torch.as_tensor(low), high)


__all__ = ["LengthPenaltyForm", "best_future_score", "length_penalty", "normalised_score"]
