"""Tiny random "peaky" models (scaled output logits, so searches are not decided by near-ties) and sources."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aiayn.config import ModelConfig
from aiayn.model import Transformer


def peaky_model(vocab: int = 12, seed: int = 0, scale: float = 3.0, eos_shift: float = 0.0, **overrides) -> Transformer:
    """A random tiny Transformer whose output logits have std ~= `scale`, plus `eos_shift` on EOS's logit.

    The output matrix is untied, so scaling it leaves the input embeddings alone. The EOS shift goes through the
    bias of the last LayerNorm (a constant added to every final hidden state) along EOS's output row: random
    models otherwise tend to repeat one token until the length limit.
    """
    fields = dict(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        N=2,
        d_model=16,
        d_ff=32,
        h=2,
        d_k=8,
        d_v=8,
        P_drop=0.0,
        tie_output=False,
    )
    fields.update(overrides)
    torch.manual_seed(seed)
    model = Transformer(ModelConfig(**fields)).eval()
    with torch.no_grad():
        weight = model.output_weight()
        weight.mul_(scale)  # rows of std d_model^-0.5 against unit-scale hidden states: logits of std ~ scale
        eos_row = weight[model.config.eos_id]
        model.decoder.layers[-1].feed_forward_residual.norm.bias.add_(eos_shift * eos_row / eos_row.norm() ** 2)
    return model


def random_sources(batch: int, max_len: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """[B,S] rows of 1..max_len random ids in [4, vocab) + EOS, right-padded with PAD; lengths differ."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (batch,), generator=generator)
    lengths[0] = max_len
    src = torch.zeros(batch, max_len + 1, dtype=torch.long)
    for row, n in enumerate(lengths.tolist()):
        src[row, :n] = torch.randint(4, vocab, (n,), generator=generator)
        src[row, n] = 2
    return src


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    from tests.decoding.model_dir import build_model_dir

    return build_model_dir(tmp_path_factory.mktemp("decoding"))


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models gain nothing from threads, and on a shared machine every parallel op of a 2-thread run
    can stall for a scheduler slice; restored afterwards for other test directories."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
