"""Label smoothing (section 5.4) against a direct computation from its definition."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from aiayn.training.loss import (
    _ProjectedSmoothedCrossEntropy,
    chunk_rows,
    count_targets,
    label_smoothed_nll_loss,
    projected_label_smoothed_loss,
)

PAD = 0


def direct(logits: torch.Tensor, target: torch.Tensor, eps: float) -> tuple[float, float]:
    """H(q, p) summed over non-pad positions, q = (1 - eps) one-hot + eps / V, p = softmax in float64."""
    z = logits.double().reshape(-1, logits.size(-1))
    p = z.exp() / z.exp().sum(-1, keepdim=True)
    V = z.size(1)
    loss = nll = 0.0
    for row, y in zip(p, target.reshape(-1).tolist()):
        if y == PAD:
            continue
        q = torch.full((V,), eps / V, dtype=torch.float64)
        q[y] += 1 - eps
        loss += float(-(q * row.log()).sum())
        nll += float(-row[y].log())
    return loss, nll


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_equals_definition(eps: float, generator: torch.Generator) -> None:
    logits = torch.randn(3, 5, 11, generator=generator) * 3
    target = torch.randint(1, 11, (3, 5), generator=generator)
    target[0, 3:] = PAD
    target[2, 1:] = PAD
    loss, nll = label_smoothed_nll_loss(logits, target, eps, PAD)
    expected_loss, expected_nll = direct(logits, target, eps)
    assert loss.item() == pytest.approx(expected_loss, rel=1e-5)
    assert nll.item() == pytest.approx(expected_nll, rel=1e-5)


def test_matches_pytorch_variant(generator: torch.Generator) -> None:
    """The variant chosen is PyTorch's: eps spread over all V classes, true class and pad included."""
    logits = torch.randn(40, 23, generator=generator)
    target = torch.randint(0, 23, (40,), generator=generator)
    loss, _ = label_smoothed_nll_loss(logits, target, 0.1, PAD)
    reference = F.cross_entropy(logits, target, ignore_index=PAD, label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(loss, reference)


def test_eps_zero_is_cross_entropy(generator: torch.Generator) -> None:
    logits = torch.randn(2, 7, 13, generator=generator)
    target = torch.randint(1, 13, (2, 7), generator=generator)
    target[1, 4:] = PAD
    loss, nll = label_smoothed_nll_loss(logits, target, 0.0, PAD)
    reference = F.cross_entropy(logits.reshape(-1, 13), target.reshape(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(loss, reference)
    torch.testing.assert_close(nll, reference)


def test_padding_is_ignored_and_gets_no_gradient(generator: torch.Generator) -> None:
    logits = torch.randn(2, 6, 9, generator=generator, requires_grad=True)
    target = torch.randint(1, 9, (2, 6), generator=generator)
    target[0, 2:] = PAD
    loss, _ = label_smoothed_nll_loss(logits, target, 0.1, PAD)
    changed = logits.detach().clone()
    changed[0, 2:] = 100 * torch.randn(4, 9, generator=generator)  # padded positions: anything
    same, _ = label_smoothed_nll_loss(changed, target, 0.1, PAD)
    torch.testing.assert_close(loss, same)
    loss.backward()
    assert torch.all(logits.grad[0, 2:] == 0) and torch.any(logits.grad[0, :2] != 0)
    assert count_targets(target, PAD) == 2 + 6


def test_bf16_logits_are_computed_in_float32(generator: torch.Generator) -> None:
    logits = torch.randn(4, 5, 17, generator=generator)
    target = torch.randint(1, 17, (4, 5), generator=generator)
    low, _ = label_smoothed_nll_loss(logits.bfloat16(), target, 0.1, PAD)
    assert low.dtype == torch.float32
    expected, _ = direct(logits.bfloat16().float(), target, 0.1)
    assert low.item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_gradient_equals_autograd_through_pytorch_loss(eps: float, generator: torch.Generator) -> None:
    """The hand-written backward (p - q) against autograd through F.cross_entropy, float64, with pad rows and a
    scaled loss (the trainer divides by the token count before backward)."""
    logits = (torch.randn(30, 19, generator=generator, dtype=torch.float64) * 4).requires_grad_()
    target = torch.randint(0, 19, (30,), generator=generator)
    target[:3] = PAD
    loss, nll = label_smoothed_nll_loss(logits, target, eps, PAD)
    (loss * 0.37).backward()
    ours = logits.grad.clone()
    logits.grad = None
    reference = F.cross_entropy(logits, target, ignore_index=PAD, label_smoothing=eps, reduction="sum")
    (reference * 0.37).backward()
    torch.testing.assert_close(loss, reference, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours, logits.grad, rtol=1e-12, atol=1e-12)
    assert not nll.requires_grad
    inputs = (logits.detach().requires_grad_(),)
    assert torch.autograd.gradcheck(lambda z: label_smoothed_nll_loss(z, target, eps, PAD)[0], inputs)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("rows", [1, 4, 7, 64])
def test_chunked_projection_loss_equals_pytorch_loss(eps: float, rows: int, generator: torch.Generator) -> None:
    """The final linear and H(q, p) a chunk of rows at a time (chunks that do not divide the rows, one row, all
    rows) against F.linear and F.cross_entropy through autograd: loss, NLL and the gradients of the states, the
    weight and a trained bias, in float64 (float32 below), with a scaled loss as the trainer scales it."""
    hidden = torch.randn(23, 6, generator=generator, dtype=torch.float64).requires_grad_()
    weight = (torch.randn(19, 6, generator=generator, dtype=torch.float64) * 2).requires_grad_()
    bias = torch.randn(19, generator=generator, dtype=torch.float64).requires_grad_()
    target = torch.randint(1, 19, (23,), generator=generator)
    loss, nll = _ProjectedSmoothedCrossEntropy.apply(hidden, weight, bias, target, eps, rows)
    (loss * 0.37).backward()
    ours = [t.grad.clone() for t in (hidden, weight, bias)]
    for t in (hidden, weight, bias):
        t.grad = None
    logits = F.linear(hidden, weight, bias)
    reference = F.cross_entropy(logits, target, label_smoothing=eps, reduction="sum")
    (reference * 0.37).backward()
    torch.testing.assert_close(loss, reference, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(nll, F.cross_entropy(logits.detach(), target, reduction="sum"), rtol=1e-12, atol=1e-12)
    for mine, t in zip(ours, (hidden, weight, bias), strict=True):
        torch.testing.assert_close(mine, t.grad, rtol=1e-12, atol=1e-12)
    assert not nll.requires_grad
    inputs = (hidden.detach().requires_grad_(), weight.detach().requires_grad_(), bias.detach().requires_grad_())
    fn = lambda h, w, b: _ProjectedSmoothedCrossEntropy.apply(h, w, b, target, eps, rows)[0]  # noqa: E731
    assert torch.autograd.gradcheck(fn, inputs)


def test_chunked_projection_loss_in_float32_without_bias(generator: torch.Generator) -> None:
    """The trainer's call: float32, a buffer bias that takes no gradient (None here), the default chunk rows
    at a vocabulary that makes several chunks; equal to the logits path to float32 rounding."""
    V = 40_000
    rows = chunk_rows(V)
    assert rows * V <= 1 << 21 or rows == 64
    hidden = torch.randn(3 * rows + 5, 16, generator=generator).requires_grad_()
    weight = (torch.randn(V, 16, generator=generator) * 0.3).requires_grad_()
    target = torch.randint(1, V, (hidden.size(0),), generator=generator)
    loss, nll = projected_label_smoothed_loss(hidden, weight, None, target, 0.1)
    loss.backward()
    grads = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    reference, reference_nll = label_smoothed_nll_loss(F.linear(hidden, weight), target, 0.1, PAD)
    reference.backward()
    torch.testing.assert_close(loss, reference, rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(nll, reference_nll, rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(grads[0], hidden.grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(grads[1], weight.grad, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="chunked loss computes in float32"):
        projected_label_smoothed_loss(hidden.bfloat16(), weight, None, target, 0.1)
