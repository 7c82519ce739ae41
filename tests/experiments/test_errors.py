"""`aiayn ablate` refuses, in one line and before training anything: an unknown row, an unknown --vary key, a
directory or a --collect that would mix sweeps of another config, budget or data (fingerprint)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiayn.cli import main


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("aiayn ablate: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def fake_sweep(folder: Path, config: str = "c1", budget: str = "b1") -> Path:
    folder.mkdir(parents=True)
    fingerprint = {"id": config + budget, "config": config, "budget": budget, "data": "d", "eval": "e"}
    meta = {"format": "aiayn-ablation", "format_version": 1, "config": "x.yaml", "sets": [], "skipped": {},
            "budget": {"updates": 5, "minutes": 0.0}, "fingerprint": fingerprint}  # fmt: skip
    (folder / "sweep.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--rows", "A,F"], "unknown row 'F' in --rows; choose from A, B, C, D, E, big"),
        (["--vary", "train.lr_scal=1,2"], "unknown config key 'train.lr_scal'"),
        (["--vary", "train.lr_scale=fast"], "row vary-train.lr_scale=fast:"),
        (["--vary", "train.seed=1,2"], "is set by the sweep"),
        (["--seeds", "1,x"], "--seeds '1,x': expected comma-separated integers"),
    ],
)
def test_bad_rows_and_keys(tiny_config: Path, tmp_path: Path, capsys, extra: list[str], match: str) -> None:
    out = tmp_path / "out"
    assert main(["ablate", str(tiny_config), "--updates", "2", "--out", str(out), *extra]) == 1
    assert match in one_error_line(capsys)
    assert not out.exists()


def test_a_directory_of_another_sweep_is_refused(tiny_config: Path, tmp_path: Path, capsys) -> None:
    out = fake_sweep(tmp_path / "other")
    assert main(["ablate", str(tiny_config), "--rows", "base", "--updates", "2", "--out", str(out)]) == 1
    err = one_error_line(capsys)
    assert "holds a sweep with another config, budget, data and eval" in err and "use another --out" in err
    assert not (out / "runs").exists()


def test_collect_refuses_mixed_fingerprints(tmp_path: Path, capsys) -> None:
    a, b = fake_sweep(tmp_path / "a"), fake_sweep(tmp_path / "b", budget="b2")
    assert main(["ablate", "--collect", str(a), str(b), "--out", str(tmp_path / "merged")]) == 1
    assert f"cannot merge {a} and {b}: they differ in budget" in one_error_line(capsys)
    assert not (tmp_path / "merged").exists()
    assert main(["ablate", "--collect", str(tmp_path / "nothing"), "--out", str(tmp_path / "merged")]) == 1
    assert "is not an ablation sweep" in one_error_line(capsys)


def test_plan_prints_the_scaled_rows_and_trains_nothing(tiny_config: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["ablate", str(tiny_config), "--rows", "A,big", "--vary", "train.warmup=5,20", "--updates", "9", "--plan"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1].strip() for line in printed.splitlines()}
    assert lines["A-h1"].startswith("h=1, d_k=32, d_v=32 ") and lines["big"].startswith("d_model=64, d_ff=128, h=8")
    assert len({line.index(" parameters") for line in printed.splitlines() if "parameters" in line}) == 1  # aligned
    assert "vary-train.warmup=20" in printed and "8 rows x 1 seeds; budget {'updates': 9, 'minutes': 0.0}" in printed
    assert not out.exists()
