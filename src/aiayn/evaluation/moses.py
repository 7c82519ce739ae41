"""Multi30k's `tok/` preprocessing applied to system output, so BLEU can be reported the way Multi30k papers do.

The dataset's `*.lc.norm.tok.*` files were made with Moses: punctuation normalisation, lowercasing, tokenization
with XML escapes (`&apos;`, `&quot;`). `moses_lc_tok` reproduces that with sacremoses (an optional dependency,
`pip install sacremoses`); on test2016.de it turns the raw references into the `tok/` references exactly
(`tests/evaluation/test_moses.py`). Score with `corpus_bleu(..., tokenize="none")` against the `tok/` file.
"""

from __future__ import annotations

from collections.abc import Sequence


def moses_lc_tok(lines: Sequence[str], lang: str) -> list[str]:
    """Normalise punctuation, lowercase and Moses-tokenize (with XML escapes) each line, as Multi30k's tok/."""
    try:
        from sacremoses import MosesPunctNormalizer, MosesTokenizer
    except ImportError:
        raise RuntimeError("Multi30k tok/ scoring needs sacremoses: pip install sacremoses") from None
    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    return [tokenizer.tokenize(normalizer.normalize(line).lower(), escape=True, return_str=True) for line in lines]
