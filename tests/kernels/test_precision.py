"""Decoding and training precisions: what `auto` picks on each kind of CPU (the feature probe forced through
$AIAYN_CPU_FLAGS), that the picked path exists here, and bf16 / int8 outputs against float32."""

from __future__ import annotations

import copy

import pytest
import torch

from aiayn.config import DecodeConfig
from aiayn.decoding import generate
from aiayn.kernels import Bf16Linear, choose_decode_precision, cpu_features, prepare_for_inference, resolve_precision
from tests.decoding.conftest import peaky_model, random_sources

CPU = torch.device("cpu")
VOCAB = 40


@pytest.mark.parametrize(
    ("flags", "decode", "train"),
    [
        ("fpu sse avx2 fma", "float32", torch.float32),  # AMD Zen 3, Intel without AVX-512 BF16
        ("avx2 avx512f avx512_vnni", "float32", torch.float32),  # int8 dot products but no bf16 matmul
        ("avx2 avx512f avx512_bf16", "bf16", torch.bfloat16),  # AMD Zen 4/5
        ("avx2 avx512f avx512_bf16 amx_bf16 amx_int8", "bf16", torch.bfloat16),  # Intel Sapphire Rapids and later
    ],
)
def test_auto_follows_the_cpu_features(monkeypatch, flags: str, decode: str, train: torch.dtype) -> None:
    monkeypatch.setenv("AIAYN_CPU_FLAGS", flags)
    assert choose_decode_precision("auto", CPU) == decode
    assert resolve_precision("auto", CPU) == train
    assert choose_decode_precision("int8", CPU) == "int8"  # an explicit choice is kept
    with pytest.raises(ValueError, match="precision implementation must be one of"):
        choose_decode_precision("fp8", CPU)


def test_auto_picks_a_path_this_machine_has() -> None:
    features = cpu_features()
    assert features.model and "avx2" in features.describe() or not features.flags
    picked = choose_decode_precision("auto", CPU)
    model, runtime = prepare_for_inference(peaky_model(VOCAB, seed=1), precision="auto")
    assert runtime.precision == {"float32": "float32", "bf16": "bf16 stacks, float32 logits"}[picked]
    generate(model, random_sources(2, 4, VOCAB, seed=1), DecodeConfig(beam=2, max_len_b=4))


@pytest.fixture(scope="module")
def models():
    plain = peaky_model(VOCAB, seed=5, eos_shift=3.0)
    return {
        "float32": prepare_for_inference(copy.deepcopy(plain), precision="float32")[0],
        "bf16": prepare_for_inference(copy.deepcopy(plain), precision="bf16")[0],
        "int8": prepare_for_inference(copy.deepcopy(plain), precision="int8")[0],
    }


@pytest.mark.parametrize(
    ("precision", "agreement", "logprob_error", "relative_error"),
    # int8 quantizes every linear layer and the vocabulary projection: on this random model 88% of greedy tokens
    # agree (93.5% with the trained demo model on test2016, docs/benchmarks/precision.md)
    [("bf16", 0.9, 0.25, 0.05), ("int8", 0.85, 0.35, 0.08)],
)
def test_lower_precision_against_float32(
    models, precision: str, agreement: float, logprob_error: float, relative_error: float
) -> None:
    """Greedy tokens agree with float32's on most positions; teacher-forced log-probabilities stay close."""
    src = random_sources(24, 8, VOCAB, seed=3)
    config = DecodeConfig(greedy=True, max_len_b=12)
    reference = [h[0].tokens for h in generate(models["float32"], src, config)]
    got = [h[0].tokens for h in generate(models[precision], src, config)]
    same = sum(a == b for r, g in zip(reference, got, strict=True) for a, b in zip(r, g))
    total = sum(min(len(r), len(g)) for r, g in zip(reference, got, strict=True))
    assert total > 0 and same / total >= agreement, f"{same}/{total}"
    tgt = torch.randint(4, VOCAB, (24, 6), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        exact = models["float32"].log_probs(src, tgt)
        approx = models[precision].log_probs(src, tgt)
    assert approx.dtype == torch.float32  # scores in float32 whatever the weights
    likely = exact > -5.0  # the tokens a search can pick: absolute error
    assert likely.any() and (approx - exact)[likely].abs().max() <= logprob_error
    assert ((approx - exact)[~likely].abs() / exact[~likely].abs()).max() <= relative_error  # the rest: relative


def test_bf16_keeps_the_search_scores_in_float32(models) -> None:
    src = random_sources(4, 6, VOCAB, seed=2)
    hypotheses = generate(models["bf16"], src, DecodeConfig(beam=3, nbest=2, max_len_b=8))
    assert all(isinstance(h.score, float) and h.score == h.score for x in hypotheses for h in x)
    linears = [m for m in models["bf16"].modules() if isinstance(m, Bf16Linear)]
    assert linears and all(m.weight.dtype == torch.bfloat16 for m in linears)
    stacks = [*models["bf16"].encoder.modules(), *models["bf16"].decoder.modules()]
    assert not any(isinstance(m, torch.nn.Linear) for m in stacks)  # every product of both stacks in bf16
    assert models["bf16"].output_weight().dtype == torch.float32  # the logits in float32


def test_bf16_linear_is_the_rounded_product() -> None:
    """Bf16Linear equals F.linear on the bf16-rounded input, weight and bias (computed in float64), to bf16's
    output rounding; float32 in and out."""
    linear = torch.nn.Linear(48, 40)
    x = torch.randn(5, 7, 48, generator=torch.Generator().manual_seed(0))
    got = Bf16Linear(linear)(x)
    assert got.dtype == torch.float32 and got.shape == (5, 7, 40)
    exact = torch.nn.functional.linear(*(t.detach().bfloat16().double() for t in (x, linear.weight, linear.bias)))
    assert torch.allclose(got.double(), exact, rtol=2**-7, atol=1e-3)
    plain = linear(x)  # against the float32 layer: the error bf16's 8-bit mantissa allows, no more
    assert (got - plain).abs().max() <= 0.02 * plain.abs().max()


def test_int8_quantizes_every_linear_with_per_row_scales(models) -> None:
    """As CTranslate2's int8: both stacks and the vocabulary projection, one symmetric scale per output row."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    int8 = models["int8"]
    assert not any(type(m) is torch.nn.Linear for m in int8.modules())  # nothing left in float32
    quantized = [m for m in int8.modules() if isinstance(m, DynamicInt8Linear)]
    assert isinstance(int8.output_proj, DynamicInt8Linear)
    for m in quantized:
        weight = m.weight()
        assert weight.qscheme() == torch.per_channel_affine and weight.q_per_channel_scales().numel() == weight.size(0)
        assert torch.all(weight.q_per_channel_zero_points() == 0)  # symmetric: zero point 0 on every row
    assert int8.tgt_embed.weight.dtype == torch.float32  # the embeddings stay float
