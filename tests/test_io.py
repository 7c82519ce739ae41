"""aiayn.io: atomic writes keep the old file on failure, the directory swap survives a kill, checksums match hashlib."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from aiayn import io


def test_atomic_writes_replace_whole_files(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    io.atomic_write_json(path, {"x": [1, 2]})
    assert json.loads(path.read_text()) == {"x": [1, 2]} and path.read_text().endswith("\n")
    io.atomic_write_text(path, "é\n")
    assert path.read_bytes() == "é\n".encode()
    io.atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]  # no temporary left behind
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()  # not mkstemp's private 0600


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_failure_mid_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails after part of the data reached the temporary file (here: fsync raising) leaves the old
    content and no temporary."""
    path = tmp_path / "state.txt"
    io.atomic_write_text(path, "old\n")

    def broken_fsync(fd: int) -> None:
        assert os.fstat(fd).st_size > 0  # the new bytes are in the temporary file when it fails
        raise OSError("disk full")

    monkeypatch.setattr(io.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        io.atomic_write_text(path, "new content\n")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.txt"]


def test_unserializable_json_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    io.atomic_write_json(path, {"ok": 1})
    with pytest.raises(TypeError):
        io.atomic_write_json(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"ok": 1}


@pytest.mark.parametrize("size", [0, 1, (1 << 22) + 7])  # empty, tiny, more than one read block
def test_sha256_matches_hashlib(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert io.sha256_file(path) == hashlib.sha256(data).hexdigest()


def make_dir(path: Path, content: str) -> Path:
    path.mkdir()
    (path / "file").write_text(content)
    return path


def test_swap_replaces_a_directory(tmp_path: Path) -> None:
    final = make_dir(tmp_path / "final", "old")
    io.swap_dir(make_dir(tmp_path / ".tmp", "new"), final)
    assert (final / "file").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final"]
    io.swap_dir(make_dir(tmp_path / ".tmp2", "first"), tmp_path / "fresh")  # nothing to replace
    assert (tmp_path / "fresh" / "file").read_text() == "first"


def test_kill_between_the_two_renames_is_recovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a kill right after `final -> old`: no `final` exists, only the old copy and the temporary.
    recover_swap puts the old copy back; a later swap then completes normally."""
    final = make_dir(tmp_path / "final", "old")
    tmp = make_dir(tmp_path / ".tmp", "new")
    real_replace = os.replace

    def killed_after_first_rename(src: str | Path, dst: str | Path) -> None:
        real_replace(src, dst)
        raise KeyboardInterrupt  # stands in for SIGKILL: nothing after the first rename runs

    monkeypatch.setattr(io.os, "replace", killed_after_first_rename)
    with pytest.raises(KeyboardInterrupt):
        io.swap_dir(tmp, final)
    monkeypatch.setattr(io.os, "replace", real_replace)
    assert not final.exists()
    (old,) = [p for p in tmp_path.iterdir() if p.name.startswith(".final.old-")]
    assert (old / "file").read_text() == "old"

    assert io.recover_swap(final) is True
    assert (final / "file").read_text() == "old"
    assert not old.exists()
    assert io.recover_swap(final) is False  # nothing left to recover
    io.swap_dir(tmp, final)
    assert (final / "file").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final"]


def test_recover_after_the_second_rename_removes_the_stale_copy(tmp_path: Path) -> None:
    """A kill after `tmp -> final` but before the old copy was removed: the new `final` stays, the old goes."""
    final = make_dir(tmp_path / "final", "new")
    make_dir(tmp_path / ".final.old-1234abcd", "old")
    assert io.recover_swap(final) is False
    assert (final / "file").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final"]


def test_swap_recovers_first_and_failed_rename_restores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """swap_dir itself recovers an interrupted swap before starting, and if renaming the new directory into
    place fails, the old one is put back."""
    final = tmp_path / "final"
    make_dir(tmp_path / ".final.old-00000000", "old")  # an earlier swap killed between its renames
    real_replace = os.replace
    calls: list[tuple[str, str]] = []

    def second_rename_fails(src: str | Path, dst: str | Path) -> None:
        calls.append((Path(src).name, Path(dst).name))
        if Path(src).name == ".tmp":
            raise OSError("rename failed")
        real_replace(src, dst)

    monkeypatch.setattr(io.os, "replace", second_rename_fails)
    with pytest.raises(OSError, match="rename failed"):
        io.swap_dir(make_dir(tmp_path / ".tmp", "new"), final)
    assert calls[0] == (".final.old-00000000", "final")  # recovery ran first
    assert (final / "file").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp", "final"]

