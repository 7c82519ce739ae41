"""BPE-dropout (Provilkov et al., 2020): each training epoch sees the pairs under a fresh segmentation.

Each merge of the BPE model is skipped with probability p while a word is segmented (sentencepiece's own
sampling: `enable_sampling=True, alpha=p`), so one sentence comes in many segmentations over the epochs; the
text is the same, only its pieces change. Validation, test and decoding keep the deterministic segmentation.

The segmentation of an epoch is a function of (seed, epoch) only, so a resumed run and every data-parallel rank
see the same pieces. A sampled sentence longer than `max_len` keeps its deterministic pieces.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import sentencepiece as spm

from aiayn.data.binarized import ParallelDataset
from aiayn.data.tokenizer import Tokenizer


def _sample(processor: spm.SentencePieceProcessor, texts: Sequence[str], p: float, seed: int) -> list[list[int]]:
    """One sampled segmentation of `texts`, the same for the same seed.

    sentencepiece draws from a thread-local generator seeded once, when the thread first samples, from the
    global seed; a new thread that samples alone (num_threads=1) therefore starts from `seed` every time."""
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
    """The training pairs of one epoch under one sampled segmentation: what `ParallelDataset` gives training."""

    def __init__(self, src: list[np.ndarray], tgt: list[np.ndarray], epoch: int) -> None:
        self.epoch = epoch
        self._src, self._tgt = src, tgt
        self.src_lengths = np.fromiter((len(s) for s in src), dtype=np.int64, count=len(src))
        self.tgt_lengths = np.fromiter((len(t) for t in tgt), dtype=np.int64, count=len(tgt))

    def __len__(self) -> int:
        return len(self._src)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self._src[i], self._tgt[i]


class BPEDropout:
    """Sampled segmentations of a binarized training split, one per epoch: merges dropped with probability `p`
    in source sentences and `p_target` (default: `p`) in target sentences; 0 keeps a side's plain pieces."""

    def __init__(self, dataset: ParallelDataset, p: float, seed: int, max_len: int, p_target: float | None = None):
        p_target = p if p_target is None else p_target
        if not (0.0 <= p < 1.0 and 0.0 <= p_target < 1.0) or p == p_target == 0.0:
            raise ValueError(f"BPE-dropout probabilities must lie in [0, 1), one of them above 0; got {p}, {p_target}")
        self.dataset, self.p, self.p_target, self.seed, self.max_len = dataset, p, p_target, seed, max_len
        self.tokenizer = Tokenizer.from_file(dataset.tokenizer_path)
        pairs = [dataset[i] for i in range(len(dataset))]
        self._ids = ([s for s, _ in pairs], [t for _, t in pairs])
        self._text = tuple([self.tokenizer.decode(ids.tolist()) for ids in side] for side in self._ids)

    def epoch(self, epoch: int) -> EpochPairs:
        """The pairs of `epoch` (1-based) under the segmentation drawn from (seed, epoch)."""
        sides = []
        for k, (text, fixed, p) in enumerate(zip(self._text, self._ids, (self.p, self.p_target))):
            if p == 0.0:
                sides.append(fixed)
                continue
            sampled = _sample(self.tokenizer.processor, text, p, _seed(self.seed, epoch, k))
            dtype = fixed[0].dtype if fixed else np.int32
            sides.append([
                np.asarray(s, dtype=dtype) if 0 < len(s) <= self.max_len else f for s, f in zip(sampled, fixed)
            ])  # fmt: skip
        return EpochPairs(sides[0], sides[1], epoch)


def _seed(seed: int, epoch: int, side: int) -> int:
    """A 32-bit seed for (seed, epoch, side), distinct for distinct triples of small numbers."""
    return int(np.random.SeedSequence([seed, epoch, side]).generate_state(1)[0])


__all__ = ["BPEDropout", "EpochPairs"]
