"""`prepare` on a Multi30k subset, its failure modes, filtering, the binarized format and the CLI."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from aiayn.cli import prepare as prepare_cli
from aiayn.data.batching import load_batch, make_source, make_target
from aiayn.data.binarized import ParallelDataset, available_splits
from aiayn.data.corpus import CorpusError
from aiayn.data.prepare import prepare
from aiayn.data.tokenizer import Tokenizer
from tests.data.test_tokenizer import head, is_normal, multi30k_dir

SIZES = {"train": 2000, "val": 200, "test2016": 100}


def write_subset(folder: Path) -> Path:
    """The first lines of Multi30k train/val/test2016 (en, de) under `folder`; returns the folder."""
    source = multi30k_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in SIZES.items():
        for lang in ("en", "de"):
            lines = head(source / f"{split}.{lang}", n)
            (folder / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def run_prepare(corpus: Path, out: Path, **options):
    options.setdefault("vocab_size", 1000)
    return prepare(
        "en", "de", corpus / "train", corpus / "val", out, test=[corpus / "test2016"],
        threads=1, progress=False, log=lambda message: None, **options,
    )  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_subset(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def prepared(corpus: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prepared") / "bin"
    run_prepare(corpus, out)
    return out


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_output_files_and_meta(prepared: Path) -> None:
    names = set(leftovers(prepared))
    expected = {"meta.json", "tokenizer.model", "tokenizer.vocab"}
    for split in ("train", "valid", "test2016"):
        expected |= {f"{split}.{lang}.{kind}" for lang in ("en", "de") for kind in ("bin", "idx")}
    expected |= {f"{split}.{lang}.txt" for split in ("valid", "test2016") for lang in ("en", "de")}
    assert names == expected
    meta = json.loads((prepared / "meta.json").read_text())
    assert (meta["format"], meta["format_version"]) == ("aiayn-binarized", 1)
    assert (meta["src_lang"], meta["tgt_lang"], meta["langs"]) == ("en", "de", ["en", "de"])
    assert meta["vocab_size"] == 1000 and meta["dtype"] == "<u2"
    assert meta["special_ids"] == {"pad": 0, "bos": 1, "eos": 2, "unk": 3}
    assert available_splits(prepared) == ["train", "valid", "test2016"]
    for split, n in zip(("train", "valid", "test2016"), SIZES.values()):
        assert meta["splits"][split]["pairs"] == n
        assert meta["splits"][split]["report"]["pairs"] == n
    assert (prepared / "train.en.bin").stat().st_size == 2 * meta["splits"]["train"]["tokens"]["en"]


def test_datasets_hold_the_encoded_text(prepared: Path, corpus: Path) -> None:
    tokenizer = Tokenizer.from_file(prepared / "tokenizer.model")
    for split, prefix in (("train", "train"), ("valid", "val"), ("test2016", "test2016")):
        dataset = ParallelDataset(prepared, split)
        assert len(dataset) == SIZES[prefix]
        assert dataset.tokenizer_path == prepared / "tokenizer.model"
        for lang, lengths, side in (("en", dataset.src_lengths, 0), ("de", dataset.tgt_lengths, 1)):
            lines = (corpus / f"{prefix}.{lang}").read_text(encoding="utf-8").splitlines()
            encoded = tokenizer.encode_batch(lines)
            np.testing.assert_array_equal(lengths, [len(ids) for ids in encoded])
            tokens = dataset.meta["splits"][split]["tokens"][lang]
            assert tokens == sum(map(len, encoded))
            for i in range(0, len(dataset), 7):
                ids = dataset[i][side]
                assert ids.dtype == np.int64 and ids.tolist() == encoded[i]
                if is_normal(lines[i]):
                    assert tokenizer.decode(ids.tolist()) == lines[i]
        if split != "train":  # raw references kept byte for byte for BLEU
            assert dataset.text_path("de").read_bytes() == (corpus / f"{prefix}.de").read_bytes()
        else:
            assert dataset.text_path("de") is None
    dataset = ParallelDataset(prepared, "valid")
    batch = load_batch(dataset, [3, 0])
    assert batch.ids == [3, 0]
    src, tgt = dataset[3]
    assert batch.src[0, : len(src) + 1].tolist() == make_source(src)
    tgt_in, tgt_out = make_target(tgt)
    assert batch.tgt_in[0, : len(tgt_in)].tolist() == tgt_in
    assert batch.tgt_out[0, : len(tgt_out)].tolist() == tgt_out
    with pytest.raises(IndexError):
        dataset[len(dataset)]


def test_dataset_rejects_corrupt_and_foreign_directories(prepared: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    with pytest.raises(CorpusError, match="no split 'dev'"):
        ParallelDataset(copy, "dev")
    bin_path = copy / "valid.de.bin"
    bin_path.write_bytes(bin_path.read_bytes()[:-2])
    with pytest.raises(CorpusError, match=r"valid\.de\.bin: .* truncated"):
        ParallelDataset(copy, "valid")
    (copy / "test2016.en.idx").write_bytes(b"\0" * 16)
    with pytest.raises(CorpusError, match=r"test2016\.en\.idx"):
        ParallelDataset(copy, "test2016")
    meta = json.loads((copy / "meta.json").read_text())
    (copy / "meta.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(CorpusError, match=r"meta\.json: format_version 99"):
        ParallelDataset(copy, "train")
    (copy / "meta.json").write_text(json.dumps({**meta, "format": "fairseq"}))
    with pytest.raises(CorpusError, match=r"meta\.json: format is 'fairseq'"):
        ParallelDataset(copy, "train")
    (copy / "meta.json").unlink()
    with pytest.raises(CorpusError, match=r"meta\.json: missing"):
        ParallelDataset(copy, "train")
    with pytest.raises(CorpusError, match="not found"):
        ParallelDataset(tmp_path / "absent", "train")


def test_existing_out_needs_force(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "bin"
    out.mkdir()
    (out / "old-file").write_text("x")
    with pytest.raises(FileExistsError, match="--force"):
        run_prepare(corpus, out)
    with pytest.raises(FileExistsError, match="not written by this command"):  # issue 12: never a foreign folder
        run_prepare(corpus, out, force=True)
    assert leftovers(out) == ["old-file"]
    (out / "old-file").unlink()
    out.rmdir()
    run_prepare(corpus, out)
    (out / "old-file").write_text("x")
    run_prepare(corpus, out, force=True, vocab_size=600)  # its own output: replaced
    assert "old-file" not in leftovers(out)
    assert ParallelDataset(out, "train").vocab_size == 600
    assert leftovers(tmp_path) == ["bin"]  # no temporary or backup directory left


def corrupt(corpus: Path, target: Path, case: str) -> tuple[str, list[str]]:
    """Copy `corpus` to `target` and break one file; return the expected exception pattern and fragments."""
    shutil.copytree(corpus, target)
    if case == "line_counts":
        lines = (target / "val.de").read_text().splitlines()
        (target / "val.de").write_text("\n".join(lines[:-3]) + "\n")
        return "line counts differ", ["val.en has 200 lines", "val.de has 197"]
    if case == "utf8":
        data = (target / "train.de").read_bytes().split(b"\n")
        data[1233] = data[1233][:5] + b"\xc3\x28" + data[1233][5:]
        (target / "train.de").write_bytes(b"\n".join(data))
        return "invalid UTF-8", ["train.de:1234:"]
    if case == "empty":
        (target / "test2016.en").write_bytes(b"")
        return "file is empty", ["test2016.en"]
    (target / "train.en").unlink()
    return "file not found", ["train.en"]


@pytest.mark.parametrize("case", ["line_counts", "utf8", "empty", "missing"])
def test_malformed_input_fails_cleanly(corpus: Path, tmp_path: Path, case: str) -> None:
    broken = tmp_path / "corpus"
    pattern, fragments = corrupt(corpus, broken, case)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(CorpusError, match=pattern) as error:
        run_prepare(broken, work / "bin")
    for fragment in fragments:
        assert fragment in str(error.value)
    assert leftovers(work) == []


def test_failure_after_writing_started_removes_the_temporary_directory(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="vocab"):  # sentencepiece cannot reach this vocabulary
        run_prepare(corpus, tmp_path / "bin", vocab_size=200_000)
    assert leftovers(tmp_path) == []


def test_report_and_filter_suspicious_pairs(corpus: Path, tmp_path: Path) -> None:
    src = (corpus / "train.en").read_text(encoding="utf-8").splitlines()[:300]
    tgt = (corpus / "train.de").read_text(encoding="utf-8").splitlines()[:300]
    src[4], tgt[4] = "", "Ein Hund."  # line 5: empty source
    src[9], tgt[9] = "A dog is running. " * 40, "Ein Hund rennt. " * 40  # line 10: > 100 subwords
    src[14], tgt[14] = "Dogs.", "Zwei große Hunde spielen im Schnee vor einem roten Haus mit vielen Fenstern. " * 2
    src[19], tgt[19] = "A cat.", "Eine Katze."  # line 20: ordinary
    raw = tmp_path / "raw"
    shutil.copytree(corpus, raw)
    (raw / "train.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (raw / "train.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    (raw / "val.en").write_text("A dog.\n\n", encoding="utf-8")
    (raw / "val.de").write_text("Ein Hund.\nEine Katze.\n", encoding="utf-8")
    options = dict(max_len=100, max_ratio=5.0, vocab_size=800)

    kept = run_prepare(raw, tmp_path / "kept", **options)
    report = kept["splits"]["train"]["report"]
    assert (report["empty"], report["too_long"], report["bad_ratio"]) == (1, 1, 1)
    assert report["example_lines"] == {"empty": [5], "too_long": [10], "bad_ratio": [15]}
    assert (report["kept"], report["dropped"], kept["splits"]["train"]["pairs"]) == (300, 0, 300)
    assert len(ParallelDataset(tmp_path / "kept", "train")) == 300

    dropped = run_prepare(raw, tmp_path / "dropped", filter_train=True, **options)
    assert dropped["splits"]["train"]["report"]["dropped"] == 3
    train = ParallelDataset(tmp_path / "dropped", "train")
    assert len(train) == 297 and train.src_lengths.min() > 0 and train.tgt_lengths.max() <= 100
    tokenizer = Tokenizer.from_file(train.tokenizer_path)
    survivors = [i for i in range(300) if i not in (4, 9, 14)]
    assert [train[k][0].tolist() for k in range(297)] == tokenizer.encode_batch([src[i] for i in survivors])
    valid = dropped["splits"]["valid"]  # valid/test are reported but never filtered
    assert (valid["pairs"], valid["report"]["empty"], valid["report"]["example_lines"]) == (2, 1, {"empty": [2]})


def test_cli_prepare(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    prepare_cli.add_arguments(parser)
    argv = ["--src-lang", "en", "--tgt-lang", "de", "--data-dir", str(corpus), "--train", "train"]
    argv += ["--valid", "val", "--test", "test2016", "--vocab-size", "700", "--threads", "1", "--quiet"]
    args = parser.parse_args([*argv, "--out", str(tmp_path / "bin"), "--filter", "--max-len", "30"])
    assert prepare_cli.run(args) == 0
    printed = capsys.readouterr().out
    assert "test2016: 100 pairs" in printed and "vocab 700" in printed
    meta = json.loads((tmp_path / "bin" / "meta.json").read_text())
    assert meta["filtered"] and meta["max_len"] == 30
    assert meta["splits"]["train"]["pairs"] == 2000 - meta["splits"]["train"]["report"]["dropped"]
    assert ParallelDataset(tmp_path / "bin", "train").tgt_lengths.max() <= 30
