"""Which pairs each update trains on: the token-budget batches of section 5.1, spread over data-parallel ranks
and gradient-accumulation micro-steps.

An epoch's batches (a function of seed and epoch only) are dealt out as `TokenBudgetBatches.shard` does:
rank r takes batches r, r + W, r + 2W, ...; each update takes `update_freq` consecutive micro-batches of a
rank's share, so update u covers the epoch's batches u*F*W .. (u+1)*F*W - 1 on all ranks together. Every
rank knows every batch, so it knows each update's total target tokens, the loss normaliser, without talking
to the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiayn.data import TokenBudgetBatches


@dataclass(frozen=True)
class EpochPlan:
    epoch: int
    updates: list[list[list[int]]]  # this rank's micro-batches (pair indices) of each update
    tokens: list[int]  # target tokens (with EOS) of each update over all ranks

    def __len__(self) -> int:
        return len(self.updates)


def plan_epoch(
    batches: TokenBudgetBatches, tgt_lengths: np.ndarray, epoch: int, rank: int, world_size: int, update_freq: int
) -> EpochPlan:
    """This rank's updates of `epoch`; an epoch too small to give every rank a batch is an error."""
    W, F = world_size, update_freq
    epoch_batches = batches.epoch(epoch)
    mine = TokenBudgetBatches.shard(epoch_batches, rank, W)
    counts = [int(np.sum(tgt_lengths[b] + 1)) for b in epoch_batches[: len(mine) * W]]
    updates = [mine[k : k + F] for k in range(0, len(mine), F)]
    tokens = [sum(counts[u * F * W : (u + 1) * F * W]) for u in range(len(updates))]
    if not updates:
        raise ValueError(f"epoch {epoch} has {len(epoch_batches)} batches, too few for {W} ranks")
    return EpochPlan(epoch, updates, tokens)


__all__ = ["EpochPlan", "plan_epoch"]
