"""Results chart (section 6.1, Table 2): our measured BLEU next to the paper's, one panel per test set.

The paper's figures are Table 2 (BLEU on WMT 2014 newstest2014, EN-DE and EN-FR). Ours are read from a JSON
file, `{"entries": [{"label", "bleu", "dataset", "source"}]}` (`bleu` may be null: not measured yet). Every
bar names its source and test set, and any panel whose test set is not newstest2014 says on the chart that its
scores cannot be compared with Table 2's.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from aiayn.visualization.style import COLORS, new_figure

PAPER_SOURCE = "Vaswani et al. 2017, Table 2"
WMT_EN_DE = "WMT14 newstest2014 EN→DE"
WMT_EN_FR = "WMT14 newstest2014 EN→FR"


@dataclass(frozen=True)
class Entry:
    label: str
    bleu: float | None  # None: not measured yet
    dataset: str
    source: str


def _paper(rows: list[tuple[str, float | None, float | None]]) -> list[Entry]:
    entries = []
    for label, en_de, en_fr in rows:
        if en_de is not None:
            entries.append(Entry(label, en_de, WMT_EN_DE, PAPER_SOURCE))
        if en_fr is not None:
            entries.append(Entry(label, en_fr, WMT_EN_FR, PAPER_SOURCE))
    return entries


# Table 2 of the paper: (model, EN-DE BLEU, EN-FR BLEU) on newstest2014.
PAPER_TABLE_2 = _paper(
    [
        ("ByteNet", 23.75, None),
        ("Deep-Att + PosUnk", None, 39.2),
        ("GNMT + RL", 24.6, 39.92),
        ("ConvS2S", 25.16, 40.46),
        ("MoE", 26.03, 40.56),
        ("GNMT + RL ensemble", 26.30, 41.16),
        ("ConvS2S ensemble", 26.36, 41.29),
        ("Transformer (base)", 27.3, 38.1),
        ("Transformer (big)", 28.4, 41.8),
    ]
)


def read_results(path: str | Path) -> list[Entry]:
    """Parse the results file; errors name the file, the entry and the field."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: results file not found") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    if not isinstance(document, dict) or not isinstance(document.get("entries"), list):
        raise ValueError(f'{path}: expected {{"entries": [...]}}')
    entries = []
    for index, item in enumerate(document["entries"]):
        where = f"{path}: entries[{index}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object")
        for name in ("label", "dataset", "source"):
            if not isinstance(item.get(name), str) or not item[name].strip():
                raise ValueError(f"{where}.{name}: a non-empty string is required")
        bleu = item.get("bleu")
        if bleu is not None and (isinstance(bleu, bool) or not isinstance(bleu, (int, float)) or not 0 <= bleu <= 100):
            raise ValueError(f"{where}.bleu: expected a number in [0, 100] or null, got {bleu!r}")
        entries.append(Entry(item["label"], None if bleu is None else float(bleu), item["dataset"], item["source"]))
    return entries


def plot_results(ours: list[Entry], paper: list[Entry] = PAPER_TABLE_2) -> Figure:
    """Horizontal bars, one panel per test set; our entries are orange and hatched."""
    mine = set(ours)
    entries = list(paper) + list(ours)
    datasets = list(dict.fromkeys(e.dataset for e in entries))  # paper's test sets first, in order
    groups = {d: [e for e in entries if e.dataset == d] for d in datasets}
    heights = [len(g) + 1.6 + ("newstest2014" not in d) for d, g in groups.items()]
    fig = new_figure(11.5, 1.2 + 0.36 * sum(heights))
    axes = fig.subplots(len(datasets), 1, sharex=True, gridspec_kw={"height_ratios": heights}, squeeze=False)
    top = max([e.bleu for e in entries if e.bleu is not None] + [45.0])
    for ax, (dataset, group) in zip(axes[:, 0], groups.items()):
        for row, entry in enumerate(group):
            ours_bar = entry in mine
            color = COLORS["ours"] if ours_bar else COLORS["paper"]
            if entry.bleu is None:
                ax.text(
                    0.5,
                    row,
                    "not measured yet (fill in the results file)",
                    va="center",
                    fontsize=8.5,
                    color=COLORS["grey"],
                    style="italic",
                )
                continue
            ax.barh(row, entry.bleu, color=color, hatch="//" if ours_bar else None, edgecolor="#444444", height=0.7)
            ax.text(
                entry.bleu + 0.4,
                row,
                f"{entry.bleu:g}  ·  {entry.source}  ·  {entry.dataset}",
                va="center",
                fontsize=8,
            )
        ax.set_yticks(range(len(group)), [e.label for e in group])
        ax.set_ylim(len(group) - 0.4, -0.6)
        ax.set_title(dataset, loc="left", fontsize=11, weight="bold")
        if "newstest2014" not in dataset:
            ax.set_ylim(len(group) + 0.9, -0.6)  # one more row, for the warning
            warning = (
                f"{dataset} is a different test set from WMT14 newstest2014 (other domain, sentence length and "
                "difficulty): these scores are not comparable with Table 2's."
            )
            ax.text(
                0.3,
                len(group) + 0.25,
                "\n".join(textwrap.wrap(warning, 110)),
                ha="left",
                va="center",
                fontsize=9,
                color="#a0306e",
                bbox=dict(boxstyle="round", facecolor="#fff4f8", edgecolor="#a0306e"),
            )
    axes[-1][0].set_xlim(0, top * 1.75)
    axes[-1][0].set_xlabel("BLEU")
    fig.suptitle("BLEU: the paper's Table 2 (blue) and ours (orange, hatched), by test set")
    return fig
