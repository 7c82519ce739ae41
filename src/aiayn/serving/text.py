"""From request texts to model segments and back: N lines in, N lines out; sentences; nothing truncated.

    plan = plan_texts(["A dog runs.\nIt is cold. Very cold."], "en", tokenizer, limit=23)
    plan.segments   # ['A dog runs.', 'It is cold.', 'Very cold.']  what the model translates
    plan.join(outputs)  # one string per text, its line breaks where the source had them

Each text is split on "\n" (a trailing "\r" and the line's leading and trailing whitespace are kept as they
were); each line into sentences by `sentencex` (Wikimedia's rule-based segmenter, ~300 languages); a sentence
with more subword tokens than the model accepts is cut at word boundaries (a single over-long word in halves)
into pieces that fit, translated separately and joined with a space. `clean` refuses lone surrogates and drops
control characters other than tab, newline and carriage return.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sentencex import segment

SURROGATE = re.compile("[\ud800-\udfff]")


class TextError(ValueError):
    """A text cannot be translated as sent (not a limit: the text itself is wrong)."""


def clean(text: str, where: str) -> str:
    """`text` without control characters (tab, newline, CR kept); a lone surrogate is a `TextError`."""
    bad = SURROGATE.search(text)
    if bad:
        raise TextError(
            f"{where} contains a lone surrogate U+{ord(bad.group()):04X} at character {bad.start()}: "
            "texts must be valid Unicode"
        )
    if text.isprintable():
        return text
    return "".join(c for c in text if c in "\t\n\r" or unicodedata.category(c) != "Cc")


def sentences(line: str, language: str) -> list[str]:
    """Sentences of one line (no newline inside), stripped, empty ones dropped."""
    try:
        parts = list(segment(language, line))
    except Exception:  # sentencex has no rules for this language: the line is one sentence
        parts = [line]
    return [part.strip() for part in parts if part.strip()]


def fit(sentence: str, count: Callable[[Sequence[str]], list[int]], limit: int) -> list[str]:
    """`sentence` cut into pieces of at most `limit` subword tokens: at word boundaries, a long word in halves."""
    if count([sentence])[0] <= limit:
        return [sentence]
    words = sentence.split()
    if len(words) == 1:
        middle = len(sentence) // 2
        return fit(sentence[:middle], count, limit) + fit(sentence[middle:], count, limit)
    chunks: list[list[str]] = [[]]
    used = 0
    for word, n in zip(words, count(words)):
        if chunks[-1] and used + n > limit:
            chunks.append([])
            used = 0
        chunks[-1].append(word)
        used += n
    return [piece for chunk in chunks for piece in fit(" ".join(chunk), count, limit)]


@dataclass
class Line:
    lead: str  # leading whitespace, kept
    segments: list[int]  # indices into Plan.segments, joined with a space
    trail: str  # trailing whitespace (and "\r"), kept


@dataclass
class Plan:
    segments: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)  # subword tokens of each segment (EOS not counted)
    texts: list[list[Line]] = field(default_factory=list)
    text_of_segment: list[int] = field(default_factory=list)

    def join(self, outputs: Sequence[str]) -> list[str]:
        """One output per text: each line's segment translations joined with a space, the lines with "\n"."""
        return [
            "\n".join(line.lead + " ".join(outputs[i] for i in line.segments) + line.trail for line in lines)
            for lines in self.texts
        ]


def plan_texts(texts: Sequence[str], language: str, tokenizer, limit: int) -> Plan:
    """Split cleaned `texts` into model segments of at most `limit` subword tokens each."""

    def count(strings: Sequence[str]) -> list[int]:
        return [len(ids) for ids in tokenizer.encode_batch(list(strings), threads=1)]

    plan = Plan()
    for index, text in enumerate(texts):
        lines = []
        for raw in text.split("\n"):
            body = raw.strip()
            lead = raw[: len(raw) - len(raw.lstrip())]
            trail = raw[len(raw.rstrip()) :] if body else raw[len(lead) :]
            line = Line(lead, [], trail)
            for sentence in sentences(body, language) if body else []:
                for piece in fit(sentence, count, limit):
                    line.segments.append(len(plan.segments))
                    plan.segments.append(piece)
                    plan.text_of_segment.append(index)
            lines.append(line)
        plan.texts.append(lines)
    plan.tokens = count(plan.segments) if plan.segments else []
    return plan


__all__ = ["Line", "Plan", "TextError", "clean", "fit", "plan_texts", "sentences"]
