"""Label-smoothed cross entropy (section 5.4, "Label Smoothing": eps_ls = 0.1).

The variant: Szegedy et al. (2016), the paper's reference [36], smoothing over all V classes. The target
distribution for a position whose reference token is y is

    q(k) = (1 - eps) * [k == y] + eps / V          for every k in the vocabulary (y and pad included)

and the loss is the cross entropy H(q, p) = -sum_k q(k) log p(k) = (1 - eps) * NLL + (eps / V) * sum_k -log p(k),
summed over non-padding positions. This is what `torch.nn.functional.cross_entropy(label_smoothing=eps)`
computes. (fairseq's `label_smoothed_cross_entropy` instead gives y 1 - eps and each other class eps / (V - 1);
the two differ by O(eps / V).) Positions whose target is `pad_id` contribute nothing.

Two implementations of the same function: `label_smoothed_nll_loss` from logits, and
`projected_label_smoothed_loss`, which applies the final linear (3.4) itself to decoder states a chunk of rows at a
time and never holds the [N, V] logits (`train.loss_kernel`, chosen in `aiayn.kernels.select`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


class _ProjectedSmoothedCrossEntropy(torch.autograd.Function):
    """The final linear (3.4) and H(q, p) of rows of decoder states, a chunk of rows at a time.

    Each chunk's logits z = h W^T (+ b) live only while the chunk is processed: log-sum-exp, NLL, the smoothing
    sum and the gradient p - q are taken from them while they are in cache, and the gradients of h, W and b are
    accumulated at once (the loss is a sum over rows, so its gradient is known in the forward pass; backward
    scales it by the upstream gradient). The full [N, V] logits, their log-probabilities and their gradient are
    never written out. The same function as `label_smoothed_nll_loss(F.linear(h, W, b), ...)`.
    """

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, eps: float, rows: int):  # type: ignore[override]
        V = weight.size(0)
        grad_h, grad_w = torch.empty_like(hidden), torch.zeros_like(weight)
        grad_b = torch.zeros_like(bias) if bias is not None and bias.requires_grad else None
        nll, smooth = hidden.new_zeros(()), hidden.new_zeros(())
        for start in range(0, hidden.size(0), rows):
            h, y = hidden[start : start + rows], target[start : start + rows, None]
            z = F.linear(h, weight, bias)  # (c, V) logits
            top = z.amax(dim=1, keepdim=True)
            z_y, z_sum = z.gather(1, y), z.sum(dim=1, keepdim=True)
            z.sub_(top).exp_()
            total = z.sum(dim=1, keepdim=True)
            lse = top + total.log()  # log sum_k exp z_k
            nll += (lse - z_y).sum()  # -log p(y)
            smooth += (V * lse - z_sum).sum()  # sum_k -log p(k)
            z.mul_(total.reciprocal_())  # p
            if eps:
                z.sub_(eps / V)
            z.scatter_add_(1, y, z.new_full(y.shape, -(1.0 - eps)))  # p - q
            torch.mm(z, weight, out=grad_h[start : start + rows])
            grad_w.addmm_(z.t(), h)
            if grad_b is not None:
                grad_b += z.sum(dim=0)
        loss = nll.clone() if eps == 0.0 else (1.0 - eps) * nll + (eps / V) * smooth
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor | None):  # type: ignore[override]
        grad_h, grad_w, grad_b = ctx.saved_tensors
        return (
            grad_h * grad_loss if ctx.needs_input_grad[0] else None,
            grad_w * grad_loss if ctx.needs_input_grad[1] else None,
            grad_b * grad_loss if grad_b is not None else None,
            None, None, None,
        )  # fmt: skip


def chunk_rows(vocab_size: int, budget: int = 1 << 21) -> int:
    """Rows per chunk of `projected_label_smoothed_loss`: logits of about `budget` elements (8 MiB in float32),
    so that a chunk stays in the last-level cache; at least 64 rows, for the products' efficiency."""
    return max(64, budget // vocab_size)


def projected_label_smoothed_loss(
    hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, eps: float, rows: int | None = None
) -> tuple[Tensor, Tensor]:
    """`label_smoothed_nll_loss(F.linear(hidden, weight, bias), target, eps)` for hidden [N, d_model] states of
    real (non-pad) targets [N], in float32, computed in chunks of `rows` (`chunk_rows` by default) without
    materialising the [N, V] logits. Returns (summed loss, summed NLL without gradient)."""
    if hidden.dtype != torch.float32 or weight.dtype != torch.float32:
        raise ValueError(f"the chunked loss computes in float32; got {hidden.dtype} states, {weight.dtype} weight")
    rows = rows or chunk_rows(weight.size(0))
    return _ProjectedSmoothedCrossEntropy.apply(hidden, weight, bias, target, float(eps), rows)


def transduction_loss(
    net: Callable[..., Tensor], model: Any, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, eps: float, pad_id: int,
    kernel: str = "logits",
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and NLL of a batch's real (non-pad) targets, the final linear applied only
    there: from the logits `net(src, tgt_in, real)` returns, or (`kernel` "chunked") inside
    `projected_label_smoothed_loss` from the decoder states `net(..., project=False)` returns, with `model`'s
    output weight and bias. `net` is the model or a wrapper around it (DDP) that forward and backward go through."""
    real = tgt_out != pad_id
    if kernel == "chunked":
        hidden = net(src, tgt_in, real, project=False)
        return projected_label_smoothed_loss(hidden, model.output_weight(), model.final_logits_bias, tgt_out[real], eps)
    return label_smoothed_nll_loss(net(src, tgt_in, real), tgt_out[real], eps, pad_id)


def count_targets(target: Tensor, pad_id: int = 0) -> int:
    """Number of non-pad targets, the loss's normaliser."""
    return int(torch.count_nonzero(target != pad_id))


__all__ = [
    "chunk_rows",
    "count_targets",
    "label_smoothed_nll_loss",
    "projected_label_smoothed_loss",
    "transduction_loss",
]
