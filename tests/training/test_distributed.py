"""torchrun hooks on CPU with gloo: 2 processes x 1 micro-batch = 1 process x 2 micro-batches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from aiayn.config import build_run_config, dump_run_config
from aiayn.model import Transformer
from aiayn.training.distributed import DistContext, init_distributed, no_sync
from aiayn.training.metrics_log import read_metrics
from tests.training.conftest import tiny_run


def test_single_process_needs_no_process_group(monkeypatch) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    ctx = init_distributed("cpu")
    assert ctx == DistContext() and ctx.is_main and not ctx.distributed
    assert not torch.distributed.is_initialized()
    with no_sync(torch.nn.Linear(2, 2), skip_sync=True):  # no DDP: a no-op
        pass


def test_two_ranks_equal_one_rank_accumulating(m30k_bin: Path, tmp_path: Path) -> None:
    run = tiny_run(m30k_bin, tmp_path / "unused", max_updates=6, save_every=3, valid_every=3)
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(build_run_config(run.to_dict(), ["model.P_drop=0"])), encoding="utf-8")
    train = ["-m", "aiayn", "train", str(config), "--set"]
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    commands = [
        [*launch, *train, f"train.out_dir={tmp_path / 'two'}"],  # 2 ranks, 1 micro-batch each per update
        [sys.executable, *train, f"train.out_dir={tmp_path / 'one'}", "--set", "train.update_freq=2"],
    ]
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
    a = Transformer.from_pretrained(tmp_path / "two" / "checkpoint-0000006").state_dict()
    b = Transformer.from_pretrained(tmp_path / "one" / "checkpoint-0000006").state_dict()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)
    losses = [[(r["step"], r["loss"], r["tgt_tokens"]) for r in read_metrics(tmp_path / run, "train")]
              for run in ("two", "one")]  # fmt: skip
    assert [step for step, *_ in losses[0]] == list(range(1, 7))
    for (s1, l1, t1), (s2, l2, t2) in zip(*losses):
        assert (s1, t1) == (s2, t2) and abs(l1 - l2) < 1e-5
