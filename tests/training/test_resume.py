"""Exact resume: `aiayn train` killed with SIGKILL right after a checkpoint and started again logs, update
for update, the same losses as an uninterrupted run (same seed, CPU, dropout on, shuffled batches)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aiayn.config import dump_run_config
from aiayn.training.metrics_log import read_metrics
from tests.training.conftest import tiny_run

UPDATES, SAVE_EVERY = 60, 20  # an epoch of the subset is ~30 updates: the runs cross epoch boundaries


def command(config: Path, out_dir: Path) -> list[str]:
    return [sys.executable, "-m", "aiayn", "train", str(config), "--set", f"train.out_dir={out_dir}"]


def run_to_end(config: Path, out_dir: Path) -> str:
    done = subprocess.run(command(config, out_dir), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr


def kill_after_first_checkpoint(config: Path, out_dir: Path, save_every: int) -> None:
    """Start `aiayn train`, SIGKILL it as soon as checkpoint `save_every` is in place."""
    process = subprocess.Popen(command(config, out_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (out_dir / f"checkpoint-{save_every:07d}").is_dir():  # renamed into place: complete
        assert process.poll() is None and time.monotonic() < deadline, "training ended before its first checkpoint"
        time.sleep(0.002)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def trace(run_dir: Path) -> list[tuple]:
    """(kind, step, epoch, loss, nll, lr) of every record: bit-for-bit floats, no timings."""
    keys = ("kind", "step", "epoch", "loss", "nll_loss", "lr")
    return [tuple(r.get(k) for k in keys) for r in read_metrics(run_dir) if r["kind"] in ("train", "valid")]


@pytest.mark.parametrize(
    "optimizer",
    ["adam", pytest.param("muon", marks=pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch < 2.9"))],
)
def test_sigkill_and_resume_gives_identical_losses(m30k_bin: Path, tmp_path: Path, optimizer: str) -> None:
    config = tmp_path / "tiny.yaml"
    run = tiny_run(
        m30k_bin, tmp_path / "unused", max_updates=UPDATES, save_every=SAVE_EVERY, valid_every=10, optimizer=optimizer
    )
    config.write_text(dump_run_config(run), encoding="utf-8")

    reference = tmp_path / "reference"
    run_to_end(config, reference)

    killed = tmp_path / "killed"
    kill_after_first_checkpoint(config, killed, SAVE_EVERY)
    assert not any(r["kind"] == "end" for r in read_metrics(killed)), "the run finished before the kill"

    log = run_to_end(config, killed)
    assert "resumed from" in log
    resumed_at = int(log.split("(update ")[1].split(")")[0])
    assert SAVE_EVERY <= resumed_at < UPDATES

    expected, got = trace(reference), trace(killed)
    assert len([t for t in expected if t[0] == "train"]) == UPDATES
    assert got == expected
    final = f"checkpoint-{UPDATES:07d}/model.safetensors"  # the header's metadata order varies; compare tensors
    a, b = load_file(killed / final), load_file(reference / final)
    assert a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)
