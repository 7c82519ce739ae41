"""`aiayn serve` arguments: model specs with and without a language pair, API keys, limits into ServeConfig."""

from __future__ import annotations

import json

import pytest

from aiayn.cli import build_parser
from aiayn.cli.serve import config_from_args, model_specs, parse_api_key
from aiayn.serving import ApiKey
from aiayn.serving.languages import pair_from_metadata, parse_model_spec


def test_arguments_make_the_config():
    args = build_parser().parse_args(
        ["serve", "--model", "en-de=m", "--max-chars", "100", "--no-batching", "--api-key", "k:5:1000",
         "--api-key", "open", "--batch-wait-ms", "2.5"]
    )  # fmt: skip
    config = config_from_args(args)
    assert config.max_chars == 100 and not config.batching and config.batch_wait_ms == 2.5
    assert config.api_keys == {"k": ApiKey(5, 1000), "open": ApiKey(0, 0)}
    with pytest.raises(ValueError, match="KEY:REQUESTS"):
        parse_api_key("k:x")


def test_model_specs(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"format": "aiayn-model", "model": {}}))
    assert model_specs([f"fr-en={tmp_path}"]) == [("fr-en", tmp_path)]
    with pytest.raises(ValueError, match="does not name its languages"):
        model_specs([str(tmp_path)])
    (tmp_path / "config.json").write_text(json.dumps({"languages": {"source": "en", "target": "de"}}))
    assert pair_from_metadata(tmp_path) == "en-de" and model_specs([str(tmp_path)]) == [("en-de", tmp_path)]
    (tmp_path / "config.json").write_text(json.dumps({"data": {"src_lang": "de", "tgt_lang": "en"}}))
    assert pair_from_metadata(tmp_path) == "de-en"
    with pytest.raises(ValueError, match="SRC-TGT=DIR"):
        parse_model_spec("english=dir")
    with pytest.raises(FileNotFoundError):
        model_specs([f"en-de={tmp_path / 'missing'}"])
