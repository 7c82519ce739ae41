"""Issue 12, class 2 (data loss by --force): `prepare --force` and `average --force` replace only a directory
the same command wrote (its marker: meta.json / config.json with "averaged_from"), never an unrelated folder,
the folder holding the input corpus, a run directory, a resumable checkpoint or a symbolic link."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aiayn.cli import main
from aiayn.data import prepare
from aiayn.model import Transformer
from aiayn.training import checkpoint as ckpt
from tests.conftest import multi30k_dir, tiny_config

QUIET = dict(threads=1, progress=False, log=lambda _: None)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """train/valid.{en,de}: 300 and 20 Multi30k lines, in a folder of their own."""
    root = tmp_path_factory.mktemp("corpus")
    for split, name, n in (("train", "train", 300), ("val", "valid", 20)):
        for lang in ("en", "de"):
            with (multi30k_dir() / f"{split}.{lang}").open(encoding="utf-8") as handle:
                (root / f"{name}.{lang}").write_text("".join(next(handle) for _ in range(n)), encoding="utf-8")
    return root


def prep(corpus: Path, out: Path, force: bool = False) -> dict:
    return prepare("en", "de", corpus / "train", corpus / "valid", out, 500, force=force, **QUIET)


def test_prepare_force_replaces_its_own_output_only(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "bin"
    prep(corpus, out)
    prep(corpus, out, force=True)  # its own directory: replaced
    assert (out / "meta.json").is_file()

    unrelated = tmp_path / "photos"
    unrelated.mkdir()
    (unrelated / "holiday.jpg").write_bytes(b"precious")
    with pytest.raises(FileExistsError, match="not written by this command"):
        prep(corpus, unrelated, force=True)
    assert (unrelated / "holiday.jpg").read_bytes() == b"precious"

    with pytest.raises(FileExistsError, match="not written by this command"):
        prep(corpus, corpus, force=True)  # the folder holding the input corpus
    assert (corpus / "train.en").is_file()

    link = tmp_path / "link"
    link.symlink_to(out)
    with pytest.raises(FileExistsError, match="symbolic link"):
        prep(corpus, link, force=True)
    assert (out / "meta.json").is_file()


def test_prepare_force_refuses_an_output_that_holds_its_input(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "bin"
    prep(corpus, out)
    (out / "raw").mkdir()
    for name in corpus.iterdir():
        (out / "raw" / name.name).write_bytes(name.read_bytes())
    with pytest.raises(FileExistsError, match="an input of this command"):
        prepare("en", "de", out / "raw" / "train", out / "raw" / "valid", out, 500, force=True, **QUIET)
    assert (out / "raw" / "train.en").is_file()


def test_average_force_replaces_only_an_earlier_average(tmp_path: Path) -> None:
    run = tmp_path / "run"
    torch.manual_seed(0)
    for step in (1, 2):
        state = dict.fromkeys(ckpt.STATE_KEYS, 0)
        ckpt.save_checkpoint(run, ckpt.checkpoint_name(step), Transformer(tiny_config()), {"step": step}, None, state)
    ckpt.save_checkpoint(run, ckpt.BEST_NAME, Transformer(tiny_config()), {"step": 2})
    (run / "config.yaml").write_text("train: {}\n")
    args = ["average", "--run", str(run), "--last", "2", "--force", "--out"]
    out = tmp_path / "avg"
    assert main([*args, str(out)]) == 0
    assert main([*args, str(out)]) == 0  # its own output: replaced
    for victim in (run, run / "checkpoint-0000002", run / ckpt.BEST_NAME, tmp_path):
        before = sorted(p.name for p in victim.iterdir())
        assert main([*args, str(victim)]) == 1
        assert sorted(p.name for p in victim.iterdir()) == before
    Transformer.from_pretrained(run / "checkpoint-0000002")  # resume's checkpoint is intact


def test_ids_outside_the_vocabulary_are_refused_naming_the_pair(corpus: Path, tmp_path: Path) -> None:
    import numpy as np

    from aiayn.data import CorpusError, ParallelDataset

    out = tmp_path / "bin"
    prep(corpus, out)
    ids = np.fromfile(out / "train.de.bin", dtype="<u2")
    offsets = np.fromfile(out / "train.de.idx", dtype="<i8")
    ids[offsets[6]] = 60000  # the first id of pair 7
    ids.tofile(out / "train.de.bin")
    with pytest.raises(CorpusError, match=r"train\.de\.bin: pair 7 holds id 60000, outside the vocabulary"):
        ParallelDataset(out, "train")
