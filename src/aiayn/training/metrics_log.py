"""The run's metrics log: one JSON object per line in `metrics.jsonl` (and TensorBoard scalars if installed).

Records carry `kind` ("train", "valid", "bleu", "end") and `step` (updates done). Losses are per target token,
in nats (natural log); perplexity is exp(nll_loss). After a resume the records past the checkpoint's step are
dropped, so the file always reads as one uninterrupted run.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from aiayn.evaluation import perplexity
from aiayn.io import atomic_write_bytes
from aiayn.training.distributed import DistContext, all_reduce_sum

METRICS_FILE = "metrics.jsonl"


class MetricsLog:
    def __init__(self, run_dir: str | Path, enabled: bool = True, tensorboard: bool = False) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        self.enabled = enabled
        self._tb = None
        if enabled and tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(Path(run_dir) / "tensorboard"))
            except ImportError:  # tensorboard is optional
                self._tb = None

    def truncate_after(self, step: int) -> None:
        """Keep only records with step <= `step` (resuming from a checkpoint written at `step`)."""
        if not self.enabled or not self.path.is_file():
            return
        kept = [line for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True) if line.strip()]
        kept = [line for line in kept if _step(line) <= step]
        atomic_write_bytes(self.path, "".join(kept).encode())

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "step" and math.isfinite(value):
                    self._tb.add_scalar(f"{record['kind']}/{key}", value, record["step"])
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


class TrainMeter:
    """Sums over one log interval (summed losses stay on the device until logged, to avoid a sync per update)."""

    def __init__(self) -> None:
        self._items: list[tuple[torch.Tensor, torch.Tensor, int, int]] = []
        self.reset_clock()

    def reset_clock(self) -> None:
        self._clock = time.perf_counter()

    def add(self, loss_sum: torch.Tensor, nll_sum: torch.Tensor, src_tokens: int, tgt_tokens: int) -> None:
        self._items.append((loss_sum, nll_sum, src_tokens, tgt_tokens))

    def __bool__(self) -> bool:
        return bool(self._items)

    def record(self, ctx: DistContext, step: int, epoch: int, lr: float, elapsed: float) -> dict[str, Any]:
        """The "train" record of the interval (sums over all ranks), and a fresh interval."""
        loss = float(sum(item[0] for item in self._items))  # type: ignore[arg-type]
        nll = float(sum(item[1] for item in self._items))  # type: ignore[arg-type]
        src, tgt = sum(item[2] for item in self._items), sum(item[3] for item in self._items)
        loss, nll, src, tgt = all_reduce_sum([loss, nll, src, tgt], ctx)
        now = time.perf_counter()
        seconds = max(now - self._clock, 1e-9)
        self._items, self._clock = [], now
        return {
            "kind": "train", "step": step, "epoch": epoch, "loss": loss / tgt, "nll_loss": nll / tgt,
            "ppl": perplexity(nll / tgt), "lr": lr, "src_tokens": int(src), "tgt_tokens": int(tgt),
            "tgt_tokens_per_s": tgt / seconds, "tokens_per_s": (src + tgt) / seconds, "elapsed_s": elapsed,
        }  # fmt: skip


def _step(line: str) -> float:
    try:
        return float(json.loads(line).get("step", math.inf))
    except (json.JSONDecodeError, AttributeError):
        return math.inf  # a line cut short by a kill is dropped


def read_metrics(run_dir: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    """The records of a run's metrics.jsonl, optionally only those of one kind."""
    path = Path(run_dir) / METRICS_FILE
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in records if kind is None or r.get("kind") == kind]


__all__ = ["METRICS_FILE", "MetricsLog", "TrainMeter", "read_metrics"]
