"""`prepare`: raw parallel text -> a binarized directory (see `aiayn.data.binarized` for the format).

1. check every file (exists, not empty, UTF-8, equal line counts on both sides), before writing anything;
2. train one joint BPE tokenizer on both sides of the training text (section 5.1: shared vocabulary);
3. encode every split, report empty / over-long / extreme-ratio pairs, and with `filter_train` drop them
   from the training split only (valid/test stay whole so scores are comparable);
4. write `meta.json`; all of it in a temporary directory beside `out`, renamed into place at the end, so a
   failed or interrupted run leaves neither `out` nor the temporary directory behind.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from aiayn.data.binarized import FORMAT_NAME, FORMAT_VERSION, META_FILENAME, SideWriter, ids_dtype, split_file
from aiayn.data.corpus import OddBreaks, PairReport, check_parallel, classify_pair, read_parallel, side_path
from aiayn.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, TOKENIZER_FILENAME, UNK_ID, Tokenizer
from aiayn.io import (
    atomic_write_text,
    check_replaceable,
    clean_stale_temporaries,
    fsync_dir,
    fsync_file,
    owned_prefix,
    recover_swap,
    swap_dir,
)

_CHUNK_PAIRS = 10_000
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def split_names(train: str | Path, valid: str | Path, test: Sequence[str | Path] = ()) -> dict[str, Path]:
    """{split name: prefix}: `train`, `valid`, and each test split named by its prefix's basename."""
    splits = {"train": Path(train), "valid": Path(valid)}
    for prefix in test:
        name = Path(prefix).name
        if not _SPLIT_NAME.match(name):
            raise ValueError(f"test prefix {prefix}: split name {name!r} must be letters, digits, '_' or '-'")
        if name in splits:
            raise ValueError(f"test prefix {prefix}: split name {name!r} is already used by {splits[name]}")
        splits[name] = Path(prefix)
    return splits


def prepare(
    src_lang: str,
    tgt_lang: str,
    train: str | Path,
    valid: str | Path,
    out: str | Path,
    vocab_size: int,
    test: Sequence[str | Path] = (),
    *,
    max_len: int = 256,
    max_ratio: float = 9.0,
    filter_train: bool = False,
    sample_size: int = 1_000_000,
    threads: int | None = None,
    character_coverage: float = 1.0,
    force: bool = False,
    odd_line_breaks: str = "keep",
    progress: bool = True,
    log: Callable[[str], None] = _stderr,
) -> dict[str, Any]:
    """Build the binarized directory `out` and return its meta.json contents as a summary.

    `max_len` and `max_ratio` are in subword tokens without BOS/EOS. Without `filter_train` suspicious pairs
    are only reported; with it they are dropped from the training split. Characters other tools treat as
    line breaks (U+2028, NEL, form feed, a lone CR...) stay inside their line with a warning naming file:line,
    or with `odd_line_breaks="error"` refuse the file; NUL bytes always do. `force` replaces only a directory
    `prepare` wrote (its meta.json), never a link, the folder of an input, or any other directory.
    """
    out = Path(out)
    if src_lang == tgt_lang:
        raise ValueError(f"source and target languages must differ, got {src_lang!r} twice")
    if vocab_size <= max(PAD_ID, BOS_ID, EOS_ID, UNK_ID) + 1:
        raise ValueError(f"vocab_size must exceed the 4 special ids, got {vocab_size}")
    if max_len <= 0 or max_ratio < 1.0:
        raise ValueError(f"need max_len > 0 and max_ratio >= 1, got max_len={max_len}, max_ratio={max_ratio}")
    if odd_line_breaks not in ("keep", "error"):
        raise ValueError(f"odd_line_breaks must be 'keep' or 'error', got {odd_line_breaks!r}")
    recover_swap(out)  # a run killed while replacing `out` left the old copy aside: put it back
    splits = split_names(train, valid, test)
    inputs = [side_path(prefix, lang) for prefix in splits.values() for lang in (src_lang, tgt_lang)]
    if out.exists() or out.is_symlink():
        if not force:
            raise FileExistsError(f"{out} already exists; pass --force (force=True) to replace it")
        check_replaceable(out, META_FILENAME, FORMAT_NAME, inputs, what=f"--out {out}")
    threads = threads or os.cpu_count() or 1

    odd: list[OddBreaks] = []
    lines = {name: check_parallel(prefix, src_lang, tgt_lang, odd_line_breaks, odd) for name, prefix in splits.items()}
    for found in odd:
        log(f"warning: {found.message()}")
    log("checked " + ", ".join(f"{name} {n} pairs" for name, n in lines.items()))

    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in clean_stale_temporaries(out.parent, f".{out.name}.tmp-"):
        log(f"removed {stale}, left by a killed prepare")
    # the pid in its name: a later prepare removes this directory only once this process is gone
    tmp = Path(tempfile.mkdtemp(prefix=owned_prefix(f".{out.name}.tmp-"), dir=out.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the result should read like any other directory
        started = time.perf_counter()
        train_files = [side_path(splits["train"], src_lang), side_path(splits["train"], tgt_lang)]
        tokenizer = Tokenizer.train(
            train_files,
            vocab_size,
            tmp / TOKENIZER_FILENAME,
            sample_size=sample_size,
            threads=threads,
            character_coverage=character_coverage,
        )
        seconds = time.perf_counter() - started
        log(f"trained joint BPE tokenizer, vocab {tokenizer.vocab_size}, in {seconds:.1f}s")
        dtype = ids_dtype(tokenizer.vocab_size)
        meta: dict[str, Any] = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "src_lang": src_lang,
            "tgt_lang": tgt_lang,
            "langs": [src_lang, tgt_lang],
            "vocab_size": tokenizer.vocab_size,
            "dtype": dtype.str,
            "special_ids": {"pad": PAD_ID, "bos": BOS_ID, "eos": EOS_ID, "unk": UNK_ID},
            "tokenizer": TOKENIZER_FILENAME,
            "max_len": max_len,
            "max_ratio": max_ratio,
            "filtered": filter_train,
            "splits": {},
        }
        encoder = _SplitEncoder(tokenizer, src_lang, tgt_lang, max_len, max_ratio, threads, progress)
        for name, prefix in splits.items():
            drop = filter_train and name == "train"
            split = encoder(tmp, name, prefix, lines[name], drop=drop, keep_text=name != "train")
            meta["splits"][name] = split
            log(f"{name}: {split['report_summary']}")
        text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
        for path in tmp.iterdir():  # every file on disk before the directory is renamed into place
            fsync_file(path)
        atomic_write_text(tmp / META_FILENAME, text)
        fsync_dir(tmp)
        swap_dir(tmp, out)  # an existing `out` (--force) is swapped out, then removed
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if _disk_full(error, out.parent):
            raise OSError(
                errno.ENOSPC, f"no space left on the device of {out.parent} while preparing {out} ({error}); "
                "nothing was written, free some space and rerun"
            ) from None
        raise
    log(f"wrote {out}")
    return meta


def _disk_full(error: BaseException, where: Path) -> bool:
    """Whether a failure was (most likely) a full disk: ENOSPC, or a library's own error while space is gone."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if not isinstance(error, Exception) or isinstance(error, OSError):
        return False
    try:
        return shutil.disk_usage(where).free < 1 << 20
    except OSError:
        return False


@dataclass
class _SplitEncoder:
    """Encodes one split chunk by chunk, reporting (and optionally dropping) suspicious pairs."""

    tokenizer: Tokenizer
    src_lang: str
    tgt_lang: str
    max_len: int
    max_ratio: float
    threads: int
    progress: bool

    def __call__(self, tmp: Path, name: str, prefix: Path, total: int, drop: bool, keep_text: bool) -> dict[str, Any]:
        langs = (self.src_lang, self.tgt_lang)
        dtype = ids_dtype(self.tokenizer.vocab_size)
        report = PairReport()
        writers = [SideWriter(tmp, name, lang, dtype) for lang in langs]
        texts = [split_file(tmp, name, lang, "txt").open("w", encoding="utf-8") for lang in langs if keep_text]
        bar = tqdm(total=total, desc=f"encode {name}", unit=" pairs", file=sys.stderr, disable=not self.progress)
        pairs = read_parallel(prefix, self.src_lang, self.tgt_lang)
        try:
            while chunk := list(itertools.islice(pairs, _CHUNK_PAIRS)):
                self._encode_chunk(chunk, writers, texts, report, drop)
                bar.update(len(chunk))
        finally:
            pairs.close()
            bar.close()
            for handle in texts:
                handle.close()
            counts = [writer.close() for writer in writers]
        assert counts[0] == counts[1] == report.kept, (counts, report.kept)
        return {
            "prefix": str(prefix),
            "pairs": report.kept,
            "tokens": {lang: writer.tokens for lang, writer in zip(langs, writers)},
            "text": keep_text,
            "filtered": drop,
            "report": report.to_dict(),
            "report_summary": report.summary(),
        }

    def _encode_chunk(
        self,
        chunk: list[tuple[str, str]],
        writers: list[SideWriter],
        texts: list[TextIO],
        report: PairReport,
        drop: bool,
    ) -> None:
        src_ids = self.tokenizer.encode_batch([src for src, _ in chunk], threads=self.threads)
        tgt_ids = self.tokenizer.encode_batch([tgt for _, tgt in chunk], threads=self.threads)
        keep = []
        for k, (s, t) in enumerate(zip(src_ids, tgt_ids)):
            reasons = classify_pair(len(s), len(t), self.max_len, self.max_ratio)
            dropped = drop and bool(reasons)
            report.add(report.pairs + 1, reasons, dropped)  # 1-based line number in the input files
            if not dropped:
                keep.append(k)
        writers[0].add_many([src_ids[k] for k in keep])
        writers[1].add_many([tgt_ids[k] for k in keep])
        for side, handle in enumerate(texts):
            handle.writelines(chunk[k][side] + "\n" for k in keep)


__all__ = ["prepare", "split_names"]
