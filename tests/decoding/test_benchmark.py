"""The decoding benchmark runs end to end on a tiny configuration (figures are not checked: speed is not a test)."""

from __future__ import annotations

import json

import pytest

from aiayn.benchmarks import decoding
from aiayn.benchmarks.decoding_peers import available
from aiayn.data import TOKENIZER_FILENAME


def run_benchmark(model_dir, tmp_path, systems: str, isolate: bool = True) -> dict:
    out = tmp_path / "bench.json"
    argv = ["--sizes", "tiny", "--lengths", "3,5", "--beams", "2,1", "--sentences", "4", "--uncached-sentences", "2"]
    argv += ["--systems", systems, "--threads", "1", "--repeats", "1", "--json", str(out), "--profile"]
    argv += ["--tokenizer", str(model_dir / TOKENIZER_FILENAME), "--isolate" if isolate else "--no-isolate"]
    assert decoding.main(argv) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("isolate", [True, False])
def test_ours_cached_uncached_plain(model_dir, tmp_path, capsys, isolate: bool):
    """Every figure comes back, whether each system runs in a worker process of its own or all in this one."""
    report = run_benchmark(model_dir, tmp_path, "ours,ours-plain,ours-uncached", isolate)
    rows = report["results"]
    assert {(r["search"], r["length"], r["system"]) for r in rows} == {
        (search, length, system)
        for search in ("beam 2", "greedy")
        for length in (3, 5)
        for system in ("ours", "ours-plain", "ours-uncached")
    }
    assert all(r["tokens_per_s"] > 0 and r["floor_tokens_per_s"] > 0 for r in rows)
    assert {r["sentences"] for r in rows if r["system"] == "ours-uncached"} == {2}
    # the products are found and classed (oneDNN packed, or torch's where the load-time measurement kept them)
    assert any(kind.startswith("matmul, ") for kind in report["profile"]["tiny"]["by_kind_s"])
    assert "| ours-uncached |" in capsys.readouterr().out


@pytest.mark.skipif(not (available("transformers") and available("ctranslate2")), reason="peers not installed")
def test_peers(model_dir, tmp_path):
    rows = run_benchmark(model_dir, tmp_path, "ours,hf,ct2-float32,ct2-int8")["results"]
    assert {r["system"] for r in rows} == {"ours", "hf", "ct2-float32", "ct2-int8"}
