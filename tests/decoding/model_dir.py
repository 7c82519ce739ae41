"""A model directory for translator and CLI tests: a sentencepiece model trained on a few hundred Multi30k
lines and a tiny random Transformer over its vocabulary (learned positions, max_positions=24, so a long line
is over-long)."""

from __future__ import annotations

import shutil
from pathlib import Path

from aiayn.data import TOKENIZER_FILENAME, Tokenizer
from tests.conftest import multi30k_dir
from tests.decoding.conftest import peaky_model

MAX_POSITIONS = 24  # learned positions: sources of at most 23 subwords + EOS




def build_model_dir(root: Path) -> Path:
    source = multi30k_dir()
    sample = root / "sample.txt"
    lines = []
    for lang in ("en", "de"):
        with (source / f"train.{lang}").open(encoding="utf-8") as handle:
            lines += [next(handle) for _ in range(300)]
    sample.write_text("".join(lines), encoding="utf-8")
    model_dir = root / "model"
    model_dir.mkdir()
    tokenizer = Tokenizer.train([sample], vocab_size=400, model_path=model_dir / TOKENIZER_FILENAME, threads=1)
    model = peaky_model(tokenizer.vocab_size, seed=3, eos_shift=3.0, positional="learned", max_positions=MAX_POSITIONS)
    model.save_pretrained(model_dir)
    return model_dir


def another_model_dir(model_dir: Path, root: Path, seed: int, **overrides) -> Path:
    """Another random model over model_dir's tokenizer (a copy of the file), at `root`."""
    root.mkdir()
    shutil.copyfile(model_dir / TOKENIZER_FILENAME, root / TOKENIZER_FILENAME)
    vocab = Tokenizer.from_file(root / TOKENIZER_FILENAME).vocab_size
    peaky_model(vocab, seed=seed, **overrides).save_pretrained(root)
    return root


def multi30k_test_sentences(count: int = 12) -> list[str]:
    with (multi30k_dir() / "test2016.en").open(encoding="utf-8") as handle:
        return [next(handle).rstrip("\n") for _ in range(count)]
