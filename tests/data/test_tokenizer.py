"""Joint BPE tokenizer on real Multi30k text: special ids, round trips, byte fallback, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest
import sentencepiece as spm

from aiayn.config import ModelConfig
from aiayn.data.corpus import CorpusError
from aiayn.data.tokenizer import TOKENIZER_FILENAME, Tokenizer
from tests.conftest import multi30k_dir


def head(path: Path, n: int) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [next(handle).rstrip("\n") for _ in range(n)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Tokenizer:
    folder = multi30k_dir()
    work = tmp_path_factory.mktemp("tok")
    files = []
    for lang in ("en", "de"):
        path = work / f"train.{lang}"
        path.write_text("\n".join(head(folder / f"train.{lang}", 2000)) + "\n", encoding="utf-8")
        files.append(path)
    return Tokenizer.train(files, vocab_size=1000, model_path=work / "model" / TOKENIZER_FILENAME, threads=1)


def is_normal(line: str) -> bool:
    """Text already in sentencepiece's normal form: NFKC-stable, single spaces, no outer spaces."""
    return line == line.strip() and "  " not in line and "\u00a0" not in line and "\t" not in line


def test_special_ids_match_model_config(tokenizer: Tokenizer) -> None:
    config = ModelConfig()
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    assert (config.pad_id, config.bos_id, config.eos_id, config.unk_id) == (0, 1, 2, 3)
    processor = tokenizer.processor
    assert (processor.pad_id(), processor.bos_id(), processor.eos_id(), processor.unk_id()) == (0, 1, 2, 3)
    assert tokenizer.pieces([0, 1, 2, 3]) == ["<pad>", "<s>", "</s>", "<unk>"]
    assert tokenizer.vocab_size == 1000


def test_round_trip_on_multi30k_validation_text(tokenizer: Tokenizer) -> None:
    folder = multi30k_dir()
    for lang in ("en", "de"):
        lines = head(folder / f"val.{lang}", 300)
        normal = [line for line in lines if is_normal(line)]
        assert len(normal) >= 0.95 * len(lines)
        encoded = tokenizer.encode_batch(normal)
        assert encoded == [tokenizer.encode(line) for line in normal]
        for line, ids in zip(normal, encoded):
            assert ids and not {0, 1, 2} & set(ids), line  # no specials added by encode
            assert tokenizer.decode(ids) == line
        assert sum(len(ids) for ids in encoded) > sum(len(line.split()) for line in normal)  # subwords


def test_unseen_characters_fall_back_to_bytes_not_unk(tokenizer: Tokenizer) -> None:
    text = "Ein Schneemann ☃ und 漢字 vor dem Café."
    ids = tokenizer.encode(text)
    assert tokenizer.unk_id not in ids
    assert tokenizer.decode(ids) == text
    assert "<0xE2>" in tokenizer.pieces(ids)  # the first UTF-8 byte of the snowman


def test_decode_drops_pad_bos_eos_and_pieces_spell_the_text(tokenizer: Tokenizer) -> None:
    text = "Two young men are playing soccer in a park."
    ids = tokenizer.encode(text)
    assert tokenizer.decode([1, *ids, 2, 0, 0]) == text
    pieces = tokenizer.pieces(ids)
    assert len(pieces) == len(ids)
    assert "".join(pieces).replace("▁", " ").strip() == text
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.decode([5, 1000])


def test_reload_from_file_and_directory(tokenizer: Tokenizer) -> None:
    text = "A dog runs through the snow."
    assert tokenizer.path is not None and tokenizer.path.with_suffix(".vocab").is_file()
    for source in (tokenizer.path, tokenizer.path.parent):
        again = Tokenizer.from_file(source)
        assert again.encode(text) == tokenizer.encode(text)
        assert again.vocab_size == tokenizer.vocab_size


def test_rejects_missing_foreign_and_non_models(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="not found"):
        Tokenizer.from_file(tmp_path / "nothing.model")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(CorpusError, match="junk.model"):
        Tokenizer.from_file(junk)
    # sentencepiece's own defaults (unk=0, bos=1, eos=2, no pad) are not the package's ids
    corpus = tmp_path / "text.txt"
    corpus.write_text("\n".join(f"sentence number {i} about dogs and cats" for i in range(200)) + "\n")
    spm.SentencePieceTrainer.Train(
        input=str(corpus), model_prefix=str(tmp_path / "foreign"), vocab_size=40, minloglevel=2
    )
    with pytest.raises(CorpusError, match="special ids"):
        Tokenizer.from_file(tmp_path / "foreign.model")


def test_fingerprint_is_the_model_not_where_it_was_trained(tokenizer: Tokenizer, tmp_path: Path) -> None:
    """The same text in another directory: other bytes in the `.model` file (it records its input paths), the same
    fingerprint; another vocabulary size or normalization rule: another fingerprint."""
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    files = []
    for lang in ("en", "de"):
        path = moved / f"corpus.{lang}"
        path.write_text(Path(tokenizer.path).parent.parent.joinpath(f"train.{lang}").read_text(encoding="utf-8"))
        files.append(path)
    same = Tokenizer.train(files, vocab_size=1000, model_path=tmp_path / "a" / TOKENIZER_FILENAME, threads=1)
    assert Path(same.path).read_bytes() != Path(tokenizer.path).read_bytes()
    assert same.fingerprint() == tokenizer.fingerprint()
    smaller = Tokenizer.train(files, vocab_size=900, model_path=tmp_path / "b" / TOKENIZER_FILENAME, threads=1)
    identity = Tokenizer.train(files, vocab_size=1000, model_path=tmp_path / "c" / TOKENIZER_FILENAME, threads=1,
                               normalization="identity")  # fmt: skip
    assert len({tokenizer.fingerprint(), smaller.fingerprint(), identity.fingerprint()}) == 3
