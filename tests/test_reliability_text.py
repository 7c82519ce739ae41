"""Issue 12, class 1 (silently wrong results) and 7 (unclear messages) for text: hostile and random text through
the one line reader (`aiayn.io.read_text_lines`), `prepare`'s file checks, `translate`/`evaluate`'s input
reader and validation BLEU, with a defined outcome each time: the lines split at "\\n" only, or one error
naming file:line. Property-based (hypothesis); runs in a few seconds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.cli.translate import read_lines
from aiayn.config import ConfigError, DecodeConfig, ModelConfig, TrainConfig, load_run_config
from aiayn.data.corpus import CorpusError, check_text_file
from aiayn.data.corpus import read_lines as corpus_lines
from aiayn.io import read_text_lines

# characters other tools take for line breaks, format and control characters, and ordinary text
ODD = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r", "\u200b", "\ufeff", "\t", "\x7f"]
line_text = st.lists(st.one_of(st.sampled_from(ODD), st.characters(blacklist_characters="\n\x00")), max_size=40).map(
    "".join
)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def encode(lines: list[str], crlf: bool) -> bytes:
    end = "\r\n" if crlf else "\n"
    return "".join(line + end for line in lines).encode("utf-8", "surrogatepass")


@SETTINGS
@given(st.lists(line_text, max_size=20), st.booleans())
def test_read_text_lines_splits_at_newline_only(lines: list[str], crlf: bool) -> None:
    try:
        data = encode(lines, crlf)
        data.decode("utf-8")
    except UnicodeError:
        return  # lone surrogates are not UTF-8: covered by the invalid-bytes property
    expected = [line.removesuffix("\r") if not crlf else line for line in lines]
    if expected:
        expected[0] = expected[0].removeprefix("\ufeff")  # a leading byte-order mark is dropped
    assert read_text_lines(data, "x") == expected


@SETTINGS
@given(st.binary(max_size=300))
def test_any_bytes_give_lines_or_an_error_naming_the_line(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("bytes") / "input.txt"
    path.write_bytes(data)
    try:
        lines, _ = read_lines(path)
    except ValueError as error:
        assert str(error).startswith(f"{path}:") and "\n" not in str(error)
        return
    text = data.removeprefix(b"\xef\xbb\xbf")
    assert len(lines) == text.count(b"\n") + (text != b"" and not text.endswith(b"\n"))
    try:
        count = check_text_file(path)  # prepare's check agrees on the count, or refuses with file:line
    except CorpusError as error:
        assert str(error).startswith(f"{path}")
        return
    assert count == len(lines) == len(list(corpus_lines(path)))


@SETTINGS
@given(st.lists(line_text, min_size=1, max_size=12))
def test_prepare_check_and_reader_agree_on_hostile_lines(tmp_path_factory, lines: list[str]) -> None:
    try:
        data = encode(lines, crlf=False)
        data.decode("utf-8")
    except UnicodeError:
        return
    path = tmp_path_factory.mktemp("odd") / "side.en"
    path.write_bytes(data)
    found: list = []
    assert check_text_file(path, "keep", found) == len(lines)
    kept = [line.removesuffix("\r") for line in lines]  # "\r\n" ends a line as "\n" does
    assert list(corpus_lines(path)) == [kept[0].removeprefix("\ufeff"), *kept[1:]]
    has_odd = any(c in line for line in kept for c in ODD[:9])
    assert bool(found) == has_odd
    if has_odd:
        assert found[0].message().startswith(f"{path}:{found[0].first_line}:")
        with pytest.raises(CorpusError, match=rf"{path}:{found[0].first_line}: .* inside a line"):
            check_text_file(path, "error")


def test_nul_bytes_are_refused_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "nul.en"
    path.write_bytes(b"one\ntwo\nth\x00ree\n")
    with pytest.raises(CorpusError, match=rf"{path}:3: NUL byte"):
        check_text_file(path)
    with pytest.raises(ValueError, match=rf"{path}:3: NUL byte"):
        read_lines(path)


def test_validation_bleu_stays_aligned_across_line_separator_characters(tmp_path: Path, monkeypatch) -> None:
    """The reported bug: splitlines() split U+2028 inside a source line, so sources and references drifted apart
    and BLEU fell to ~1 silently. A scripted translator that knows the right answer for each source line gives
    BLEU 100 only when the lines stay aligned."""
    from aiayn.training import validation

    sources = [f"source {i}\u2028still line {i}" if i % 3 == 0 else f"source {i}\x0cline" for i in range(30)]
    references = [f"the reference number {i} is here" for i in range(30)]
    (tmp_path / "valid.en.txt").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    (tmp_path / "valid.de.txt").write_text("".join(r + "\n" for r in references), encoding="utf-8")
    answer = dict(zip(sources, references))

    class Dataset:
        src_lang, tgt_lang, split, data_dir, tokenizer_path = "en", "de", "valid", tmp_path, tmp_path / "t.model"

        def text_path(self, lang: str) -> Path:
            return tmp_path / f"valid.{lang}.txt"

    class Scripted:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def translate(self, lines: list[str]) -> list[str]:
            return [answer.get(line, "") for line in lines]

    class Model:
        training = False

        def parameters(self):
            import torch

            yield torch.zeros(1)

        def eval(self):
            return self

        def train(self, mode: bool):
            return self

    monkeypatch.setattr(validation, "Translator", Scripted)
    monkeypatch.setattr(validation.Tokenizer, "from_file", staticmethod(lambda path: None))
    score = validation.validation_bleu(Model(), Dataset(), DecodeConfig(), 30, warn=print)
    assert score is not None and score.score == pytest.approx(100.0)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "cls, field",
    [(DecodeConfig, "lenpen"), (DecodeConfig, "max_len_a"), (DecodeConfig, "temperature"), (DecodeConfig, "top_p"),
     (TrainConfig, "lr_scale"), (TrainConfig, "adam_eps"), (TrainConfig, "clip_norm"), (ModelConfig, "P_drop"),
     (ModelConfig, "layer_norm_eps")],
)  # fmt: skip
def test_non_finite_floats_are_refused_by_the_python_api(cls, field: str, value: float) -> None:
    section = {DecodeConfig: "decode", TrainConfig: "train", ModelConfig: "model"}[cls]
    with pytest.raises(ConfigError, match=rf"{section}\.{field}"):
        cls(**{field: value})


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e999"])
def test_non_finite_floats_are_refused_in_yaml_and_set(tmp_path: Path, text: str) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({"train": {"out_dir": str(tmp_path)}}))
    with pytest.raises(ConfigError, match=r"train\.lr_scale: must be a finite number"):
        load_run_config(config, [f"train.lr_scale={text}"])
    with pytest.raises(ConfigError, match=r"decode\.lenpen: must be a finite number"):
        load_run_config(config, [f"decode.lenpen={text}"])


@pytest.mark.parametrize(
    "overrides, match",
    [({"beam": 20000}, "decode.beam"), ({"max_len_b": 10**9}, "max_len_b"), ({"lenpen": 1e6}, "decode.lenpen"),
     ({"lr_scale": 1e9}, "train.lr_scale")],
)  # fmt: skip
def test_out_of_range_settings_name_the_field(overrides: dict, match: str) -> None:
    cls = TrainConfig if "lr_scale" in overrides else DecodeConfig
    with pytest.raises(ConfigError, match=match):
        cls(**overrides)
