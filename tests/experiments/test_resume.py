"""`aiayn ablate` end to end through the real CLI: a sweep of two tiny rows (base and D-ls0.0, 24 updates each),
killed with SIGKILL while its second run trains and started again, ends with the same results and table as an
uninterrupted sweep in another directory (deterministic with --updates: compared exactly)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from aiayn.training.checkpoint import checkpoint_name

UPDATES, SAVE_EVERY = 24, 4  # tiny_config checkpoints every 4 updates


def command(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "aiayn", "ablate", str(config), "--rows", "D-ls0.0", "--updates", str(UPDATES),
            "--out", str(out)]  # fmt: skip


def run_to_end(config: Path, out: Path) -> str:
    done = subprocess.run(command(config, out), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


def results(out: Path) -> dict[str, dict]:
    """Every run's result without its wall time (the one value two identical runs do not share)."""
    loaded = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "results").glob("*.json"))}
    for result in loaded.values():
        result.pop("train_seconds")
    return loaded


def test_killed_sweep_resumes_to_the_same_table(tiny_config: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    run_to_end(tiny_config, reference)

    killed = tmp_path / "killed"
    process = subprocess.Popen(command(tiny_config, killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = killed / "runs" / "D-ls0.0-s1"
    deadline = time.monotonic() + 300
    while not (second / checkpoint_name(SAVE_EVERY)).is_dir():  # renamed into place: complete
        assert process.poll() is None and time.monotonic() < deadline, "the sweep ended before the kill"
        time.sleep(0.002)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (killed / "results" / "base-s1.json").is_file(), "the first run had finished"
    assert not (killed / "results" / "D-ls0.0-s1.json").exists(), "the second run finished before the kill"

    log = run_to_end(tiny_config, killed)
    assert "base-s1: done already" in log and "resumed from" in log
    assert results(killed) == results(reference) and len(results(reference)) == 2
    table = json.loads((killed / "table.json").read_text(encoding="utf-8"))
    assert table == json.loads((reference / "table.json").read_text(encoding="utf-8"))
    assert (killed / "table.md").read_text() == (reference / "table.md").read_text()
    assert [row["id"] for row in table["rows"]] == ["base", "D-ls0.0"] and (killed / "ablation.png").stat().st_size
    assert all(row["updates"] == [UPDATES] for row in table["rows"])
    assert table["rows"][1]["values"] == "eps_ls=0.0" and table["rows"][1]["paper"]["ppl"] == 4.67
    assert table["rows"][1]["delta"]["ppl"]["mean"] == table["rows"][1]["ppl"]["mean"] - table["rows"][0]["ppl"]["mean"]
