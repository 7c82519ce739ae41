"""Raw-text checks: line counting, UTF-8 errors with line numbers, line splitting, cleaning rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.data.corpus import (
    CorpusError,
    PairReport,
    check_parallel,
    check_text_file,
    classify_pair,
    read_lines,
    read_parallel,
)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_line_counts_with_and_without_final_newline(tmp_path: Path) -> None:
    assert check_text_file(write(tmp_path / "a", b"one\ntwo\n")) == 2
    assert check_text_file(write(tmp_path / "b", b"one\ntwo")) == 2
    assert check_text_file(write(tmp_path / "c", b"\n")) == 1  # one empty line is not an empty file
    assert check_text_file(write(tmp_path / "d", "Grüße\n漢字\n\n".encode())) == 3


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.de", b"gut\nauch gut\nschlecht \xff hier\nok\n")
    with pytest.raises(CorpusError, match=r"bad\.de:3: invalid UTF-8 at byte 10"):
        check_text_file(path)
    truncated = write(tmp_path / "cut.de", b"ok\nGr\xc3")  # file ends inside a 2-byte character
    with pytest.raises(CorpusError, match=r"cut\.de:2: invalid UTF-8"):
        check_text_file(truncated)


def test_invalid_utf8_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aiayn.data.corpus as corpus

    monkeypatch.setattr(corpus, "_CHUNK_BYTES", 7)  # many chunk boundaries, some inside characters
    lines = ["Grüße aus Köln", "Straße", "ok", "ok"]
    good = write(tmp_path / "good", ("\n".join(lines) + "\n").encode())
    assert check_text_file(good) == 4
    bad = write(tmp_path / "bad", ("\n".join(lines) + "\n").encode() + b"x\x80y\n")
    with pytest.raises(CorpusError, match=r"bad:5: invalid UTF-8"):
        check_text_file(bad)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"nope\.en: file not found"):
        check_text_file(tmp_path / "nope.en")
    with pytest.raises(CorpusError, match=r"empty\.en: file is empty"):
        check_text_file(write(tmp_path / "empty.en", b""))


def test_parallel_line_count_mismatch_names_both_files(tmp_path: Path) -> None:
    write(tmp_path / "train.en", b"a\nb\nc\n")
    write(tmp_path / "train.de", b"a\nb\n")
    with pytest.raises(CorpusError) as error:
        check_parallel(tmp_path / "train", "en", "de")
    message = str(error.value)
    assert "train.en has 3 lines" in message and "train.de has 2" in message
    assert "first unpaired line: 3" in message


def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    text = "\ufeffeins\r\nzwei\u2028halb\x0cform\nvier\tfeld\n\ndrei"
    path = write(tmp_path / "x", text.encode())
    assert list(read_lines(path)) == ["eins", "zwei\u2028halb\x0cform", "vier\tfeld", "", "drei"]
    write(tmp_path / "p.en", b"a\nb\n")
    write(tmp_path / "p.de", b"x\ny\n")
    assert list(read_parallel(tmp_path / "p", "en", "de")) == [("a", "x"), ("b", "y")]


@pytest.mark.parametrize(
    ("src", "tgt", "reasons"),
    [
        (10, 12, ()),
        (0, 5, ("empty",)),
        (0, 0, ("empty",)),
        (3, 300, ("too_long", "bad_ratio")),
        (257, 250, ("too_long",)),
        (256, 256, ()),
        (2, 19, ("bad_ratio",)),
        (2, 18, ()),  # exactly 9 times: allowed
        (40, 4, ("bad_ratio",)),
    ],
)
def test_classify_pair(src: int, tgt: int, reasons: tuple[str, ...]) -> None:
    assert classify_pair(src, tgt, max_len=256, max_ratio=9.0) == reasons


def test_pair_report_counts_and_examples() -> None:
    report = PairReport(max_examples=2)
    for line, reasons in enumerate([(), ("empty",), ("empty",), ("empty",), ("too_long", "bad_ratio")], 1):
        report.add(line, reasons, drop=bool(reasons))
    data = report.to_dict()
    assert (data["pairs"], data["kept"], data["dropped"]) == (5, 1, 4)
    assert (data["empty"], data["too_long"], data["bad_ratio"]) == (3, 1, 1)
    assert data["example_lines"] == {"empty": [2, 3], "too_long": [5], "bad_ratio": [5]}
