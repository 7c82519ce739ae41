"""The encoder-decoder diagram of Figure 1 (section 3), drawn from an actual `ModelConfig`.

Every number on it comes from the configuration: N (and N_dec), d_model, h, d_k, d_v, d_ff, P_drop, the
vocabulary sizes, shared embeddings and a tied output layer (3.4), post-norm as in 3.1 or the pre-norm flag,
sinusoidal or learned positions (3.5, Table 3 row E), and the parameter count of the model it describes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch

from aiayn.config import ModelConfig
from aiayn.model import Transformer
from aiayn.visualization.style import new_figure

FILL = {
    "attention": "#fbe3c4",
    "norm": "#f4f1b5",
    "ffn": "#c9e7f5",
    "embedding": "#f8d0d0",
    "linear": "#d7d2f0",
    "softmax": "#cdebc6",
    "stack": "#eeeeee",
}
WIDTH = 3.2  # width of a sub-layer box in diagram units
SUBLAYER_H, NORM_H, GAP = 0.95, 0.45, 0.28


@dataclass
class Box:
    x: float  # centre
    y: float  # bottom
    w: float
    h: float

    @property
    def top(self) -> float:
        return self.y + self.h

    @property
    def mid(self) -> float:
        return self.y + self.h / 2


def _box(ax: Axes, x: float, y: float, h: float, text: str, fill: str, w: float = WIDTH, size: float = 9) -> Box:
    patch = FancyBboxPatch(
        (x - w / 2, y), w, h, boxstyle="round,pad=0,rounding_size=0.12", facecolor=fill, edgecolor="#333333"
    )
    ax.add_patch(patch)
    ax.text(x, y + h / 2, text, ha="center", va="center", fontsize=size, linespacing=1.25)
    return Box(x, y, w, h)


def _arrow(ax: Axes, points: list[tuple[float, float]], color: str = "#333333", style: str = "-") -> None:
    """A polyline ending in an arrow head at its last point."""
    xs, ys = zip(*points)
    ax.plot(xs[:-1] + (xs[-1],), ys[:-1] + (ys[-1],), color=color, linewidth=1.1, linestyle=style)
    ax.annotate("", xy=points[-1], xytext=points[-2], arrowprops=dict(arrowstyle="-|>", color=color, linewidth=1.1))


def _sublayers(c: ModelConfig, decoder: bool) -> list[tuple[str, str]]:
    heads = f"h = {c.h}, d_k = {c.d_k}, d_v = {c.d_v}"
    ffn = (f"Feed Forward  (eq. 2)\nd_ff = {c.d_ff}, ReLU", "ffn")
    if not decoder:
        return [(f"Multi-Head Attention\n{heads}", "attention"), ffn]
    return [
        (f"Masked Multi-Head Attention\n{heads}", "attention"),
        (f"Multi-Head Attention (enc-dec)\n{heads}", "attention"),
        ffn,
    ]


def _stack(ax: Axes, c: ModelConfig, x: float, y: float, decoder: bool) -> tuple[Box, list[Box], float]:
    """Draw one stack from `y` upwards; returns its frame, its sub-layer boxes and the top of its output."""
    side = 1 if decoder else -1  # residual connections on the outside of the diagram
    start = y
    y += GAP
    sublayers: list[Box] = []
    for text, fill in _sublayers(c, decoder):
        below = y - GAP / 2  # the residual branches off here
        if c.norm_first:
            norm = _box(ax, x, y, NORM_H, "LayerNorm", FILL["norm"])
            _arrow(ax, [(x, norm.top), (x, norm.top + GAP)])
            y = norm.top + GAP
        box = _box(ax, x, y, SUBLAYER_H, text, FILL[fill])
        sublayers.append(box)
        _arrow(ax, [(x, box.top), (x, box.top + GAP)])
        y = box.top + GAP
        add = _box(ax, x, y, NORM_H, "Add (residual)" if c.norm_first else "Add & Norm", FILL["norm"])
        edge = x + side * WIDTH / 2
        _arrow(ax, [(x, below), (edge + side * 0.35, below), (edge + side * 0.35, add.mid), (edge, add.mid)])
        y = add.top + GAP
        ax.plot([x, x], [add.top, y], color="#333333", linewidth=1.1)
    if c.norm_first:
        final = _box(ax, x, y, NORM_H, "final LayerNorm (pre-norm)", FILL["norm"])
        y = final.top + GAP
    frame = FancyBboxPatch(
        (x - WIDTH / 2 - 0.55, start),
        WIDTH + 1.1,
        y - start,
        boxstyle="round,pad=0,rounding_size=0.25",
        facecolor=FILL["stack"],
        edgecolor="#777777",
        zorder=-1,
    )
    ax.add_patch(frame)
    layers = c.decoder_layers if decoder else c.N
    ax.text(
        x + side * (WIDTH / 2 + 0.85),
        (start + y) / 2,
        f"{'Decoder' if decoder else 'Encoder'}\n{layers}×",
        fontsize=12,
        ha="left" if decoder else "right",
        va="center",
    )
    return Box(x, start, WIDTH + 1.1, y - start), sublayers, y


def _inputs(ax: Axes, c: ModelConfig, x: float, decoder: bool) -> float:
    """Embedding, ⊕ positional encoding; returns the y where the stack starts."""
    vocab = c.tgt_vocab_size if decoder else c.src_vocab_size
    label = "Outputs (shifted right)" if decoder else "Inputs"
    ax.text(x, 0.0, label, ha="center", va="bottom", fontsize=10)
    scale = ", × √d_model" if c.scale_embeddings else ""
    name = "Output Embedding" if decoder else "Input Embedding"
    emb = _box(ax, x, 0.75, 0.8, f"{name}\n{vocab:,} × {c.d_model}{scale}", FILL["embedding"])
    _arrow(ax, [(x, 0.4), (x, emb.y)])
    plus_y = emb.top + 0.55
    ax.add_patch(Circle((x, plus_y), 0.2, facecolor="white", edgecolor="#333333"))
    ax.text(x, plus_y, "+", ha="center", va="center", fontsize=12)
    _arrow(ax, [(x, emb.top), (x, plus_y - 0.2)])
    kind = "sinusoidal (3.5)" if c.positional == "sinusoidal" else "learned (Table 3 E)"
    side = 1 if decoder else -1
    ax.text(
        x + side * 0.35,
        plus_y,
        f"Positional\nEncoding\n{kind}",
        ha="left" if decoder else "right",
        va="center",
        fontsize=8.5,
    )
    ax.text(
        x - side * 0.1,
        plus_y + 0.3,
        f"dropout {c.P_drop}",
        ha="right" if decoder else "left",
        va="bottom",
        fontsize=7.5,
        color="#555555",
    )
    _arrow(ax, [(x, plus_y + 0.2), (x, plus_y + 0.85)])
    return plus_y + 0.85


def plot_architecture(config: ModelConfig, name: str = "") -> Figure:
    """Figure 1 of the paper for `config`."""
    c = config
    with torch.device("meta"):  # shapes only: counts the parameters without allocating them
        model = Transformer(c)
    params = model.num_parameters()
    fig = new_figure(12.0, 10.0)
    grid = fig.add_gridspec(1, 2, width_ratios=[3.0, 1.15])
    ax = fig.add_subplot(grid[0, 0])
    ax.set_axis_off()
    x_enc, x_dec = 3.0, 9.0

    enc_frame, _, enc_top = _stack(ax, c, x_enc, _inputs(ax, c, x_enc, decoder=False), decoder=False)
    dec_frame, dec_boxes, dec_top = _stack(ax, c, x_dec, _inputs(ax, c, x_dec, decoder=True), decoder=True)

    # Encoder output -> keys and values of every decoder layer's encoder-decoder attention (3.2.3).
    cross = dec_boxes[1]
    route_y = enc_top + 0.5
    left = x_dec - WIDTH / 2
    _arrow(
        ax, [(x_enc, enc_top), (x_enc, route_y), (left - 0.85, route_y), (left - 0.85, cross.mid), (left, cross.mid)]
    )
    ax.text(x_enc + 0.1, route_y + 0.1, "encoder output: K, V", fontsize=8.5, va="bottom")

    linear = _box(ax, x_dec, dec_top + 0.45, 0.7, f"Linear  {c.d_model} → {c.tgt_vocab_size:,}", FILL["linear"])
    _arrow(ax, [(x_dec, dec_top), (x_dec, linear.y)])
    softmax = _box(ax, x_dec, linear.top + 0.45, 0.6, "Softmax", FILL["softmax"])
    _arrow(ax, [(x_dec, linear.top), (x_dec, softmax.y)])
    _arrow(ax, [(x_dec, softmax.top), (x_dec, softmax.top + 0.45)])
    ax.text(x_dec, softmax.top + 0.5, "Output Probabilities", ha="center", va="bottom", fontsize=10)

    # Weight sharing (3.4): dashed links between the matrices that are one and the same.
    tie = "#a0306e"
    if c.share_embeddings:
        ax.plot([x_enc + WIDTH / 2, x_dec - WIDTH / 2], [1.15, 1.15], color=tie, linestyle="--", linewidth=1.3)
        ax.text(
            (x_enc + x_dec) / 2, 1.22, "one shared\nembedding matrix", color=tie, ha="center", va="bottom", fontsize=8.5
        )
    if c.tie_output:
        far = x_dec + WIDTH / 2 + 2.1
        ax.plot(
            [x_dec + WIDTH / 2, far, far, x_dec + WIDTH / 2],
            [1.15, 1.15, linear.mid, linear.mid],
            color=tie,
            linestyle="--",
            linewidth=1.3,
        )
        ax.text(
            far + 0.08,
            (1.15 + linear.mid) / 2,
            "tied: pre-softmax\nlinear = Eᵀ",
            color=tie,
            fontsize=8.5,
            rotation=90,
            ha="left",
            va="center",
        )
    x_range, y_range = (-0.6, x_dec + WIDTH / 2 + 2.7), (-0.2, softmax.top + 1.0)
    ax.set_xlim(*x_range)
    ax.set_ylim(*y_range)
    ax.set_aspect("equal")
    fig.set_size_inches(12.0, 1.0 + 8.6 * (y_range[1] - y_range[0]) / (x_range[1] - x_range[0]))

    side = fig.add_subplot(grid[0, 1])
    side.set_axis_off()
    lines = [
        ("configuration", ""),
        ("N (encoder layers)", f"{c.N}"),
        ("N (decoder layers)", f"{c.decoder_layers}"),
        ("d_model", f"{c.d_model}"),
        ("h (heads)", f"{c.h}"),
        ("d_k / d_v", f"{c.d_k} / {c.d_v}"),
        ("h · d_v", f"{c.h * c.d_v}"),
        ("d_ff", f"{c.d_ff}"),
        ("P_drop", f"{c.P_drop}"),
        ("eps_ls", f"{c.eps_ls}"),
        ("residual + norm", "pre-norm" if c.norm_first else "post-norm (3.1)"),
        ("positions", c.positional),
        ("source vocabulary", f"{c.src_vocab_size:,}"),
        ("target vocabulary", f"{c.tgt_vocab_size:,}"),
        ("shared embeddings", "yes" if c.share_embeddings else "no"),
        ("tied output layer", "yes" if c.tie_output else "no"),
        ("parameters", f"{params:,}"),
        ("", f"({params / 1e6:.1f}M)"),
    ]
    for row, (key, value) in enumerate(lines):
        y = 0.9 - row * 0.042
        weight = "bold" if row == 0 else "normal"
        side.text(0.0, y, key, fontsize=10, weight=weight, transform=side.transAxes, va="top")
        side.text(1.0, y, value, fontsize=10, ha="right", transform=side.transAxes, va="top")
    title = "The Transformer (Figure 1), drawn from the configuration"
    fig.suptitle(f"{title}: {name}" if name else title)
    return fig
