"""Training curves (section 5): loss, perplexity, learning rate (eq. 3) and BLEU over updates, from a run's
metrics log.

The log is JSON lines (`metrics.jsonl` in the run directory, written by `aiayn.training.metrics_log`): one
object per line with the update count under `step` and the record's kind under `kind`: "train", "valid",
"bleu", "end". Values are read when present: `loss`, `nll_loss`, `ppl`, `lr`, `bleu` and its sacrebleu
`signature`, `tokens_per_s`, and the run's time in `elapsed_s`. Missing keys leave a panel empty.
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from aiayn.visualization.style import COLORS, new_figure

METRICS_FILE = "metrics.jsonl"


@dataclass
class Series:
    """Points (update, value) of one quantity for one kind of record."""

    steps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, step: float, value: Any) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            self.steps.append(float(step))
            self.values.append(float(value))


def metrics_path(run: str | Path) -> Path:
    """The metrics file of a run directory (or the file itself)."""
    path = Path(run)
    if path.is_dir():
        path = path / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: metrics log not found (expected {METRICS_FILE} in the run directory)")
    return path


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Parse the JSON-lines log; a malformed line is an error naming file and line, except a cut-off last one."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines):  # a run killed mid-write leaves a partial last line
                break
            raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        step = record.get("step")
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            raise ValueError(f"{path}:{number}: missing a numeric 'step' field")
        records.append(record)
    if not records:
        raise ValueError(f"{path}: no metrics records")
    return records


def collect(records: list[dict[str, Any]]) -> dict[tuple[str, str], Series]:
    """(kind, quantity) -> Series, for quantity in loss, nll_loss, ppl, lr, bleu, tokens_per_s."""
    series: dict[tuple[str, str], Series] = {}
    for record in records:
        kind = str(record.get("kind", "train"))
        step = record["step"]
        values = dict(record)
        if "ppl" not in values and isinstance(values.get("nll_loss"), (int, float)):
            values["ppl"] = math.exp(min(values["nll_loss"], 700.0))
        for quantity in ("loss", "nll_loss", "ppl", "lr", "bleu", "tokens_per_s"):
            if quantity in values:
                series.setdefault((kind, quantity), Series()).add(step, values[quantity])
    return {key: s for key, s in series.items() if s.steps}


def _panel(ax, series: dict[tuple[str, str], Series], quantity: str, title: str, ylabel: str) -> None:
    drawn = 0
    for (kind, name), s in sorted(series.items()):
        if name != quantity:
            continue
        color = COLORS.get(kind, COLORS["grey"] if kind != "bleu" else COLORS["valid"])
        style = dict(marker="o", markersize=3.5) if len(s.steps) < 60 else {}
        label = "valid" if kind == "bleu" else kind  # BLEU records are validation translations
        ax.plot(s.steps, s.values, color=color, linewidth=1.4, label=label, **style)
        drawn += 1
    ax.set_title(title)
    ax.set_xlabel("updates")
    ax.set_ylabel(ylabel)
    if drawn:
        ax.legend(frameon=False)
    else:
        ax.text(
            0.5,
            0.5,
            f"no '{quantity}' in the log",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color=COLORS["grey"],
        )


def plot_curves(records: list[dict[str, Any]], title: str = "") -> Figure:
    """Four panels: loss, perplexity (log scale), learning rate, BLEU."""
    series = collect(records)
    fig = new_figure(11.0, 7.5)
    axes = fig.subplots(2, 2)
    _panel(axes[0][0], series, "loss", "Loss per target token (label smoothed, nats)", "loss")
    _panel(axes[0][1], series, "ppl", "Perplexity exp(NLL)", "perplexity")
    if any(name == "ppl" for _, name in series):
        axes[0][1].set_yscale("log")
        axes[0][1].yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes[0][1].yaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels overlap
    _panel(axes[1][0], series, "lr", "Learning rate (eq. 3: warm-up, then 1/sqrt(step))", "learning rate")
    axes[1][0].ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    _panel(axes[1][1], series, "bleu", "Validation BLEU (sacrebleu)", "BLEU")
    signatures = [r["signature"] for r in records if r.get("kind") == "bleu" and isinstance(r.get("signature"), str)]
    if signatures:
        axes[1][1].text(
            0.99,
            0.02,
            "\n".join(textwrap.wrap(signatures[-1], 60)),
            transform=axes[1][1].transAxes,
            ha="right",
            va="bottom",
            fontsize=7,
            color=COLORS["grey"],
        )
    last = records[-1]
    notes = [f"{int(last.get('step', 0)):,} updates"]
    times = [r.get("elapsed_s") for r in records]
    wall = max((t for t in times if isinstance(t, (int, float))), default=None)
    if wall is not None:
        notes.append(f"{wall / 3600:.2f} h wall time")
    throughput = series.get(("train", "tokens_per_s"))
    if throughput is not None:
        notes.append(f"median {sorted(throughput.values)[len(throughput.values) // 2]:,.0f} tokens/s")
    fig.suptitle(f"{title + ': ' if title else ''}training curves ({', '.join(notes)})")
    return fig
