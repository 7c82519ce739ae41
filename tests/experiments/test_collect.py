"""`aiayn ablate --collect`: a sweep divided by --rows (base + D-ls0.0 on one "machine", base + E-learned on another)
and merged gives the same table as the undivided sweep (16 updates per run, compared exactly)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from aiayn.cli import main


def sweep(config: Path, rows: str, out: Path) -> None:
    argv = ["ablate", str(config), "--rows", rows, "--updates", "16", "--seeds", "3", "--out", str(out)]
    done = subprocess.run([sys.executable, "-m", "aiayn", *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def table(out: Path) -> dict:
    return json.loads((out / "table.json").read_text(encoding="utf-8"))


def test_collect_of_two_halves_equals_the_full_sweep(tiny_config: Path, tmp_path: Path) -> None:
    sweep(tiny_config, "D-ls0.0,E", tmp_path / "full")
    sweep(tiny_config, "D-ls0.0", tmp_path / "half1")
    sweep(tiny_config, "E-learned", tmp_path / "half2")
    merged = tmp_path / "merged"
    assert main(["ablate", "--collect", str(tmp_path / "half1"), str(tmp_path / "half2"), "--out", str(merged)]) == 0
    assert table(merged) == table(tmp_path / "full")
    assert [row["id"] for row in table(merged)["rows"]] == ["base", "D-ls0.0", "E-learned"]
    assert table(merged)["seeds"] == [3] and (merged / "ablation.png").is_file()
    assert sorted(p.name for p in (merged / "results").iterdir()) == ["D-ls0.0-s3.json", "E-learned-s3.json",
                                                                     "base-s3.json"]  # fmt: skip
    assert (merged / "table.md").read_text() == (tmp_path / "full" / "table.md").read_text()
