"""Constraints every search applies (section 6.1): the maximum output length "input length + 50" (in general
floor(a * |x| + b), |x| the source subwords without EOS), a minimum length, and tokens never generated.

Scores are masked after the softmax (`constrain_` sets entries to -inf and never renormalises), so every
hypothesis is scored by the model's true log-probabilities: a forced EOS at the maximum length costs
log P(EOS | prefix), as in fairseq.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

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
    if model_config.bos_id is not None:
        scores[:, model_config.bos_id] = float("-inf")
    if length < config.min_len:
        scores[:, eos] = float("-inf")
    if forced:
        scores.masked_fill_(at_max[:, None], float("-inf"))
        scores[:, eos] = torch.where(at_max, eos_scores, scores[:, eos])
    return scores


class SearchTooLargeError(ValueError):
    """A search whose beam or output length cannot fit: refused before anything is allocated."""


def available_memory(device: torch.device) -> int:
    """Bytes a search may use on `device`: free CUDA memory, or this machine's physical memory."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 40  # unknown: do not refuse on memory


def search_bytes(config: DecodeConfig, model_config: ModelConfig, sentences: int, source_len: int) -> int:
    """An estimate of the memory a search over `sentences` sources of `source_len` tokens (EOS included) needs:
    per hypothesis the self-attention K/V of every decoder layer at the longest output, the encoder-decoder
    K/V, and a few [V] score rows (4-byte floats)."""
    rows = sentences * (1 if config.greedy else config.beam)
    longest = math.floor(config.max_len_a * max(source_len - 1, 0) + config.max_len_b) + 1
    if model_config.positional == "learned":
        longest = min(longest, model_config.max_positions)
    per_layer = 2 * model_config.d_model * (longest + source_len)
    return 4 * rows * (model_config.decoder_layers * per_layer + 4 * model_config.tgt_vocab_size)


def check_search_budget(
    config: DecodeConfig,
    model_config: ModelConfig | Sequence[ModelConfig],
    sentences: int,
    source_len: int,
    device: torch.device,
) -> None:
    """Refuse (`SearchTooLargeError`, naming the options) a beam wider than the target vocabulary, or a search
    whose estimated memory exceeds what the device has; an ensemble passes its members' configs (each keeps its
    own caches)."""
    configs = [model_config] if isinstance(model_config, ModelConfig) else list(model_config)
    if not config.greedy and config.beam > configs[0].tgt_vocab_size:
        raise SearchTooLargeError(
            f"--beam {config.beam} exceeds the target vocabulary of {configs[0].tgt_vocab_size} tokens"
        )
    needed = sum(search_bytes(config, c, sentences, source_len) for c in configs)
    have = available_memory(device)
    if needed > have:
        raise SearchTooLargeError(
            f"the search needs about {needed / 2**30:.1f} GiB for {sentences} sentence(s) (--beam {config.beam}, "
            f"--max-len-a {config.max_len_a}, --max-len-b {config.max_len_b}), more than the "
            f"{have / 2**30:.1f} GiB {device} has; lower them or --max-tokens"
        )


__all__ = ["SearchTooLargeError", "check_search_budget", "constrain_", "output_length_limits", "search_bytes"]
