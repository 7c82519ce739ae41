"""Shared fixture: a small binarized Multi30k En-De subset (1,000 training pairs, vocab 500), prepared once
per session with the data API, and a run config for tiny, fast training runs on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.config import RunConfig, build_run_config
from tests.conftest import multi30k_slice

TRAIN_PAIRS, VALID_PAIRS, VOCAB = 1000, 200, 500


@pytest.fixture(scope="session")
def m30k_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Binarized directory with splits train (1,000 pairs) and valid (200 pairs), raw text kept for valid."""
    return multi30k_slice(tmp_path_factory, "m30k", TRAIN_PAIRS, VALID_PAIRS, VOCAB)


def tiny_run(data_dir: Path, out_dir: Path, **train: object) -> RunConfig:
    """A 2-layer d_model=32 model with dropout on, shuffled batches of at most 512 tokens."""
    sets = [f"train.{key}={value}" for key, value in train.items()]
    document = {
        "model": {"preset": "tiny", "N": 2, "d_model": 32, "d_ff": 64, "h": 4, "d_k": 8, "d_v": 8, "P_drop": 0.1},
        "data": {"dir": str(data_dir), "max_tokens": 512},
        "train": {"out_dir": str(out_dir), "warmup": 50, "lr_scale": 2.0, "log_every": 1, "threads": 1,
                  "progress": False, "tensorboard": False, "bleu": False, "valid_every": 0},
    }  # fmt: skip
    return build_run_config(document, sets)
