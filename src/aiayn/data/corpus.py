"""Checks on raw parallel text, before anything is trained or written.

A parallel corpus is two plain UTF-8 files, one sentence per line, where line i of `PREFIX.src` translates
line i of `PREFIX.tgt` (fairseq's naming). Lines end with "\\n" ("\\r\\n" is accepted and the "\\r"
dropped); a leading byte-order mark is dropped. Every failure is a `CorpusError` that names the file and,
where there is one, the line number, so a user can open the file at the bad line.

`classify_pair` holds the cleaning rules of `aiayn prepare --filter` (in the spirit of Moses'
`clean-corpus-n.perl`, but on subword tokens): empty sides, over-long sides, extreme length ratios.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_CHUNK_BYTES = 1 << 24  # 16 MiB: validation decodes whole chunks in C, not line by line in Python
# Characters that `str.splitlines`, editors or other tools treat as line breaks but aiayn keeps inside a line
# (lines end at "\n" only): U+2028, U+2029, NEL, VT, FF, the file/group/record separators, a lone CR.
ODD_BREAKS = re.compile(rb"\xe2\x80[\xa8\xa9]|\xc2\x85|[\x0b\x0c\x1c\x1d\x1e]|\r(?!\n)")
_ODD_NAMES = {b"\xe2\x80\xa8": "U+2028", b"\xe2\x80\xa9": "U+2029", b"\xc2\x85": "U+0085 (NEL)", b"\x0b": "U+000B (VT)",
              b"\x0c": "U+000C (form feed)", b"\x1c": "U+001C", b"\x1d": "U+001D", b"\x1e": "U+001E",
              b"\r": "a lone CR"}  # fmt: skip


@dataclass
class OddBreaks:
    """Lines of one file holding characters other tools treat as line breaks (kept inside the line)."""

    path: Path
    lines: int = 0
    first_line: int = 0
    first_char: str = ""

    def message(self) -> str:
        more = f" (and {self.lines - 1} more line(s))" if self.lines > 1 else ""
        return (
            f"{self.path}:{self.first_line}: {self.first_char} inside a line{more}; aiayn splits lines at \\n only "
            "and keeps it, but other tools may split there (--odd-line-breaks error refuses such files)"
        )


class CorpusError(ValueError):
    """Input text or a prepared data directory is malformed; the message names the file (and line)."""


def side_path(prefix: str | Path, lang: str) -> Path:
    """`PREFIX.lang`, the file of one side of a parallel corpus (fairseq's convention)."""
    return Path(f"{prefix}.{lang}")


def check_text_file(path: str | Path, odd_breaks: str = "keep", found: list[OddBreaks] | None = None) -> int:
    """Return the number of lines of a UTF-8 text file; raise `CorpusError` if missing, empty or not UTF-8, or
    if it holds a NUL byte.

    A final line without "\\n" counts as a line. Invalid UTF-8 is reported with its line number and the
    byte offset inside that line. Characters other tools take for line breaks (`ODD_BREAKS`) stay inside
    their line: with `odd_breaks="keep"` they are appended to `found` (for a warning), with "error" they
    raise `CorpusError` naming the first one's line.
    """
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: file not found")
    if not path.is_file():
        raise CorpusError(f"{path}: not a regular file")
    lines = 0  # lines before `pending`
    size = 0
    pending = b""  # bytes after the last "\n" seen so far: an unfinished line
    odd = OddBreaks(path)
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            if size == 0:
                chunk = chunk.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark is no text (read_lines drops it)
            size += len(chunk)
            data = pending + chunk
            end = data.rfind(b"\n") + 1  # decode whole lines only, so no character is cut in two
            _check_lines(path, data[:end], lines, odd, odd_breaks)
            lines += data.count(b"\n", 0, end)
            pending = data[end:]
    if size == 0:
        raise CorpusError(f"{path}: file is empty")
    if pending:
        _check_lines(path, pending, lines, odd, odd_breaks)
        lines += 1
    if odd.lines and found is not None:
        found.append(odd)
    return lines


def _check_lines(path: Path, data: bytes, lines_before: int, odd: OddBreaks, policy: str) -> None:
    _decode_lines(path, data, lines_before)
    if (nul := data.find(b"\x00")) >= 0:
        line = lines_before + data.count(b"\n", 0, nul) + 1
        raise CorpusError(f"{path}:{line}: NUL byte in the text (a binary file, or UTF-16?)")
    last = -1
    for match in ODD_BREAKS.finditer(data):
        line = lines_before + data.count(b"\n", 0, match.start()) + 1
        if policy == "error":
            raise CorpusError(
                f"{path}:{line}: {_ODD_NAMES[match.group()]} inside a line, which other tools take for a line "
                "break (--odd-line-breaks keep keeps it, with a warning)"
            )
        if line != last:
            odd.lines, last = odd.lines + 1, line
            if odd.lines == 1:
                odd.first_line, odd.first_char = line, _ODD_NAMES[match.group()]


def _decode_lines(path: Path, data: bytes, lines_before: int) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = lines_before + data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        bad = data[error.start : error.start + 4]
        raise CorpusError(
            f"{path}:{line}: invalid UTF-8 at byte {column} of the line ({bad!r}: {error.reason})"
        ) from None


def check_parallel(
    prefix: str | Path, src_lang: str, tgt_lang: str, odd_breaks: str = "keep", found: list[OddBreaks] | None = None
) -> int:
    """Check both sides of `PREFIX.{src,tgt}` and return their common number of lines."""
    src, tgt = side_path(prefix, src_lang), side_path(prefix, tgt_lang)
    n_src, n_tgt = check_text_file(src, odd_breaks, found), check_text_file(tgt, odd_breaks, found)
    if n_src != n_tgt:
        raise CorpusError(
            f"line counts differ: {src} has {n_src} lines but {tgt} has {n_tgt}; "
            f"line i of one side must translate line i of the other "
            f"(first unpaired line: {min(n_src, n_tgt) + 1})"
        )
    return n_src


def read_lines(path: str | Path) -> Iterator[str]:
    """Yield the lines of a checked text file without their line ending (and without a leading BOM)."""
    # newline="\n": split on "\n" only; str.splitlines would also split on U+2028, U+0085, form feeds...
    with Path(path).open(encoding="utf-8-sig", newline="\n") as handle:
        for line in handle:
            if line.endswith("\n"):
                line = line[:-1]
                if line.endswith("\r"):
                    line = line[:-1]
            yield line


def read_parallel(prefix: str | Path, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
    """Yield (source line, target line) pairs; call `check_parallel` first."""
    yield from zip(read_lines(side_path(prefix, src_lang)), read_lines(side_path(prefix, tgt_lang)))


# --- cleaning rules ----------------------------------------------------------------------------------------

REASONS = ("empty", "too_long", "bad_ratio")


def classify_pair(src_len: int, tgt_len: int, max_len: int, max_ratio: float) -> tuple[str, ...]:
    """Reasons (a subset of `REASONS`) why a pair of subword lengths (without BOS/EOS) looks broken.

    empty: a side has no subword token. too_long: a side has more than `max_len` tokens.
    bad_ratio: both sides are non-empty and the longer is more than `max_ratio` times the shorter.
    """
    reasons = []
    if src_len == 0 or tgt_len == 0:
        reasons.append("empty")
    if max(src_len, tgt_len) > max_len:
        reasons.append("too_long")
    if src_len > 0 and tgt_len > 0 and max(src_len, tgt_len) > max_ratio * min(src_len, tgt_len):
        reasons.append("bad_ratio")
    return tuple(reasons)


@dataclass
class PairReport:
    """Counts of suspicious pairs in one split, with the first few (1-based) line numbers of each kind."""

    pairs: int = 0
    kept: int = 0
    dropped: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    examples: dict[str, list[int]] = field(default_factory=lambda: {reason: [] for reason in REASONS})
    max_examples: int = 5

    def add(self, line: int, reasons: tuple[str, ...], drop: bool) -> None:
        self.pairs += 1
        for reason in reasons:
            self.counts[reason] += 1
            if len(self.examples[reason]) < self.max_examples:
                self.examples[reason].append(line)
        if drop:
            self.dropped += 1
        else:
            self.kept += 1

    def to_dict(self) -> dict:
        return {
            "pairs": self.pairs,
            "kept": self.kept,
            "dropped": self.dropped,
            **self.counts,
            "example_lines": {reason: lines for reason, lines in self.examples.items() if lines},
        }

    def summary(self) -> str:
        found = ", ".join(f"{self.counts[r]} {r}" for r in REASONS)
        return f"{self.pairs} pairs: {found}; kept {self.kept}, dropped {self.dropped}"


__all__ = [
    "CorpusError",
    "ODD_BREAKS",
    "OddBreaks",
    "PairReport",
    "REASONS",
    "check_parallel",
    "check_text_file",
    "classify_pair",
    "read_lines",
    "read_parallel",
    "side_path",
]
