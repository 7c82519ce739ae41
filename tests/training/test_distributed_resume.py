"""Killing a 2-process `torchrun` run right after a checkpoint and starting it again continues it
exactly: the resumed run logs, update for update, the same losses (bit for bit) as an uninterrupted 2-process
run, and only rank 0 writes checkpoints, metrics and log lines. CPU, gloo, dropout on, shuffled batches.

Bit-identity is expected: the checkpoint holds every rank's RNG state, each rank replays its own shard of the
same epoch plan, and gloo's sum of two float32 gradients does not depend on the order of its operands.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from aiayn.config import dump_run_config
from aiayn.training.metrics_log import read_metrics
from tests.training.conftest import tiny_run

UPDATES, SAVE_EVERY = 24, 8  # 2 ranks: an epoch of the subset is ~15 updates, so the runs cross an epoch end
LAUNCH = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def command(config: Path, out_dir: Path) -> list[str]:
    return [*LAUNCH, "-m", "aiayn", "train", str(config), "--set", f"train.out_dir={out_dir}"]


def run_to_end(config: Path, out_dir: Path) -> str:
    done = subprocess.run(command(config, out_dir), capture_output=True, text=True, timeout=120, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (torchrun starts its workers in sessions of their own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def trace(run_dir: Path) -> list[tuple]:
    """(kind, step, epoch, loss, nll, lr, tokens) of every record: bit-for-bit floats, no timings."""
    keys = ("kind", "step", "epoch", "loss", "nll_loss", "lr", "tgt_tokens")
    return [tuple(r.get(k) for k in keys) for r in read_metrics(run_dir) if r["kind"] in ("train", "valid")]


def test_two_process_sigkill_and_resume(m30k_bin: Path, tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    run = tiny_run(m30k_bin, tmp_path / "unused", max_updates=UPDATES, save_every=SAVE_EVERY, valid_every=4,
                   keep_last=10)  # fmt: skip
    config.write_text(dump_run_config(run), encoding="utf-8")

    reference = tmp_path / "reference"
    run_to_end(config, reference)

    killed = tmp_path / "killed"
    launcher = subprocess.Popen(command(config, killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=ENV, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not (killed / f"checkpoint-{SAVE_EVERY:07d}").is_dir():  # renamed into place: complete
        assert launcher.poll() is None and time.monotonic() < deadline, "training ended before its first checkpoint"
        time.sleep(0.002)
    workers = children(launcher.pid)
    os.killpg(launcher.pid, signal.SIGKILL)  # the launcher (and anything left in its group) ...
    for pid in workers:  # ... and both ranks, which torchrun starts in new sessions
        os.kill(pid, signal.SIGKILL)
    launcher.wait()
    assert len(workers) == 2
    assert not any(r["kind"] == "end" for r in read_metrics(killed)), "the run finished before the kill"

    log = run_to_end(config, killed)
    assert log.count("resumed from") == 1, log[-3000:]  # rank 0 alone says it
    resumed_at = int(log.split("(update ")[1].split(")")[0])
    assert SAVE_EVERY <= resumed_at < UPDATES

    expected, got = trace(reference), trace(killed)
    assert [t[1] for t in expected if t[0] == "train"] == list(range(1, UPDATES + 1))  # each step logged once
    assert got == expected
    for run_dir in (reference, killed):  # one writer: one end record, no temporaries, the expected checkpoints
        assert [r["step"] for r in read_metrics(run_dir, "end")] == [UPDATES]
        names = sorted(p.name for p in run_dir.iterdir())
        numbered = [f"checkpoint-{s:07d}" for s in range(SAVE_EVERY, UPDATES + 1, SAVE_EVERY)]
        assert names == sorted(["config.yaml", "metrics.jsonl", "checkpoint-best", *numbered]), names
    final = f"checkpoint-{UPDATES:07d}/model.safetensors"
    a, b = load_file(killed / final), load_file(reference / final)
    assert a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)
