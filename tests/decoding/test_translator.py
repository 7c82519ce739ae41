"""The Translator on a real tokenizer: input order, empty and over-long sentences, batching by a token budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.decoding import LongInputError, Translator
from aiayn.decoding.translator import make_batches
from tests.decoding.model_dir import MAX_POSITIONS, multi30k_test_sentences
from tests.test_cpu import GLIBC_ONLY, large_block_in_heap


@pytest.fixture(scope="module")
def translator(model_dir):
    return Translator.from_pretrained(model_dir, beam=3, max_len_b=10)


def test_make_batches_sorts_by_length_and_respects_the_budget():
    lengths = [5, 0, 12, 3, 12, 7, 1, 30]
    batches = make_batches(lengths, max_tokens=26)
    assert sorted(i for b in batches for i in b) == [0, 2, 3, 4, 5, 6, 7]  # empty sentence 1 left out
    for batch in batches:
        assert [lengths[i] for i in batch] == sorted((lengths[i] for i in batch), reverse=True)
        assert len(batch) == 1 or len(batch) * (max(lengths[i] for i in batch) + 1) <= 26
    assert [7] in batches  # longer than the budget alone: a batch of its own


def test_output_order_matches_input_order_whatever_the_batching(translator):
    sentences = multi30k_test_sentences(12)
    alone = [translator.translate([s])[0] for s in sentences]
    for max_tokens in (1, 40, 10_000):  # one per batch, a few per batch (sorted internally), all at once
        assert translator.translate(sentences, max_tokens=max_tokens) == alone
    assert translator.translate(sentences[::-1]) == alone[::-1]
    assert len(set(alone)) > 3  # distinct outputs, so a permutation would be caught


def test_empty_sentences_give_empty_strings_without_disturbing_the_rest(translator):
    sentences = multi30k_test_sentences(3)
    mixed = ["", sentences[0], "   ", sentences[1], "", sentences[2]]
    out = translator.translate(mixed)
    assert out[0] == out[2] == out[4] == ""
    assert [out[1], out[3], out[5]] == translator.translate(sentences)
    assert translator.translate([]) == []


def test_long_sentences_truncate_or_raise(translator):
    long = " ".join(multi30k_test_sentences(6))
    limit = MAX_POSITIONS - 1
    assert len(translator.tokenizer.encode(long)) > limit
    result = translator.translate_detailed(["A dog.", long])
    assert result[0].truncated_from is None
    assert result[1].truncated_from == len(translator.tokenizer.encode(long))
    assert len(result[1].source_pieces) == limit
    with pytest.raises(LongInputError, match="sentence 2 ") as error:
        translator.translate(["A dog.", long], on_long_line="error")
    assert error.value.index == 1


def test_detailed_nbest_scores_pieces_and_attention(translator):
    sentence = multi30k_test_sentences(1)[0]
    [result] = translator.translate_detailed([sentence], nbest=3, need_attention=True)
    assert len(result.hypotheses) == len(result.scores) == len(result.pieces) == len(result.attentions) == 3
    assert result.scores == sorted(result.scores, reverse=True)
    assert result.text == translator.translate([sentence])[0]
    for text, pieces, attention in zip(result.hypotheses, result.pieces, result.attentions):
        ids = [translator.tokenizer.processor.piece_to_id(piece) for piece in pieces]
        assert translator.tokenizer.decode(ids) == text
        assert attention.shape == (len(pieces) + 1, len(result.source_pieces) + 1)


def test_translate_rejects_a_single_string(translator):
    with pytest.raises(TypeError, match="list of sentences"):
        translator.translate("A dog.")


@GLIBC_ONLY
@pytest.mark.parametrize("reuse_memory", [True, False])
def test_from_pretrained_keeps_freed_memory_unless_told_not_to(model_dir: Path, reuse_memory: bool) -> None:
    """On CPU the process's allocator keeps freed memory (faster steps), except with reuse_memory=False."""
    setup = (
        "from aiayn.decoding import Translator\n"
        f"Translator.from_pretrained({str(model_dir)!r}, reuse_memory={reuse_memory})"
    )
    assert large_block_in_heap(setup) == reuse_memory
