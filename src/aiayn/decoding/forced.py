"""The log-probability a model gives a given output, teacher forced (section 3.4's softmax, chained):

    log P(Y | X) = sum_{t=1..|Y|} log P(y_t | y_<t, X),   Y = the output's subwords followed by EOS

the same quantity a search records as `Hypothesis.log_prob` when it finds Y; used to rescore candidates that
another model proposed (aiayn.decoding.rerank).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.model import Transformer


def sequence_log_probs(model: Transformer, src: Tensor, targets: Sequence[Sequence[int]]) -> Tensor:
    """log P(targets[b] + [EOS] | src[b]) for each row b: src [B,S] (ids + EOS, right-padded), targets the
    outputs' subword ids without BOS/EOS. Returns [B] (float32)."""
    c = model.config
    if src.shape[0] != len(targets):
        raise ValueError(f"{src.shape[0]} sources but {len(targets)} targets")
    lengths = torch.tensor([len(t) + 1 for t in targets], device=src.device)  # |Y|: EOS included
    width = int(lengths.max())
    tgt_in = torch.full((len(targets), width), c.pad_id, dtype=torch.long)
    tgt_out = torch.full((len(targets), width), c.pad_id, dtype=torch.long)
    for row, ids in enumerate(targets):
        tgt_in[row, 0] = c.decoder_start_id  # shifted right (3.1)
        tgt_in[row, 1 : len(ids) + 1] = torch.tensor(ids, dtype=torch.long)
        tgt_out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        tgt_out[row, len(ids)] = c.eos_id
    tgt_in, tgt_out = tgt_in.to(src.device), tgt_out.to(src.device)
    with torch.inference_mode():
        log_probs = model.log_probs(src, tgt_in)  # [B,T,V]
    picked = log_probs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)  # [B,T]
    real = torch.arange(width, device=src.device) < lengths.unsqueeze(1)
    return torch.where(real, picked, torch.zeros_like(picked)).sum(dim=-1)


__all__ = ["sequence_log_probs"]
