"""train.precision=fastest: the candidates per CPU kind (feature probe forced through $AIAYN_CPU_FLAGS), the
measurement on real batches (it leaves the model and the random streams as it found them), the choice logged in
the run, recorded in each checkpoint and kept on resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from aiayn.data import ParallelDataset, TokenBudgetBatches, load_batch
from aiayn.kernels import precision_candidates
from aiayn.model import Transformer
from aiayn.training.checkpoint import latest_checkpoint
from aiayn.training.metrics_log import read_metrics
from aiayn.training.precision_probe import BF16_MIN_SPEEDUP, measure_precisions
from aiayn.training.run import train
from tests.training.conftest import tiny_run

CPU = torch.device("cpu")
AMX = "avx2 avx512f avx512_bf16 amx_bf16 amx_int8"


@pytest.mark.parametrize(("flags", "d_model", "expected"), [
    (AMX, 128, (torch.float32, torch.bfloat16)),  # native bf16: timed, whatever the width
    (AMX, 1024, (torch.float32, torch.bfloat16)),
    ("avx2 avx512f avx512_bf16", 128, (torch.float32, torch.bfloat16)),
    ("fpu sse avx2 fma", 1024, (torch.float32,)),  # no native bf16: nothing to time
])  # fmt: skip
def test_fastest_times_both_only_where_the_cpu_has_bf16_units(monkeypatch, flags, d_model, expected) -> None:
    monkeypatch.setenv("AIAYN_CPU_FLAGS", flags)
    assert precision_candidates("fastest", CPU, d_model=d_model) == expected
    assert len(precision_candidates("auto", CPU, d_model=d_model)) == 1  # auto stays a rule: no timing
    assert precision_candidates("fp32", CPU, d_model=d_model) == (torch.float32,)


def test_measurement_leaves_model_and_random_streams_alone(m30k_bin: Path) -> None:
    dataset = ParallelDataset(m30k_bin, "train")
    run = tiny_run(m30k_bin, Path("unused"), max_updates=1)
    config = run.model.with_overrides(src_vocab_size=dataset.vocab_size, tgt_vocab_size=dataset.vocab_size)
    torch.manual_seed(0)
    model = Transformer(config)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    plan = TokenBudgetBatches(dataset.src_lengths, dataset.tgt_lengths, 512, 1, True).epoch(1)
    batches = [load_batch(dataset, indices) for indices in plan[:2]]
    rng = torch.get_rng_state()
    probe = measure_precisions(model, (torch.float32, torch.bfloat16), batches, run.data.max_len + 1, rounds=2)
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert set(probe.seconds) == {"fp32", "bf16"} and all(s > 0 for s in probe.seconds.values())
    faster = probe.seconds["bf16"] * BF16_MIN_SPEEDUP <= probe.seconds["fp32"]
    assert probe.chosen == (torch.bfloat16 if faster else torch.float32)
    assert "fp32" in probe.describe() and "bf16" in probe.describe()
    with pytest.raises(ValueError, match="at least one batch"):
        measure_precisions(model, (torch.float32,), [], 8)


def test_run_logs_the_choice_and_resumes_in_it(m30k_bin: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AIAYN_CPU_FLAGS", AMX)  # bf16 autocast runs on every CPU; here it is only timed as AMX
    out = tmp_path / "run"
    train(tiny_run(m30k_bin, out, max_updates=6, save_every=3, precision="fastest"))
    first = capsys.readouterr().err
    [record] = read_metrics(out, "precision")
    chosen = record["chosen"]
    assert chosen in ("float32", "bfloat16") and set(record["seconds"]) == {"fp32", "bf16"}
    assert "precision fastest:" in first and f"precision={chosen}" in first
    info = json.loads((latest_checkpoint(out) / "config.json").read_text())["checkpoint"]
    assert info["precision"] == chosen

    # The resumed run does not time again: it continues in the precision the run began with, even where a new
    # measurement could choose the other one.
    document = json.loads((latest_checkpoint(out) / "config.json").read_text())
    other = "bfloat16" if chosen == "float32" else "float32"
    document["checkpoint"]["precision"] = other  # what a run that had chosen the other one would have recorded
    (latest_checkpoint(out) / "config.json").write_text(json.dumps(document))
    train(tiny_run(m30k_bin, out, max_updates=9, save_every=3, precision="fastest"))
    resumed = capsys.readouterr().err
    assert "resumed from" in resumed and "precision fastest:" not in resumed
    assert f"precision={other}" in resumed
    assert len(read_metrics(out, "precision")) == 1


@pytest.mark.parametrize(("flags", "timed"), [(AMX, True), ("fpu sse avx2 fma", False)])
def test_info_says_what_fastest_does_here(monkeypatch, flags: str, timed: bool) -> None:
    from aiayn.cli.info import runtime_report

    monkeypatch.setenv("AIAYN_CPU_FLAGS", flags)
    said = runtime_report(d_model=128)["train_fastest"]
    assert ("times float32 and bfloat16" in said) == timed
    assert ("nothing to time" in said) == (not timed)
