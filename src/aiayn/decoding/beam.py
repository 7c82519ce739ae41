"""Beam search (section 6.1: "beam search with a beam size of 4 and length penalty alpha = 0.6 ... maximum
output length input length + 50, but terminate early when possible").

All sentences of a batch are searched at once, k = `beam` rows per sentence (sentence-major). Each step:

1. log P(y | prefix) for every row (one `DecoderState.step`), masked by `limits.constrain_`; the first step
   runs once per sentence (all k beams would read the same BOS) and then branches into k rows (`expand`);
2. candidates: every live hypothesis extended by every token, scored by the summed log-probability; the top 2k
   of a sentence's k * V candidates (at most k of them end in EOS, one per beam), found among each row's top
   2k log-probabilities plus the row's score (the same set, without a k * V matrix of sums);
3. EOS candidates ranked within the top k are set aside as finished, normalised by the length penalty
   (`length_penalty`); the k best non-EOS candidates become the new beam;
4. the cache follows the back-pointers (`reorder(rows, source_changed=False)`: the encoder-decoder keys and
   values are never copied);
5. a sentence is done when it holds `nbest` finished hypotheses and no live hypothesis can beat the worst of
   them (`best_future_score`: an exact bound, not fairseq's "beam hypotheses finished"), or when all its live
   hypotheses are dead (-inf, e.g. after the forced EOS at the maximum length). Done sentences leave the
   batch and the cache (a shrinking `reorder`), so they cost nothing from then on.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.config import DecodeConfig
from aiayn.decoding.encoding import encode_sources
from aiayn.decoding.ensemble import Ensemble
from aiayn.decoding.hypothesis import Hypothesis, insert_nbest
from aiayn.decoding.length_penalty import best_future_score, normalised_score
from aiayn.decoding.limits import constrain_, output_length_limits
from aiayn.decoding.state import branch, start_decoder
from aiayn.model import Transformer

NEG_INF = float("-inf")


@torch.inference_mode()
def beam_search(model: Transformer | Ensemble, src: Tensor, config: DecodeConfig) -> list[list[Hypothesis]]:
    """Beam search over src [B,S] (ids + EOS, right-padded); per sentence the `nbest` best, best first."""
    c, k, device = model.config, config.beam, src.device
    memory = encode_sources(model, src)
    batch = src.size(0)
    max_len = output_length_limits(memory.mask, config, c)  # [b] of the sentences still searched
    steps = int(max_len.max()) + 1  # the last step can only predict EOS
    state = start_decoder(model, memory, steps + 1, config.use_cache, config.need_attention, config.ensemble_mean)
    source_lengths = memory.mask.sum(dim=1).tolist()

    sentence = torch.arange(batch, device=device)  # [b] input index of each sentence still searched
    scores = torch.full((batch, k), NEG_INF, device=device)  # [b,k] log P of the live hypotheses
    scores[:, 0] = 0.0  # one live hypothesis (BOS) per sentence at first; the other beams are empty
    tokens = torch.full((batch,), c.decoder_start_id, dtype=torch.long, device=device)  # BOS: one row per sentence
    history = torch.empty(batch * k, steps, dtype=torch.long, device=device)  # [b*k, t] output ids so far
    attention = memory.hidden.new_zeros(batch * k, steps, src.size(1)) if config.need_attention else None
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    threshold = torch.full((batch,), NEG_INF, device=device)  # [b] score of the nbest-th finished hypothesis
    offsets = torch.arange(2 * k, device=device)

    for t in range(steps):  # t output tokens so far in every live hypothesis
        b = sentence.numel()
        logits, weights = state.step(tokens)  # [b*k, V]; [b, V] at t = 0
        lprobs = F.log_softmax(logits.float(), dim=-1)  # one fused pass (faster here than logsumexp alone)
        if t == 0 and k > 1:  # the first step ran once per sentence (its k beams would all read BOS)
            lprobs, weights = branch(state, k, lprobs, weights)
        constrain_(lprobs, t, config, c, at_max=(max_len == t).repeat_interleave(k))
        # Within a row the hypothesis score is a constant, so the sentence's best 2k of k * V candidates are
        # among its rows' best 2k log-probabilities: rank those, not a k * V matrix of sums.
        width = min(2 * k, lprobs.size(1))
        row_top, row_token = lprobs.topk(width, dim=1)  # [b*k, width]
        row_scores = row_top.add_(scores.view(-1, 1)).view(b, k * width)
        top_scores, top_index = row_scores.topk(2 * k, dim=1)  # [b, 2k], best first
        top_beam, top_token = top_index // width, row_token.view(b, k * width).gather(1, top_index)
        is_eos = top_token == c.eos_id
        if attention is not None:
            attention[:, t] = weights

        # 3. finished: EOS candidates among the top k with a finite score
        ending = is_eos[:, :k] & torch.isfinite(top_scores[:, :k])
        if bool(ending.any()):
            for i, j in ending.nonzero().tolist():
                r = i * k + int(top_beam[i, j])
                s = int(sentence[i])
                log_prob = float(top_scores[i, j])
                weights_r = None if attention is None else attention[r, : t + 1, : source_lengths[s]].clone()
                score = normalised_score(log_prob, t + 1, config.lenpen, config.lenpen_form)
                insert_nbest(finished[s], Hypothesis(history[r, :t].tolist(), score, log_prob, weights_r), config.nbest)
                if len(finished[s]) == config.nbest:
                    threshold[i] = finished[s][-1].score

        # the new beam: the first k candidates that do not end
        pick = (is_eos.long() * (2 * k) + offsets).topk(k, dim=1, largest=False).indices  # [b,k] ranks
        scores = top_scores.gather(1, pick)
        new_tokens = top_token.gather(1, pick)
        rows = top_beam.gather(1, pick) + (torch.arange(b, device=device) * k)[:, None]  # [b,k] back-pointers

        # 5. stop sentences no live hypothesis can improve (lengths: |Y| in [t + 2, max_len + 1], EOS counted)
        bound = best_future_score(scores.max(dim=1).values, t + 2, max_len + 1, config.lenpen, config.lenpen_form)
        done = bound <= threshold  # also true when every live score is -inf
        source_changed = False
        if bool(done.any()):
            keep = (~done).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            rows, scores, new_tokens = rows[keep], scores[keep], new_tokens[keep]
            sentence, max_len, threshold = sentence[keep], max_len[keep], threshold[keep]
            source_changed = True  # fewer rows: the cache drops whole sentences
        flat = rows.reshape(-1)
        state.reorder(flat, source_changed=source_changed)
        history = history.index_select(0, flat)
        history[:, t] = new_tokens.reshape(-1)
        if attention is not None:
            attention = attention.index_select(0, flat)
        tokens = new_tokens.reshape(-1)
    return finished


__all__ = ["beam_search"]
