"""`aiayn serve` arguments: model specs with and without a language pair, API keys, limits into ServeConfig."""

from __future__ import annotations

import json

import pytest

from aiayn.cli import build_parser
from aiayn.cli.serve import config_from_args, decode_overrides, model_specs, parse_api_key
from aiayn.serving import ApiKey, Service
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


def test_decoding_defaults_reach_the_loaded_translator(serve_model_dir):
    args = build_parser().parse_args(
        ["serve", "--model", f"en-de={serve_model_dir}", "--beam", "2", "--lenpen", "1.0", "--lenpen-form", "power",
         "--precision", "int8"]
    )  # fmt: skip
    service = Service.load(model_specs(args.model), config_from_args(args), **decode_overrides(args))
    try:
        (model,) = service.models.values()
        c = model.translator.config
        assert (c.beam, c.lenpen, c.lenpen_form, c.precision) == (2, 1.0, "power", "int8")
        assert "int8" in model.translator.runtime.precision
    finally:
        service.stop()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--model", "m", "--lenpen-form", "linear"])
