"""Training curves from a run's metrics log, tolerant of missing keys, strict about broken lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from aiayn.cli import main
from aiayn.visualization.curves import collect, plot_curves, read_records


def write_log(path: Path, records: list[dict], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")
    return path


def trainer_records() -> list[dict]:
    """The trainer's layout (`kind`, `step`), with the learning rate of eq. (3)."""
    records = []
    for step in range(100, 2001, 100):
        lr = 128**-0.5 * min(step**-0.5, step * 400**-1.5)
        records.append(
            {
                "kind": "train",
                "step": step,
                "loss": 6 / math.log(step),
                "nll_loss": 5 / math.log(step),
                "lr": lr,
                "tokens_per_s": 1000.0 + step,
                "elapsed_s": step / 10,
            }
        )
        if step % 500 == 0:
            records.append({"kind": "valid", "step": step, "loss": 5.5 / math.log(step), "ppl": 20 - step / 200})
            records.append({"kind": "bleu", "step": step, "bleu": step / 100, "signature": "nrefs:1|tok:13a"})
    records.append({"kind": "end", "step": 2000, "reason": "max_update", "elapsed_s": 210.0})
    return records


def test_lines_plot_the_logged_values(tmp_path: Path) -> None:
    records = trainer_records()
    fig = plot_curves(read_records(write_log(tmp_path / "metrics.jsonl", records)))
    lines = {(ax.get_title().split(" ")[0], line.get_label()): line for ax in fig.axes for line in ax.lines}
    lr = lines[("Learning", "train")]
    assert list(lr.get_ydata()) == [r["lr"] for r in records if r["kind"] == "train"]
    assert list(lines[("Validation", "valid")].get_ydata()) == [5.0, 10.0, 15.0, 20.0]
    ppl = lines[("Perplexity", "train")]  # derived from nll_loss when ppl is not logged
    assert ppl.get_ydata()[0] == pytest.approx(math.exp(5 / math.log(100)))
    assert list(lines[("Perplexity", "valid")].get_ydata()) == [17.5, 15.0, 12.5, 10.0]
    assert "2,000 updates" in fig._suptitle.get_text() and "0.06 h" in fig._suptitle.get_text()
    assert "nrefs:1|tok:13a" in [t.get_text() for ax in fig.axes for t in ax.texts]


def test_missing_keys_leave_panels_empty(tmp_path: Path) -> None:
    """Records with only some of the keys the trainer writes: the present ones are plotted, the panels of the
    absent ones say so."""
    records = [
        {"kind": "train", "step": 1, "loss": 9.0},
        {"kind": "valid", "step": 2, "loss": 8.0},
        {"kind": "bleu", "step": 2, "bleu": 3.5, "elapsed_s": 7200.0},
    ]
    series = collect(read_records(write_log(tmp_path / "m.jsonl", records)))
    assert series[("train", "loss")].values == [9.0] and series[("valid", "loss")].steps == [2.0]
    assert series[("bleu", "bleu")].values == [3.5]
    fig = plot_curves(read_records(tmp_path / "m.jsonl"))
    empty = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "no 'lr' in the log" in empty and "no 'ppl' in the log" in empty
    assert "2.00 h wall time" in fig._suptitle.get_text()


def test_broken_lines(tmp_path: Path) -> None:
    path = write_log(tmp_path / "metrics.jsonl", trainer_records()[:3], tail='{"kind": "train", "st')
    assert len(read_records(path)) == 3  # a cut-off last line (killed run) is dropped
    write_log(path, [{"kind": "train", "step": 1}], tail='oops\n{"kind": "train", "step": 2}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: not valid JSON"):
        read_records(path)
    write_log(path, [{"kind": "train", "loss": 1.0}])
    with pytest.raises(ValueError, match=r"metrics.jsonl:1: missing a numeric 'step'"):
        read_records(path)


def test_command(tmp_path: Path, capsys) -> None:
    write_log(tmp_path / "run" / "metrics.jsonl", trainer_records())
    for out in ("a", "b"):
        assert main(["visualize", "curves", "--run", str(tmp_path / "run"), "--out", str(tmp_path / out)]) == 0
    for name in ("training_curves.png", "training_curves.svg"):
        assert (tmp_path / "a" / name).stat().st_size > 1000
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert main(["visualize", "curves", "--run", str(tmp_path / "none"), "--out", str(tmp_path)]) == 1
    assert "metrics log not found" in capsys.readouterr().err
