"""Issue 12, classes 1, 4 and 7 at the command line: hostile text through `translate` and `evaluate`
(property-based: line counts kept, sources and references aligned, or one error line naming file:line), and
every option or input a user can get wrong answered with one line and exit 1 (a traceback only with --debug)."""

from __future__ import annotations

import io
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.cli import main
from aiayn.config import ConfigError, DecodeConfig, ModelConfig
from aiayn.decoding.limits import SearchTooLargeError, check_search_budget

FLAGS = ["--beam", "2", "--max-len-b", "4", "--quiet", "--threads", "1"]
ODD = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\r", "\u200b", "\ufeff", "\x7f", "\x1b[31m", "é", "日本"]
hostile_line = st.lists(st.one_of(st.sampled_from(ODD), st.text(alphabet="abc xyz.", max_size=5)), max_size=8).map(
    "".join
)


def one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"aiayn {command}: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(hostile_line, min_size=1, max_size=6))
def test_hostile_text_keeps_line_counts_and_alignment(model_dir, tmp_path_factory, lines: list[str]) -> None:
    folder = tmp_path_factory.mktemp("hostile")
    src, ref, hyp = folder / "src.en", folder / "ref.de", folder / "hyp.de"
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    ref.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(src), "--output", str(hyp), *FLAGS]) == 0
    assert hyp.read_bytes().count(b"\n") == len(lines)  # one output line per input line, whatever it holds
    args = ["evaluate", "--model", str(model_dir), "--src", str(src), "--ref", str(ref), "--hyp-out", str(hyp)]
    assert main([*args, *FLAGS]) == 0  # --src and --ref read alike: the same number of lines, aligned
    assert hyp.read_bytes().count(b"\n") == len(lines)


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--lenpen", "nan"], "decode.lenpen: must be a finite number"),
        (["--max-len-a", "nan"], "decode.max_len_a: must be a finite number"),
        (["--temperature", "nan", "--sampling"], "decode.temperature: must be a finite number"),
        (["--top-p", "inf", "--sampling"], "decode.top_p: must be a finite number"),
        (["--beam", "20000"], "decode.beam must be in"),
        (["--max-len-b", str(10**9)], "decode.max_len_a and decode.max_len_b must be at most"),
        (["--beam", "1000"], "exceeds the target vocabulary"),
        (["--device", "warp9"], "--device 'warp9': not a device"),
    ],
)
def test_bad_options_are_one_line(model_dir, tmp_path, capsys, extra: list[str], match: str) -> None:
    source = tmp_path / "in.en"
    source.write_text("A dog runs.\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(source), *FLAGS, *extra]) == 1
    assert match in one_error_line(capsys, "translate")


def test_model_naming_a_file_or_nothing(model_dir, tmp_path, capsys) -> None:
    source = tmp_path / "in.en"
    source.write_text("A dog.\n", encoding="utf-8")
    assert main(["translate", "--model", str(source), "--input", str(source), *FLAGS]) == 1
    assert "is a file; --model takes a model directory" in one_error_line(capsys, "translate")
    assert main(["translate", "--model", str(tmp_path / "none"), "--input", str(source), *FLAGS]) == 1
    assert "no such directory" in one_error_line(capsys, "translate")


def test_unknown_tokenize_is_refused_before_translating(model_dir, tmp_path, capsys, monkeypatch) -> None:
    import aiayn.decoding

    source = tmp_path / "in.en"
    source.write_text("A dog.\n", encoding="utf-8")
    monkeypatch.setattr(aiayn.decoding.Translator, "from_pretrained", None)  # would fail if reached
    args = ["evaluate", "--model", str(model_dir), "--src", str(source), "--ref", str(source), "--tokenize", "klingon"]
    assert main([*args, *FLAGS]) == 1
    assert "--tokenize 'klingon': not a sacrebleu tokenizer" in one_error_line(capsys, "evaluate")


def test_pipes_closed_streams_and_debug(model_dir, tmp_path, capsys, monkeypatch) -> None:
    args = ["translate", "--model", str(model_dir), *FLAGS]
    read, write = os.pipe()
    os.write(write, b"A dog.\n")
    os.close(write)
    out = tmp_path / "out.de"
    assert main([*args, "--input", f"/dev/fd/{read}", "--output", str(out)]) == 0  # a pipe is read, not "not found"
    os.close(read)
    assert out.read_bytes().count(b"\n") == 1
    with monkeypatch.context() as patch:
        patch.setattr(sys, "stdin", None)  # what Python sees when the shell closed it (<&-)
        assert main(args) == 1
    assert "<stdin> is closed" in one_error_line(capsys, "translate")
    with monkeypatch.context() as patch:
        patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"A dog.\n")))
        patch.setattr(sys, "stdout", None)  # closed (>&-)
        assert main(args) == 1
    assert "stdout is closed" in one_error_line(capsys, "translate")
    with pytest.raises(ConfigError, match="decode.lenpen"):  # --debug: the exception itself, with its traceback
        main([*args, "--input", str(out), "--lenpen", "nan", "--debug"])


def test_search_memory_is_estimated_before_allocating(monkeypatch) -> None:
    import aiayn.decoding.limits as limits

    model = ModelConfig(src_vocab_size=37000, tgt_vocab_size=37000)
    monkeypatch.setattr(limits, "available_memory", lambda device: 8 << 30)
    check_search_budget(DecodeConfig(beam=4), model, 64, 50, "cpu")  # the paper's search: fine
    with pytest.raises(SearchTooLargeError, match=r"needs about .* GiB .*--beam 1024"):
        check_search_budget(DecodeConfig(beam=1024, max_len_b=60000), model, 1, 50, "cpu")


def test_special_ids_must_match_the_tokenizer(model_dir, tmp_path, capsys) -> None:
    import json
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy)
    document = json.loads((copy / "config.json").read_text())
    document["model"].update(eos_id=3, unk_id=2)  # still distinct ids: only the tokenizer can tell
    (copy / "config.json").write_text(json.dumps(document))
    source = tmp_path / "in.en"
    source.write_text("A dog.\n", encoding="utf-8")
    assert main(["translate", "--model", str(copy), "--input", str(source), *FLAGS]) == 1
    assert "eos_id is 2 but the model's config.json says 3" in one_error_line(capsys, "translate")
