"""Shared matplotlib settings for every figure of the paper's walkthrough (sections 3-6).

Figures are built as `matplotlib.figure.Figure` objects (no pyplot global state) on the Agg backend and saved as
PNG and SVG. Output is byte-identical for a given input: the SVG id salt is fixed, no date is written, and
the PNG carries no time stamp.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; must precede any pyplot import anywhere in the process

from matplotlib.figure import Figure  # noqa: E402

from aiayn.io import atomic_write_bytes  # noqa: E402

RC = {
    "svg.hashsalt": "aiayn",  # fixed ids inside the SVG, so the same figure gives the same bytes
    "svg.fonttype": "path",  # glyphs as paths: renders the same without the fonts installed
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "figure.titlesize": 13,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": "viridis",
    "savefig.dpi": 150,
}
PNG_METADATA = {"Software": None}  # the matplotlib version would make PNGs differ across installs
SVG_METADATA = {"Date": None, "Creator": None}

# Colours used consistently across figures (colour-blind safe, Okabe-Ito).
COLORS = {
    "attention": "#0072B2",
    "recurrent": "#D55E00",
    "convolution": "#009E73",
    "scores": "#CC79A7",
    "ours": "#E69F00",
    "paper": "#56B4E9",
    "train": "#0072B2",
    "valid": "#D55E00",
    "grey": "#777777",
}


def apply_style() -> None:
    """Install the shared settings in matplotlib's global rcParams (idempotent)."""
    matplotlib.rcParams.update(RC)


def new_figure(width: float, height: float) -> Figure:
    """A figure of `width` x `height` inches with the shared style and constrained layout."""
    apply_style()
    return Figure(figsize=(width, height), layout="constrained")


def save_figure(fig: Figure, out_dir: str | Path, name: str) -> list[Path]:
    """Write `name.png` and `name.svg` into `out_dir` (created if needed), atomically; returns both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt, metadata in (("png", PNG_METADATA), ("svg", SVG_METADATA)):
        buffer = io.BytesIO()
        with matplotlib.rc_context(RC):
            fig.savefig(buffer, format=fmt, metadata=metadata)
        path = out_dir / f"{name}.{fmt}"
        atomic_write_bytes(path, buffer.getvalue())
        paths.append(path)
    return paths


def short_token(piece: str, limit: int = 12) -> str:
    """A sentencepiece piece as a plot label: "▁" (word start) kept, long pieces ellipsised."""
    return piece if len(piece) <= limit else piece[: limit - 1] + "…"


def label_tokens(pieces: Sequence[str], limit: int = 12) -> list[str]:
    return [short_token(piece, limit) for piece in pieces]
