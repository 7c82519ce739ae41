"""Issue 12, class 6 (divergence): a non-finite loss skips its update and is logged; `train.max_bad_updates`
in a row stop the run with an explanation and the last good checkpoint kept (none written after it); resuming
on re-prepared data (another tokenizer or meta.json) is refused unless `train.allow_data_change`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from aiayn.model import Transformer
from aiayn.training import trainer as trainer_module
from aiayn.training.checkpoint import latest_checkpoint, list_checkpoints
from aiayn.training.metrics_log import read_metrics
from aiayn.training.run import train
from tests.training.conftest import tiny_run


def test_non_finite_losses_are_skipped_then_stop_the_run(m30k_bin: Path, tmp_path: Path, monkeypatch) -> None:
    real = trainer_module.label_smoothed_nll_loss
    calls = [0]
    bad = {3} | set(range(8, 100))  # update 3 alone (skipped, then training goes on), then 8, 9, 10: stop

    def poisoned(*args, **kwargs):
        calls[0] += 1
        loss, nll = real(*args, **kwargs)
        return (loss * float("nan"), nll) if calls[0] in bad else (loss, nll)

    monkeypatch.setattr(trainer_module, "label_smoothed_nll_loss", poisoned)
    run = tiny_run(m30k_bin, tmp_path / "run", max_updates=20, save_every=5, max_bad_updates=3)
    with pytest.raises(trainer_module.TrainingDiverged, match=r"3 updates in a row .* the last at update 10"):
        train(run)
    skipped = [r["step"] for r in read_metrics(tmp_path / "run") if r["kind"] == "skipped"]
    assert skipped == [3, 8, 9, 10]
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["checkpoint-0000005"]
    model = Transformer.from_pretrained(latest_checkpoint(tmp_path / "run"))
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_resume_refuses_other_data_unless_allowed(m30k_bin: Path, tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    shutil.copytree(m30k_bin, data)
    train(tiny_run(data, tmp_path / "run", max_updates=4, save_every=4))
    meta = json.loads((data / "meta.json").read_text())
    (data / "meta.json").write_text(json.dumps({**meta, "note": "re-prepared"}))  # same size, other data
    with pytest.raises(ValueError, match=r"trained on other data: the meta of .*train\.allow_data_change"):
        train(tiny_run(data, tmp_path / "run", max_updates=8, save_every=4))
    state = train(tiny_run(data, tmp_path / "run", max_updates=8, save_every=4, allow_data_change=True))
    assert state.step == 8 and "resuming anyway" in capsys.readouterr().err
