"""One entry point for every search of section 6.1: `generate(model, src, config)`.

src [B,S] holds each source as subword ids + EOS, right-padded with PAD (`aiayn.data.make_source`). The result
is, per sentence in input order, its n-best `Hypothesis` list, best first: beam search by default, greedy
with `config.greedy`, sampling with `config.sampling`. `model` may be an `Ensemble` (`aiayn.decoding.ensemble`):
every search then follows the members' mean next-token probability.

Beam size 1 is beam search, not greedy: with alpha > 0 it keeps searching after the first EOS while a longer
hypothesis could still score higher (`length_penalty`). With alpha = 0 both give the same output.
"""

from __future__ import annotations

from torch import Tensor

from aiayn.config import DecodeConfig
from aiayn.decoding.beam import beam_search
from aiayn.decoding.ensemble import Ensemble
from aiayn.decoding.greedy import greedy_search
from aiayn.decoding.hypothesis import Hypothesis
from aiayn.decoding.sampling import sampling_search
from aiayn.model import Transformer


def generate(model: Transformer | Ensemble, src: Tensor, config: DecodeConfig | None = None) -> list[list[Hypothesis]]:
    """Decode src [B,S] (ids + EOS, PAD-padded) -> per sentence its n-best hypotheses, best first."""
    config = config or DecodeConfig()
    if src.dim() != 2 or src.size(0) == 0 or src.size(1) == 0:
        raise ValueError(f"src must be a non-empty [B,S] tensor of ids, got shape {tuple(src.shape)}")
    if bool((src[:, 0] == model.config.pad_id).any()):
        raise ValueError("every source row needs at least one token (its EOS); got a row of padding")
    if model.training:
        raise ValueError("decode with model.eval(): dropout would make the search random")
    if config.sampling:
        return sampling_search(model, src, config)
    if config.greedy:
        return greedy_search(model, src, config)
    return beam_search(model, src, config)


__all__ = ["Hypothesis", "beam_search", "generate", "greedy_search", "sampling_search"]
