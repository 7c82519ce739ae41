"""Constraints every search applies (section 6.1): the maximum output length "input length + 50" (in general
floor(a * |x| + b), |x| the source subwords without EOS), a minimum length, and tokens never generated.

Scores are masked after the softmax (`constrain_` sets entries to -inf and never renormalises), so every
hypothesis is scored by the model's true log-probabilities: a forced EOS at the maximum length costs
log P(EOS | prefix), as in fairseq.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.config import DecodeConfig, ModelConfig


def output_length_limits(memory_mask: Tensor, config: DecodeConfig, model_config: ModelConfig) -> Tensor:
    """[B] the most output tokens (EOS not counted) for each source; memory_mask [B,S] is True at real tokens.

    With learned positions the decoder cannot read positions >= max_positions, so the limit is clamped to
    max_positions - 1 (BOS takes position 0).
    """
    source_lengths = memory_mask.sum(dim=1).double() - 1  # without the source EOS
    limits = torch.floor(config.max_len_a * source_lengths + config.max_len_b).long()
    if model_config.positional == "learned":
        limits = limits.clamp(max=model_config.max_positions - 1)
    return limits.clamp(min=0)


def constrain_(
    scores: Tensor, length: int, config: DecodeConfig, model_config: ModelConfig, at_max: Tensor | None = None
) -> Tensor:
    """Mask next-token scores [R,V] in place for rows that hold `length` output tokens so far.

    PAD and BOS are never generated; EOS is forbidden while length < min_len; rows where `at_max` [R] is True
    reached their maximum length and may only end (EOS keeps its unmasked score). Returns `scores`.
    """
    eos = model_config.eos_id
    forced = at_max is not None and bool(at_max.any())
    if forced:
        eos_scores = scores[:, eos].clone()
    scores[:, model_config.pad_id] = float("-inf")
    scores[:, model_config.bos_id] = float("-inf")
    if length < config.min_len:
        scores[:, eos] = float("-inf")
    if forced:
        scores.masked_fill_(at_max[:, None], float("-inf"))
        scores[:, eos] = torch.where(at_max, eos_scores, scores[:, eos])
    return scores


__all__ = ["constrain_", "output_length_limits"]
