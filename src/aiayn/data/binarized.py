"""The binarized data directory written by `aiayn prepare`, and `ParallelDataset`, which memory-maps it.

Format "aiayn-binarized", version 1 (one directory):

    meta.json             format, format_version, langs, vocab_size, dtype, per-split pairs/tokens/report
    tokenizer.model       the joint sentencepiece model (and tokenizer.vocab, for reading)
    {split}.{lang}.bin    the subword ids of every sentence, concatenated, no BOS/EOS; little-endian
                          uint16 when vocab_size <= 65536, else int32
    {split}.{lang}.idx    int64 little-endian offsets into .bin, n + 1 of them:
                          sentence i is bin[idx[i]:idx[i+1]]
    {split}.{lang}.txt    valid/test splits only: the raw text, line i = pair i (references for BLEU)

Only the arrays' bytes are stored, so readers need nothing but numpy; sizes are checked against meta.json
on open, so a truncated copy fails loudly instead of yielding garbage.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiayn.data.corpus import CorpusError
from aiayn.data.tokenizer import TOKENIZER_FILENAME

FORMAT_NAME = "aiayn-binarized"
FORMAT_VERSION = 1
META_FILENAME = "meta.json"
INDEX_DTYPE = np.dtype("<i8")


def ids_dtype(vocab_size: int) -> np.dtype:
    """The smallest of uint16 / int32 that holds every id below `vocab_size`."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<i4")


def split_file(data_dir: str | Path, split: str, lang: str, kind: str) -> Path:
    """Path of `{split}.{lang}.{kind}` (kind: bin, idx or txt)."""
    return Path(data_dir) / f"{split}.{lang}.{kind}"


class SideWriter:
    """Appends the sentences of one side of one split to `.bin` and, on `close`, writes the `.idx`."""

    def __init__(self, data_dir: str | Path, split: str, lang: str, dtype: np.dtype) -> None:
        self.bin_path = split_file(data_dir, split, lang, "bin")
        self.idx_path = split_file(data_dir, split, lang, "idx")
        self.dtype = np.dtype(dtype)
        self._bin = self.bin_path.open("wb")
        self._lengths: list[int] = []
        self.tokens = 0

    def add_many(self, sentences: Sequence[Sequence[int]]) -> None:
        if not sentences:
            return
        flat = np.fromiter((i for ids in sentences for i in ids), dtype=np.int64)
        if flat.size and (flat.min() < 0 or flat.max() > np.iinfo(self.dtype).max):
            raise ValueError(f"{self.bin_path}: id out of range for {self.dtype}")
        self._bin.write(flat.astype(self.dtype).tobytes())
        self._lengths.extend(len(ids) for ids in sentences)
        self.tokens += int(flat.size)

    def close(self) -> int:
        """Finish both files and return the number of sentences written."""
        self._bin.close()
        offsets = np.zeros(len(self._lengths) + 1, dtype=INDEX_DTYPE)
        np.cumsum(np.asarray(self._lengths, dtype=np.int64), out=offsets[1:])
        offsets.tofile(self.idx_path)
        return len(self._lengths)


def load_meta(data_dir: str | Path) -> dict[str, Any]:
    """Read and check `meta.json` of a binarized directory; a foreign or newer format is a `CorpusError`."""
    path = Path(data_dir) / META_FILENAME
    if not Path(data_dir).is_dir():
        raise CorpusError(f"{data_dir}: binarized data directory not found (run `aiayn prepare`)")
    if not path.is_file():
        raise CorpusError(f"{path}: missing; {data_dir} is not a directory written by `aiayn prepare`")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorpusError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise CorpusError(f"{path}: format is {found!r}, expected {FORMAT_NAME!r}")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CorpusError(
            f"{path}: format_version {meta.get('format_version')!r} is not supported "
            f"(this aiayn reads version {FORMAT_VERSION}; re-run `aiayn prepare`)"
        )
    for key in ("src_lang", "tgt_lang", "vocab_size", "dtype", "splits"):
        if key not in meta:
            raise CorpusError(f"{path}: field {key!r} is missing")
    return meta


class _Side:
    """One memory-mapped side of a split; opened lazily so a pickled dataset (DataLoader workers) is small."""

    def __init__(self, data_dir: Path, split: str, lang: str, dtype: np.dtype, pairs: int) -> None:
        self.bin_path = split_file(data_dir, split, lang, "bin")
        self.idx_path = split_file(data_dir, split, lang, "idx")
        self.dtype = dtype
        for path in (self.bin_path, self.idx_path):
            if not path.is_file():
                raise CorpusError(f"{path}: missing from the binarized directory")
        expected_idx = (pairs + 1) * INDEX_DTYPE.itemsize
        if self.idx_path.stat().st_size != expected_idx:
            raise CorpusError(
                f"{self.idx_path}: {self.idx_path.stat().st_size} bytes, expected {expected_idx} "
                f"({pairs} pairs in meta.json); the file is truncated or from another run"
            )
        self.offsets = np.fromfile(self.idx_path, dtype=INDEX_DTYPE)
        tokens = int(self.offsets[-1])
        if self.offsets[0] != 0 or np.any(np.diff(self.offsets) < 0):
            raise CorpusError(f"{self.idx_path}: offsets are not increasing from 0; the file is corrupt")
        if self.bin_path.stat().st_size != tokens * dtype.itemsize:
            raise CorpusError(
                f"{self.bin_path}: {self.bin_path.stat().st_size} bytes, expected {tokens * dtype.itemsize} "
                f"({tokens} {dtype.name} ids per {self.idx_path.name}); the file is truncated or corrupt"
            )
        self.lengths = np.diff(self.offsets)
        self._data: np.ndarray | None = None

    @property
    def data(self) -> np.ndarray:
        if self._data is None:
            if self.offsets[-1] == 0:  # np.memmap refuses empty files
                self._data = np.zeros(0, dtype=self.dtype)
            else:
                self._data = np.memmap(self.bin_path, dtype=self.dtype, mode="r")
        return self._data

    def __getitem__(self, i: int) -> np.ndarray:
        return np.asarray(self.data[self.offsets[i] : self.offsets[i + 1]], dtype=np.int64)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_data": None}


class ParallelDataset:
    """Pairs of one split of a binarized directory: `dataset[i] -> (src_ids, tgt_ids)` without specials.

    `src_lengths`/`tgt_lengths` count subword ids only; the EOS (source) and BOS/EOS (target) that
    `aiayn.data.batching.make_source`/`make_target` add are not included.
    """

    def __init__(self, data_dir: str | Path, split: str) -> None:
        self.data_dir = Path(data_dir)
        self.split = split
        self.meta = load_meta(self.data_dir)
        splits = self.meta["splits"]
        if split not in splits:
            raise CorpusError(f"{self.data_dir / META_FILENAME}: no split {split!r}; available: {', '.join(splits)}")
        self.src_lang: str = self.meta["src_lang"]
        self.tgt_lang: str = self.meta["tgt_lang"]
        meta_path = self.data_dir / META_FILENAME
        pairs, vocab = splits[split].get("pairs"), self.meta["vocab_size"]
        if type(pairs) is not int or pairs < 0 or type(vocab) is not int or not 4 < vocab <= 1 << 31:
            raise CorpusError(f"{meta_path}: splits.{split}.pairs or vocab_size is not a valid count")
        if self.meta["dtype"] not in ("<u2", "<i4"):
            raise CorpusError(f"{meta_path}: dtype {self.meta['dtype']!r} is not one aiayn writes (<u2 or <i4)")
        dtype = np.dtype(self.meta["dtype"])
        self._src = _Side(self.data_dir, split, self.src_lang, dtype, pairs)
        self._tgt = _Side(self.data_dir, split, self.tgt_lang, dtype, pairs)
        for side in (self._src, self._tgt):  # an id outside the vocabulary would index past the embedding
            if side.offsets[-1] and (int(side.data.max()) >= vocab or int(side.data.min()) < 0):
                bad = int(np.flatnonzero((side.data >= vocab) | (side.data < 0))[0])
                pair = int(np.searchsorted(side.offsets, bad, side="right")) - 1
                raise CorpusError(
                    f"{side.bin_path}: pair {pair + 1} holds id {int(side.data[bad])}, outside the vocabulary of "
                    f"{vocab} in meta.json; the file is corrupt or from another run (re-run `aiayn prepare`)"
                )
        if not self.tokenizer_path.is_file():
            raise CorpusError(f"{self.tokenizer_path}: missing from the binarized directory")

    @property
    def tokenizer_path(self) -> Path:
        return self.data_dir / TOKENIZER_FILENAME

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    @property
    def src_lengths(self) -> np.ndarray:
        return self._src.lengths

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self._tgt.lengths

    def text_path(self, lang: str) -> Path | None:
        """The raw text of this split in `lang` (valid/test splits only), else None."""
        path = split_file(self.data_dir, self.split, lang, "txt")
        return path if path.is_file() else None

    def __len__(self) -> int:
        return len(self._src.lengths)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"pair {i} out of range for split {self.split!r} of {len(self)} pairs")
        i = int(i) % len(self)
        return self._src[i], self._tgt[i]

    def __repr__(self) -> str:
        return (
            f"ParallelDataset({str(self.data_dir)!r}, {self.split!r}: {len(self)} pairs "
            f"{self.src_lang}-{self.tgt_lang}, vocab {self.vocab_size})"
        )


def available_splits(data_dir: str | Path) -> list[str]:
    """Split names recorded in a binarized directory's meta.json."""
    return list(load_meta(data_dir)["splits"])


__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "META_FILENAME",
    "ParallelDataset",
    "SideWriter",
    "available_splits",
    "ids_dtype",
    "load_meta",
    "split_file",
]
