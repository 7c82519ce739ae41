"""BPE-dropout (Provilkov et al., 2020): each training epoch sees the pairs under a fresh segmentation.

Each merge of the BPE model is skipped with probability p while a word is segmented (sentencepiece's own
sampling: `enable_sampling=True, alpha=p`), so one sentence comes in many segmentations over the epochs; the
text is the same, only its pieces change. Validation, test and decoding keep the deterministic segmentation.

Each draw is seeded from (seed, epoch, side), but sentencepiece's sampler does not give the same pieces for the
same seed in another process, so a run keeps what it drew: with `keep_dir` each epoch's pieces are written there
(atomically, the last `keep` epochs) and read back when the epoch is asked for again, which makes a resumed run
train on exactly the pieces of the uninterrupted one (a run resumed from further back than the kept epochs
draws those epochs anew: it continues, though not bit for bit). A sampled sentence longer than `max_len` keeps
its plain pieces.
"""

from __future__ import annotations

import io
import re
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import sentencepiece as spm

from aiayn.data.binarized import ParallelDataset
from aiayn.data.corpus import CorpusError
from aiayn.data.tokenizer import Tokenizer
from aiayn.io import atomic_write_bytes


def _sample(processor: spm.SentencePieceProcessor, texts: Sequence[str], p: float, seed: int) -> list[list[int]]:
    """One sampled segmentation of `texts`, the same for the same seed.

    sentencepiece draws from a thread-local generator seeded once, when the thread first samples, from the
    global seed; a new thread that samples alone (num_threads=1) therefore starts from `seed` every time in
    this process (not across processes: see the module's note)."""
    out: list[list[list[int]]] = []
    spm.set_random_generator_seed(seed)
    worker = threading.Thread(
        target=lambda: out.append(
            processor.encode(list(texts), out_type=int, enable_sampling=True, alpha=p, nbest_size=-1, num_threads=1)
        )
    )
    worker.start()
    worker.join()
    if not out:
        raise RuntimeError("sentencepiece's sampled encoding failed (see the error above)")
    return out[0]


class EpochPairs:
    """The training pairs of one epoch under one sampled segmentation: what `ParallelDataset` gives training.

    Each side is one flat id array with offsets (pair i's pieces are `data[offsets[i]:offsets[i + 1]]`)."""

    def __init__(self, epoch: int, src: tuple[np.ndarray, np.ndarray], tgt: tuple[np.ndarray, np.ndarray]) -> None:
        self.epoch = epoch
        (self._src, self._src_offsets), (self._tgt, self._tgt_offsets) = src, tgt
        self.settings: tuple[float, ...] = ()  # what a kept epoch was drawn under (p, p_target, seed, max_len)
        self.src_lengths = np.diff(self._src_offsets).astype(np.int64)
        self.tgt_lengths = np.diff(self._tgt_offsets).astype(np.int64)

    @classmethod
    def from_lists(cls, epoch: int, src: Sequence[np.ndarray], tgt: Sequence[np.ndarray]) -> EpochPairs:
        return cls(epoch, _flat(src), _flat(tgt))

    def __len__(self) -> int:
        return len(self.src_lengths)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        s, t = self._src_offsets, self._tgt_offsets
        return self._src[s[i] : s[i + 1]], self._tgt[t[i] : t[i + 1]]

    def to_bytes(self, settings: Sequence[float] = ()) -> bytes:
        """The epoch as an .npz (no pickles), with the `settings` it was drawn under."""
        buffer = io.BytesIO()
        np.savez(buffer, epoch=np.int64(self.epoch), src=self._src, src_offsets=self._src_offsets, tgt=self._tgt,
                 tgt_offsets=self._tgt_offsets, settings=np.asarray(settings, dtype=np.float64))  # fmt: skip
        return buffer.getvalue()

    @classmethod
    def load(cls, path: Path, pairs: int, vocab_size: int) -> EpochPairs:
        """An epoch written by `to_bytes` (no pickles), checked against the split's pairs and vocabulary."""
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = {k: f[k] for k in ("epoch", "src", "src_offsets", "tgt", "tgt_offsets", "settings")}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            raise CorpusError(
                f"{path}: not a saved BPE-dropout epoch ({error}); delete it to draw the epoch anew"
            ) from None
        for side in ("src", "tgt"):
            offsets = arrays[f"{side}_offsets"]
            ids = arrays[side]
            if len(offsets) != pairs + 1 or offsets[0] != 0 or offsets[-1] != len(ids) or (np.diff(offsets) < 0).any():
                raise CorpusError(f"{path}: its {side} pieces are not {pairs} pairs; delete it to draw the epoch anew")
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
                raise CorpusError(f"{path}: {side} ids outside the vocabulary of {vocab_size}; delete it to draw anew")
        src, tgt = (arrays["src"], arrays["src_offsets"]), (arrays["tgt"], arrays["tgt_offsets"])
        kept = cls(int(arrays["epoch"]), src, tgt)
        kept.settings = tuple(arrays["settings"].tolist())
        return kept


def _flat(sentences: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sentences])
    data = np.concatenate(sentences) if len(sentences) else np.zeros(0, dtype=np.int32)
    return data, offsets


class BPEDropout:
    """Sampled segmentations of a binarized training split, one per epoch: merges dropped with probability `p`
    in source sentences and `p_target` (default: `p`) in target sentences; 0 keeps a side's plain pieces."""

    def __init__(
        self,
        dataset: ParallelDataset,
        p: float,
        seed: int,
        max_len: int,
        p_target: float | None = None,
        keep_dir: str | Path | None = None,
        keep: int = 2,
    ) -> None:
        p_target = p if p_target is None else p_target
        if not (0.0 <= p < 1.0 and 0.0 <= p_target < 1.0) or p == p_target == 0.0:
            raise ValueError(f"BPE-dropout probabilities must lie in [0, 1), one of them above 0; got {p}, {p_target}")
        self.dataset, self.p, self.p_target, self.seed, self.max_len = dataset, p, p_target, seed, max_len
        self.keep_dir, self.keep = (None if keep_dir is None else Path(keep_dir)), keep
        self.tokenizer = Tokenizer.from_file(dataset.tokenizer_path)
        self._sides: tuple[tuple[list[np.ndarray], list[str]], ...] | None = None  # (plain ids, text): at 1st draw

    def _plain(self) -> tuple[tuple[list[np.ndarray], list[str]], ...]:
        """Each side's plain ids and text, read once when the first epoch is drawn (not when all are kept)."""
        if self._sides is None:
            pairs = [self.dataset[i] for i in range(len(self.dataset))]
            ids = ([s for s, _ in pairs], [t for _, t in pairs])
            self._sides = tuple((side, [self.tokenizer.decode(x.tolist()) for x in side]) for side in ids)
        return self._sides

    def epoch(self, epoch: int) -> EpochPairs:
        """The pairs of `epoch` (1-based): read back from `keep_dir` when kept there, else drawn (and kept)."""
        path = None if self.keep_dir is None else self.keep_dir / f"epoch-{epoch:06d}.npz"
        settings = (self.p, self.p_target, float(self.seed), float(self.max_len))
        if path is not None and path.is_file():
            kept = EpochPairs.load(path, len(self.dataset), self.dataset.vocab_size)
            if kept.epoch != epoch:
                raise CorpusError(f"{path}: holds epoch {kept.epoch}, not {epoch}; delete it to draw the epoch anew")
            if kept.settings == settings:
                return kept  # else drawn under other settings: drawn anew below, and replaced
        pairs = self.draw(epoch)
        if path is not None:
            self.keep_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
            atomic_write_bytes(path, pairs.to_bytes(settings))
            self._forget_before(epoch - self.keep + 1)
        return pairs

    def draw(self, epoch: int) -> EpochPairs:
        """A fresh segmentation of `epoch` (seeded by (seed, epoch, side); see the module's note)."""
        sides = []
        for k, ((fixed, text), p) in enumerate(zip(self._plain(), (self.p, self.p_target))):
            if p == 0.0:
                sides.append(fixed)
                continue
            sampled = _sample(self.tokenizer.processor, text, p, _seed(self.seed, epoch, k))
            dtype = fixed[0].dtype if fixed else np.int32
            sides.append([
                np.asarray(s, dtype=dtype) if 0 < len(s) <= self.max_len else f for s, f in zip(sampled, fixed)
            ])  # fmt: skip
        return EpochPairs.from_lists(epoch, sides[0], sides[1])

    def _forget_before(self, epoch: int) -> None:
        """Remove the kept epochs before `epoch` (only files this class names and writes)."""
        for path in self.keep_dir.glob("epoch-*.npz"):  # type: ignore[union-attr]
            match = re.fullmatch(r"epoch-(\d{6})\.npz", path.name)
            if match and int(match.group(1)) < epoch:
                path.unlink(missing_ok=True)


def _seed(seed: int, epoch: int, side: int) -> int:
    """A 32-bit seed for (seed, epoch, side), distinct for distinct triples of small numbers."""
    return int(np.random.SeedSequence([seed, epoch, side]).generate_state(1)[0])


__all__ = ["BPEDropout", "EpochPairs"]
