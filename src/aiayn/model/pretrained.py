"""The model directory format, version 3, used by every other part of aiayn:

    config.json          {"format": "aiayn-model", "format_version": 3, "model": {ModelConfig fields},
                          "weights": {"file": "model.safetensors", "sha256": "...", "bytes": N}, ...}
    model.safetensors    the weights; tied matrices stored once (safetensors: no pickle, safe to load)
    tokenizer.model      the sentencepiece model, added by the data pipeline (the model never reads it)

Writes are atomic (a temporary file renamed into place, weights before config); reads verify the checksum and
that every weight matches the configuration, and fail with `ModelDirectoryError` naming the file. Version 1
directories (one fused attention projection) load through `upgrade_v1`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from aiayn.config import ConfigError, ModelConfig
from aiayn.config_loading import field_types
from aiayn.io import atomic_write_json, fsync_dir, fsync_file, readable, sha256_file

if TYPE_CHECKING:
    from aiayn.model.transformer import Transformer

FORMAT = "aiayn-model"
# 3: the settings of imported models (activation, positional layout, final_logits_bias, decoder_start, ...) are
# recorded; 2: W^Q, W^K, W^V, W^O as separate linear maps (1: one fused in_proj); 1 and 2 are read
FORMAT_VERSION = 3
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


class ModelDirectoryError(ValueError):
    """A model directory is missing, corrupt, foreign, or does not match its configuration."""


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


def _dtype(stored: dict[str, torch.Tensor]) -> str | None:
    """The safetensors name ("F32", "BF16") of the floating tensors when they share one dtype, else None."""
    names = {"torch.float16": "F16", "torch.bfloat16": "BF16", "torch.float32": "F32", "torch.float64": "F64"}
    kinds = {names.get(str(t.dtype)) for t in stored.values() if t.is_floating_point()}
    return kinds.pop() if len(kinds) == 1 else None


def save_model(model: Transformer, model_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write config.json and model.safetensors into `model_dir` (created if needed); returns the path."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    stored, aliases = _unique_state(model)
    fd, tmp = tempfile.mkstemp(prefix=f".{WEIGHTS_FILE}.", suffix=".tmp", dir=model_dir)
    os.close(fd)
    try:
        save_file(stored, tmp, metadata={"format": FORMAT, "format_version": str(FORMAT_VERSION)})
        readable(tmp)
        fsync_file(tmp)
        digest, size = sha256_file(tmp), os.path.getsize(tmp)
        os.replace(tmp, model_dir / WEIGHTS_FILE)
        fsync_dir(model_dir)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": model.config.to_dict(),
        "weights": {"file": WEIGHTS_FILE, "sha256": digest, "bytes": size, "tied": aliases, "dtype": _dtype(stored)},
        **(extra or {}),
    }
    atomic_write_json(model_dir / CONFIG_FILE, config)
    return model_dir


def upgrade_v1(tensors: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Format 1 -> 2 names: each attention's fused `in_proj` rows [W^Q; W^K; W^V] become `w_q`, `w_k`, `w_v`,
    `out_proj` becomes `w_o`. The same numbers, split."""
    sizes = [config.h * config.d_k, config.h * config.d_k, config.h * config.d_v]
    upgraded: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        prefix, _, kind = name.rpartition(".")  # kind: weight | bias
        if prefix.endswith(".in_proj"):
            base = prefix.removesuffix("in_proj")
            for part, block in zip(("w_q", "w_k", "w_v"), tensor.split(sizes, dim=0), strict=True):
                upgraded[f"{base}{part}.{kind}"] = block.contiguous()
        elif prefix.endswith(".out_proj"):
            upgraded[f"{prefix.removesuffix('out_proj')}w_o.{kind}"] = tensor
        else:
            upgraded[name] = tensor
    return upgraded


# The fields config.json held in formats 1 and 2; such a directory must have all of them. Fields added to
# ModelConfig since (format 3) take their defaults there (they reproduce the old models); 3 needs every field.
FORMAT1_FIELDS = (
    "src_vocab_size", "tgt_vocab_size", "N", "N_dec", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls",
    "attention_dropout", "activation_dropout", "norm_first", "layer_norm_eps", "positional", "max_positions",
    "share_embeddings", "tie_output", "scale_embeddings", "pad_id", "bos_id", "eos_id", "unk_id",
)  # fmt: skip
# Sizes a model file may declare: far above any real Transformer, far below what exhausts memory when the
# checks against the weights' header run (they build the model on the meta device, which allocates nothing).
SIZE_BOUNDS = {
    "src_vocab_size": 1 << 24, "tgt_vocab_size": 1 << 24, "N": 256, "N_dec": 256, "d_model": 1 << 16,
    "d_ff": 1 << 18, "h": 1024, "d_k": 1 << 14, "d_v": 1 << 14, "max_positions": 1 << 20,
}  # fmt: skip
_FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}


def _check_model_fields(path: Path, version: int, section: Any) -> None:
    """The `model` section holds every required field, and every size within `SIZE_BOUNDS`."""
    if not isinstance(section, dict):
        raise ModelDirectoryError(f'{path}: the "model" section is missing or not a mapping')
    required = FORMAT1_FIELDS if version in (1, 2) else tuple(field_types(ModelConfig))  # 2 held 1's fields
    missing = [name for name in required if name not in section]
    if missing:
        raise ModelDirectoryError(
            f"{path}: model.{missing[0]} is missing (required fields absent: {', '.join(missing)}); "
            "a default would silently change the model"
        )
    for name, bound in SIZE_BOUNDS.items():
        value = section.get(name)
        if isinstance(value, int) and value > bound:
            raise ModelDirectoryError(f"{path}: model.{name} = {value} exceeds the sane bound {bound}")


def read_config(model_dir: str | Path) -> tuple[ModelConfig, dict[str, Any]]:
    """Parse and validate config.json strictly (format, version, every field present with its exact type,
    sizes within `SIZE_BOUNDS`); returns the ModelConfig and the whole JSON document."""
    model_dir = Path(model_dir)
    path = model_dir / CONFIG_FILE
    if not model_dir.exists():
        olds = sorted(model_dir.parent.glob(f".{model_dir.name}.old-*")) if model_dir.parent.is_dir() else []
        hint = f"; an interrupted replacement left {olds[0]}, which the next writer restores" if olds else ""
        raise ModelDirectoryError(f"{model_dir}: not a model directory (it does not exist){hint}")
    if not model_dir.is_dir():
        raise ModelDirectoryError(f"{model_dir}: is a file, not a model directory (which holds {CONFIG_FILE})")
    if not path.is_file():
        raise ModelDirectoryError(f"{path}: missing; a model directory holds {CONFIG_FILE} and {WEIGHTS_FILE}")
    if path.stat().st_size > 16 << 20:
        raise ModelDirectoryError(f"{path}: {path.stat().st_size} bytes; a model config is a few kilobytes")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise ModelDirectoryError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ModelDirectoryError(f'{path}: not an aiayn model config (expected "format": "{FORMAT}")')
    version = document.get("format_version")
    if type(version) is not int or version not in (1, 2, FORMAT_VERSION):
        raise ModelDirectoryError(f"{path}: format_version {version!r} is not supported (1 to {FORMAT_VERSION})")
    try:
        config = ModelConfig.from_dict(document.get("model", {}))
    except ConfigError as error:
        raise ModelDirectoryError(f"{path}: invalid model configuration: {error}") from None
    _check_model_fields(path, version, document.get("model"))
    return config, document


def weights_path(model_dir: str | Path, document: dict[str, Any]) -> Path:
    """The weights file a config.json names: a plain file name inside the directory, with size and checksum."""
    model_dir, config_path = Path(model_dir), Path(model_dir) / CONFIG_FILE
    weights = document.get("weights")
    if not isinstance(weights, dict):
        raise ModelDirectoryError(f'{config_path}: the "weights" section (file, sha256, bytes) is missing')
    for key, kind in (("file", str), ("sha256", str), ("bytes", int)):
        if type(weights.get(key)) is not kind:
            raise ModelDirectoryError(f"{config_path}: weights.{key} is missing or not a {kind.__name__}")
    name = weights["file"]
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise ModelDirectoryError(f"{config_path}: weights.file {name!r} must be a plain file name in the directory")
    path = model_dir / name
    if path.is_symlink() and path.resolve().parent != model_dir.resolve():
        raise ModelDirectoryError(f"{config_path}: weights.file {name!r} links outside the model directory")
    return path


def read_weights(
    model_dir: str | Path, map_location: str | torch.device = "cpu", cls: type[Transformer] | None = None
) -> dict[str, torch.Tensor]:
    """The stored tensors of a model directory, verified: config, size, SHA-256, dtypes as recorded, finite
    values, names and shapes against the configuration (from the file's header, before reading the data)."""
    return _load_verified(model_dir, map_location, cls)[2]


# The sinusoid table (max_positions x d_model, float64 while computed) is built in memory, never stored.
MAX_TABLE_NUMBERS = 1 << 26


def least_weight_bytes(config: ModelConfig) -> int:
    """A lower bound on the bytes of a model file for `config` (2-byte numbers): eq. 2's two matrices and the
    attention projections of every layer, one embedding matrix and a learned position table."""
    attention = 2 * config.d_model * config.h * (config.d_k + config.d_v)  # W^Q, W^K, W^V, W^O
    layers = (config.N + config.decoder_layers) * 2 * config.d_model * config.d_ff
    layers += (config.N + 2 * config.decoder_layers) * attention  # the decoder has self- and cross-attention
    tables = min(config.src_vocab_size, config.tgt_vocab_size) * config.d_model
    if config.positional == "learned":
        tables += config.max_positions * config.d_model
    return 2 * (layers + tables)


def _load_verified(
    model_dir: str | Path, map_location: str | torch.device, cls: type[Transformer] | None
) -> tuple[ModelConfig, dict[str, Any], dict[str, torch.Tensor], Transformer]:
    """config, document, verified tensors, and a model built for the config (its weights not loaded yet).

    Before anything is allocated, the config is bounded by the file: it may not imply more bytes of weights
    than the file holds (`least_weight_bytes`), so building it costs at most about what loading the file does;
    then the names, shapes and dtypes the built model has are compared with the header, before the data is read.
    """
    from aiayn.model.transformer import Transformer

    model_dir = Path(model_dir)
    config, document = read_config(model_dir)
    path = weights_path(model_dir, document)
    weights = document["weights"]
    if not path.is_file():
        raise ModelDirectoryError(f"{path}: missing weights file")
    if path.stat().st_size != weights["bytes"]:
        raise ModelDirectoryError(
            f"{path}: {path.stat().st_size} bytes, but {CONFIG_FILE} records {weights['bytes']} (truncated or replaced)"
        )
    found = _read_header(path)
    least = least_weight_bytes(config)
    if least > weights["bytes"]:
        raise ModelDirectoryError(
            f"{path}: {CONFIG_FILE} implies at least {least} bytes of weights, the file has {weights['bytes']}"
        )
    if config.positional == "sinusoidal" and config.max_positions * config.d_model > MAX_TABLE_NUMBERS:
        raise ModelDirectoryError(
            f"{model_dir / CONFIG_FILE}: model.max_positions x model.d_model = {config.max_positions * config.d_model}"
            f" exceeds {MAX_TABLE_NUMBERS} (the sinusoid table is built in memory)"
        )
    model = (cls or Transformer)(config)
    expected = _expected_tensors(model, document["format_version"])
    _check_header(path, found, expected, weights.get("dtype"))
    if sha256_file(path) != weights["sha256"]:
        raise ModelDirectoryError(f"{path}: checksum mismatch with {CONFIG_FILE}; the file is corrupt or replaced")
    try:
        tensors = load_file(path, device=str(map_location))
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelDirectoryError(f"{path}: not a readable safetensors file ({error})") from None
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ModelDirectoryError(f"{path}: weight {name} holds NaN or infinite values; refusing to use it")
    return config, document, tensors, model


def _expected_tensors(model: torch.nn.Module, version: int) -> dict[str, tuple[tuple, bool]]:
    """{stored name: (shape, is floating)} of a model as `save_model` stores it (format 1: fused in_proj)."""
    stored, _ = _unique_state(model)
    expected = {name: (tuple(t.shape), t.is_floating_point()) for name, t in stored.items()}
    if version == 1:  # the fused layout: in_proj = [W^Q; W^K; W^V] rows, out_proj = W^O
        fused: dict[str, tuple[tuple, bool]] = {}
        for name, (shape, floating) in expected.items():
            prefix, _, kind = name.rpartition(".")
            base, _, part = prefix.rpartition(".")
            if part == "w_q":
                rows = sum(expected[f"{base}.{p}.{kind}"][0][0] for p in ("w_q", "w_k", "w_v"))
                fused[f"{base}.in_proj.{kind}"] = ((rows, *shape[1:]), floating)
            elif part in ("w_k", "w_v"):
                continue
            elif part == "w_o":
                fused[f"{base}.out_proj.{kind}"] = (shape, floating)
            else:
                fused[name] = (shape, floating)
        expected = fused
    return expected


def _read_header(path: Path) -> dict[str, tuple[tuple, str]]:
    """{name: (shape, dtype)} from the safetensors header alone (`safe_open` reads no tensor data)."""
    try:
        with safe_open(path, framework="pt") as handle:
            header = {name: handle.get_slice(name) for name in handle.keys()}  # noqa: SIM118
            return {name: (tuple(s.get_shape()), s.get_dtype()) for name, s in header.items()}
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelDirectoryError(f"{path}: not a readable safetensors file ({error})") from None


def _check_header(
    path: Path, found: dict[str, tuple[tuple, str]], expected: dict[str, tuple[tuple, bool]], dtype: str | None
) -> None:
    """Names, shapes and dtypes in the safetensors header against what the config implies."""
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    if missing or unexpected:
        raise ModelDirectoryError(
            f"{path}: weights do not match {CONFIG_FILE}: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for name, (shape, stored_dtype) in found.items():
        want_shape, floating = expected[name]
        if shape != want_shape:
            raise ModelDirectoryError(f"{path}: weight {name} has shape {shape} but {CONFIG_FILE} implies {want_shape}")
        if floating and stored_dtype not in _FLOAT_DTYPES:
            raise ModelDirectoryError(f"{path}: weight {name} is stored as {stored_dtype}, not a floating-point type")
        if dtype is not None and floating and stored_dtype != dtype:
            raise ModelDirectoryError(f"{path}: weight {name} is {stored_dtype} but {CONFIG_FILE} records {dtype}")


def load_model(cls: type[Transformer], model_dir: str | Path, map_location: str | torch.device = "cpu") -> Transformer:
    """Build the model from config.json and load model.safetensors, all verified first (`read_weights`)."""
    config, document, tensors, model = _load_verified(model_dir, map_location, cls)
    if document["format_version"] == 1:
        tensors = upgrade_v1(tensors, config)
    _, aliases = _unique_state(model)
    model.load_state_dict({**tensors, **{alias: tensors[name] for alias, name in aliases.items()}})
    return model.to(map_location)
