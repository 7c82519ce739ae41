"""aiayn.config_loading: one coercion by type hints for YAML values, --set text, config.json and keyword arguments."""

from __future__ import annotations

import json
import math
from typing import Literal

import pytest

from aiayn.config import DataConfig, DecodeConfig, ModelConfig, TrainConfig, build_run_config, preset
from aiayn.config_loading import ConfigError, coerce, parse_assignments, with_overrides


@pytest.mark.parametrize(
    "text, hint, expected",
    [
        ("3", int, 3),
        ("1e5", int, 100000),
        ("0.25", float, 0.25),
        ("2", float, 2.0),
        ("on", bool, True),
        ("No", bool, False),
        ("none", int | None, None),
        ("7", int | None, 7),
        ("null", str | None, None),
        ("runs/x", str | None, "runs/x"),
        ("a/x, b/y,", tuple[str, ...], ("a/x", "b/y")),
        ("sdpa", Literal["auto", "explicit", "sdpa"], "sdpa"),
    ],
)
def test_text_is_parsed_to_the_hint(text: str, hint: object, expected: object) -> None:
    value = coerce(text, hint, "s.f", text=True)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    "value, hint, message",
    [
        ("3", int, r"s\.f: expected int, got '3'"),  # typed sources (YAML, JSON) are not parsed
        (True, int, r"s\.f: expected int, got True"),
        (1, bool, r"s\.f: expected bool, got 1"),
        (0.5, int, r"s\.f: expected int, got 0\.5"),
        (None, float, r"s\.f: expected float, got None"),
        ([1], tuple[str, ...], r"s\.f: expected a list of str, got \[1\]"),
        ("bf17", Literal["auto", "bf16"], r"s\.f: expected one of 'auto', 'bf16', got 'bf17'"),
        (math.nan, float, r"s\.f: must be a finite number"),
        (-math.inf, float | None, r"s\.f: must be a finite number"),
    ],
)
def test_typed_values_are_checked(value: object, hint: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        coerce(value, hint, "s.f")


@pytest.mark.parametrize(
    "text, hint, message",
    [
        ("many", int, r"cannot parse 'many' as int"),
        ("1.5", int, r"cannot parse '1\.5' as int"),
        ("maybe", bool, r"cannot parse 'maybe' as bool"),
        ("nan", float, r"s\.f: must be a finite number, got 'nan'"),
        ("inf", float, r"s\.f: must be a finite number, got 'inf'"),
        ("x", int | None, r"cannot parse 'x' as int or null"),
    ],
)
def test_bad_text_names_the_field(text: str, hint: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        coerce(text, hint, "s.f", text=True)


def test_every_source_goes_through_the_same_coercion(tmp_path) -> None:
    """YAML sections, --set, config.json (ModelConfig.from_dict) and the Python API agree and all reject NaN."""
    run = build_run_config({"train": {"max_minutes": 60}}, ["decode.attention_impl=sdpa", "train.lr_scale=2"])
    assert run.train.max_minutes == 60.0 and isinstance(run.train.max_minutes, float) and run.train.lr_scale == 2.0
    assert run.decode == DecodeConfig(attention_impl="sdpa") and run.train.attention_impl == "auto"
    document = json.loads(json.dumps(preset("tiny").to_dict()))
    assert ModelConfig.from_dict(document) == preset("tiny")
    assert preset("tiny", P_drop="0.2") == preset("tiny", P_drop=0.2) == preset("tiny").with_overrides(P_drop=0.2)
    assert with_overrides(DataConfig(), {"test_prefixes": "a,b"}, "data").test_prefixes == ("a", "b")
    for attempt in (
        lambda: build_run_config({"train": {"lr_scale": float("nan")}}),
        lambda: build_run_config({}, ["train.lr_scale=nan"]),
        lambda: ModelConfig.from_dict({**document, "layer_norm_eps": float("inf")}),
        lambda: with_overrides(TrainConfig(), {"adam_eps": "inf"}, "train"),
    ):
        with pytest.raises(ConfigError, match=r"(lr_scale|layer_norm_eps|adam_eps): must be a finite number"):
            attempt()

def test_unknown_fields_suggest_and_literals_are_checked_on_construction() -> None:
    with pytest.raises(ConfigError, match=r"unknown field decode\.bam \(did you mean beam\?\)"):
        with_overrides(DecodeConfig(), {"bam": 3}, "decode")
    with pytest.raises(ConfigError, match=r"decode\.linear_kernel: expected one of 'auto', 'onednn', 'torch'"):
        DecodeConfig(linear_kernel="mkl")  # type: ignore[arg-type]
    assert parse_assignments(["beam=4", "lenpen=0.6"]) == {"beam": "4", "lenpen": "0.6"}
    with pytest.raises(ConfigError, match=r"--decode expects FIELD=VALUE, got 'beam'"):
        parse_assignments(["beam"], "--decode")
