"""Decoding and training precisions: what `auto` picks on each kind of CPU (the feature probe forced through
$AIAYN_CPU_FLAGS), that the picked path exists here, and bf16 / int8 outputs against float32."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from aiayn.config import DecodeConfig
from aiayn.decoding import generate
from aiayn.kernels import (
    Bf16FeedForward,
    Bf16Linear,
    Int8Linear,
    choose_decode_precision,
    cpu_features,
    prepare_for_inference,
    resolve_precision,
    swap_bf16_linears,
)
from aiayn.kernels.bf16 import bf16_packing_available
from aiayn.kernels.select import BF16_TRAIN_MIN_D_MODEL, INT8_MIN_D_MODEL
from aiayn.model.feed_forward import PositionwiseFeedForward
from tests.decoding.conftest import peaky_model, random_sources

CPU = torch.device("cpu")
VOCAB = 40


@pytest.mark.parametrize(
    ("flags", "decode", "train"),
    [
        ("fpu sse sse2", "float32", torch.float32),  # no AVX2: neither bf16 nor int8 kernels pay
        ("fpu sse avx2 fma", "int8", torch.float32),  # AMD Zen 3, Intel without AVX-512 BF16
        ("avx2 avx512f avx512_vnni", "int8", torch.float32),  # int8 dot products but no bf16 matmul
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


@pytest.mark.parametrize(("flags", "d_model", "train"), [
    ("avx2 avx512f avx512_bf16 amx_bf16 amx_int8", BF16_TRAIN_MIN_D_MODEL // 2, torch.float32),  # narrow: fp32
    ("avx2 avx512f avx512_bf16 amx_bf16 amx_int8", BF16_TRAIN_MIN_D_MODEL, torch.bfloat16),
    ("avx2 avx512f avx512_bf16", 4 * BF16_TRAIN_MIN_D_MODEL, torch.bfloat16),
    ("fpu sse avx2 fma", 4 * BF16_TRAIN_MIN_D_MODEL, torch.float32),  # no native bf16 at any width
])  # fmt: skip
def test_auto_training_bf16_needs_wide_products(monkeypatch, flags: str, d_model: int, train: torch.dtype) -> None:
    monkeypatch.setenv("AIAYN_CPU_FLAGS", flags)
    assert resolve_precision("auto", CPU, d_model=d_model) == train
    assert resolve_precision("fp32", CPU, d_model=4 * BF16_TRAIN_MIN_D_MODEL) == torch.float32  # explicit: kept
    assert resolve_precision("bf16", CPU, d_model=BF16_TRAIN_MIN_D_MODEL // 2) == torch.bfloat16


@pytest.mark.parametrize(("flags", "d_model", "decode"), [
    ("fpu sse avx2 fma", INT8_MIN_D_MODEL // 2, "float32"),  # narrow products: int8 gains less than it costs
    ("fpu sse avx2 fma", INT8_MIN_D_MODEL, "int8"),
    ("avx2 avx512f avx512_bf16", INT8_MIN_D_MODEL // 2, "bf16"),  # bf16 whatever the width
])  # fmt: skip
def test_auto_int8_needs_wide_products(monkeypatch, flags: str, d_model: int, decode: str) -> None:
    monkeypatch.setenv("AIAYN_CPU_FLAGS", flags)
    assert choose_decode_precision("auto", CPU, d_model=d_model) == decode
    model = peaky_model(VOCAB, seed=1)
    model.config = dataclasses.replace(model.config, d_model=d_model)  # what the rule reads; weights unchanged
    _, runtime = prepare_for_inference(model, precision="auto")
    assert runtime.precision.startswith({"float32": "float32", "int8": "int8", "bf16": "bf16"}[decode])


def test_auto_picks_a_path_this_machine_has() -> None:
    features = cpu_features()
    assert features.model and "avx2" in features.describe() or not features.flags
    labels = {"bf16": "bf16 stacks", "int8": "int8 linears (per-row weight and input scales)", "float32": "float32"}
    for d_model in (16, INT8_MIN_D_MODEL):  # the test model's own width, and one where int8 can be picked
        picked = choose_decode_precision("auto", CPU, d_model=d_model)
        model = peaky_model(VOCAB, seed=1)
        model.config = dataclasses.replace(model.config, d_model=d_model)
        model, runtime = prepare_for_inference(model, precision="auto")
        assert runtime.precision.startswith(labels[picked])
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
    ffns = [m for m in models["bf16"].modules() if isinstance(m, Bf16FeedForward)]
    assert len(ffns) == 2 * 2 and all(p.weight.dtype == torch.bfloat16 for f in ffns for p in (f.w_1, f.w_2))
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


def test_bf16_packed_product_is_f_linear_in_bf16() -> None:
    """The weight packed once for oneDNN gives F.linear's bf16 product to the bit, at any row count (the packing
    is tuned for 256 rows), and a deep copy (the model copied for another precision) repacks its own."""
    linear = torch.nn.Linear(64, 96)
    layer = Bf16Linear(linear)
    for rows in (1, 3, 256, 1000):
        x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(rows))
        reference = torch.nn.functional.linear(x.bfloat16(), layer.weight, layer.bias).float()
        assert torch.equal(layer(x), reference), rows
    clone = copy.deepcopy(layer)
    assert torch.equal(clone(x), layer(x))
    with torch.no_grad():  # changed in place: repacked, not stale
        clone.weight.mul_(2)
    assert torch.equal(clone(x), torch.nn.functional.linear(x.bfloat16(), clone.weight, clone.bias).float())
    if torch.backends.mkldnn.is_available() and cpu_features().native_bf16:
        assert bf16_packing_available()  # the packed path is the one these asserts checked


def test_bf16_feed_forward_is_two_bf16_linears() -> None:
    """Eq. (2) with the hidden layer kept in bf16 equals two Bf16Linear with float32 between (ReLU commutes with
    rounding to bf16), to the bit; models with another activation keep separate Bf16Linear layers."""
    ffn = PositionwiseFeedForward(32, 80).eval()
    fused = Bf16FeedForward(ffn)
    x = torch.randn(6, 5, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        two = Bf16Linear(ffn.w_2)(torch.relu(Bf16Linear(ffn.w_1)(x)))
        plain = ffn(x)
    assert torch.equal(fused(x), two) and fused(x).dtype == torch.float32
    assert (two - plain).abs().max() <= 0.03 * plain.abs().max()
    swish = torch.nn.Sequential(PositionwiseFeedForward(32, 80, activation="swish")).eval()
    assert swap_bf16_linears(swish) == 2 and isinstance(swish[0].w_1, Bf16Linear)
    relu = torch.nn.Sequential(PositionwiseFeedForward(32, 80)).eval()
    assert swap_bf16_linears(relu) == 2 and isinstance(relu[0], Bf16FeedForward)


def test_int8_quantizes_every_linear_with_per_row_scales(models) -> None:
    """As CTranslate2's int8: both stacks and the vocabulary projection, one symmetric scale per output row."""
    int8 = models["int8"]
    assert not any(type(m) is torch.nn.Linear for m in int8.modules())  # nothing left in float32
    quantized = [m for m in int8.modules() if isinstance(m, Int8Linear)]
    assert isinstance(int8.output_proj, Int8Linear) and len(quantized) > 10
    for m in quantized:
        weight = m.quantized_weight()
        assert weight.qscheme() == torch.per_channel_affine and weight.q_per_channel_scales().numel() == weight.size(0)
        assert torch.all(weight.q_per_channel_zero_points() == 0)  # symmetric: zero point 0 on every row
    assert int8.tgt_embed.weight.dtype == torch.float32  # the embeddings stay float


@pytest.mark.parametrize("bias", [True, False])
def test_int8_linear_is_per_row_quantization(bias: bool) -> None:
    """Int8Linear against the formula in float64: each input row scaled by its max |x| to [-1, 1] and rounded
    to 7 bits, each weight row to 8 bits with its own scale; and against the float layer within int8's error."""
    generator = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(64, 48, bias=bias)
    x = torch.randn(3, 5, 64, generator=generator) * torch.logspace(-2, 2, 5)[:, None]  # rows of unlike sizes
    layer = Int8Linear(linear)
    got = layer(x)
    assert got.dtype == torch.float32 and got.shape == (3, 5, 48)
    assert torch.equal(copy.deepcopy(layer)(x), got)  # a copied model decodes the same
    w = linear.weight.detach().double()
    w_scale = w.abs().amax(1, keepdim=True) / 127
    w_hat = (w / w_scale).round() * w_scale
    rows = x.double().reshape(-1, 64)
    x_scale = rows.abs().amax(1, keepdim=True)
    x_hat = (rows / x_scale * 63).round() / 63 * x_scale
    expected = x_hat @ w_hat.T + (linear.bias.detach().double() if bias else 0)
    assert torch.allclose(got.double().reshape(-1, 48), expected, rtol=1e-5, atol=1e-6 * x_scale.max().item())
    plain = linear(x).detach()
    relative = (got - plain).abs().amax(-1) / plain.abs().amax(-1)  # every row, small or large, to ~1%
    assert relative.max() <= 0.05


def test_int8_rows_do_not_depend_on_their_batch(models) -> None:
    """Each row quantized with its own scale: a sentence decodes alone exactly as inside a batch."""
    src = random_sources(6, 8, VOCAB, seed=7)
    config = DecodeConfig(beam=3, nbest=2, max_len_b=10)
    together = generate(models["int8"], src, config)
    for i in range(src.size(0)):
        row = src[i : i + 1]
        alone = generate(models["int8"], row[:, : int(row.ne(0).sum())], config)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in together[i]], i
        assert [h.score for h in alone] == pytest.approx([h.score for h in together[i]], abs=1e-5)
