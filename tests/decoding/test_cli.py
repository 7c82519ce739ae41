"""`aiayn translate` and `aiayn evaluate` end to end: input order, empty, over-long and invalid lines, n-best
format, scores with sacrebleu signatures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aiayn.cli import main
from aiayn.decoding import Translator
from tests.decoding.model_dir import multi30k_test_sentences

FLAGS = ["--beam", "3", "--max-len-b", "8", "--quiet", "--threads", "1"]


@pytest.fixture(scope="module")
def sentences():
    return multi30k_test_sentences(8)


@pytest.fixture(scope="module")
def expected(model_dir, sentences):
    return Translator.from_pretrained(model_dir, beam=3, max_len_b=8).translate(sentences)


def test_translate_file_keeps_order_and_empty_lines(model_dir, sentences, expected, tmp_path):
    source = tmp_path / "in.en"
    lines = [sentences[0], "", *sentences[1:4], "", *sentences[4:]]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.de"
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--output", str(out), *FLAGS]) == 0
    got = out.read_text(encoding="utf-8").split("\n")
    assert got[-1] == "" and len(got) - 1 == len(lines)
    assert got[:-1] == [expected[0], "", *expected[1:4], "", *expected[4:]]


def test_translate_stdin_to_stdout_in_a_subprocess(model_dir, sentences, expected):
    text = "\n".join([sentences[2], "", sentences[3]]) + "\n"
    process = subprocess.run(
        [sys.executable, "-m", "aiayn", "translate", "--model", str(model_dir), *FLAGS],
        input=text.encode(),
        capture_output=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr.decode()
    assert process.stdout.decode().split("\n") == [expected[2], "", expected[3], ""]


def test_over_long_line_is_truncated_with_a_warning_naming_it(model_dir, sentences, tmp_path, capsys):
    source = tmp_path / "long.en"
    source.write_text(f"{sentences[0]}\n{' '.join(sentences)}\n{sentences[1]}\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--beam", "2"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.split("\n")) == 4
    assert f"{source}:2:" in captured.err and "truncated" not in captured.out and "limit" in captured.err


def test_over_long_line_error_names_it_and_writes_nothing(model_dir, sentences, tmp_path, capsys):
    source = tmp_path / "long.en"
    source.write_text(f"{sentences[0]}\n\n{' '.join(sentences)}\n", encoding="utf-8")
    out = tmp_path / "out.de"
    argv = ["translate", "--model", str(model_dir), "--input", str(source), "--output", str(out)]
    assert main([*argv, "--on-long-line", "error"]) == 1
    assert f"{source}:3:" in capsys.readouterr().err
    assert not out.exists()


def test_invalid_utf8_is_an_error_naming_the_line(model_dir, tmp_path, capsys):
    source = tmp_path / "bad.en"
    source.write_bytes(b"A dog.\nA cat.\nA \xff bird.\n")
    assert main(["translate", "--model", str(model_dir), "--input", str(source)]) == 1
    err = capsys.readouterr().err
    assert f"{source}:3:" in err and "UTF-8" in err


def test_nbest_lines(model_dir, sentences, tmp_path, capsys):
    source = tmp_path / "in.en"
    source.write_text(f"{sentences[0]}\n\n{sentences[1]}\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--input", str(source), "--nbest", "3", *FLAGS]) == 0
    rows = [line.split(" ||| ") for line in capsys.readouterr().out.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 0, 1, 2, 2, 2]
    assert rows[3][1:] == ["", "0.0000"]  # the empty line: one empty hypothesis
    for index in (0, 2):
        scores = [float(r[2]) for r in rows if int(r[0]) == index]
        assert scores == sorted(scores, reverse=True)


def test_evaluate_prints_bleu_and_chrf_with_signatures(model_dir, sentences, expected, tmp_path, capsys):
    src, ref, hyp = tmp_path / "src.en", tmp_path / "ref.de", tmp_path / "hyp.de"
    src.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    ref.write_text("\n".join(expected) + "\n", encoding="utf-8")  # references = our own output: BLEU 100
    argv = ["evaluate", "--model", str(model_dir), "--src", str(src), "--ref", str(ref), "--hyp-out", str(hyp)]
    assert main([*argv, *FLAGS]) == 0
    out = capsys.readouterr().out
    assert out.startswith("BLEU = 100.00") and "chrF2 = 100.00" in out
    assert out.count("signature: nrefs:1|") == 2
    assert hyp.read_text(encoding="utf-8").splitlines() == expected
    ref.write_text("one line\n", encoding="utf-8")
    assert main([*argv, *FLAGS]) == 1
    assert "line i of --ref" in capsys.readouterr().err
