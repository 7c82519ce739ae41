"""Shared fixtures: tiny configurations keep every model test well under a second."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aiayn.config import ModelConfig
from aiayn.data import prepare
from aiayn.data.download import resolve_data_dir

PAD = 0


def tiny_config(**overrides) -> ModelConfig:
    base = dict(src_vocab_size=37, tgt_vocab_size=37, N=2, d_model=32, d_ff=64, h=4, d_k=8, d_v=8, P_drop=0.0)
    base.update(overrides)
    return ModelConfig(**base)


def random_batch(batch: int, length: int, vocab: int, generator: torch.Generator, min_length: int = 1):
    """Random ids in [4, vocab) right-padded with 0 to `length`, each row at least `min_length` long."""
    tokens = torch.randint(4, vocab, (batch, length), generator=generator)
    lengths = torch.randint(min_length, length + 1, (batch,), generator=generator)
    lengths[0] = length  # at least one full row
    positions = torch.arange(length)[None, :]
    return tokens.masked_fill(positions >= lengths[:, None], PAD), lengths


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def multi30k_dir() -> Path:
    """The real Multi30k folder: $AIAYN_DATA_DIR, ../shared/data, or the shared folder beside this checkout."""
    folder = resolve_data_dir() / "multi30k"
    if not (folder / "train.en").is_file():  # run from elsewhere than the repository root
        folder = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"
    if not (folder / "train.en").is_file():
        pytest.skip("Multi30k not found; set AIAYN_DATA_DIR")
    return folder


def multi30k_slice(tmp_path_factory: pytest.TempPathFactory, name: str, train: int, valid: int, vocab: int) -> Path:
    """The first `train` / `valid` pairs of Multi30k En-De, binarized with a `vocab`-piece BPE (once per call)."""
    source = multi30k_dir()
    raw = tmp_path_factory.mktemp(f"{name}-raw")
    for split, split_name, n in (("train", "train", train), ("val", "valid", valid)):
        for lang in ("en", "de"):
            with (source / f"{split}.{lang}").open(encoding="utf-8") as handle:
                lines = "".join(next(handle) for _ in range(n))
            (raw / f"{split_name}.{lang}").write_text(lines, encoding="utf-8")
    out = tmp_path_factory.mktemp(f"{name}-bin") / "en-de"
    prepare("en", "de", raw / "train", raw / "valid", out, vocab, threads=1, progress=False, log=lambda _: None)
    return out
