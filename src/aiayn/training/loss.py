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


class _SmoothedCrossEntropy(torch.autograd.Function):
    """H(q, p) and NLL summed over the rows whose target is not `pad_id`; the gradient written in one pass.

    d H(q, p) / d logits = p - q on each real row (zero on pad rows): exp of the saved log-probabilities, scaled
    and shifted in place, then (1 - eps) taken off at each target. autograd's chain through `nll_loss`, the
    smoothing sum and `log_softmax` gives the same tensor after several more passes over the [N, V] logits.
    The NLL output carries no gradient (it is for perplexity).
    """

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, eps: float, pad_id: int) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        lprobs = F.log_softmax(logits, dim=-1)  # (N, V)
        real = (target != pad_id).to(lprobs.dtype)  # (N,)
        nll = -(lprobs.gather(1, target[:, None]).squeeze(1) * real).sum()
        smooth = 0.0 if eps == 0.0 else -(lprobs.sum(dim=-1) * real).sum()  # sum_k -log p(k) over real rows
        loss = nll.clone() if eps == 0.0 else (1.0 - eps) * nll + (eps / logits.size(-1)) * smooth
        ctx.save_for_backward(lprobs, target, real)
        ctx.eps = eps
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor | None) -> tuple[Tensor, None, None, None]:  # type: ignore[override]
        lprobs, target, real = ctx.saved_tensors
        eps, V = ctx.eps, lprobs.size(-1)
        scale = (real * grad_loss)[:, None]  # (N, 1): 0 on pad rows
        grad = torch.exp(lprobs).mul_(scale)  # p
        if eps:
            grad.sub_(scale * (eps / V))  # - eps / V
        grad.scatter_add_(1, target[:, None], scale * -(1.0 - eps))  # - (1 - eps) at the target
        return grad, None, None, None


def label_smoothed_nll_loss(logits: Tensor, target: Tensor, eps: float, pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL (for perplexity) over the non-pad targets.

    logits [..., V] (float16/bf16 computed in float32), target [...] ids. Returns two scalar tensors (the NLL
    without gradient); divide by the number of non-pad targets for per-token values.
    """
    V = logits.size(-1)
    flat = logits.reshape(-1, V)
    if flat.dtype in (torch.float16, torch.bfloat16):
        flat = flat.float()
    return _SmoothedCrossEntropy.apply(flat, target.reshape(-1), float(eps), pad_id)


def count_targets(target: Tensor, pad_id: int = 0) -> int:
    """Number of non-pad targets, the loss's normaliser."""
    return int(torch.count_nonzero(target != pad_id))


__all__ = ["count_targets", "label_smoothed_nll_loss"]
