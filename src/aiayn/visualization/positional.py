"""Positional-encoding figure (section 3.5).

    PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),   PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))

Four panels: the [positions x d_model] heatmap; the first dimensions as curves over positions; the linear map
M_k with PE(pos + k) = PE(pos) M_k^T (a rotation of each (sin, cos) pair by the angle k w_i), fitted by least
squares on the first half of the positions; and that fit's error on the held-out second half, for several
offsets k, next to the exact rotation's. The numbers are also returned (and written as JSON by the CLI).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from aiayn.model.positional import fit_relative_position_matrix, relative_position_matrix, sinusoidal_encoding
from aiayn.visualization.style import COLORS, new_figure

DEFAULT_OFFSETS = (1, 2, 5, 10, 25)


@dataclass(frozen=True)
class RelativeFit:
    """How well PE(pos + k) = PE(pos) M_k^T holds, for one offset k."""

    k: int
    fit_positions: int  # M_k fitted on positions 0 .. fit_positions-1 (and their +k partners)
    held_out_positions: int  # error measured on positions fit_positions .. fit_positions+held_out-1
    fit_max_error: float  # max |PE(pos) M_k^T - PE(pos + k)| on the fitted positions
    held_out_max_error: float  # the same on held-out positions
    exact_max_error: float  # held-out error of the closed-form rotation `relative_position_matrix(k)`
    matrix_max_difference: float  # max |fitted M_k - exact M_k|


def relative_fits(
    d_model: int, positions: int, offsets: tuple[int, ...] = DEFAULT_OFFSETS
) -> tuple[list[RelativeFit], dict[int, torch.Tensor]]:
    """Fit M_k on the first half of `positions` and measure the error on the second half."""
    if positions < 4:
        raise ValueError(f"--positions must be at least 4, got {positions}")
    fit_n = positions // 2
    held_n = positions - fit_n
    pe = sinusoidal_encoding(positions + max(offsets), d_model, dtype=torch.float64)  # [P+k, d_model]
    fits, matrices = [], {}
    for k in offsets:
        fitted = fit_relative_position_matrix(pe, k, fit_positions=fit_n)  # [d_model, d_model]
        exact = relative_position_matrix(k, d_model).double()

        def error(m: torch.Tensor, start: int, count: int, k: int = k) -> float:
            return float((pe[start : start + count] @ m.T - pe[start + k : start + k + count]).abs().max())

        fits.append(
            RelativeFit(
                k=k,
                fit_positions=fit_n,
                held_out_positions=held_n,
                fit_max_error=error(fitted, 0, fit_n),
                held_out_max_error=error(fitted, fit_n, held_n),
                exact_max_error=error(exact, fit_n, held_n),
                matrix_max_difference=float((fitted - exact).abs().max()),
            )
        )
        matrices[k] = fitted
    return fits, matrices


def plot_positional(d_model: int, positions: int, offsets: tuple[int, ...] = DEFAULT_OFFSETS):
    """The four-panel figure and the fit numbers (a list of `RelativeFit` as dicts)."""
    pe = sinusoidal_encoding(positions, d_model).numpy()  # [positions, d_model]
    fits, matrices = relative_fits(d_model, positions, offsets)
    fig: Figure = new_figure(13.0, 8.6)
    grid = fig.add_gridspec(2, 2)

    ax = fig.add_subplot(grid[0, 0])
    order = list(range(0, d_model, 2)) + list(range(1, d_model, 2))  # display only: sin columns, then cos
    image = ax.imshow(pe[:, order], aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.axvline(d_model / 2 - 0.5, color="black", linewidth=0.8)
    half = d_model // 2
    ax.set_xticks(
        [0, half // 2, half, half + half // 2, d_model - 1], ["0", str(half), "1", str(half + 1), str(d_model - 1)]
    )
    ax.set_xlabel("dimension: even 2i = 0, 2, .. (sin) | odd 2i+1 = 1, 3, .. (cos); stored interleaved")
    ax.set_ylabel("position pos")
    ax.set_title(f"PE(pos, ·) for {positions} positions, d_model = {d_model}")
    fig.colorbar(image, ax=ax, shrink=0.85)

    ax = fig.add_subplot(grid[0, 1])
    shown = [0, 1] + sorted({2 * (d_model // 32), 2 * (d_model // 16), 2 * (d_model // 8)} - {0})
    for dim in shown:
        kind = "sin" if dim % 2 == 0 else "cos"
        wavelength = 2 * np.pi * 10000 ** ((dim // 2 * 2) / d_model)
        ax.plot(
            np.arange(positions),
            pe[:, dim],
            linewidth=1.3,
            linestyle="-" if dim < 2 else "--",
            label=f"dim {dim}: {kind}, wavelength {wavelength:.1f}",
        )
    ax.set_xlabel("position pos")
    ax.set_ylabel("PE(pos, dim)")
    ax.set_ylim(-1.15, 1.9)
    ax.set_title("Dimensions as curves: wavelengths grow from 2π to 10000·2π")
    ax.legend(loc="upper right", ncol=2, fontsize=8, frameon=False)

    k_show = 5 if 5 in matrices else offsets[0]
    dims = min(d_model, 8)
    ax = fig.add_subplot(grid[1, 0])
    block = matrices[k_show][:dims, :dims].numpy()
    image = ax.imshow(block, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    for i in range(dims):
        for j in range(dims):
            if abs(block[i, j]) >= 0.005:
                color = "white" if abs(block[i, j]) > 0.6 else "black"
                ax.text(j, i, f"{block[i, j]:.3f}", ha="center", va="center", fontsize=8, color=color)
    ax.set_xticks(range(dims))
    ax.set_yticks(range(dims))
    ax.set_title(
        f"Fitted M_{k_show} (first {dims} of {d_model} dims): PE(pos+{k_show}) = PE(pos) M_{k_show}ᵀ\n"
        "2×2 rotations by k·w_i on each (sin, cos) pair; zero elsewhere"
    )
    fig.colorbar(image, ax=ax, shrink=0.85)

    ax = fig.add_subplot(grid[1, 1])
    ks = np.arange(len(fits))
    width = 0.27
    bars = [
        ("fit positions", [f.fit_max_error for f in fits], COLORS["grey"]),
        ("held-out positions", [f.held_out_max_error for f in fits], COLORS["attention"]),
        ("closed-form M_k (float32), held-out", [f.exact_max_error for f in fits], COLORS["convolution"]),
    ]
    floor = 1e-17
    for n, (label, values, color) in enumerate(bars):
        heights = np.maximum(values, floor)
        ax.bar(ks + (n - 1) * width, heights, width, label=label, color=color)
        for x, v in zip(ks + (n - 1) * width, values):
            ax.text(x, max(v, floor) * 1.6, f"{v:.0e}", ha="center", va="bottom", fontsize=6.5, rotation=90)
    ax.set_yscale("log")
    ax.set_ylim(floor, 1.0)
    ax.set_xticks(ks, [f"k = {f.k}" for f in fits])
    ax.set_ylabel("max |PE(pos) M_kᵀ − PE(pos+k)|")
    fit_n, held_n = fits[0].fit_positions, fits[0].held_out_positions
    ax.set_title(
        f"Fit on positions 0–{fit_n - 1}, error on held-out {fit_n}–{fit_n + held_n - 1}\n"
        "(float64; PE(pos+k) is a linear function of PE(pos))"
    )
    ax.legend(loc="upper left", fontsize=8, frameon=False, ncol=3)

    fig.suptitle("Sinusoidal positional encoding (section 3.5)")
    return fig, [asdict(f) for f in fits]
