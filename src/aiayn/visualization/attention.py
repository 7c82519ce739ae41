"""Attention figures (sections 3.2.1-3.2.3, and the paper's attention visualizations, Figures 3-5).

For one sentence pair, from a model's real weights (`attention_data`):
- a grid of every layer x head, for encoder self-attention, decoder self-attention and encoder-decoder attention;
- a zoom on one (layer, head) with the tokens on rows (queries) and columns (keys);
- the three-panel view of eq. (1) for one query: q and K, the scores q K^T / sqrt(d_k) and their softmax,
  then V and the output softmax(q K^T / sqrt(d_k)) V.
Layers and heads are numbered from 1 in titles; functions take 0-based indices.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from aiayn.data.tokenizer import Tokenizer
from aiayn.decoding import Translator
from aiayn.model import Transformer
from aiayn.visualization.attention_data import (
    KINDS,
    TITLES,
    AttentionMaps,
    Kind,
    QueryView,
    capture_attention,
    query_view,
)
from aiayn.visualization.style import COLORS, label_tokens, new_figure, save_figure

AXIS_NAMES = {
    "encoder": ("source query", "source key"),
    "decoder": ("target query (decoder input)", "target key (decoder input)"),
    "cross": ("target token being predicted", "source key"),
}


def _masked(weights: np.ndarray, kind: Kind) -> np.ma.MaskedArray:
    """Hide the causally masked cells (drawn grey) of decoder self-attention; their weight is exactly 0."""
    if kind != "decoder":
        return np.ma.masked_array(weights, mask=np.zeros_like(weights, dtype=bool))
    tq, tk = weights.shape[-2:]
    upper = np.triu(np.ones((tq, tk), dtype=bool), k=1 + tk - tq)
    return np.ma.masked_array(weights, mask=np.broadcast_to(upper, weights.shape))


def _cmap():
    from matplotlib import colormaps

    return colormaps["viridis"].with_extremes(bad="#dddddd")


def plot_grid(maps: AttentionMaps, kind: Kind, sentence: str = "") -> Figure:
    """Every layer (rows) x head (columns) of one attention kind, on one colour scale [0, 1]."""
    weights = maps.weights(kind).numpy()  # [N, h, Tq, Tk]
    layers, heads, tq, tk = weights.shape
    cell = 1.45 if heads <= 8 else 1.1
    width = max(6.5, 0.9 + cell * heads)
    fig = new_figure(width, 1.5 + cell * layers * max(0.45, min(1.0, tq / tk)))
    axes = fig.subplots(layers, heads, squeeze=False)
    image = None
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer][head]
            image = ax.imshow(_masked(weights[layer, head], kind), cmap=_cmap(), vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks([])
            ax.set_yticks([])
            if layer == 0:
                ax.set_title(f"head {head + 1}", fontsize=9)
            if head == 0:
                ax.set_ylabel(f"layer {layer + 1}", fontsize=9)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    title = f"{TITLES[kind].capitalize()}: every layer × head ({tq} queries × {tk} keys)"
    lines = textwrap.wrap(title, int(width * 9)) + textwrap.wrap(sentence, int(width * 11))
    fig.suptitle("\n".join(lines[:4]), fontsize=11)
    return fig


def plot_zoom(maps: AttentionMaps, kind: Kind, layer: int, head: int) -> Figure:
    """One (layer, head) with token labels; cells of weight >= 0.1 are printed (".25" = 0.25)."""
    weights = maps.weights(kind)[layer, head].numpy()  # [Tq, Tk]
    rows, cols = label_tokens(maps.query_labels(kind)), label_tokens(maps.key_labels(kind))
    tq, tk = weights.shape
    fig = new_figure(2.6 + 0.36 * tk, 2.2 + 0.33 * tq)
    ax = fig.add_subplot()
    image = ax.imshow(_masked(weights, kind), cmap=_cmap(), vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(tk), cols, rotation=90)
    ax.set_yticks(range(tq), rows)
    ax.tick_params(length=0)
    ax.set_xlabel(AXIS_NAMES[kind][1])
    ax.set_ylabel(AXIS_NAMES[kind][0])
    for i in range(tq):
        for j in range(tk):
            if weights[i, j] >= 0.1:
                color = "black" if weights[i, j] > 0.6 else "white"
                ax.text(
                    j, i, f"{weights[i, j]:.2f}".removeprefix("0"), ha="center", va="center", fontsize=6.5, color=color
                )
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    ax.set_title(f"{TITLES[kind].capitalize()}, layer {layer + 1}, head {head + 1}")
    return fig


def plot_query(view: QueryView) -> Figure:
    """Eq. (1) for one query: [q over K] -> [scores, softmax weights] -> [V and the output]."""
    keys = label_tokens(view.key_labels)
    tk, d_k, d_v = view.k.size(0), view.k.size(1), view.v.size(1)
    fig = new_figure(13.0, 2.6 + 0.3 * tk)
    grid = fig.add_gridspec(2, 4, height_ratios=[1, max(tk, 2)], width_ratios=[3, 1.4, 1.4, 3])
    limit = float(max(view.q.abs().max(), view.k.abs().max(), view.v.abs().max(), view.output.abs().max()))
    norm = Normalize(-limit, limit)

    ax_q = fig.add_subplot(grid[0, 0])
    ax_q.imshow(view.q[None].numpy(), cmap="RdBu_r", norm=norm, aspect="auto")
    ax_q.set_yticks([0], [f"q: {view.query_label}"])
    ax_q.set_xticks([])
    ax_q.set_title(f"query q_i = x_i W^Q   (d_k = {d_k})")
    ax_k = fig.add_subplot(grid[1, 0], sharex=ax_q)
    ax_k.imshow(view.k.numpy(), cmap="RdBu_r", norm=norm, aspect="auto")
    ax_k.set_yticks(range(tk), keys)
    ax_k.set_xlabel("dimension of q, k")
    ax_k.set_title("keys K = X W^K", fontsize=10)

    finite = view.scores.isfinite()
    ax_s = fig.add_subplot(grid[1, 1])
    positions = np.arange(tk)
    ax_s.barh(positions[finite.numpy()], view.scores[finite].numpy(), color=COLORS["scores"])
    ax_s.set_yticks(range(tk), [""] * tk)
    ax_s.set_ylim(tk - 0.5, -0.5)
    ax_s.axvline(0, color=COLORS["grey"], linewidth=0.8)
    ax_s.set_title("q k_j / sqrt(d_k)", fontsize=10)
    if (~finite).any():
        for j in positions[(~finite).numpy()]:
            ax_s.text(0, j, " masked", va="center", fontsize=7, color=COLORS["grey"])

    ax_w = fig.add_subplot(grid[1, 2])
    ax_w.barh(positions, view.weights.numpy(), color=COLORS["attention"])
    ax_w.set_yticks(range(tk), [""] * tk)
    ax_w.set_ylim(tk - 0.5, -0.5)
    ax_w.set_xlim(0, 1.18)
    ax_w.set_title("softmax: weights", fontsize=10)
    for j, w in enumerate(view.weights.tolist()):
        if w >= 0.01:
            ax_w.text(w + 0.02, j, f"{w:.2f}", va="center", fontsize=7)

    ax_v = fig.add_subplot(grid[1, 3])
    ax_v.imshow(view.v.numpy(), cmap="RdBu_r", norm=norm, aspect="auto")
    ax_v.set_yticks(range(tk), keys)
    ax_v.set_xlabel("dimension of v")
    ax_v.set_title("values V = X W^V", fontsize=10)
    ax_o = fig.add_subplot(grid[0, 3], sharex=ax_v)
    image = ax_o.imshow(view.output[None].numpy(), cmap="RdBu_r", norm=norm, aspect="auto")
    ax_o.set_yticks([0], ["output"])
    ax_o.set_xticks([])
    ax_o.set_title(f"output = sum_j weight_j v_j   (d_v = {d_v})")
    fig.colorbar(image, ax=[ax_v, ax_o], shrink=0.8, label="value")

    fig.suptitle(
        f"{TITLES[view.kind].capitalize()}, layer {view.layer + 1}, head {view.head + 1}, "
        f"query {view.query} '{view.query_label}':  softmax(q K^T / sqrt(d_k)) V  (eq. 1)"
    )
    return fig


def pair_maps(
    model: Transformer, tokenizer: Tokenizer, source: str, target_ids: list[int], target_tokenizer: Any = None
) -> AttentionMaps:
    """Attention maps of `source` (text) and the target subword ids (without bos/eos), teacher forced; the
    decoder reads the model's start token first (BOS, or Marian's pad). `target_tokenizer` labels the target
    side of models with two vocabularies (default: `tokenizer`)."""
    target_tokenizer = target_tokenizer or tokenizer
    src_ids = tokenizer.encode(source) + [model.config.eos_id]
    tgt_in = [model.config.decoder_start_id] + list(target_ids)
    tgt_out = list(target_ids) + [model.config.eos_id]
    return capture_attention(
        model,
        src_ids,
        tgt_in,
        tokenizer.pieces(src_ids),
        target_tokenizer.pieces(tgt_in),
        target_tokenizer.pieces(tgt_out),
    )


def attention_figures(
    model: Transformer,
    maps: AttentionMaps,
    out_dir: str | Path,
    layer: int,
    head: int,
    query: int | None = None,
    name: str = "attention",
    caption: str = "",
) -> list[Path]:
    """Write the grid, zoom and three-panel figures of all three attention kinds; returns the files."""
    for kind in KINDS:
        layers, heads = maps.weights(kind).shape[:2]
        if not 0 <= layer < layers:
            raise ValueError(f"layer {layer + 1} is out of range: the {TITLES[kind]} has {layers} layers")
        if not 0 <= head < heads:
            raise ValueError(f"head {head + 1} is out of range: the model has h={heads} heads")
    written: list[Path] = []
    for kind in KINDS:
        written += save_figure(plot_grid(maps, kind, caption), out_dir, f"{name}_grid_{kind}")
        written += save_figure(plot_zoom(maps, kind, layer, head), out_dir, f"{name}_zoom_{kind}")
        length = len(maps.query_labels(kind))
        position = length // 2 if query is None else query
        view = query_view(model, maps, kind, layer, head, position)
        written += save_figure(plot_query(view), out_dir, f"{name}_query_{kind}")
    return written


def translation_ids(
    model: Transformer, tokenizer: Tokenizer, text: str, target_tokenizer: Any = None, **decode_overrides: object
) -> list[int]:
    """The model's own translation of `text` (beam search of section 6.1 unless overridden) as target subword
    ids, without bos/eos. Teacher forcing them reproduces the attention of the search's final pass."""
    target_tokenizer = target_tokenizer or tokenizer
    translator = Translator(model, tokenizer, target_tokenizer=target_tokenizer)
    translation = translator.translate_detailed([text], **decode_overrides)[0]
    if not translation.pieces:
        raise RuntimeError(f"the model produced no translation of {text!r}; pass --target")
    if hasattr(target_tokenizer, "vocab"):  # a vocabulary-mapped tokenizer (imported models)
        return [target_tokenizer.vocab[piece] for piece in translation.pieces[0]]
    return [target_tokenizer.processor.piece_to_id(piece) for piece in translation.pieces[0]]
