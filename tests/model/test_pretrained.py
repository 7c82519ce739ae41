"""Table 3 parameter counts; the model directory round trip and its errors."""

from __future__ import annotations

import json

import pytest
import torch

from aiayn.config import ConfigError, preset
from aiayn.model import ModelDirectoryError, Transformer
from tests.conftest import tiny_config


def test_parameter_counts_match_table_3() -> None:
    with torch.device("meta"):  # no memory: only shapes are counted
        base = Transformer(preset("base", src_vocab_size=37000, tgt_vocab_size=37000))
        big = Transformer(preset("big", src_vocab_size=37000, tgt_vocab_size=37000))
    assert abs(base.num_parameters() / 65e6 - 1) <= 0.05, base.num_parameters()
    assert abs(big.num_parameters() / 213e6 - 1) <= 0.05, big.num_parameters()
    untied = preset("base", share_embeddings=False, tie_output=False)
    with torch.device("meta"):
        assert Transformer(untied).num_parameters() - base.num_parameters() == 2 * 37000 * 512


def test_presets_are_table_3() -> None:
    base, big = preset("base"), preset("big")
    assert (base.N, base.d_model, base.d_ff, base.h, base.d_k, base.d_v) == (6, 512, 2048, 8, 64, 64)
    assert (base.P_drop, base.eps_ls) == (0.1, 0.1)
    assert (big.N, big.d_model, big.d_ff, big.h, big.d_k, big.d_v) == (6, 1024, 4096, 16, 64, 64)
    assert (big.P_drop, big.eps_ls) == (0.3, 0.1)
    assert preset("base", d_model="256").d_model == 256
    with pytest.raises(ConfigError, match="model.d_modle"):
        preset("base", d_modle=256)
    with pytest.raises(ConfigError, match="unknown preset"):
        preset("huge")


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"share_embeddings": False, "tie_output": False, "tgt_vocab_size": 41},
        {"positional": "learned", "norm_first": True},
    ],
)
def test_round_trip_is_bit_exact(tmp_path, overrides, generator) -> None:
    torch.manual_seed(0)
    model = Transformer(tiny_config(**overrides)).eval()
    model.save_pretrained(tmp_path / "m")
    loaded = Transformer.from_pretrained(tmp_path / "m").eval()
    assert loaded.config == model.config
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    if model.config.share_embeddings:
        assert loaded.src_embed.weight is loaded.tgt_embed.weight  # ties survive the round trip
    src = torch.randint(4, 37, (2, 5), generator=generator)
    assert torch.equal(model(src, src), loaded(src, src))
    assert not list(tmp_path.joinpath("m").glob("*.tmp"))  # atomic writes leave nothing behind


@pytest.fixture
def saved(tmp_path):
    Transformer(tiny_config()).save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def test_missing_directory_and_files(tmp_path, saved) -> None:
    with pytest.raises(ModelDirectoryError, match="does not exist"):
        Transformer.from_pretrained(tmp_path / "nowhere")
    (saved / "model.safetensors").unlink()
    with pytest.raises(ModelDirectoryError, match="missing weights"):
        Transformer.from_pretrained(saved)
    (saved / "config.json").unlink()
    with pytest.raises(ModelDirectoryError, match="config.json: missing"):
        Transformer.from_pretrained(saved)


def test_truncated_weights(saved) -> None:
    data = (saved / "model.safetensors").read_bytes()
    (saved / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelDirectoryError, match="truncated"):
        Transformer.from_pretrained(saved)


def test_corrupt_weights_detected_by_checksum(saved) -> None:
    data = bytearray((saved / "model.safetensors").read_bytes())
    data[-10] ^= 0xFF
    (saved / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ModelDirectoryError, match="checksum"):
        Transformer.from_pretrained(saved)


def test_unreadable_weights_with_a_matching_checksum(saved) -> None:
    import hashlib

    (saved / "model.safetensors").write_bytes(b"\x00" * 64)
    document = json.loads((saved / "config.json").read_text())
    document["weights"].update(sha256=hashlib.sha256(b"\x00" * 64).hexdigest(), bytes=64)
    (saved / "config.json").write_text(json.dumps(document))
    with pytest.raises(ModelDirectoryError, match="not a readable safetensors"):
        Transformer.from_pretrained(saved)


def test_config_that_does_not_match_weights(saved) -> None:
    document = json.loads((saved / "config.json").read_text())
    document["model"]["d_ff"] = 128
    (saved / "config.json").write_text(json.dumps(document))
    with pytest.raises(ModelDirectoryError, match=r"w_1\.(weight|bias) has shape"):
        Transformer.from_pretrained(saved)
    document["model"]["N"] = 3
    (saved / "config.json").write_text(json.dumps(document))
    with pytest.raises(ModelDirectoryError, match="missing"):
        Transformer.from_pretrained(saved)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ('{"format": "hf"}', "not an aiayn model"),
        ('{"format": "aiayn-model", "format_version": 9}', "format_version 9"),
        ('{"format": "aiayn-model", "format_version": 1, "model": {"d_model": -1}}', "must be positive"),
    ],
)
def test_foreign_or_invalid_config(saved, text, message) -> None:
    (saved / "config.json").write_text(text)
    with pytest.raises(ModelDirectoryError, match=message):
        Transformer.from_pretrained(saved)


def test_saved_files_are_readable_by_others(tmp_path) -> None:
    import os
    import stat

    Transformer(tiny_config()).save_pretrained(tmp_path / "m")
    mask = os.umask(0)
    os.umask(mask)
    for name in ("config.json", "model.safetensors"):
        mode = stat.S_IMODE((tmp_path / "m" / name).stat().st_mode)
        assert mode == 0o666 & ~mask, (name, oct(mode))


def test_format_1_directory_loads_as_the_same_model(tmp_path) -> None:
    """A directory written in format 1 (one fused in_proj [W^Q; W^K; W^V] and out_proj per attention) loads
    through `upgrade_v1` into exactly the model it was written from."""
    from safetensors.torch import load_file, save_file

    from aiayn.io import sha256_file

    torch.manual_seed(4)
    model = Transformer(tiny_config(N=2)).eval()
    model.save_pretrained(tmp_path)
    v2 = load_file(tmp_path / "model.safetensors")
    v1: dict[str, torch.Tensor] = {}
    for name, tensor in v2.items():  # rewrite the file with format 1's names and fused matrices
        prefix, _, kind = name.rpartition(".")
        if prefix.endswith(".w_q"):
            base = prefix.removesuffix("w_q")
            v1[f"{base}in_proj.{kind}"] = torch.cat([v2[f"{base}{p}.{kind}"] for p in ("w_q", "w_k", "w_v")])
        elif prefix.endswith(".w_o"):
            v1[f"{prefix.removesuffix('w_o')}out_proj.{kind}"] = tensor
        elif not prefix.endswith((".w_k", ".w_v")):
            v1[name] = tensor
    save_file(v1, tmp_path / "model.safetensors")
    document = json.loads((tmp_path / "config.json").read_text())
    document["format_version"] = 1
    document["weights"].update(sha256=sha256_file(tmp_path / "model.safetensors"),
                               bytes=(tmp_path / "model.safetensors").stat().st_size)  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(document))
    loaded = Transformer.from_pretrained(tmp_path)
    assert loaded.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
