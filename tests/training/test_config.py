"""Run configs: YAML sections map one-to-one onto the dataclasses; --set overrides; errors name file and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aiayn.config import PRESETS, ConfigError, RunConfig, TrainConfig, dump_run_config, load_run_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_preset_fields_and_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, {"model": {"preset": "tiny", "P_drop": 0.2}, "train": {"max_updates": 5}})
    config = load_run_config(path, ["train.lr_scale=2", "model.N=3", "data.max_sentences=none", "decode.beam=5"])
    assert config.model == PRESETS["tiny"].with_overrides(P_drop=0.2, N=3)
    assert config.train == TrainConfig(max_updates=5, lr_scale=2.0)
    assert config.data.max_sentences is None and config.decode.beam == 5
    assert load_run_config(path, ["model.preset=base"]).model == PRESETS["base"].with_overrides(P_drop=0.2)


def test_dump_and_load_round_trip(tmp_path: Path) -> None:
    config = load_run_config(write(tmp_path, {"model": {"preset": "small"}}), ["data.test_prefixes=a/x,b/y"])
    assert config.data.test_prefixes == ("a/x", "b/y")
    again = tmp_path / "again.yaml"
    again.write_text(dump_run_config(config), encoding="utf-8")
    assert load_run_config(again) == config


@pytest.mark.parametrize(
    "document, sets, message",
    [
        ({"train": {"max_update": 3}}, [], r"run\.yaml: unknown field train\.max_update \(did you mean max_updates"),
        ({"trian": {}}, [], r"run\.yaml: unknown section\(s\) trian \(did you mean train\?\)"),
        ({}, ["model.d_mdel=3"], r"unknown field model\.d_mdel \(did you mean d_model\?\)"),
        ({}, ["train.max_updates=many"], r"train\.max_updates: cannot parse 'many' as int"),
        ({"train": {"max_updates": "many"}}, [], r"train\.max_updates: expected int, got 'many'"),
        ({"train": {"precision": "bf17"}}, [],
         r"train\.precision: expected one of 'auto', 'fastest', 'fp32', 'bf16', 'fp16'"),
        ({"train": {"warmup": 0}}, [], r"train\.warmup must be positive"),
        ({"model": {"preset": "huge"}}, [], r"unknown model\.preset 'huge'"),
        ({"model": {"src_vocab_size": 100}}, [], r"model\.src_vocab_size is set from the data"),
        ({"train": [1, 2]}, [], r"section train must be a mapping"),
        ({}, ["max_updates=3"], r"--set expects section\.field=value"),
        ({}, ["optim.lr=3"], r"unknown section 'optim'"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, document: dict, sets: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_run_config(write(tmp_path, document), sets)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: config file not found"):
        load_run_config(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml: not valid YAML"):
        load_run_config(broken)


@pytest.mark.parametrize("name", ["multi30k-tiny", "multi30k-base", "wmt14-en-de-base", "wmt14-en-de-big"])
def test_shipped_configs_load(name: str) -> None:
    config = load_run_config(CONFIGS / f"{name}.yaml")
    assert isinstance(config, RunConfig)
    header = (CONFIGS / f"{name}.yaml").read_text(encoding="utf-8").split("\n\n")[0]
    for word in ("aiayn train", "hardware", "time", "BLEU"):
        assert word.lower() in header.lower(), f"{name}.yaml header lacks {word!r}"
