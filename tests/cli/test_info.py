"""`aiayn info` reports what the model itself counts."""

from __future__ import annotations

import json

import torch

from aiayn.cli import main
from aiayn.config import preset
from aiayn.model import Transformer


def test_info_json_matches_the_model(capsys) -> None:
    assert main(["info", "--preset", "base", "--vocab-size", "37000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    with torch.device("meta"):
        model = Transformer(preset("base", src_vocab_size=37000, tgt_vocab_size=37000))
    assert report["parameters"] == model.num_parameters() == 63_082_496
    assert report["parameters_without_embeddings"] == model.num_parameters(embeddings=False)
    assert report["parameters"] - report["parameters_without_embeddings"] == 37000 * 512
    assert report["forward_flops_per_target_token"] > report["forward_flops_per_source_token"] > 0


def test_info_override_and_bad_field(capsys) -> None:
    assert main(["info", "--preset", "tiny", "--set", "model.N=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["N"] == 2
    assert main(["info", "--preset", "tiny", "--set", "model.N_layers=2"]) == 1
    assert "unknown field model.N_layers" in capsys.readouterr().err


def test_info_runtime_names_every_training_choice(monkeypatch, capsys) -> None:
    """--runtime says what auto trains with: on a CPU without native bf16 float32, hence the chunked loss; on an
    AMX CPU a base-width model trains in bf16 under autocast, hence the logits path."""
    monkeypatch.setenv("AIAYN_CPU_FLAGS", "avx2 fma")
    assert main(["info", "--preset", "base", "--runtime"]) == 0
    assert "training (auto): precision float32, attention sdpa/explicit, loss chunked" in capsys.readouterr().out
    monkeypatch.setenv("AIAYN_CPU_FLAGS", "avx2 avx512f avx512_bf16 amx_bf16 amx_int8")
    assert main(["info", "--preset", "base", "--runtime"]) == 0
    assert "training (auto): precision bfloat16, attention sdpa/explicit, loss logits" in capsys.readouterr().out
