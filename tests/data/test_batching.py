"""Token-budget batching (section 5.1), data-parallel shards, and padding into tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aiayn.data.batching import Batch, TokenBudgetBatches, collate, make_source, make_target

MAX_TOKENS = 600


@pytest.fixture(scope="module")
def lengths() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    src = rng.integers(0, 60, size=3000)
    tgt = np.clip(src + rng.integers(-10, 11, size=3000), 0, 70)
    tgt[:5] = 0  # a few empty targets
    return src, tgt


def padded_cost(batch: list[int], src: np.ndarray, tgt: np.ndarray) -> tuple[int, int]:
    """Positions of the padded source and target tensors, counted independently of the batcher."""
    pairs = [(np.ones(src[i], dtype=np.int64) * 7, np.ones(tgt[i], dtype=np.int64) * 8) for i in batch]
    collated = collate(pairs)
    return collated.src.numel(), collated.tgt_in.numel()


def test_make_source_and_target() -> None:
    assert make_source([5, 6, 7]) == [5, 6, 7, 2]
    assert make_target([8, 9]) == ([1, 8, 9], [8, 9, 2])
    assert make_source(np.array([4], dtype=np.uint16)) == [4, 2]
    assert make_target([]) == ([1], [2])


def test_batches_respect_budget_and_cover_every_pair_once(lengths) -> None:
    src, tgt = lengths
    batcher = TokenBudgetBatches(src, tgt, max_tokens=MAX_TOKENS, seed=3)
    for epoch in (0, 1):
        batches = batcher.epoch(epoch)
        flat = [i for batch in batches for i in batch]
        assert sorted(flat) == list(range(len(src)))
        for batch in batches:
            src_cost, tgt_cost = padded_cost(batch, src, tgt)
            assert src_cost <= MAX_TOKENS and tgt_cost <= MAX_TOKENS
        # grouped by length: little padding on the target side (sorted by it), far less than random grouping
        real = sum(int(tgt[i]) + 1 for i in flat)
        padded = sum(len(b) * max(int(tgt[i]) + 1 for i in b) for b in batches)
        assert real / padded > 0.9
        # greedy filling: batches are nearly full (the budget is the binding constraint)
        assert len(batches) < 1.3 * (src + 1).sum() / MAX_TOKENS + 1


def test_deterministic_per_seed_and_epoch(lengths) -> None:
    src, tgt = lengths
    batcher = TokenBudgetBatches(src, tgt, max_tokens=MAX_TOKENS, seed=1)
    assert batcher.epoch(4) == TokenBudgetBatches(src, tgt, max_tokens=MAX_TOKENS, seed=1).epoch(4)
    assert batcher.epoch(4) != batcher.epoch(5)
    assert batcher.epoch(4) != TokenBudgetBatches(src, tgt, max_tokens=MAX_TOKENS, seed=2).epoch(4)
    fixed = TokenBudgetBatches(src, tgt, max_tokens=MAX_TOKENS, shuffle=False)
    assert fixed.epoch(0) == fixed.epoch(1)
    order = [i for batch in fixed.epoch(0) for i in batch]
    assert [(tgt[i], src[i]) for i in order] == sorted(zip(tgt, src))


def test_max_sentences(lengths) -> None:
    src, tgt = lengths
    batches = TokenBudgetBatches(src, tgt, max_tokens=10_000, max_sentences=16).epoch(0)
    assert max(map(len, batches)) == 16
    assert sorted(i for batch in batches for i in batch) == list(range(len(src)))


def test_pair_over_budget_is_named() -> None:
    with pytest.raises(ValueError, match="first is pair 2 with 5 source and 99 target"):
        TokenBudgetBatches([3, 4, 5, 6], [3, 4, 99, 200], max_tokens=50)
    TokenBudgetBatches([3, 4], [3, 49], max_tokens=50)  # 49 + BOS fits exactly


def test_shards_are_disjoint_and_equal(lengths) -> None:
    src, tgt = lengths
    batches = TokenBudgetBatches(src, tgt, max_tokens=MAX_TOKENS, seed=7).epoch(2)
    world_size = 3
    shards = [TokenBudgetBatches.shard(batches, rank, world_size) for rank in range(world_size)]
    assert len({len(shard) for shard in shards}) == 1
    assert len(shards[0]) == len(batches) // world_size
    seen = [i for shard in shards for batch in shard for i in batch]
    assert len(seen) == len(set(seen))  # disjoint
    usable = len(batches) - len(batches) % world_size
    assert sorted(seen) == sorted(i for batch in batches[:usable] for i in batch)
    assert TokenBudgetBatches.shard(batches, 0, 1) == batches
    with pytest.raises(ValueError):
        TokenBudgetBatches.shard(batches, 3, 3)


def test_collate_pads_and_places_bos_eos() -> None:
    batch = collate([([5, 6, 7], [8, 9]), (np.array([10]), np.array([11, 12, 13, 14]))], ids=[42, 7])
    assert isinstance(batch, Batch) and len(batch) == 2 and batch.ids == [42, 7]
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    assert batch.src.tolist() == [[5, 6, 7, 2], [10, 2, 0, 0]]
    assert batch.tgt_in.tolist() == [[1, 8, 9, 0, 0], [1, 11, 12, 13, 14]]
    assert batch.tgt_out.tolist() == [[8, 9, 2, 0, 0], [11, 12, 13, 14, 2]]
    assert (batch.src_tokens, batch.tgt_tokens) == (6, 8)
    assert batch.src_tokens == int((batch.src != 0).sum()) and batch.tgt_tokens == int((batch.tgt_out != 0).sum())
    moved = batch.to("cpu")
    assert isinstance(moved, Batch) and torch.equal(moved.tgt_out, batch.tgt_out) and moved.ids == [42, 7]


def test_collate_custom_ids_and_empty_sides() -> None:
    batch = collate([([], []), ([4], [])], pad_id=9, bos_id=7, eos_id=8)
    assert batch.src.tolist() == [[8, 9], [4, 8]]
    assert batch.tgt_in.tolist() == [[7], [7]]
    assert batch.tgt_out.tolist() == [[8], [8]]
    assert batch.ids == [0, 1]
    with pytest.raises(ValueError):
        collate([])
