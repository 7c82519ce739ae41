"""Greedy decoding (section 6.1 without the beam): at each step the single most probable token.

Also the loop behind sampling (`aiayn.decoding.sampling`): rows are independent, each extended by one chosen
token per step; a row ends at EOS (or at its maximum length, where EOS is forced). Ended rows leave the batch
and the cache when they are at least a fifth of it (`_COMPACT_SHARE`): each removal copies every layer's cache,
so rows ending one by one are carried along, ignored, until enough have ended to pay for the copy.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.config import DecodeConfig
from aiayn.decoding.encoding import encode_sources
from aiayn.decoding.ensemble import Ensemble
from aiayn.decoding.hypothesis import Hypothesis, insert_nbest
from aiayn.decoding.length_penalty import normalised_score
from aiayn.decoding.limits import constrain_, output_length_limits
from aiayn.decoding.state import branch, start_decoder
from aiayn.model import Transformer

Chooser = Callable[[Tensor], Tensor]  # masked log-probabilities [R,V] -> chosen ids [R]
_COMPACT_SHARE = 0.2  # ended rows are removed once they are this share of the batch (or all of it)


def argmax_chooser(logits: Tensor) -> Tensor:
    return logits.argmax(dim=-1)


@torch.inference_mode()
def decode_rows(
    model: Transformer | Ensemble, src: Tensor, config: DecodeConfig, copies: int, choose: Chooser
) -> list[list[Hypothesis]]:
    """`copies` independent rows per sentence of src [B,S]; returns per sentence the best `nbest`, best first."""
    c = model.config
    memory = encode_sources(model, src)
    batch = src.size(0)
    max_len = output_length_limits(memory.mask, config, c).repeat_interleave(copies)  # [R]
    steps = int(max_len.max()) + 1  # the last step can only predict EOS
    state = start_decoder(model, memory, steps + 1, config.use_cache, config.need_attention, config.ensemble_mean)
    source_lengths = memory.mask.sum(dim=1).tolist()
    rows = batch * copies
    sentence = torch.arange(batch, device=src.device).repeat_interleave(copies)  # [R] input sentence of each row
    tokens = torch.full((batch,), c.decoder_start_id, dtype=torch.long, device=src.device)  # BOS: one per sentence
    log_prob = torch.zeros(rows, device=src.device)
    alive = torch.ones(rows, dtype=torch.bool, device=src.device)  # False: ended, still in the batch
    history = torch.empty(rows, steps, dtype=torch.long, device=src.device)  # [R, t] output ids so far
    attention = memory.hidden.new_zeros(rows, steps, src.size(1)) if config.need_attention else None
    results: list[list[Hypothesis]] = [[] for _ in range(batch)]
    for t in range(steps):
        logits, weights = state.step(tokens)
        if t == 0 and copies > 1:  # the first step ran once per sentence (every copy reads BOS)
            logits, weights = branch(state, copies, logits, weights)
        lprobs = constrain_(F.log_softmax(logits.float(), dim=-1), t, config, c, at_max=max_len == t)
        chosen = choose(lprobs)  # [R]
        log_prob += lprobs.gather(1, chosen[:, None]).squeeze(1)
        history[:, t] = chosen
        if attention is not None:
            attention[:, t] = weights
        ended = (chosen == c.eos_id) & alive
        tokens = chosen
        if not bool(ended.any()):
            continue
        for r in ended.nonzero().squeeze(1).tolist():
            i = int(sentence[r])
            weights_r = None if attention is None else attention[r, : t + 1, : source_lengths[i]].clone()
            score = normalised_score(float(log_prob[r]), t + 1, config.lenpen, config.lenpen_form)
            hypothesis = Hypothesis(history[r, :t].tolist(), score, float(log_prob[r]), weights_r)
            insert_nbest(results[i], hypothesis, config.nbest)
        alive &= ~ended
        live = int(alive.sum())
        if live == 0:
            break
        if alive.numel() - live < _COMPACT_SHARE * alive.numel():
            continue  # too few ended rows to pay for copying the cache: carry them along
        keep = alive.nonzero().squeeze(1)
        state.reorder(keep, source_changed=True)
        tokens, log_prob, history, alive = tokens[keep], log_prob[keep], history[keep], alive[keep]
        max_len, sentence = max_len[keep], sentence[keep]
        if attention is not None:
            attention = attention[keep]
    return results


def greedy_search(model: Transformer | Ensemble, src: Tensor, config: DecodeConfig) -> list[list[Hypothesis]]:
    """The argmax token at each step, one hypothesis per sentence of src [B,S] (ids + EOS, right-padded)."""
    return decode_rows(model, src, config, copies=1, choose=argmax_chooser)


__all__ = ["Chooser", "argmax_chooser", "decode_rows", "greedy_search"]
