"""Checkpoints (section 5): the model directory format plus the state needed to resume exactly, and the
checkpoint averaging of section 6.1 ("averaging the last 5 checkpoints, which were written at 10-minute
intervals"; 20 for the big model).

A run directory holds

    config.yaml                 the run's configuration (aiayn.config.RunConfig)
    metrics.jsonl               one JSON record per log interval / validation
    checkpoint-0001000/         a model directory (config.json + model.safetensors + tokenizer.model)
        training_state.pt       optimizer, scheduler, step, epoch, position in the epoch, RNG states
    checkpoint-best/            the model with the lowest validation loss (no training state)

Each checkpoint is written into a temporary directory beside it and swapped into place (`aiayn.io.swap_dir`),
so a run killed at any moment leaves only complete checkpoints. `training_state.pt` is written with `torch.save`
and holds only tensors and plain Python values, so it loads with `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from aiayn.data.tokenizer import TOKENIZER_FILENAME as TOKENIZER_FILE
from aiayn.io import clean_stale_temporaries, owned_prefix, recover_swap, sha256_file, swap_dir
from aiayn.model.pretrained import CONFIG_FILE, ModelDirectoryError, read_config, read_weights, save_model, upgrade_v1

TRAINING_STATE = "training_state.pt"
# version 2: config.json's "checkpoint" record holds the state's size and SHA-256 (version 1 had none)
STATE_FORMAT, STATE_VERSION = "aiayn-training-state", 2
STATE_KEYS = ("step", "epoch", "epoch_updates", "best_valid_loss", "train_seconds", "world_size", "update_freq",
              "rng", "optimizer", "scheduler", "scaler")  # fmt: skip
BEST_NAME = "checkpoint-best"
_NUMBERED = re.compile(r"^checkpoint-(\d+)$")


class NonFiniteWeightsError(RuntimeError):
    """A model about to be checkpointed holds NaN or infinite weights; nothing is written."""


def check_finite_weights(model: nn.Module, what: str) -> None:
    """Raise `NonFiniteWeightsError` naming the first parameter or buffer that is not finite."""
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise NonFiniteWeightsError(f"{what}: weight {name} is NaN or infinite; the checkpoint is not written")


def checkpoint_name(step: int) -> str:
    return f"checkpoint-{step:07d}"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Numbered, resumable checkpoints of a run, oldest first."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if (m := _NUMBERED.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found) if (p / TRAINING_STATE).is_file()]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    checkpoints = list_checkpoints(run_dir)
    return checkpoints[-1] if checkpoints else None


def save_checkpoint(
    run_dir: str | Path,
    name: str,
    model: nn.Module,
    info: dict[str, Any],
    tokenizer_path: str | Path | None = None,
    training_state: dict[str, Any] | None = None,
) -> Path:
    """Write `run_dir/name` atomically: model directory (+ `info` under "checkpoint" in config.json),
    tokenizer copy and, when given, the training state (its size and SHA-256 recorded in config.json).
    Weights that are not finite are never written (`NonFiniteWeightsError`)."""
    run_dir = Path(run_dir)
    check_finite_weights(model, str(run_dir / name))
    run_dir.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(run_dir, f".tmp-{name}-")  # left by a killed writer (its process is gone)
    tmp = Path(tempfile.mkdtemp(prefix=owned_prefix(f".tmp-{name}-"), dir=run_dir))
    try:
        info = dict(info)
        if training_state is not None:
            with open(tmp / TRAINING_STATE, "wb") as handle:
                torch.save({"format": STATE_FORMAT, "format_version": STATE_VERSION, **training_state}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            state_path = tmp / TRAINING_STATE
            info["training_state"] = {"sha256": sha256_file(state_path), "bytes": state_path.stat().st_size}
        if tokenizer_path is not None:
            shutil.copyfile(tokenizer_path, tmp / TOKENIZER_FILE)
        save_model(model, tmp, extra={"checkpoint": info})  # type: ignore[arg-type]
        os.chmod(tmp, 0o755)
        swap_dir(tmp, run_dir / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return run_dir / name


def prune_checkpoints(run_dir: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` numbered checkpoints (the best one is never touched)."""
    removed = list_checkpoints(run_dir)[:-keep_last] if keep_last > 0 else []
    for path in removed:
        shutil.rmtree(path)
    return removed


def clean_temporaries(run_dir: str | Path) -> None:
    """After a killed run: remove half-written checkpoint directories and finish or undo interrupted swaps
    (`aiayn.io.recover_swap`: a checkpoint whose replacement was cut short is restored, never deleted)."""
    run_dir = Path(run_dir)
    for path in run_dir.glob(".tmp-checkpoint-*"):
        shutil.rmtree(path, ignore_errors=True)
    for path in run_dir.glob(".checkpoint-*.old-*"):
        recover_swap(run_dir / path.name[1:].rpartition(".old-")[0])
    for path in run_dir.glob(".old-checkpoint-*"):  # the earlier layout: .old-NAME-XXXX/NAME
        for copy in path.iterdir():
            if not (run_dir / copy.name).exists():
                os.replace(copy, run_dir / copy.name)
        shutil.rmtree(path, ignore_errors=True)


def load_training_state(checkpoint: str | Path) -> dict[str, Any]:
    """Read `training_state.pt` with `torch.load(weights_only=True)`, verified against the size and SHA-256
    config.json records (version 2); errors name the file, and a missing key names the key."""
    path = Path(checkpoint) / TRAINING_STATE
    if not path.is_file():
        raise ModelDirectoryError(f"{path}: missing; {checkpoint} is not a resumable checkpoint")
    _, document = read_config(checkpoint)
    info = document.get("checkpoint")
    record = info.get("training_state") if isinstance(info, dict) else None
    if record is not None:
        if not isinstance(record, dict) or path.stat().st_size != record.get("bytes"):
            raise ModelDirectoryError(f"{path}: size differs from what {CONFIG_FILE} records (truncated or replaced)")
        if sha256_file(path) != record.get("sha256"):
            raise ModelDirectoryError(f"{path}: checksum mismatch with {CONFIG_FILE}; the file is corrupt or replaced")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # unpickling errors have many types
        raise ModelDirectoryError(f"{path}: unreadable training state ({error})") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ModelDirectoryError(f"{path}: not an aiayn training state")
    if state.get("format_version") not in (1, STATE_VERSION):
        raise ModelDirectoryError(f"{path}: format_version {state.get('format_version')!r} is not supported")
    if state["format_version"] >= 2 and record is None:
        raise ModelDirectoryError(f"{path}: {CONFIG_FILE} records no checksum for it; refusing an unverified state")
    return state


def require_keys(state: dict[str, Any], checkpoint: str | Path, keys: Sequence[str] = STATE_KEYS) -> None:
    """Resume needs every key of `keys` in a training state; a missing one is named (not a KeyError)."""
    missing = [key for key in keys if key not in state]
    if missing:
        path = Path(checkpoint) / TRAINING_STATE
        raise ModelDirectoryError(f"{path}: key {missing[0]!r} is missing (absent: {', '.join(missing)})")


def load_model_weights(model: nn.Module, checkpoint: str | Path) -> None:
    """Copy a checkpoint's weights into `model` in place (verified: checksum, names, shapes)."""
    loaded = type(model).from_pretrained(checkpoint)  # type: ignore[attr-defined]
    model.load_state_dict(loaded.state_dict())


# --- random number generators ------------------------------------------------------------------------------


def capture_rng() -> dict[str, Any]:
    """The state of every generator training may draw from (python, numpy, torch CPU, every CUDA device)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# --- averaging (section 6.1) -------------------------------------------------------------------------------


def _read_weights(checkpoint: Path) -> dict[str, Tensor]:
    """All weights of a model directory, verified as `load_model` does (size, SHA-256, names, shapes, dtypes,
    finite values), tied names included (safetensors stores each tensor once)."""
    config, document = read_config(checkpoint)
    weights = document["weights"]
    tensors = read_weights(checkpoint)
    if document["format_version"] == 1:
        tensors = upgrade_v1(tensors, config)
    tied = weights.get("tied", {})
    if not isinstance(tied, dict) or any(name not in tensors for name in tied.values()):
        raise ModelDirectoryError(f"{checkpoint / CONFIG_FILE}: weights.tied names tensors that are not stored")
    for alias, name in tied.items():
        tensors[alias] = tensors[name]
    return tensors


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Tensor]:
    """Element-wise mean of the weights of several checkpoints of one model (accumulated in float64)."""
    if not paths:
        raise ValueError("no checkpoints to average")
    paths = [Path(p) for p in paths]
    first = _read_weights(paths[0])
    dtypes = {name: t.dtype for name, t in first.items()}
    total = {name: t.double() if t.is_floating_point() else t for name, t in first.items()}
    for path in paths[1:]:
        tensors = _read_weights(path)
        if tensors.keys() != total.keys():
            raise ModelDirectoryError(f"{path / CONFIG_FILE}: weights differ in names from {paths[0]}")
        for name, tensor in tensors.items():
            if tensor.shape != total[name].shape:
                shape, expected = tuple(tensor.shape), tuple(total[name].shape)
                raise ModelDirectoryError(f"{path}: weight {name} has shape {shape}, not {expected} as in {paths[0]}")
            if tensor.is_floating_point():
                total[name] += tensor.double()
    return {name: (t / len(paths)).to(dtypes[name]) if t.is_floating_point() else t for name, t in total.items()}


def write_average(paths: Sequence[str | Path], out: str | Path) -> Path:
    """Average checkpoints into a new model directory `out` (atomically), with the tokenizer of the last."""
    from aiayn.model import Transformer

    paths = [Path(p) for p in paths]
    model = Transformer.from_pretrained(paths[-1])
    model.load_state_dict(average_checkpoints(paths))
    out = Path(out)
    info = {"averaged_from": [str(p) for p in paths]}
    tokenizer = paths[-1] / TOKENIZER_FILE
    return save_checkpoint(out.parent, out.name, model, info, tokenizer if tokenizer.is_file() else None)


def checkpoint_info(checkpoint: str | Path) -> dict[str, Any]:
    """The "checkpoint" record (step, epoch, valid_loss, ...) of a checkpoint's config.json."""
    document = json.loads((Path(checkpoint) / CONFIG_FILE).read_text(encoding="utf-8"))
    return dict(document.get("checkpoint", {}))


__all__ = [
    "BEST_NAME",
    "TRAINING_STATE",
    "average_checkpoints",
    "capture_rng",
    "checkpoint_info",
    "check_finite_weights",
    "checkpoint_name",
    "clean_temporaries",
    "latest_checkpoint",
    "list_checkpoints",
    "NonFiniteWeightsError",
    "load_model_weights",
    "load_training_state",
    "prune_checkpoints",
    "require_keys",
    "restore_rng",
    "save_checkpoint",
    "write_average",
]
