"""Shared fixtures: a small binarized slice of Multi30k (300 training pairs, 40 validation pairs, vocab 500),
prepared once per session, and a tiny run config on it (2 layers, d_model 32) for sweeps of tens of updates."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.config import build_run_config, dump_run_config
from tests.conftest import multi30k_slice

TRAIN_PAIRS, VALID_PAIRS, VOCAB = 300, 40, 500


@pytest.fixture(scope="session")
def ablate_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return multi30k_slice(tmp_path_factory, "ablate", TRAIN_PAIRS, VALID_PAIRS, VOCAB)


@pytest.fixture(scope="session")
def tiny_config(ablate_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A YAML run config: dropout on, shuffled 512-token batches, a checkpoint every 4 updates, one thread."""
    document = {
        "model": {"preset": "tiny", "N": 2, "d_model": 32, "d_ff": 64, "h": 4, "d_k": 8, "d_v": 8, "P_drop": 0.1},
        "data": {"dir": str(ablate_data), "max_tokens": 512},
        "train": {"out_dir": "unused", "warmup": 10, "lr_scale": 2.0, "log_every": 4, "threads": 1,
                  "progress": False, "tensorboard": False, "valid_every": 0, "save_every": 4, "keep_last": 2},
        "decode": {"max_len_b": 10},
    }  # fmt: skip
    path = tmp_path_factory.mktemp("ablate-config") / "tiny.yaml"
    path.write_text(dump_run_config(build_run_config(document)), encoding="utf-8")
    return path
