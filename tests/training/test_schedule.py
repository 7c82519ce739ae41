"""Learning rate of section 5.3, eq. 3, at several steps, through the optimizer it drives."""

from __future__ import annotations

import pytest
import torch

from aiayn.training.schedule import inverse_sqrt_lr, inverse_sqrt_schedule


def eq3(step: int, d_model: int, warmup: int) -> float:
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step", [1, 2, 100, 3999, 4000, 4001, 10_000, 100_000])
def test_function_is_eq3(step: int) -> None:
    assert inverse_sqrt_lr(step, 512, 4000) == pytest.approx(eq3(step, 512, 4000), rel=1e-12)
    assert inverse_sqrt_lr(step, 128, 1000, scale=2.0) == pytest.approx(2 * eq3(step, 128, 1000), rel=1e-12)


def test_peak_at_warmup() -> None:
    peak = inverse_sqrt_lr(4000, 512, 4000)
    assert peak == pytest.approx((512 * 4000) ** -0.5, rel=1e-12)  # ~7.0e-4 for the base model
    assert inverse_sqrt_lr(3999, 512, 4000) < peak and inverse_sqrt_lr(4001, 512, 4000) < peak
    assert inverse_sqrt_lr(0, 512, 4000) == 0.0


def test_scheduler_sets_the_rate_of_each_update() -> None:
    """Update k (1-based) runs at lrate(k); the scheduler steps after the optimizer."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([param], lr=123.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = inverse_sqrt_schedule(optimizer, d_model=512, warmup=40, scale=1.0)
    seen = []
    for _ in range(120):
        seen.append(optimizer.param_groups[0]["lr"])
        param.grad = torch.ones(1)
        optimizer.step()
        scheduler.step()
    for k in (1, 2, 39, 40, 41, 120):
        assert seen[k - 1] == pytest.approx(eq3(k, 512, 40), rel=1e-12)
    assert max(seen) == seen[39]


def test_scheduler_state_round_trip() -> None:
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([param])
    scheduler = inverse_sqrt_schedule(optimizer, 256, 100, 2.0)
    for _ in range(7):
        optimizer.step()
        scheduler.step()
    fresh_optimizer = torch.optim.Adam([param])
    fresh = inverse_sqrt_schedule(fresh_optimizer, 256, 100, 2.0)
    fresh_optimizer.load_state_dict(optimizer.state_dict())
    fresh.load_state_dict(scheduler.state_dict())
    optimizer.step(), scheduler.step(), fresh_optimizer.step(), fresh.step()
    assert fresh_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2 * eq3(9, 256, 100), rel=1e-12)


def test_linear_decay_warms_up_as_eq3_then_falls_to_zero_at_its_last_update() -> None:
    """train.lr_decay: linear, through the optimizer: eq. 3 up to the peak, then a straight line to 0."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([param], lr=1.0)
    scheduler = inverse_sqrt_schedule(optimizer, 128, 10, 2.0, decay="linear", total=50)
    seen = []
    for _ in range(60):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    peak = 2 * eq3(10, 128, 10)
    for k in (1, 5, 10):
        assert seen[k - 1] == pytest.approx(2 * eq3(k, 128, 10), rel=1e-12)
    assert seen[29] == pytest.approx(peak * 20 / 40, rel=1e-12)  # update 30 of 50: halfway down from update 10
    assert seen[48] == pytest.approx(peak / 40, rel=1e-12) and seen[49] == 0.0 and seen[59] == 0.0
    assert all(a > b for a, b in zip(seen[9:49], seen[10:50]))  # strictly falling after the peak


def test_linear_decay_needs_a_last_update_after_the_warmup() -> None:
    from aiayn.config import ConfigError, TrainConfig

    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    with pytest.raises(ValueError, match="after the warmup"):
        inverse_sqrt_schedule(optimizer, 128, 100, decay="linear", total=100)
    with pytest.raises(ConfigError, match="train.decay_updates"):
        TrainConfig(lr_decay="linear", warmup=1000, max_minutes=60)
    with pytest.raises(ConfigError, match="train.lr_decay"):
        TrainConfig(lr_decay="cosine", max_updates=10)
    assert TrainConfig(lr_decay="linear", warmup=1000, max_updates=5000).decay_updates == 0


def test_decay_line_redrawn_keeps_the_rate_continuous_and_ends_at_zero() -> None:
    """train.decay_updates: auto's line: redrawing at update k keeps update k's factor and falls to 0 at the new end;
    redrawn before the warmup ends it only moves the end (the line still starts at the peak)."""
    from aiayn.training.schedule import DecayLine

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([param], lr=1.0)
    line = DecayLine(10, 0)
    scheduler = inverse_sqrt_schedule(optimizer, 128, 10, 2.0, decay="linear", line=line)
    peak, seen = 2 * eq3(10, 128, 10), []
    for k in range(1, 61):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        if k == 5:
            line.redraw(5, 50)  # before the warmup's end: the line 10 -> 50 from the peak
            assert (line.start, line.end, line.start_factor) == (10, 50, 1.0)
        if k == 30:
            line.redraw(30, 40)  # at update 30 (factor 0.5) the budget shrinks: 0 at update 40 instead of 50
            from aiayn.training.schedule import reapply

            reapply(scheduler)
    assert seen[9] == pytest.approx(peak, rel=1e-12) and seen[19] == pytest.approx(peak * 30 / 40, rel=1e-12)
    assert seen[29] == pytest.approx(peak / 2, rel=1e-12)  # update 30 on the first line
    assert seen[30] == pytest.approx(peak / 2 * 9 / 10, rel=1e-12)  # update 31 on the second: 0.5 * (40-31)/(40-30)
    assert seen[38] == pytest.approx(peak / 2 / 10, rel=1e-12) and seen[39] == 0.0 and seen[59] == 0.0


def test_decay_updates_auto_needs_a_linear_decay_and_a_time_budget() -> None:
    from aiayn.config import ConfigError, TrainConfig, build_run_config

    document = {"train": {"lr_decay": "linear", "max_minutes": 60, "max_updates": 8000}}
    assert build_run_config(document, ["train.decay_updates=auto"]).train.decay_updates == "auto"
    assert TrainConfig(lr_decay="linear", warmup=1000, max_minutes=60, decay_updates="auto").max_updates == 0
    assert build_run_config({"train": {"max_updates": 9}}, ["train.decay_updates=7"]).train.decay_updates == 7
    with pytest.raises(ConfigError, match="train.decay_updates: auto .* train.max_minutes > 0"):
        TrainConfig(lr_decay="linear", max_updates=5000, decay_updates="auto")
    with pytest.raises(ConfigError, match="train.lr_decay: linear"):
        TrainConfig(max_minutes=60, decay_updates="auto")
    with pytest.raises(ConfigError, match="train.decay_updates"):
        build_run_config(document, ["train.decay_updates=soon"])
