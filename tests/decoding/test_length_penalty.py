"""Length penalties in closed form, and the early-stopping bound against brute force."""

from __future__ import annotations

import pytest
import torch

from aiayn.decoding import best_future_score, length_penalty, normalised_score


def test_gnmt_and_power_forms():
    assert length_penalty(7.0, 0.6, "gnmt") == pytest.approx(2.0**0.6)  # ((5 + 7) / 6)^0.6
    assert length_penalty(1.0, 0.6, "gnmt") == pytest.approx(1.0)
    assert length_penalty(9.0, 0.5, "power") == pytest.approx(3.0)
    assert length_penalty(9.0, 0.0, "power") == length_penalty(9.0, 0.0, "gnmt") == 1.0
    assert normalised_score(-6.0, 9, 0.5, "power") == pytest.approx(-2.0)
    with pytest.raises(ValueError, match="gnmt"):
        length_penalty(3.0, 1.0, "linear")


@pytest.mark.parametrize("form", ["gnmt", "power"])
@pytest.mark.parametrize("alpha", [-0.7, 0.0, 0.6, 1.0, 2.5])
def test_bound_is_at_least_every_continuation_score(form, alpha):
    # Any continuation of a hypothesis with log P = s ends with log P' <= s at a length in [lo, hi].
    generator = torch.Generator().manual_seed(1)
    s = -torch.rand(200, generator=generator) * 10
    lo, hi = 3, torch.randint(3, 30, (200,), generator=generator)
    bound = best_future_score(s, lo, hi, alpha, form)
    for i in range(200):
        for length in range(lo, int(hi[i]) + 1):
            for extra in (0.0, -0.01, -1.0):  # the continuation's further log-probability
                assert (s[i] + extra) / length_penalty(float(length), alpha, form) <= bound[i] + 1e-6
        # and the bound is attained (tight) by some length with no further cost
        attained = max(float(s[i]) / length_penalty(float(n), alpha, form) for n in range(lo, int(hi[i]) + 1))
        assert attained == pytest.approx(float(bound[i]), rel=1e-5)
    assert best_future_score(torch.tensor([float("-inf")]), 2, torch.tensor([5]), alpha, form).item() == float("-inf")
