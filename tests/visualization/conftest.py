"""A tiny trained-format model directory (config.json, model.safetensors, tokenizer.model) for the figure tests.

The sentencepiece model is trained on a few hundred real Multi30k lines; the Transformer is random (tiny
config), which is all the figures need: they must show whatever weights the model computes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aiayn.data.tokenizer import TOKENIZER_FILENAME, Tokenizer
from aiayn.model import Transformer
from tests.conftest import multi30k_dir, tiny_config

SOURCE = "A man in an orange hat starring at something."
TARGET = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."




@pytest.fixture(scope="session")
def tokenizer_file(tmp_path_factory) -> Path:
    folder = multi30k_dir()
    work = tmp_path_factory.mktemp("spm")
    files = []
    for lang in ("en", "de"):
        with (folder / f"train.{lang}").open(encoding="utf-8") as handle:
            lines = [next(handle) for _ in range(300)]
        path = work / f"train.{lang}"
        path.write_text("".join(lines), encoding="utf-8")
        files.append(path)
    Tokenizer.train(files, vocab_size=600, model_path=work / TOKENIZER_FILENAME, threads=1)
    return work / TOKENIZER_FILENAME


def make_model_dir(root: Path, tokenizer_file: Path, **overrides) -> Path:
    vocab = Tokenizer.from_file(tokenizer_file).vocab_size
    torch.manual_seed(0)
    model = Transformer(tiny_config(src_vocab_size=vocab, tgt_vocab_size=vocab, **overrides))
    model.save_pretrained(root)
    (root / TOKENIZER_FILENAME).write_bytes(tokenizer_file.read_bytes())
    return root


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, tokenizer_file: Path) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("model"), tokenizer_file)


@pytest.fixture(scope="session")
def prenorm_model_dir(tmp_path_factory, tokenizer_file: Path) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("model_prenorm"), tokenizer_file, norm_first=True, N_dec=3)
