"""The trainer end to end on a Multi30k subset: it learns, covers each pair once per epoch, writes a complete
run directory, and `aiayn average` / `aiayn train` work on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from aiayn.cli import main
from aiayn.config import build_run_config
from aiayn.data import ParallelDataset
from aiayn.model import Transformer
from aiayn.training.checkpoint import BEST_NAME, checkpoint_info, list_checkpoints
from aiayn.training.distributed import DistContext
from aiayn.training.metrics_log import read_metrics
from aiayn.training.run import train
from aiayn.training.validation import validation_loss
from tests.training.conftest import tiny_run


def initial_valid_loss(data_dir: Path, run) -> float:
    valid = ParallelDataset(data_dir, "valid")
    torch.manual_seed(run.train.seed)
    model = Transformer(run.model.with_overrides(src_vocab_size=valid.vocab_size, tgt_vocab_size=valid.vocab_size))
    return validation_loss(model, valid, run.data.max_tokens, run.model.eps_ls, 0, DistContext())["loss"]


def test_short_run_lowers_validation_loss(m30k_bin: Path, tmp_path: Path) -> None:
    run = tiny_run(m30k_bin, tmp_path / "run", max_updates=400, valid_every=100, save_every=200, lr_scale=1,
                   warmup=100, log_every=20)  # fmt: skip
    before = initial_valid_loss(m30k_bin, run)
    state = train(run)
    valid = [r["loss"] for r in read_metrics(tmp_path / "run", "valid")]
    assert state.step == 400 and len(valid) == 4
    assert valid[-1] < 0.7 * before, (before, valid)  # ~6.3 -> ~4.0 nats per token
    assert valid == sorted(valid, reverse=True)
    best = tmp_path / "run" / BEST_NAME
    assert checkpoint_info(best)["valid_loss"] == min(valid) == state.best_valid_loss


def test_one_epoch_covers_every_pair_once(m30k_bin: Path, tmp_path: Path) -> None:
    """Target tokens trained on in epoch 1 = all target tokens of the split (+1 EOS each), with accumulation."""
    run = tiny_run(m30k_bin, tmp_path / "run", max_epochs=1, update_freq=3)
    state = train(run)
    records = read_metrics(tmp_path / "run", "train")
    dataset = ParallelDataset(m30k_bin, "train")
    assert sum(r["tgt_tokens"] for r in records) == int(np.sum(dataset.tgt_lengths + 1))
    assert sum(r["src_tokens"] for r in records) == int(np.sum(dataset.src_lengths + 1))
    assert state.epoch == 2 and state.epoch_updates == 0
    assert [r["step"] for r in records] == list(range(1, state.step + 1))
    kinds = [r["kind"] for r in read_metrics(tmp_path / "run")]
    assert kinds[-2:] == ["valid", "end"] and kinds.count("valid") == 1  # epoch end, not repeated at the finish


def test_run_directory_cli_average_and_no_resume(m30k_bin: Path, tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    config = tmp_path / "run.yaml"
    document = tiny_run(m30k_bin, run_dir, max_updates=12, save_every=4, keep_last=2).to_dict()
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["train", str(config), "--set", "train.max_updates=8"]) == 0
    assert [p.name for p in list_checkpoints(run_dir)] == ["checkpoint-0000004", "checkpoint-0000008"]
    assert build_run_config(yaml.safe_load((run_dir / "config.yaml").read_text())).train.max_updates == 8
    assert main(["train", str(config)]) == 0  # resumes at 8, continues to 12
    assert "resumed from" in capsys.readouterr().err
    assert [p.name for p in list_checkpoints(run_dir)] == ["checkpoint-0000008", "checkpoint-0000012"]
    assert [r["step"] for r in read_metrics(run_dir, "train")] == list(range(1, 13))
    assert main(["train", str(config), "--no-resume"]) == 1
    assert "already has checkpoints" in capsys.readouterr().err

    assert main(["average", "--run", str(run_dir), "--last", "2", "--out", str(tmp_path / "avg")]) == 0
    averaged = Transformer.from_pretrained(tmp_path / "avg")
    a, b = (Transformer.from_pretrained(p) for p in list_checkpoints(run_dir))
    torch.testing.assert_close(averaged.src_embed.weight, (a.src_embed.weight + b.src_embed.weight) / 2)
    assert (tmp_path / "avg" / "tokenizer.model").is_file()


def test_changed_model_is_refused_on_resume(m30k_bin: Path, tmp_path: Path) -> None:
    train(tiny_run(m30k_bin, tmp_path / "run", max_updates=2, save_every=2))
    changed = build_run_config(tiny_run(m30k_bin, tmp_path / "run", max_updates=4).to_dict(), ["model.d_ff=32"])
    with pytest.raises(ValueError, match=r"different model \(model\.d_ff: 64 -> 32\)"):
        train(changed)


def test_a_limit_is_required(m30k_bin: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_updates, train.max_epochs, train.max_minutes"):
        train(tiny_run(m30k_bin, tmp_path / "run"))


def test_chunked_loss_trains_as_the_logits_path(m30k_bin: Path, tmp_path: Path, capsys) -> None:
    """train.loss_kernel chunked (the final linear and the loss a chunk of rows at a time, auto's choice in
    float32) against logits (projection, then the loss from the logits): the same seed gives the same losses
    per update and the same weights after 30 updates, to float32 rounding carried through Adam."""
    runs = {}
    for kernel in ("chunked", "logits"):
        run = tiny_run(m30k_bin, tmp_path / kernel, max_updates=30, save_every=0, loss_kernel=kernel)
        train(run)
        assert f"loss={kernel}" in capsys.readouterr().err
        losses = [r["loss"] for r in read_metrics(tmp_path / kernel, "train")]
        runs[kernel] = losses, Transformer.from_pretrained(tmp_path / kernel / BEST_NAME).state_dict()
    assert len(runs["chunked"][0]) == 30
    np.testing.assert_allclose(runs["chunked"][0], runs["logits"][0], rtol=1e-4)
    for name, weight in runs["logits"][1].items():
        if name.endswith("w_k.bias"):  # softmax is blind to it: its true gradient is 0, Adam scales up rounding
            continue
        torch.testing.assert_close(runs["chunked"][1][name], weight, rtol=1e-3, atol=1e-5, msg=name)
