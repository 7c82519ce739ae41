"""The tok/ pipeline reproduces the Multi30k authors' preprocessing on the real references."""

from __future__ import annotations

import pytest

from aiayn.data import resolve_data_dir
from aiayn.evaluation import corpus_bleu
from aiayn.evaluation.moses import moses_lc_tok


@pytest.mark.parametrize("lang", ["de", "en"])
def test_raw_references_become_the_tok_files(lang: str) -> None:
    folder = resolve_data_dir() / "multi30k"
    raw = (folder / f"test2016.{lang}").read_text(encoding="utf-8").splitlines()
    tok = (folder / "tok" / f"test2016.lc.norm.tok.{lang}").read_text(encoding="utf-8").splitlines()
    ours = moses_lc_tok(raw, lang)
    assert sum(a == b for a, b in zip(ours, tok)) == len(tok) == 1000
    assert corpus_bleu(ours, tok, tokenize="none").score == pytest.approx(100.0)
