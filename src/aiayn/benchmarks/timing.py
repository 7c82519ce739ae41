"""Timing and growth-rate helpers for the benchmarks (section 4, Table 1: how cost grows with n).

`time_call` times a function by its minimum over repeats (the least disturbed run on a shared machine);
`fit_exponent` fits t = c n^p by least squares in log-log space; `crossover` finds where one cost curve
overtakes another, interpolating in log-log space between measured lengths.
"""

from __future__ import annotations

import math
import platform
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from aiayn.kernels import cpu_features


def time_call(
    fn: Callable[[], object], min_repeats: int = 3, max_repeats: int = 20, min_total_s: float = 0.3, warmup: int = 1
) -> dict[str, float]:
    """Run `fn` `warmup` times, then at least `min_repeats` times and until `min_total_s` seconds have passed
    (at most `max_repeats`). Returns {"min_s", "median_s", "repeats"}."""
    for _ in range(warmup):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_repeats or (time.perf_counter() - start < min_total_s and len(times) < max_repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"min_s": min(times), "median_s": statistics.median(times), "repeats": len(times)}


def fit_exponent(ns: Sequence[float], times: Sequence[float]) -> dict[str, float]:
    """Least-squares fit of log t = log c + p log n. Returns {"exponent": p, "coefficient": c, "r2"}."""
    if len(ns) != len(times) or len(ns) < 2:
        raise ValueError("fit_exponent needs at least two (n, time) pairs of equal count")
    if min(ns) <= 0 or min(times) <= 0:
        raise ValueError("fit_exponent needs positive lengths and times")
    xs = [math.log(n) for n in ns]
    ys = [math.log(t) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("fit_exponent needs at least two distinct lengths")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return {"exponent": slope, "coefficient": math.exp(intercept), "r2": 1.0 - ss_res / ss_tot if ss_tot else 1.0}


def crossover(ns: Sequence[float], slower_later: Sequence[float], other: Sequence[float]) -> float | None:
    """The first length where `slower_later` stops being cheaper than `other` (log-log interpolation between
    the two measured lengths around it); None if it stays cheaper over the range. If it is never cheaper,
    returns the first length."""
    diff = [math.log(a) - math.log(b) for a, b in zip(slower_later, other)]
    if diff[0] >= 0:
        return float(ns[0])
    for i in range(1, len(ns)):
        if diff[i] >= 0:
            x0, x1 = math.log(ns[i - 1]), math.log(ns[i])
            x = x0 + (x1 - x0) * (0 - diff[i - 1]) / (diff[i] - diff[i - 1])
            return math.exp(x)
    return None


def machine() -> dict[str, object]:
    """Where the numbers were measured."""
    return {
        "platform": platform.platform(),
        "processor": cpu_features().describe(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }
