"""File helpers every layer uses: atomic writes, SHA-256 checksums, and an atomic directory swap.

A file is written to a temporary file beside it, flushed and fsynced, renamed over the target, and the
directory is fsynced, so a reader (or a run killed at any moment) sees the old file or the new one, never half.

A directory is replaced in two renames, `final -> .final.old-X` then `tmp -> final`, and the old copy is
removed last. A kill between the two renames leaves no `final` but a complete old copy; `recover_swap(final)`,
called before the next swap (and by whoever starts next), puts it back. It never deletes the only copy.
This module imports nothing from aiayn, so every layer may use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_OLD = ".old-"  # marker in the name of a directory swapped out: .NAME.old-XXXXXXXX


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def readable(path: str | Path) -> None:
    """mkstemp creates files private (0600); give them the permissions any other new file would get."""
    os.chmod(path, 0o666 & ~_umask())


def fsync_file(path: str | Path) -> None:
    """Flush a file written by another library (safetensors, torch.save) to disk before it is renamed."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_dir(path: str | Path) -> None:
    """Make the renames inside directory `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over `path` (and fsync the dir)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        readable(tmp)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: str | Path, data: Any) -> None:
    """Indented JSON with a final newline, written atomically."""
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _old_copies(final: Path) -> list[Path]:
    """Copies of `final` swapped out by `swap_dir` and not yet removed, newest first."""
    prefix = f".{final.name}{_OLD}"
    found = [p for p in final.parent.iterdir() if p.name.startswith(prefix)] if final.parent.is_dir() else []
    return sorted(found, key=lambda p: p.lstat().st_mtime_ns, reverse=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def recover_swap(final: str | Path) -> bool:
    """Finish or undo a `swap_dir` that was killed: if `final` is missing, the newest old copy becomes `final`
    again; old copies beside an existing `final` are removed. Returns True when a copy was restored."""
    final = Path(final)
    olds = _old_copies(final)
    if not olds:
        return False
    restored = False
    if not final.exists() and not final.is_symlink():
        os.replace(olds.pop(0), final)
        fsync_dir(final.parent)
        restored = True
    for old in olds:  # `final` exists now, so none of these is the only copy
        _remove(old)
    return restored


def json_format(path: str | Path) -> str | None:
    """The "format" field of a small JSON file (the marker every aiayn-written directory holds), or None."""
    path = Path(path)
    try:
        if not path.is_file() or path.stat().st_size > 16 << 20:
            return None
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    found = document.get("format") if isinstance(document, dict) else None
    return found if isinstance(found, str) else None


def check_replaceable(
    out: str | Path, marker: str, fmt: str, inputs: Iterable[str | Path] = (), what: str = ""
) -> None:
    """Before `--force` replaces directory `out`: refuse (`FileExistsError`) unless it is a real directory (not a
    symbolic link) that an aiayn command wrote (`out/marker` holds `"format": fmt`) and that is neither one of
    `inputs` nor holds one of them (nor the working directory)."""
    out = Path(out)
    label = what or str(out)
    if out.is_symlink():
        raise FileExistsError(f"{label} is a symbolic link; --force replaces only directories aiayn wrote, not links")
    if not out.is_dir():
        raise FileExistsError(f"{label} exists and is not a directory; --force will not replace it")
    if json_format(out / marker) != fmt:
        raise FileExistsError(
            f"{label} was not written by this command (no {marker} with format {fmt!r}); --force will not delete it"
        )
    root = out.resolve()
    for path in [Path.cwd(), *map(Path, inputs)]:
        resolved = path.resolve()
        if resolved == root or root in resolved.parents:
            raise FileExistsError(f"{label} holds {path}, an input of this command; --force will not delete it")


def owned_prefix(prefix: str) -> str:
    """`prefix` + this process's pid + "-": the name start of a temporary directory `clean_stale_temporaries`
    can tell the owner of (`tempfile.mkdtemp(prefix=owned_prefix(".out.tmp-"))`)."""
    return f"{prefix}{os.getpid()}-"


def clean_stale_temporaries(parent: str | Path, prefix: str) -> list[Path]:
    """Remove directories `parent/PREFIX<pid>-*` (`owned_prefix`) left by killed runs: only those whose owner
    process is gone, so a concurrent run's temporary directory is never touched. A directory of the older
    layout (no pid in its name) is removed once it is a minute old."""
    parent, removed = Path(parent), []
    if not parent.is_dir():
        return removed
    for path in parent.iterdir():
        if not path.name.startswith(prefix) or path.is_symlink() or not path.is_dir():
            continue
        owner = path.name[len(prefix) :].partition("-")[0]
        if owner.isdigit() and _alive(int(owner)):
            continue
        if not owner.isdigit() and time.time() - path.lstat().st_mtime < 60:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def read_text_lines(data: bytes, name: str) -> list[str]:
    """The lines of UTF-8 text, the one way aiayn reads text everywhere: split at "\\n" only (never at U+2028,
    U+0085, form feeds or a lone "\\r", which `str.splitlines` also splits at), one "\\r" before it dropped, a
    leading byte-order mark dropped, no final empty line. Invalid UTF-8 is a ValueError naming `name:line`."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{name}:{line}: invalid UTF-8 ({error.reason} at byte {error.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final line end
    return [line.removesuffix("\r") for line in lines]


def read_text_file(path: str | Path, limit: int | None = None) -> list[str]:
    """`read_text_lines` of a file (the first `limit` lines when given)."""
    lines = read_text_lines(Path(path).read_bytes(), str(path))
    return lines if limit is None else lines[:limit]


def swap_dir(tmp: str | Path, final: str | Path) -> None:
    """Rename the finished directory `tmp` to `final`, replacing any existing `final`; safe against kills.

    Steps: recover an interrupted earlier swap; rename `final -> .final.old-X`; rename `tmp -> final`;
    fsync the parent; remove the old copy. A failure of the second rename puts the old copy back.
    """
    tmp, final = Path(tmp), Path(final)
    recover_swap(final)
    if not final.exists() and not final.is_symlink():
        os.replace(tmp, final)
        fsync_dir(final.parent)
        return
    old = final.parent / f".{final.name}{_OLD}{secrets.token_hex(4)}"
    os.replace(final, old)
    try:
        os.replace(tmp, final)
    except BaseException:
        os.replace(old, final)
        raise
    fsync_dir(final.parent)
    _remove(old)


__all__ = [
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "check_replaceable",
    "clean_stale_temporaries",
    "json_format",
    "owned_prefix",
    "read_text_file",
    "read_text_lines",
    "fsync_dir",
    "fsync_file",
    "readable",
    "recover_swap",
    "sha256_file",
    "swap_dir",
]
