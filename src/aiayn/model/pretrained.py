"""The model directory format, version 1, used by every other part of aiayn:

    config.json          {"format": "aiayn-model", "format_version": 1, "model": {ModelConfig fields},
                          "weights": {"file": "model.safetensors", "sha256": "...", "bytes": N}, ...}
    model.safetensors    the weights; tied matrices stored once (safetensors: no pickle, safe to load)
    tokenizer.model      the sentencepiece model, added by the data pipeline (the model never reads it)

Writes are atomic (a temporary file renamed into place, weights before config); reads verify the checksum and
that every weight matches the configuration, and fail with `ModelDirectoryError` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from aiayn.config import ConfigError, ModelConfig

if TYPE_CHECKING:
    from aiayn.model.transformer import Transformer

FORMAT = "aiayn-model"
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


class ModelDirectoryError(ValueError):
    """A model directory is missing, corrupt, foreign, or does not match its configuration."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _readable(path: str | Path) -> None:
    """mkstemp creates files private (0600); give them the permissions any other file here would get."""
    os.chmod(path, 0o666 & ~_umask())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    _readable(tmp)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _unique_state(model: torch.nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """State dict with each tied tensor stored once, and the map alias -> stored name."""
    stored: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    by_storage: dict[tuple[int, int], str] = {}
    for name, tensor in model.state_dict().items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
        if key in by_storage:
            aliases[name] = by_storage[key]
        else:
            by_storage[key] = name
            stored[name] = tensor.detach().contiguous().cpu()
    return stored, aliases


def save_model(model: Transformer, model_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write config.json and model.safetensors into `model_dir` (created if needed); returns the path."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    stored, aliases = _unique_state(model)
    fd, tmp = tempfile.mkstemp(prefix=f".{WEIGHTS_FILE}.", suffix=".tmp", dir=model_dir)
    os.close(fd)
    try:
        save_file(stored, tmp, metadata={"format": FORMAT, "format_version": str(FORMAT_VERSION)})
        _readable(tmp)
        digest, size = sha256_file(Path(tmp)), os.path.getsize(tmp)
        os.replace(tmp, model_dir / WEIGHTS_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": model.config.to_dict(),
        "weights": {"file": WEIGHTS_FILE, "sha256": digest, "bytes": size, "tied": aliases},
        **(extra or {}),
    }
    atomic_write_json(model_dir / CONFIG_FILE, config)
    return model_dir


def read_config(model_dir: str | Path) -> tuple[ModelConfig, dict[str, Any]]:
    """Parse and validate config.json; returns the ModelConfig and the whole JSON document."""
    model_dir = Path(model_dir)
    path = model_dir / CONFIG_FILE
    if not model_dir.is_dir():
        raise ModelDirectoryError(f"{model_dir}: not a model directory (it does not exist)")
    if not path.is_file():
        raise ModelDirectoryError(f"{path}: missing; a model directory holds {CONFIG_FILE} and {WEIGHTS_FILE}")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelDirectoryError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ModelDirectoryError(f'{path}: not an aiayn model config (expected "format": "{FORMAT}")')
    version = document.get("format_version")
    if version != FORMAT_VERSION:
        raise ModelDirectoryError(f"{path}: format_version {version!r} is not supported (expected {FORMAT_VERSION})")
    try:
        config = ModelConfig.from_dict(document.get("model", {}))
    except ConfigError as error:
        raise ModelDirectoryError(f"{path}: invalid model configuration: {error}") from None
    return config, document


def load_model(cls: type[Transformer], model_dir: str | Path, map_location: str | torch.device = "cpu") -> Transformer:
    """Build the model from config.json and load model.safetensors, checking checksum, names and shapes."""
    model_dir = Path(model_dir)
    config, document = read_config(model_dir)
    weights = document.get("weights", {})
    path = model_dir / weights.get("file", WEIGHTS_FILE)
    if not path.is_file():
        raise ModelDirectoryError(f"{path}: missing weights file")
    expected_bytes = weights.get("bytes")
    if expected_bytes is not None and path.stat().st_size != expected_bytes:
        raise ModelDirectoryError(
            f"{path}: {path.stat().st_size} bytes, but {CONFIG_FILE} records {expected_bytes} (truncated or replaced)"
        )
    if "sha256" in weights and sha256_file(path) != weights["sha256"]:
        raise ModelDirectoryError(f"{path}: checksum mismatch with {CONFIG_FILE}; the file is corrupt or replaced")
    try:
        tensors = load_file(path, device=str(map_location))
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelDirectoryError(f"{path}: not a readable safetensors file ({error})") from None

    model = cls(config)
    expected = model.state_dict()
    _, aliases = _unique_state(model)
    missing = sorted(k for k in expected if k not in aliases and k not in tensors)
    unexpected = sorted(k for k in tensors if k not in expected or k in aliases)
    if missing or unexpected:
        raise ModelDirectoryError(
            f"{path}: weights do not match {CONFIG_FILE}: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise ModelDirectoryError(
                f"{path}: weight {name} has shape {tuple(tensor.shape)} but {CONFIG_FILE} implies "
                f"{tuple(expected[name].shape)}"
            )
    model.load_state_dict({**tensors, **{alias: tensors[name] for alias, name in aliases.items()}})
    return model.to(map_location)
