"""Token-budget batching (section 5.1) and padding of pairs into tensors.

"Sentence pairs were batched together by approximate sequence length. Each training batch contained a set
of sentence pairs containing approximately 25000 source tokens and 25000 target tokens."

Sequence convention, shared by training and decoding:

    source     = encode(src) + [eos]
    target in  = [bos] + encode(tgt)      (decoder input, shifted right: section 3.1)
    target out = encode(tgt) + [eos]      (what the decoder must predict)

So a pair of subword lengths (s, t) occupies s + 1 source positions and t + 1 target positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from aiayn.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    from aiayn.data.binarized import ParallelDataset
    from aiayn.data.bpe_dropout import EpochPairs


def make_source(ids: Sequence[int], eos_id: int = EOS_ID) -> list[int]:
    """encode(src) + [eos]."""
    return [*map(int, ids), eos_id]


def make_target(ids: Sequence[int], bos_id: int = BOS_ID, eos_id: int = EOS_ID) -> tuple[list[int], list[int]]:
    """(tgt_in, tgt_out) = ([bos] + encode(tgt), encode(tgt) + [eos])."""
    body = list(map(int, ids))
    return [bos_id, *body], [*body, eos_id]


class TokenBudgetBatches:
    """Groups pair indices into batches of similar length under a padded-token budget.

    A batch of n pairs costs n * max(s + 1) source positions and n * max(t + 1) target positions (each of
    tgt_in and tgt_out is t + 1 wide); both must stay <= `max_tokens` (the paper: about 25000 each).
    Pairs are sorted by (target length, source length) with ties broken at random per epoch, cut greedily
    into batches, and the batch order is shuffled per epoch; everything depends only on (seed, epoch).
    """

    def __init__(
        self,
        src_lengths: Sequence[int] | np.ndarray,
        tgt_lengths: Sequence[int] | np.ndarray,
        max_tokens: int,
        seed: int = 1,
        shuffle: bool = True,
        max_sentences: int | None = None,
    ) -> None:
        self.src_lengths = np.asarray(src_lengths, dtype=np.int64)
        self.tgt_lengths = np.asarray(tgt_lengths, dtype=np.int64)
        if self.src_lengths.shape != self.tgt_lengths.shape or self.src_lengths.ndim != 1:
            raise ValueError(
                f"src_lengths {self.src_lengths.shape} and tgt_lengths {self.tgt_lengths.shape} "
                "must be 1-D arrays of the same length"
            )
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if max_sentences is not None and max_sentences <= 0:
            raise ValueError(f"max_sentences must be positive, got {max_sentences}")
        self.max_tokens = int(max_tokens)
        self.seed = int(seed)
        self.shuffle = shuffle
        self.max_sentences = max_sentences
        too_long = np.flatnonzero((self.src_lengths + 1 > max_tokens) | (self.tgt_lengths + 1 > max_tokens))
        if too_long.size:
            i = int(too_long[0])
            raise ValueError(
                f"{too_long.size} pair(s) do not fit a batch of max_tokens={max_tokens}; "
                f"the first is pair {i} "
                f"with {self.src_lengths[i]} source and {self.tgt_lengths[i]} target subwords (+1 for "
                "EOS/BOS); raise max_tokens or drop long pairs (`aiayn prepare --filter --max-len`)"
            )

    def __len__(self) -> int:
        """Number of pairs (the number of batches varies slightly by epoch; see `epoch`)."""
        return len(self.src_lengths)

    def _order(self, rng: np.random.Generator) -> np.ndarray:
        tie = rng.permutation(len(self)) if self.shuffle else np.arange(len(self))
        return np.lexsort((tie, self.src_lengths, self.tgt_lengths))  # last key is the primary one

    def epoch(self, epoch: int) -> list[list[int]]:
        """All pair indices of one epoch, each exactly once, as batches; deterministic for (seed, epoch)."""
        rng = np.random.default_rng([self.seed, int(epoch)])
        order = self._order(rng)
        src = (self.src_lengths[order] + 1).tolist()
        tgt = (self.tgt_lengths[order] + 1).tolist()
        limit_n = self.max_sentences or len(order) + 1
        budget = self.max_tokens
        batches: list[list[int]] = []
        start, max_s, max_t = 0, 0, 0
        for k in range(len(order)):
            s, t = src[k], tgt[k]
            new_s, new_t = max(max_s, s), max(max_t, t)
            n = k - start + 1
            if n > limit_n or n * new_s > budget or n * new_t > budget:
                batches.append(order[start:k].tolist())
                start, new_s, new_t = k, s, t
            max_s, max_t = new_s, new_t
        if start < len(order):
            batches.append(order[start:].tolist())
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    @staticmethod
    def shard(batches: Sequence[list[int]], rank: int, world_size: int) -> list[list[int]]:
        """Rank `rank`'s share of an epoch's batches for data-parallel training.

        Every rank gets the same number of batches, len(batches) // world_size: the last
        len(batches) % world_size batches of the (already shuffled) epoch are dropped, a different few each
        epoch, so no pair is lost for good. Rank r takes batches r, r + world_size, r + 2 * world_size, ...
        """
        if world_size <= 0 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        usable = len(batches) - len(batches) % world_size
        return list(batches[rank:usable:world_size])


@dataclass
class Batch:
    """Padded, batch-first tensors of one batch of pairs.

    Shapes: src [B, S], tgt_in [B, T], tgt_out [B, T], all torch.long, filled with pad_id.
    `src_tokens` counts non-pad source positions (EOS included); `tgt_tokens` counts non-pad positions of
    tgt_out (EOS included), the number of predictions the loss averages over. `ids` are dataset indices.
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    src_tokens: int
    tgt_tokens: int
    ids: list[int]

    def __len__(self) -> int:
        return self.src.size(0)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return replace(
            self,
            src=self.src.to(device, non_blocking=non_blocking),
            tgt_in=self.tgt_in.to(device, non_blocking=non_blocking),
            tgt_out=self.tgt_out.to(device, non_blocking=non_blocking),
        )

    def pin_memory(self) -> Batch:
        return replace(
            self,
            src=self.src.pin_memory(),
            tgt_in=self.tgt_in.pin_memory(),
            tgt_out=self.tgt_out.pin_memory(),
        )


def collate(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    ids: Sequence[int] | None = None,
) -> Batch:
    """Pad pairs of subword ids (no specials) into a `Batch`, adding EOS/BOS as `make_source/target` do."""
    if not pairs:
        raise ValueError("cannot collate an empty batch")
    if ids is not None and len(ids) != len(pairs):
        raise ValueError(f"{len(ids)} ids for {len(pairs)} pairs")
    B = len(pairs)
    src_len = [len(s) + 1 for s, _ in pairs]
    tgt_len = [len(t) + 1 for _, t in pairs]
    src = np.full((B, max(src_len)), pad_id, dtype=np.int64)  # (B, S)
    tgt_in = np.full((B, max(tgt_len)), pad_id, dtype=np.int64)  # (B, T)
    tgt_out = np.full((B, max(tgt_len)), pad_id, dtype=np.int64)  # (B, T)
    for b, (s, t) in enumerate(pairs):
        n, m = src_len[b] - 1, tgt_len[b] - 1
        src[b, :n] = s
        src[b, n] = eos_id
        tgt_in[b, 0] = bos_id
        tgt_in[b, 1 : m + 1] = t
        tgt_out[b, :m] = t
        tgt_out[b, m] = eos_id
    return Batch(
        src=torch.from_numpy(src),
        tgt_in=torch.from_numpy(tgt_in),
        tgt_out=torch.from_numpy(tgt_out),
        src_tokens=sum(src_len),
        tgt_tokens=sum(tgt_len),
        ids=list(map(int, ids)) if ids is not None else list(range(B)),
    )


def load_batch(dataset: ParallelDataset | EpochPairs, indices: Sequence[int]) -> Batch:
    """Read the pairs `indices` of a dataset and collate them (ids = those indices)."""
    return collate([dataset[i] for i in indices], ids=indices)


__all__ = ["Batch", "TokenBudgetBatches", "collate", "load_batch", "make_source", "make_target"]
