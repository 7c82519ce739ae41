"""`train.precision: fastest`: time a few training steps in each precision the CPU offers, keep the faster.

On CPUs with native bf16 matrix units (AMX, AVX-512 BF16) a narrow model (d_model < 256) can train faster in
float32 or in bf16, depending on the guest (docs/benchmarks/training.md): its products are small, and what
bf16 saves on them its casts can cost back. So the run measures: copies of the model, each prepared as the
trainer would prepare it, take turns running forward, loss and backward on the run's own first batches; each
precision keeps its fastest step, and bf16 is chosen only when it is clearly faster. The measurement leaves the
model, the optimizer and every random number generator as it found them, so a run is the same whichever
precision the measurement picks, up to that precision's rounding.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from aiayn.data.batching import Batch
from aiayn.kernels import prepare_for_training
from aiayn.training.loss import label_smoothed_nll_loss

BF16_MIN_SPEEDUP = 1.05  # bf16 is chosen only when its fastest step is at least this much faster


@dataclass(frozen=True)
class PrecisionProbe:
    """The fastest measured step (seconds) of each precision, and the precision chosen."""

    seconds: dict[str, float]
    chosen: torch.dtype

    def describe(self) -> str:
        times = ", ".join(f"{name} {s:.3f} s" for name, s in self.seconds.items())
        return f"precision fastest: forward+backward of the first batches at best {times} -> {_name(self.chosen)}"


def _name(dtype: torch.dtype) -> str:
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def _step(model: nn.Module, batch: Batch, dtype: torch.dtype, eps_ls: float, pad_id: int) -> float:
    """Seconds of one forward, loss and backward (what an update costs, without the optimizer's step, which is
    the same float32 arithmetic in every precision)."""
    start = time.perf_counter()
    with torch.autocast(batch.src.device.type, dtype=dtype, enabled=dtype != torch.float32):
        real = batch.tgt_out != pad_id
        logits = model(batch.src, batch.tgt_in, real)
        loss, _ = label_smoothed_nll_loss(logits, batch.tgt_out[real], eps_ls, pad_id)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def measure_precisions(
    model: nn.Module,
    candidates: Sequence[torch.dtype],
    batches: Sequence[Batch],
    max_keys: int,
    rounds: int = 3,
) -> PrecisionProbe:
    """Time `rounds` passes over `batches` in each of `candidates` (taking turns, one batch at a time, after one
    untimed warm-up pass each) on copies of `model` prepared as for training; keep each precision's fastest
    step summed over the batches. float32 wins unless bf16 is BF16_MIN_SPEEDUP faster."""
    if not batches:
        raise ValueError("the precision measurement needs at least one batch")
    eps_ls, pad_id = model.config.eps_ls, model.config.pad_id
    with torch.random.fork_rng(devices=[]):  # dropout draws here must not shift the run's stream
        copies = {}
        for dtype in candidates:
            replica = copy.deepcopy(model).train()
            prepare_for_training(replica, precision=dtype, max_keys=max_keys)
            copies[dtype] = replica
        best = {dtype: [float("inf")] * len(batches) for dtype in candidates}
        for r in range(rounds + 1):
            for i, batch in enumerate(batches):
                for dtype, replica in copies.items():
                    seconds = _step(replica, batch, dtype, eps_ls, pad_id)
                    if r > 0:
                        best[dtype][i] = min(best[dtype][i], seconds)
    seconds = {_name(dtype): sum(times) for dtype, times in best.items()}
    fp32 = seconds.get("fp32", float("inf"))
    chosen = torch.float32 if torch.float32 in candidates else candidates[0]
    if torch.bfloat16 in candidates and seconds["bf16"] * BF16_MIN_SPEEDUP <= fp32:
        chosen = torch.bfloat16
    return PrecisionProbe(seconds, chosen)


__all__ = ["BF16_MIN_SPEEDUP", "PrecisionProbe", "measure_precisions"]
