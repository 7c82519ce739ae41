"""The per-update plan: ranks x accumulation steps cover the epoch's batches once; token totals add up."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.data import TokenBudgetBatches
from aiayn.training.plan import plan_epoch


@pytest.fixture
def batches() -> tuple[TokenBudgetBatches, np.ndarray]:
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 40, 500), rng.integers(1, 40, 500)
    return TokenBudgetBatches(src, tgt, max_tokens=200, seed=3), tgt


@pytest.mark.parametrize("world_size, update_freq", [(1, 1), (1, 3), (2, 1), (3, 2)])
def test_ranks_and_steps_cover_the_epoch(batches, world_size: int, update_freq: int) -> None:
    budget, tgt = batches
    epoch = budget.epoch(4)
    plans = [plan_epoch(budget, tgt, 4, rank, world_size, update_freq) for rank in range(world_size)]
    assert len({len(plan) for plan in plans}) == 1  # every rank makes the same number of updates
    usable = len(epoch) - len(epoch) % world_size
    for u in range(len(plans[0])):
        # update u is the contiguous run of the epoch's batches u*F*W ... (u+1)*F*W - 1, dealt out by rank
        expected = epoch[u * update_freq * world_size : min((u + 1) * update_freq * world_size, usable)]
        got = [batch for plan in plans for batch in plan.updates[u]]
        assert sorted(map(tuple, got)) == sorted(map(tuple, expected))
        assert all(plan.tokens[u] == sum(int(np.sum(tgt[b] + 1)) for b in expected) for plan in plans)
    seen = [i for plan in plans for update in plan.updates for batch in update for i in batch]
    assert len(seen) == len(set(seen)) == sum(len(b) for b in epoch[:usable])


def test_too_few_batches_for_the_ranks(batches) -> None:
    budget, tgt = batches
    with pytest.raises(ValueError, match="too few for 1000 ranks"):
        plan_epoch(budget, tgt, 1, 0, 1000, 1)
