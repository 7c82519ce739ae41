"""The README's Python snippets run as printed, on a tiny configuration (the base preset swapped for tiny) and a
model directory built by the test (for the checkpoint path)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_the_model_and_translator_snippets() -> None:
    found = snippets()
    assert any("model.step(" in s for s in found) and any("Translator.from_pretrained" in s for s in found)


@pytest.mark.parametrize("index", range(len(snippets())))
def test_readme_snippet_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.decoding.model_dir import build_model_dir

    code = snippets()[index].replace('preset("base", src_vocab_size=37000, tgt_vocab_size=37000)',
                                     'preset("tiny", src_vocab_size=64, tgt_vocab_size=64)')  # fmt: skip
    if "runs/demo/checkpoint-best" in code:
        code = code.replace("runs/demo/checkpoint-best", str(build_model_dir(tmp_path)))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md python snippet {index + 1}", "exec"), {})
