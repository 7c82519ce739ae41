"""Issue 12, class 6 (divergence): a non-finite loss skips its update and is logged; `train.max_bad_updates`
in a row stop the run with an explanation and the last good checkpoint kept (none written after it); resuming
on re-prepared data (another tokenizer or meta.json) is refused unless `train.allow_data_change`; the same data
prepared from a corpus in another directory is the same data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from aiayn.data import ParallelDataset
from aiayn.io import sha256_file
from aiayn.model import Transformer
from aiayn.training import trainer as trainer_module
from aiayn.training.checkpoint import latest_checkpoint, list_checkpoints
from aiayn.training.metrics_log import read_metrics
from aiayn.training.run import train
from aiayn.training.trainer import data_fingerprint
from tests.conftest import multi30k_slice
from tests.training.conftest import TRAIN_PAIRS, VALID_PAIRS, VOCAB, tiny_run


def test_non_finite_losses_are_skipped_then_stop_the_run(m30k_bin: Path, tmp_path: Path, monkeypatch) -> None:
    calls = [0]
    bad = {3} | set(range(8, 100))  # update 3 alone (skipped, then training goes on), then 8, 9, 10: stop

    def poison(real):
        def poisoned(*args, **kwargs):
            calls[0] += 1
            loss, nll = real(*args, **kwargs)
            return (loss * float("nan"), nll) if calls[0] in bad else (loss, nll)

        return poisoned

    monkeypatch.setattr(trainer_module, "transduction_loss", poison(trainer_module.transduction_loss))
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


def test_the_same_corpus_prepared_from_another_directory_resumes(m30k_bin: Path, tmp_path_factory, tmp_path) -> None:
    """A corpus moved (another machine, another mount) and prepared again: same fingerprint, the run resumes."""
    moved = multi30k_slice(tmp_path_factory, "m30k-moved", TRAIN_PAIRS, VALID_PAIRS, VOCAB)
    assert json.loads((moved / "meta.json").read_text())["splits"]["train"]["prefix"] != \
        json.loads((m30k_bin / "meta.json").read_text())["splits"]["train"]["prefix"]
    assert data_fingerprint(ParallelDataset(moved, "train")) == data_fingerprint(ParallelDataset(m30k_bin, "train"))
    train(tiny_run(m30k_bin, tmp_path / "run", max_updates=4, save_every=4))
    assert train(tiny_run(moved, tmp_path / "run", max_updates=8, save_every=4)).step == 8


def _write_legacy_data_hash(run: Path, tokenizer: Path, meta_sha256: str) -> None:
    """Rewrite the newest checkpoint's data fingerprint as versions before the portable one wrote it (the whole
    meta.json's hash), with the checksum config.json records for the state file updated to match."""
    checkpoint = latest_checkpoint(run)
    state_file = checkpoint / "training_state.pt"
    state = torch.load(state_file, weights_only=True)
    state["data"] = {"tokenizer_sha256": sha256_file(tokenizer), "meta_sha256": meta_sha256}
    torch.save(state, state_file)
    config = json.loads((checkpoint / "config.json").read_text())
    config["checkpoint"]["training_state"] = {"sha256": sha256_file(state_file), "bytes": state_file.stat().st_size}
    (checkpoint / "config.json").write_text(json.dumps(config))


def test_checkpoints_with_the_whole_meta_hash_are_still_checked(m30k_bin: Path, tmp_path: Path) -> None:
    """Older checkpoints hold `meta_sha256` of the whole file: the same file resumes, another one is refused."""
    data = tmp_path / "data"
    shutil.copytree(m30k_bin, data)
    train(tiny_run(data, tmp_path / "run", max_updates=4, save_every=4))
    _write_legacy_data_hash(tmp_path / "run", data / "tokenizer.model", sha256_file(data / "meta.json"))
    assert train(tiny_run(data, tmp_path / "run", max_updates=8, save_every=4)).step == 8
    _write_legacy_data_hash(tmp_path / "run", data / "tokenizer.model", "0" * 64)
    with pytest.raises(ValueError, match=r"trained on other data: the meta of "):
        train(tiny_run(data, tmp_path / "run", max_updates=12, save_every=4))
