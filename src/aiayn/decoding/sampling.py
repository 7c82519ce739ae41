"""Sampling (an option next to the paper's beam search): each step draws the next token from the model's
distribution, reshaped by a temperature and truncated to the top-k tokens and/or the nucleus of probability
mass top-p (Holtzman et al. 2020). `beam` samples are drawn per sentence; the best `nbest` by length-normalised
model score are returned. A fixed `seed` gives the same samples for the same inputs and batch; top_k=1 is greedy.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.config import DecodeConfig
from aiayn.decoding.ensemble import Ensemble
from aiayn.decoding.greedy import decode_rows
from aiayn.decoding.hypothesis import Hypothesis
from aiayn.model import Transformer


def filter_logits(logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """logits [R,V] / temperature, with tokens outside the top-k and outside the top-p nucleus set to -inf."""
    logits = logits / temperature
    if 0 < top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # [R,1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # probability of the better tokens
        drop = mass_before >= top_p  # keep the smallest prefix whose mass reaches top_p (never the first token)
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return logits


def sampling_search(model: Transformer | Ensemble, src: Tensor, config: DecodeConfig) -> list[list[Hypothesis]]:
    """`config.beam` samples per sentence of src [B,S]; returns the best `config.nbest` of them, best first."""
    generator = torch.Generator(device=src.device).manual_seed(config.seed)

    def choose(logits: Tensor) -> Tensor:
        probs = filter_logits(logits, config.temperature, config.top_k, config.top_p).softmax(dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    return decode_rows(model, src, config, copies=config.beam, choose=choose)


__all__ = ["filter_logits", "sampling_search"]
