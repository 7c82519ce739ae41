"""The run's metrics log: one JSON object per line in `metrics.jsonl` (and TensorBoard scalars if installed).

Records carry `kind` ("train", "valid", "bleu", "end") and `step` (updates done). Losses are per target token,
in nats (natural log); perplexity is exp(nll_loss). After a resume the records past the checkpoint's step are
dropped, so the file always reads as one uninterrupted run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from aiayn.model.pretrained import atomic_write_bytes

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


__all__ = ["METRICS_FILE", "MetricsLog", "read_metrics"]
