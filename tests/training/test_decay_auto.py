"""train.decay_updates: auto on a real clock: the linear decay is redrawn at each validation to reach 0 where
train.max_minutes ends, without a jump in the rate, and a resumed run continues on the line its checkpoint holds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aiayn.training.checkpoint import list_checkpoints, load_training_state
from aiayn.training.metrics_log import read_metrics
from aiayn.training.run import train
from aiayn.training.schedule import DecayLine, inverse_sqrt_lr
from tests.training.conftest import tiny_run

WARMUP = 20


def budget_run(data: Path, out: Path, minutes: float):
    return tiny_run(data, out, lr_decay="linear", decay_updates="auto", max_minutes=minutes, warmup=WARMUP,
                    save_every=10, keep_last=100)  # fmt: skip


def test_the_rate_follows_redrawn_lines_to_about_zero_at_the_time_budget(m30k_bin: Path, tmp_path: Path) -> None:
    state = train(budget_run(m30k_bin, tmp_path / "run", minutes=0.2))
    records = read_metrics(tmp_path / "run")
    lr = {r["step"]: r["lr"] for r in records if r["kind"] == "train"}  # the rate each update ran at
    redraws = [r for r in records if r["kind"] == "decay"]
    peak = inverse_sqrt_lr(WARMUP, 32, WARMUP, 2.0)
    assert len(redraws) >= 3 and max(lr.values()) == pytest.approx(peak, rel=1e-12)
    for r in redraws:  # update k ran on the old line at factor f; update k + 1 is on the new line to `end`
        k, end, f = r["step"], r["end"], r["factor"]
        assert end > k
        if k > WARMUP:
            assert lr[k] == pytest.approx(peak * f, rel=1e-9)
        if k + 1 in lr:
            assert lr[k + 1] == pytest.approx(peak * f * (end - k - 1) / (end - k), rel=1e-9, abs=1e-15)
    after = [lr[k] for k in sorted(lr) if k >= WARMUP]
    assert all(a >= b for a, b in zip(after, after[1:]))  # never up again after the peak
    assert lr[state.step] <= 0.25 * peak  # annealed when the budget stopped the run (the line ends there)


def test_a_resumed_run_continues_on_its_checkpoints_line(m30k_bin: Path, tmp_path: Path) -> None:
    train(budget_run(m30k_bin, tmp_path / "run", minutes=0.15))
    checkpoints = list_checkpoints(tmp_path / "run")
    middle = next(c for c in checkpoints[len(checkpoints) // 2 :] if load_training_state(c)["step"] > WARMUP)
    saved = load_training_state(middle)
    line, step = DecayLine(**saved["decay_line"]), saved["step"]
    assert line.end > 0
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "run", copy)
    for later in list_checkpoints(copy):
        if load_training_state(later)["step"] > step:
            shutil.rmtree(later)
    train(budget_run(m30k_bin, copy, minutes=0.15))  # the same budget: its clock resumes at the checkpoint's
    lr = {r["step"]: r["lr"] for r in read_metrics(copy, "train")}
    assert lr[step + 1] == pytest.approx(inverse_sqrt_lr(WARMUP, 32, WARMUP, 2.0) * line.factor(step + 1), rel=1e-9)
