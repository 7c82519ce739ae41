"""Our BLEU next to Table 2, every bar labelled with source and test set, the difference said on the chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiayn.cli import main
from aiayn.visualization.results import PAPER_TABLE_2, Entry, plot_results, read_results

REPO = Path(__file__).resolve().parents[2]


def test_paper_figures_are_table_2() -> None:
    got = {(e.label, e.dataset.split()[-1]): e.bleu for e in PAPER_TABLE_2}
    assert got[("Transformer (base)", "EN→DE")] == 27.3 and got[("Transformer (big)", "EN→DE")] == 28.4
    assert got[("Transformer (base)", "EN→FR")] == 38.1 and got[("Transformer (big)", "EN→FR")] == 41.8
    assert got[("ByteNet", "EN→DE")] == 23.75 and ("ByteNet", "EN→FR") not in got
    assert len(PAPER_TABLE_2) == 16


def test_chart_labels_and_warning() -> None:
    ours = [
        Entry("ours", 37.5, "Multi30k test2016 EN→DE", "this repository"),
        Entry("ours, greedy", None, "Multi30k test2016 EN→DE", "this repository"),
    ]
    fig = plot_results(ours)
    widths = sorted(p.get_width() for ax in fig.axes for p in ax.patches if p.get_width() > 0)
    assert widths == sorted([e.bleu for e in PAPER_TABLE_2] + [37.5])
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "37.5  ·  this repository  ·  Multi30k test2016 EN→DE" in texts
    assert "27.3  ·  Vaswani et al. 2017, Table 2  ·  WMT14 newstest2014 EN→DE" in texts
    assert any("not measured yet" in t for t in texts)
    warnings = [t for t in texts if "not comparable" in t]
    assert len(warnings) == 1 and "Multi30k test2016" in warnings[0] and "newstest2014" in warnings[0]


def test_results_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"entries": [{"label": "x", "bleu": 120, "dataset": "d", "source": "s"}]}')
    with pytest.raises(ValueError, match=r"r.json: entries\[0\].bleu"):
        read_results(path)
    path.write_text('{"entries": [{"label": "x", "bleu": 1, "source": "s"}]}')
    with pytest.raises(ValueError, match=r"entries\[0\].dataset"):
        read_results(path)
    path.write_text('{"entries": [}')
    with pytest.raises(ValueError, match=r"r.json:1: not valid JSON"):
        read_results(path)


def test_command_with_the_repository_file(tmp_path: Path) -> None:
    shipped = REPO / "docs" / "results.json"
    assert all(set(e) == {"label", "bleu", "dataset", "source"} for e in json.loads(shipped.read_text())["entries"])
    for out in ("a", "b"):
        assert main(["visualize", "results", "--results", str(shipped), "--out", str(tmp_path / out)]) == 0
    for name in ("results_bleu.png", "results_bleu.svg"):
        assert (tmp_path / "a" / name).stat().st_size > 1000
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
