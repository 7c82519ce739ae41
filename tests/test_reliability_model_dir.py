"""Issue 12, classes 3 (integrity holes) and 4 (resource exhaustion from a file): every corrupt, foreign or
oversized model directory is refused with a `ModelDirectoryError` naming the file and field, in bounded time
and memory (the config is checked against the safetensors header before anything is allocated)."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from aiayn.io import sha256_file
from aiayn.model import ModelDirectoryError, Transformer
from aiayn.model.pretrained import FORMAT1_FIELDS, read_config
from aiayn.training import checkpoint as ckpt
from tests.conftest import tiny_config


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    Transformer(tiny_config()).save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def edit(model_dir: Path, change) -> None:
    document = json.loads((model_dir / "config.json").read_text())
    change(document)
    (model_dir / "config.json").write_text(json.dumps(document))


def rewrite_weights(model_dir: Path, tensors: dict) -> None:
    """Replace the weights and record their new size and checksum, so only the content is wrong."""
    save_file(tensors, model_dir / "model.safetensors")
    path = model_dir / "model.safetensors"
    edit(model_dir, lambda d: d["weights"].update(sha256=sha256_file(path), bytes=path.stat().st_size))


def _set(path: str, value):
    def change(document: dict) -> None:
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node[key]
        node[last] = value

    return change


def _delete(path: str):
    def change(document: dict) -> None:
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node[key]
        del node[last]

    return change


CONFIG_CASES = [
    ("no weights section", _delete("weights"), r'"weights" section'),
    ("no sha256", _delete("weights.sha256"), r"weights\.sha256 is missing"),
    ("no bytes", _delete("weights.bytes"), r"weights\.bytes is missing"),
    ("missing scale_embeddings", _delete("model.scale_embeddings"), r"model\.scale_embeddings is missing"),
    ("missing layer_norm_eps", _delete("model.layer_norm_eps"), r"model\.layer_norm_eps is missing"),
    ("N as text", _set("model.N", "2"), r"model\.N: expected int"),
    ("N as bool", _set("model.N", True), r"model\.N: expected int"),
    ("N as float", _set("model.N", 2.0), r"model\.N: expected int"),
    ("flag as int", _set("model.norm_first", 0), r"model\.norm_first: expected bool"),
    ("eps NaN", _set("model.layer_norm_eps", float("nan")), r"layer_norm_eps"),
    ("N = 10**6", _set("model.N", 10**6), r"model\.N = 1000000 exceeds"),
    ("d_model = 10**9", _set("model.d_model", 10**9), r"model\.d_model = 1000000000 exceeds"),
    ("vocab = 10**9", lambda d: d["model"].update(src_vocab_size=10**9, tgt_vocab_size=10**9), r"exceeds"),
    ("big but in bounds", lambda d: d["model"].update(N=256, d_model=4096, d_ff=16384), r"implies at least"),
    ("path outside", _set("weights.file", "../model.safetensors"), r"plain file name"),
    ("absolute path", _set("weights.file", "/etc/passwd"), r"plain file name"),
    ("format_version as text", _set("format_version", "2"), r"format_version '2'"),
    ("model not a mapping", _set("model", [1, 2]), r"model"),
    ("dtype recorded differs", _set("weights.dtype", "BF16"), r"records BF16"),
]


@pytest.mark.parametrize("name, change, match", CONFIG_CASES, ids=[case[0] for case in CONFIG_CASES])
def test_bad_config_is_refused_quickly_and_without_allocating(saved: Path, name: str, change, match: str) -> None:
    edit(saved, change)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with pytest.raises(ModelDirectoryError, match=match):
        Transformer.from_pretrained(saved)
    assert time.perf_counter() - started < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: no model was built


def test_weights_file_linking_outside_is_refused(saved: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.safetensors"
    (saved / "model.safetensors").rename(outside)
    (saved / "model.safetensors").symlink_to(outside)
    with pytest.raises(ModelDirectoryError, match="links outside"):
        Transformer.from_pretrained(saved)


def test_integer_and_nan_tensors_are_refused(saved: Path) -> None:
    tensors = load_file(saved / "model.safetensors")
    name = next(iter(tensors))
    rewrite_weights(saved, {**tensors, name: tensors[name].to(torch.int32)})
    with pytest.raises(ModelDirectoryError, match=rf"{name} is stored as I32"):
        Transformer.from_pretrained(saved)
    poisoned = tensors[name].clone()
    poisoned.view(-1)[0] = float("nan")
    rewrite_weights(saved, {**tensors, name: poisoned})
    with pytest.raises(ModelDirectoryError, match=rf"{name} holds NaN"):
        Transformer.from_pretrained(saved)


@pytest.mark.parametrize("version", [1, 2])
def test_older_directories_need_only_their_own_fields(saved: Path, version: int) -> None:
    """A format-1 (fused in_proj) or format-2 directory written before fields were added still loads; the new
    fields take their defaults. One missing a field its format had is refused."""
    model = Transformer.from_pretrained(saved)
    tensors = load_file(saved / "model.safetensors")
    fused = {}
    for key, tensor in tensors.items():
        prefix, _, kind = key.rpartition(".")
        base, _, part = prefix.rpartition(".")
        if part == "w_q":
            fused[f"{base}.in_proj.{kind}"] = torch.cat([tensors[f"{base}.{p}.{kind}"] for p in ("w_q", "w_k", "w_v")])
        elif part == "w_o":
            fused[f"{base}.out_proj.{kind}"] = tensor
        elif part not in ("w_k", "w_v"):
            fused[key] = tensor
    rewrite_weights(saved, fused if version == 1 else tensors)

    def to_v1(document: dict) -> None:
        document["format_version"] = version
        document["model"] = {key: document["model"][key] for key in FORMAT1_FIELDS}
        document["weights"].pop("dtype")

    edit(saved, to_v1)
    loaded = Transformer.from_pretrained(saved)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    edit(saved, _delete("model.scale_embeddings"))
    with pytest.raises(ModelDirectoryError, match=r"model\.scale_embeddings is missing"):
        read_config(saved)


def test_average_verifies_checksums_instead_of_resaving_corruption(tmp_path: Path) -> None:
    torch.manual_seed(0)
    paths = [ckpt.save_checkpoint(tmp_path, ckpt.checkpoint_name(i), Transformer(tiny_config()), {}) for i in (1, 2)]
    data = bytearray((paths[0] / "model.safetensors").read_bytes())
    data[-10] ^= 0xFF
    (paths[0] / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ModelDirectoryError, match="checksum"):
        ckpt.write_average(paths, tmp_path / "avg")
    assert not (tmp_path / "avg").exists()


def test_training_state_is_checksummed_and_keys_are_named(tmp_path: Path) -> None:
    model = Transformer(tiny_config())
    state = dict.fromkeys(ckpt.STATE_KEYS, 0)
    path = ckpt.save_checkpoint(tmp_path, ckpt.checkpoint_name(1), model, {"step": 1}, None, state)
    assert ckpt.load_training_state(path)["step"] == 0
    data = bytearray((path / ckpt.TRAINING_STATE).read_bytes())
    data[len(data) // 2] ^= 0x01
    (path / ckpt.TRAINING_STATE).write_bytes(bytes(data))
    with pytest.raises(ModelDirectoryError, match="training_state.pt: checksum mismatch"):
        ckpt.load_training_state(path)
    del state["scheduler"]
    path = ckpt.save_checkpoint(tmp_path, ckpt.checkpoint_name(2), model, {"step": 2}, None, state)
    with pytest.raises(ModelDirectoryError, match="key 'scheduler' is missing"):
        ckpt.require_keys(ckpt.load_training_state(path), path)
    edit(path, _delete("checkpoint.training_state"))
    with pytest.raises(ModelDirectoryError, match="records no checksum"):
        ckpt.load_training_state(path)


def test_checkpoints_with_non_finite_weights_are_never_written(tmp_path: Path) -> None:
    model = Transformer(tiny_config())
    with torch.no_grad():
        model.src_embed.weight[5, 3] = float("inf")
    with pytest.raises(ckpt.NonFiniteWeightsError, match="src_embed.weight"):
        ckpt.save_checkpoint(tmp_path, ckpt.checkpoint_name(1), model, {})
    assert list(tmp_path.iterdir()) == []


def test_model_naming_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelDirectoryError, match="is a file, not a model directory"):
        read_config(tmp_path / "file")
