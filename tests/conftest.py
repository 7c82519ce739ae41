"""Shared fixtures: tiny configurations keep every model test well under a second."""

from __future__ import annotations

import pytest
import torch

from aiayn.config import ModelConfig

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
