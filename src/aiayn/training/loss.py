"""Label-smoothed cross entropy (section 5.4, "Label Smoothing": eps_ls = 0.1).

The variant: Szegedy et al. (2016), the paper's reference [36], smoothing over all V classes. The target
distribution for a position whose reference token is y is

    q(k) = (1 - eps) * [k == y] + eps / V          for every k in the vocabulary (y and pad included)

and the loss is the cross entropy H(q, p) = -sum_k q(k) log p(k) = (1 - eps) * NLL + (eps / V) * sum_k -log p(k),
summed over non-padding positions. This is what `torch.nn.functional.cross_entropy(label_smoothing=eps)`
computes. (fairseq's `label_smoothed_cross_entropy` instead gives y 1 - eps and each other class eps / (V - 1);
the two differ by O(eps / V).) Positions whose target is `pad_id` contribute nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll_loss(logits: Tensor, target: Tensor, eps: float, pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL (for perplexity) over the non-pad targets.

    logits [..., V] (any dtype; computed in float32), target [...] ids. Returns two scalar float32 tensors;
    divide by the number of non-pad targets for per-token values.
    """
    V = logits.size(-1)
    lprobs = F.log_softmax(logits.reshape(-1, V).float(), dim=-1)  # (N, V)
    target = target.reshape(-1)  # (N,)
    nll = F.nll_loss(lprobs, target, ignore_index=pad_id, reduction="sum")
    if eps == 0.0:
        return nll, nll.detach()
    real = target != pad_id
    smooth = -(lprobs.sum(dim=-1) * real).sum()  # sum_k -log p(k) over real positions
    loss = (1.0 - eps) * nll + (eps / V) * smooth
    return loss, nll.detach()


def count_targets(target: Tensor, pad_id: int = 0) -> int:
    """Number of non-pad targets, the loss's normaliser."""
    return int(torch.count_nonzero(target != pad_id))


__all__ = ["count_targets", "label_smoothed_nll_loss"]
