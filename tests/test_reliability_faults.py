"""Issue 12, class 5 (crash windows) and full disks: every writer (checkpoint, prepare, average) killed at each
rename and each fsync (before and after it), in a forked process that then `os._exit`s, as SIGKILL would,
without running any cleanup; then the previous good state must load (after the recovery the next start runs),
and the next run must succeed and leave no temporary directory. A full disk is an ENOSPC injected into each
writer's fsync: the writer fails with one clear error and the previous state is untouched."""

from __future__ import annotations

import errno
import multiprocessing
import os
from pathlib import Path

import pytest
import torch

from aiayn.data import ParallelDataset, prepare
from aiayn.io import recover_swap
from aiayn.model import Transformer
from aiayn.training import checkpoint as ckpt
from tests.conftest import multi30k_dir, tiny_config

KILLED = 137
HOOKED = ("replace", "rename", "fsync")


def _hook(k: int, after: bool, record: str | None) -> None:
    """Make the k-th call of os.replace/rename/fsync end the process, before or after it acts (k=0: never;
    `record`: append each call's name to that file)."""
    calls = [0]
    for name in HOOKED:
        real = getattr(os, name)

        def wrapped(*args, _real=real, _name=name, **kwargs):
            calls[0] += 1
            if record:
                with open(record, "a") as handle:
                    handle.write(_name + "\n")
            if calls[0] == k and not after:
                os._exit(KILLED)
            result = _real(*args, **kwargs)
            if calls[0] == k and after:
                os._exit(KILLED)
            return result

        setattr(os, name, wrapped)


def _write(kind: str, root: str, k: int, after: bool, record: str | None = None) -> None:
    torch.set_num_threads(1)
    root_path = Path(root)
    _hook(k, after, record)
    if kind == "checkpoint":
        torch.manual_seed(2)
        state = dict.fromkeys(ckpt.STATE_KEYS, 0)
        ckpt.save_checkpoint(root_path / "run", ckpt.BEST_NAME, Transformer(tiny_config()), {"step": 2}, None, state)
    elif kind == "prepare":
        corpus = root_path / "corpus"
        prepare("en", "de", corpus / "train", corpus / "valid", root_path / "bin", 500, force=True, threads=1,
                progress=False, log=lambda _: None)  # fmt: skip
    else:
        ckpt.write_average(ckpt.list_checkpoints(root_path / "run"), root_path / "avg")
    os._exit(0)


_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload([__name__])  # the server imports torch and aiayn once; each writer is a fork


def _run_killed(kind: str, root: Path, k: int, after: bool, record: Path | None = None) -> int:
    context = _CONTEXT
    process = context.Process(target=_write, args=(kind, str(root), k, after, record and str(record)))
    process.start()
    process.join(120)
    return process.exitcode


def _state_ok(kind: str, root: Path) -> None:
    """The previous (or the new) good state loads, after the recovery a next start performs."""
    if kind == "checkpoint":
        ckpt.clean_temporaries(root / "run")
        Transformer.from_pretrained(root / "run" / ckpt.BEST_NAME)
        leftovers = [p.name for p in (root / "run").iterdir() if p.name.startswith(".")]
    elif kind == "prepare":
        recover_swap(root / "bin")
        ParallelDataset(root / "bin", "train")
        leftovers = []  # a killed prepare's temporary directory is removed by the next prepare (checked below)
    else:
        recover_swap(root / "avg")
        Transformer.from_pretrained(root / "avg")
        leftovers = [p.name for p in root.iterdir() if p.name.startswith(".avg.old-")]
    assert leftovers == [], leftovers


def kill_points(kind: str, root: Path) -> list[tuple[int, bool]]:
    """(k, after) for a dry run's call sequence: before and after every rename, and the fsync right before each
    rename (any kill between two renames is one of these; earlier fsyncs only flush the temporary copy)."""
    record = root / f"calls-{kind}.txt"
    record.unlink(missing_ok=True)
    assert _run_killed(kind, root, 0, False, record) == 0
    calls = record.read_text().split()
    points = []
    for k, name in enumerate(calls, start=1):
        nxt = calls[k] if k < len(calls) else None
        if name in ("replace", "rename") or k == 1 or (name == "fsync" and nxt in ("replace", "rename")):
            points += [(k, False), (k, True)]
    return points


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("faults")
    (root / "corpus").mkdir()
    for split, name, n in (("train", "train", 300), ("val", "valid", 10)):
        for lang in ("en", "de"):
            with (multi30k_dir() / f"{split}.{lang}").open(encoding="utf-8") as handle:
                text = "".join(next(handle) for _ in range(n))
            (root / "corpus" / f"{name}.{lang}").write_text(text, encoding="utf-8")
    for kind in ("checkpoint", "prepare"):
        assert _run_killed(kind, root, 0, False) == 0
    for step in (1, 2):
        torch.manual_seed(step)
        state = dict.fromkeys(ckpt.STATE_KEYS, 0)
        ckpt.save_checkpoint(root / "run", ckpt.checkpoint_name(step), Transformer(tiny_config()), {}, None, state)
    assert _run_killed("average", root, 0, False) == 0
    return root


KILLS: dict[str, int] = {}  # kind -> kill points tried (docs/RELIABILITY.md quotes them)


@pytest.mark.parametrize("kind", ["checkpoint", "prepare", "average"])
def test_a_kill_at_every_rename_and_fsync_never_loses_the_previous_state(root: Path, kind: str) -> None:
    points = kill_points(kind, root)
    assert len(points) >= 6, points
    for k, after in points:
        assert _run_killed(kind, root, k, after) == KILLED, (k, after)
        _state_ok(kind, root)
    KILLS[kind] = len(points)
    print(f"{kind}: {len(points)} kill points, previous state loadable after each")
    assert _run_killed(kind, root, 0, False) == 0  # the next run succeeds
    _state_ok(kind, root)
    temporaries = {"checkpoint": (root / "run", ".tmp-"), "prepare": (root, ".bin.tmp-"), "average": (root, ".tmp-avg")}
    folder, prefix = temporaries[kind]
    assert [p.name for p in folder.iterdir() if p.name.startswith(prefix)] == []  # killed runs' temporaries


def _enospc_at(monkeypatch, k: int) -> None:
    calls = [0]
    real = os.fsync

    def full(fd):
        calls[0] += 1
        if calls[0] >= k:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", full)


@pytest.mark.parametrize("k", [1, 3])
def test_a_full_disk_fails_each_writer_cleanly(root: Path, tmp_path: Path, monkeypatch, k: int, capsys) -> None:
    from aiayn.cli import main

    before = (root / "run" / ckpt.BEST_NAME / "model.safetensors").read_bytes()
    _enospc_at(monkeypatch, k)
    with pytest.raises(OSError, match="No space left"):
        ckpt.save_checkpoint(root / "run", ckpt.BEST_NAME, Transformer(tiny_config()), {})
    with pytest.raises(OSError, match="No space left"):
        ckpt.write_average(ckpt.list_checkpoints(root / "run"), root / "avg")
    corpus = root / "corpus"
    args = ["prepare", "--src-lang", "en", "--tgt-lang", "de", "--train", str(corpus / "train"), "--valid",
            str(corpus / "valid"), "--vocab-size", "500", "--out", str(tmp_path / "bin"), "--quiet", "--threads", "1"]
    assert main(args) == 1
    message = capsys.readouterr().err.strip()
    assert message.count("\n") == 0 and "no space left" in message.lower(), message
    monkeypatch.undo()
    assert (root / "run" / ckpt.BEST_NAME / "model.safetensors").read_bytes() == before
    assert [p.name for p in (root / "run").iterdir() if p.name.startswith(".")] == []
    assert list(tmp_path.iterdir()) == []
    Transformer.from_pretrained(root / "avg")


def test_a_library_error_on_a_full_disk_is_reported_as_a_full_disk(root: Path, tmp_path: Path, monkeypatch) -> None:
    """sentencepiece writes its model itself: on a full disk it leaves a truncated file, read back as corrupt."""
    import importlib
    import shutil

    from aiayn.data.corpus import CorpusError

    prepare_module = importlib.import_module("aiayn.data.prepare")
    def corrupt(*args, **kwargs):
        raise CorpusError("tokenizer.model: not a sentencepiece model")

    monkeypatch.setattr(prepare_module.Tokenizer, "train", staticmethod(corrupt))
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 100, 100))
    corpus = root / "corpus"
    with pytest.raises(OSError, match="no space left"):
        prepare("en", "de", corpus / "train", corpus / "valid", tmp_path / "bin", 500, threads=1, progress=False,
                log=lambda _: None)  # fmt: skip
