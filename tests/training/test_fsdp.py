"""`train.fsdp` on CPU with gloo, 2 processes: FSDP2 trains the same parameters as DDP (float32
tolerance: reduce-scatter and all-reduce sum in different orders), writes checkpoints in the model directory
format, and a run stopped at a checkpoint and resumed (full optimizer state re-sharded) continues exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from aiayn.config import dump_run_config
from aiayn.model import Transformer
from aiayn.training.metrics_log import read_metrics
from tests.training.conftest import tiny_run

LAUNCH = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def train(config: Path, out_dir: Path, *sets: str) -> str:
    command = [*LAUNCH, "-m", "aiayn", "train", str(config), "--set", f"train.out_dir={out_dir}", *sets]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return Transformer.from_pretrained(checkpoint).state_dict()  # the model directory format, verified


def test_fsdp_matches_ddp_and_resumes(m30k_bin: Path, tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    run = tiny_run(m30k_bin, tmp_path / "unused", max_updates=6, save_every=3, valid_every=3, clip_norm=1.0,
                   precision="fp32")  # the reductions agree to float32 rounding; bf16 (auto on AMX) is coarser
    config.write_text(dump_run_config(run), encoding="utf-8")
    fsdp = "train.fsdp=true"
    train(config, tmp_path / "ddp", "--set", "train.linear_kernel=torch")  # FSDP runs torch's kernels too
    train(config, tmp_path / "fsdp", "--set", fsdp)
    train(config, tmp_path / "resumed", "--set", fsdp, "--set", "train.max_updates=3")
    log = train(config, tmp_path / "resumed", "--set", fsdp)
    assert log.count("resumed from") == 1 and "(update 3)" in log

    ddp, sharded = weights(tmp_path / "ddp" / "checkpoint-0000006"), weights(tmp_path / "fsdp" / "checkpoint-0000006")
    start = weights(tmp_path / "fsdp" / "checkpoint-0000003")
    assert any(not torch.equal(sharded[name], start[name]) for name in sharded)  # it trained
    # The key bias b^K adds q.b^K to every score of a query, which the softmax ignores: its gradient is rounding
    # noise (exactly zero in exact arithmetic), which Adam scales up to lr-sized steps, so ulp-level differences
    # between DDP's and FSDP's reductions show there and nowhere else. The function is compared on the rest.
    for name in (n for n in ddp if not n.endswith("w_k.bias")):
        torch.testing.assert_close(sharded[name], ddp[name], rtol=1e-5, atol=1e-6, msg=name)
    ddp_losses = [r["loss"] for r in read_metrics(tmp_path / "ddp", "train")]
    fsdp_losses = [r["loss"] for r in read_metrics(tmp_path / "fsdp", "train")]
    assert len(fsdp_losses) == 6 and all(abs(a - b) < 1e-5 for a, b in zip(ddp_losses, fsdp_losses, strict=True))

    resumed = weights(tmp_path / "resumed" / "checkpoint-0000006")
    assert all(torch.equal(resumed[name], sharded[name]) for name in sharded)
    keys = ("kind", "step", "loss", "nll_loss", "lr")
    trace = [[tuple(r.get(k) for k in keys) for r in read_metrics(tmp_path / d) if r["kind"] in ("train", "valid")]
             for d in ("fsdp", "resumed")]  # fmt: skip
    assert trace[0] == trace[1]
