"""Beam search against brute force on tiny random models with a 6-token vocabulary.

1. With a beam wide enough to never prune, beam search (with its early stopping) must return exactly the
   best hypotheses of an exhaustive search over all outputs of at most L tokens, under the same
   length-normalised score, for both penalty forms and several alphas (also alpha < 0 and min_len).
2. With small beams, the batched search must equal a plain per-sentence beam search written out in Python
   that never stops early (it runs every hypothesis to the length limit): early stopping changes nothing.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from aiayn.config import DecodeConfig
from aiayn.decoding import generate, length_penalty
from tests.decoding.conftest import peaky_model, random_sources

VOCAB = 6  # pad, bos, eos, unk + 2 words: outputs use unk(3), 4, 5 and end with eos(2)
CONTENT = (3, 4, 5)
EOS = 2


def sequence_log_probs(model, src_row: torch.Tensor, outputs: list[tuple[int, ...]]) -> list[float]:
    """log P(y + EOS | x) for each y, by teacher forcing (full forward passes, no cache)."""
    src = src_row[src_row != 0][None]
    result = []
    with torch.no_grad():
        for length in sorted({len(y) for y in outputs}):
            group = [y for y in outputs if len(y) == length]
            tgt_in = torch.tensor([[1, *y] for y in group])
            tgt_out = torch.tensor([[*y, EOS] for y in group])
            lprobs = model.log_probs(src.expand(len(group), -1), tgt_in)
            for y, lp in zip(group, lprobs.gather(2, tgt_out[..., None]).squeeze(2).sum(1).tolist()):
                result.append((y, lp))
    order = {y: i for i, y in enumerate(outputs)}
    return [lp for _, lp in sorted(result, key=lambda pair: order[pair[0]])]


def exhaustive(model, src_row, max_len: int, min_len: int, alpha: float, form: str, n: int):
    outputs = [y for length in range(min_len, max_len + 1) for y in itertools.product(CONTENT, repeat=length)]
    lps = sequence_log_probs(model, src_row, outputs)
    scored = [(lp / length_penalty(len(y) + 1, alpha, form), list(y)) for y, lp in zip(outputs, lps)]
    scored.sort(key=lambda pair: -pair[0])
    return scored[:n]


@pytest.fixture(scope="module", params=[(5, 1.0), (6, 0.0)], ids=["model5", "model6"])
def model(request):
    # model6 with a power penalty is a case where stopping once no live hypothesis beats the finished ones
    # *at its current length* would be wrong: a longer continuation wins later.
    seed, eos_shift = request.param
    return peaky_model(VOCAB, seed=seed, scale=2.0, eos_shift=eos_shift)


@pytest.fixture(scope="module")
def src():
    return random_sources(3, 5, VOCAB, seed=7)


@pytest.mark.parametrize(
    "alpha,form,min_len",
    [
        (0.0, "gnmt", 0),
        (0.6, "gnmt", 0),
        (2.0, "gnmt", 0),
        (1.0, "power", 0),
        (3.0, "power", 0),
        (-0.5, "gnmt", 0),
        (0.6, "gnmt", 2),
    ],
)
def test_wide_beam_equals_exhaustive_search(model, src, alpha, form, min_len):
    L, n = 4, 3
    config = DecodeConfig(
        beam=(len(CONTENT) + 1) ** L,
        nbest=n,
        lenpen=alpha,
        lenpen_form=form,
        max_len_a=0.0,
        max_len_b=L,
        min_len=min_len,
    )
    results = generate(model, src, config)
    for row, hyps in enumerate(results):
        expected = exhaustive(model, src[row], L, min_len, alpha, form, n)
        assert [h.tokens for h in hyps] == [y for _, y in expected]
        assert [h.score for h in hyps] == pytest.approx([s for s, _ in expected], abs=1e-4)


def reference_beam_search(model, src_row, k: int, max_len: int, alpha: float, form: str, nbest: int):
    """A textbook beam search for one sentence, run to the length limit without early stopping."""
    src = src_row[src_row != 0][None]
    live = [(0.0, [])]  # (log P, tokens)
    finished = []
    with torch.no_grad():
        for t in range(max_len + 1):
            tgt_in = torch.tensor([[1, *y] for _, y in live])
            lprobs = model.log_probs(src.expand(len(live), -1), tgt_in)[:, -1]
            candidates = []
            for (score, y), row in zip(live, lprobs.tolist()):
                for token in range(VOCAB):
                    if token in (0, 1) or (t == max_len and token != EOS):
                        continue
                    candidates.append((score + row[token], y, token))
            candidates.sort(key=lambda c: -c[0])
            candidates = candidates[: 2 * k]
            for rank, (score, y, token) in enumerate(candidates):
                if token == EOS and rank < k:
                    finished.append((score / length_penalty(len(y) + 1, alpha, form), score, y))
            live = [(score, [*y, token]) for score, y, token in candidates if token != EOS][:k]
            if not live:
                break
    finished.sort(key=lambda f: -f[0])
    return finished[:nbest]


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("alpha,form", [(0.0, "gnmt"), (0.6, "gnmt"), (2.0, "gnmt"), (1.5, "power")])
def test_early_stopping_changes_nothing(model, src, k, alpha, form):
    L = 6
    config = DecodeConfig(beam=k, nbest=k, lenpen=alpha, lenpen_form=form, max_len_a=0.0, max_len_b=L)
    results = generate(model, src, config)
    for row, hyps in enumerate(results):
        expected = reference_beam_search(model, src[row], k, L, alpha, form, k)
        assert [h.tokens for h in hyps] == [y for _, _, y in expected]
        assert [h.score for h in hyps] == pytest.approx([s for s, _, _ in expected], abs=1e-4)
