"""RandMaskDropout against the definition of dropout (5.4) and torch's nn.Dropout."""

from __future__ import annotations

import math

import torch
from torch import nn

from aiayn.kernels import prepare_for_training
from aiayn.kernels.dropout import RandMaskDropout, dropped_levels, rand_mask_dropout
from aiayn.model import Transformer
from tests.conftest import tiny_config


def test_keeps_each_element_with_probability_one_minus_p_and_scales_the_kept() -> None:
    torch.manual_seed(0)
    n, p = 1_000_000, 0.3
    x = torch.randn(n).abs() + 0.5  # no zeros of its own
    y = rand_mask_dropout(x, p)
    kept = y != 0
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * sigma
    for lane in range(4):  # each of the four 16-bit lanes of a 64-bit draw (the top one holds the sign bit)
        assert abs(kept[lane::4].float().mean().item() - (1 - p)) < 5 * 2 * sigma
    p_drop = dropped_levels(p) / 2**16  # p rounded to a multiple of 2^-16
    assert abs(p_drop - p) <= 2**-17
    torch.testing.assert_close(y[kept], x[kept] / (1 - p_drop), rtol=1e-6, atol=0)  # E[y] = x exactly
    pairs = kept[:-1].float() * kept[1:].float()  # neighbours independent: P(both kept) = (1 - p)^2
    assert abs(pairs.mean().item() - (1 - p) ** 2) < 0.005


def test_odd_sizes_shapes_and_views() -> None:
    torch.manual_seed(5)
    for shape in [(1,), (3,), (5, 7), (2, 3, 5)]:
        x = torch.ones(shape)
        y = rand_mask_dropout(x, 0.5)
        assert y.shape == x.shape and set(y.unique().tolist()) <= {0.0, 2.0}
    x = torch.randn(6, 8).t()  # not contiguous
    y = rand_mask_dropout(x, 0.5)
    assert y.shape == (8, 6) and torch.equal(y[y != 0], 2 * x[y != 0])


def test_gradient_is_the_mask_times_the_scale() -> None:
    torch.manual_seed(1)
    x = torch.randn(64, 33, requires_grad=True)
    y = rand_mask_dropout(x, 0.25)
    upstream = torch.randn_like(y)
    y.backward(upstream)
    expected = upstream * (y.detach() != 0) / 0.75
    torch.testing.assert_close(x.grad, expected, rtol=1e-6, atol=0)

    def seeded(z: torch.Tensor) -> torch.Tensor:  # the same mask on every call gradcheck makes
        torch.manual_seed(2)
        return rand_mask_dropout(z, 0.25)

    assert torch.autograd.gradcheck(seeded, (torch.randn(5, 4, dtype=torch.float64, requires_grad=True),))


def test_seeded_like_torch_and_identity_in_eval() -> None:
    x = torch.randn(4096)
    torch.manual_seed(3)
    a = rand_mask_dropout(x, 0.1)
    torch.manual_seed(3)
    b = rand_mask_dropout(x, 0.1)
    torch.manual_seed(4)
    c = rand_mask_dropout(x, 0.1)
    assert torch.equal(a, b) and not torch.equal(a, c)  # the global generator: seeds and checkpoints cover it
    module = RandMaskDropout(0.5).eval()
    assert module(x) is x and rand_mask_dropout(x, 0.0) is x
    assert torch.equal(rand_mask_dropout(x, 1.0), torch.zeros_like(x))  # p = 1 as nn.Dropout: all dropped


def test_prepare_for_training_swaps_every_dropout_on_cpu() -> None:
    model = Transformer(tiny_config(P_drop=0.2))
    before = sorted(m.p for m in model.modules() if type(m) is nn.Dropout)
    runtime = prepare_for_training(model)
    assert 0.2 in before and runtime.dropout == "rand-mask"
    assert not any(type(m) is nn.Dropout for m in model.modules())
    assert sorted(m.p for m in model.modules() if isinstance(m, RandMaskDropout)) == before  # each p kept
