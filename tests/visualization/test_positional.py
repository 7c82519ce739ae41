"""The positional-encoding figure (3.5) and its numbers: PE(pos+k) = PE(pos) M_k^T on held-out positions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

from aiayn.cli import main
from aiayn.model.positional import sinusoidal_encoding
from aiayn.visualization.positional import plot_positional, relative_fits


def test_relative_fit_generalises_to_held_out_positions() -> None:
    fits, matrices = relative_fits(512, 100, offsets=(1, 7, 30))
    for fit in fits:
        assert fit.fit_positions == 50 and fit.held_out_positions == 50
        assert fit.held_out_max_error < 1e-6  # float64 least squares on positions 0..49 only
        assert fit.exact_max_error < 1e-6  # the closed-form rotation, stored in float32
        assert fit.matrix_max_difference < 1e-6
    # An independent check of the fitted M_30 on positions far beyond the fitted range.
    pe = sinusoidal_encoding(1000, 512, dtype=torch.float64)
    assert (pe[900:960] @ matrices[30].T - pe[930:990]).abs().max() < 1e-6
    # Each (sin, cos) pair is rotated by the angle k * w_i: the block is [[cos, sin], [-sin, cos]].
    w = 1 / 10000 ** (4 / 512)
    block = matrices[7][4:6, 4:6]
    torch.testing.assert_close(
        block,
        torch.tensor([[math.cos(7 * w), math.sin(7 * w)], [-math.sin(7 * w), math.cos(7 * w)]], dtype=torch.float64),
    )


def test_heatmap_shows_the_encoding() -> None:
    fig, fits = plot_positional(64, 40)
    heatmap = fig.axes[0].images[0].get_array()
    pe = sinusoidal_encoding(40, 64).numpy()
    order = list(range(0, 64, 2)) + list(range(1, 64, 2))
    np.testing.assert_array_equal(np.asarray(heatmap), pe[:, order])
    assert [fit["k"] for fit in fits] == [1, 2, 5, 10, 25]


def test_command_writes_files_and_numbers_deterministically(tmp_path: Path) -> None:
    for run in ("a", "b"):
        argv = ["visualize", "positional", "--d-model", "128", "--positions", "60", "--out", str(tmp_path / run)]
        assert main(argv) == 0
    for name in ("positional_encoding.png", "positional_encoding.svg", "positional_encoding.json"):
        first, second = (tmp_path / run / name for run in ("a", "b"))
        assert first.stat().st_size > 1000 or name.endswith(".json")
        assert first.read_bytes() == second.read_bytes()
    numbers = json.loads((tmp_path / "a" / "positional_encoding.json").read_text())
    assert numbers["d_model"] == 128 and numbers["positions"] == 60
    assert all(fit["held_out_max_error"] < 1e-6 for fit in numbers["relative_fits"])
