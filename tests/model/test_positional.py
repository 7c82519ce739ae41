"""The sinusoids of section 3.5, and PE(pos+k) as a linear function of PE(pos)."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.model.positional import (
    SinusoidalPositionalEncoding,
    fit_relative_position_matrix,
    relative_position_matrix,
    sinusoidal_encoding,
)


def test_worked_values_at_d_model_512() -> None:
    pe = sinusoidal_encoding(10, 512)
    assert math.isclose(pe[1, 0].item(), math.sin(1.0), abs_tol=1e-7)
    assert math.isclose(pe[1, 1].item(), math.cos(1.0), abs_tol=1e-7)
    assert math.isclose(pe[3, 4].item(), math.sin(3 / 10000 ** (4 / 512)), abs_tol=1e-7)
    assert math.isclose(pe[3, 4].item(), 0.343, abs_tol=1e-3)  # the paper's rounded figure
    assert torch.all(pe[0, 0::2] == 0) and torch.all(pe[0, 1::2] == 1)  # sin 0, cos 0: interleaved


def test_offset_and_growth_agree_with_the_table() -> None:
    module = SinusoidalPositionalEncoding(16, initial_positions=8)
    torch.testing.assert_close(module(5, start=20), sinusoidal_encoding(25, 16)[20:])


@pytest.mark.parametrize("k", [1, 7, 50])
def test_pe_pos_plus_k_is_linear_in_pe_pos(k: int) -> None:
    d_model = 512
    pe = sinusoidal_encoding(200 + k, d_model, dtype=torch.float64)
    fitted = fit_relative_position_matrix(pe, k, fit_positions=100)  # sees positions 0..99+k only
    held_out = pe[100:200] @ fitted.T - pe[100 + k : 200 + k]  # positions 100..199
    assert held_out.abs().max() < 1e-4
    exact = relative_position_matrix(k, d_model).double()  # the rotation the sinusoids imply
    assert (fitted - exact).abs().max() < 1e-4
    assert (pe[:200] @ exact.T - pe[k : 200 + k]).abs().max() < 1e-4


def test_unconstrained_fit_where_positions_determine_it() -> None:
    """With more positions than dimensions, a plain full-matrix least-squares fit generalises too."""
    pe = sinusoidal_encoding(210, 16, dtype=torch.float64)
    fit = torch.linalg.lstsq(pe[0:100], pe[3:103], driver="gelsd").solution
    assert (pe[100:200] @ fit - pe[103:203]).abs().max() < 1e-4
