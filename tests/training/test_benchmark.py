"""The training benchmark runs end to end on a small batch (figures are not checked: speed is not a test)."""

from __future__ import annotations

import argparse
import json

from aiayn.benchmarks import training


def test_training_benchmark_reports_every_implementation(capsys) -> None:
    parser = argparse.ArgumentParser()
    training.add_arguments(parser)
    argv = ["--sizes", "tiny", "--impls", "aiayn,torch.nn.Transformer", "--batch", "4", "--length", "8"]
    argv += ["--steps", "1", "--warmup", "0", "--threads", "1", "--vocab", "64", "--json"]
    assert training.run(parser.parse_args(argv)) == 0
    report = json.loads(capsys.readouterr().out)
    assert {r["impl"] for r in report["rows"]} == {"aiayn", "torch.nn.Transformer"}
    assert report["matmul_gflops"]["fp32"] > 0 and report["tgt_tokens"] > 0
    for row in report["rows"]:
        assert row["step_s"] > 0 and row["peak_mib"] > 0 and row["speedup_vs_fastest_peer"] > 0
        assert row["precision"] == "fp32"


def test_auto_precision_is_chosen_per_size_by_width(monkeypatch) -> None:
    monkeypatch.setenv("AIAYN_CPU_FLAGS", "avx2 avx512f avx512_bf16 amx_bf16 amx_int8")
    assert training.precision_for("auto", "cpu", "tiny", 8000) == "fp32"  # d_model 128
    assert training.precision_for("auto", "cpu", "base", 8000) == "bf16"  # d_model 512
    assert training.precision_for("fp32", "cpu", "base", 8000) == "fp32"
    monkeypatch.setenv("AIAYN_CPU_FLAGS", "avx2 fma")
    assert training.precision_for("auto", "cpu", "base", 8000) == "fp32"
