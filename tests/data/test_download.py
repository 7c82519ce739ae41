"""Data directory resolution and Multi30k fetching, offline: present files, bad checksums, file:// downloads."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from aiayn.data import download
from aiayn.data.corpus import CorpusError
from aiayn.data.download import MULTI30K_SHA256, ensure_multi30k, resolve_data_dir
from aiayn.io import sha256_file
from tests.data.test_tokenizer import multi30k_dir


def test_resolve_data_dir_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIAYN_DATA_DIR", str(tmp_path / "from-env"))
    assert resolve_data_dir(tmp_path / "flag") == tmp_path / "flag"
    assert resolve_data_dir() == tmp_path / "from-env"
    monkeypatch.delenv("AIAYN_DATA_DIR")
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert resolve_data_dir() == tmp_path / "shared" / "data"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_data_dir() == tmp_path / "home" / ".cache" / "aiayn" / "data"


def test_recorded_checksums_match_the_shared_copy() -> None:
    sums = multi30k_dir().parent / "SHA256SUMS"
    if not sums.is_file():
        pytest.skip("no SHA256SUMS beside the data")
    listed = dict(reversed(line.split()) for line in sums.read_text().splitlines() if line.strip())
    assert {name: listed[f"multi30k/{name}"] for name in MULTI30K_SHA256} == MULTI30K_SHA256


def test_present_files_are_verified_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = multi30k_dir()
    monkeypatch.setattr(download, "_download_gz", None)  # any download attempt would raise TypeError
    assert ensure_multi30k(folder.parent, langs=("en", "de")) == folder


def test_checksum_mismatch_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "multi30k").mkdir()
    (tmp_path / "multi30k" / "train.en").write_text("A dog.\n")
    with pytest.raises(CorpusError, match=r"train\.en: SHA-256 .* does not match"):
        ensure_multi30k(tmp_path, langs=("en",))
    assert (tmp_path / "multi30k" / "train.en").read_text() == "A dog.\n"  # left alone for the user
    with pytest.raises(CorpusError, match=r"multi30k/train\.de: missing"):
        ensure_multi30k(tmp_path / "elsewhere", langs=("de",), download=False)


def test_download_decompresses_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The download path, with the upstream repository replaced by gzip files behind a file:// URL."""
    source = multi30k_dir()
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    for local, remote in download.MULTI30K_SPLITS.items():
        data = (source / f"{local}.en").read_bytes()
        (upstream / f"{remote}.en.gz").write_bytes(gzip.compress(data))
    monkeypatch.setattr(download, "MULTI30K_URL", upstream.as_uri() + "/{name}.gz")
    folder = ensure_multi30k(tmp_path / "data", langs=("en",))
    assert sorted(path.name for path in folder.iterdir()) == ["test2016.en", "train.en", "val.en"]
    assert sha256_file(folder / "val.en") == MULTI30K_SHA256["val.en"]

    (upstream / "val.de.gz").write_bytes(gzip.compress(b"tampered\n"))
    (upstream / "train.de.gz").write_bytes(gzip.compress((source / "train.de").read_bytes()))
    with pytest.raises(CorpusError, match=r"val\.de\.gz: downloaded text has SHA-256"):
        ensure_multi30k(tmp_path / "data", langs=("de",))
    assert sorted(path.name for path in folder.iterdir()) == ["test2016.en", "train.de", "train.en", "val.en"]
