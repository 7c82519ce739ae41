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
    assert report["matmul_gflops"] > 0 and report["tgt_tokens"] > 0
    for row in report["rows"]:
        assert row["step_s"] > 0 and row["peak_mib"] > 0 and row["speedup_vs_fastest_peer"] > 0
