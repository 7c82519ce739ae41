"""oneDNN linear layers for CPU training compute the same function and gradients as torch's own."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from aiayn.kernels import OneDnnLinear, choose_linear, onednn_available, onednn_linear, swap_linears
from aiayn.kernels.onednn import packed_min_rows
from aiayn.model import Transformer
from aiayn.training.loss import label_smoothed_nll_loss
from tests.conftest import PAD, random_batch, tiny_config

pytestmark = pytest.mark.skipif(not onednn_available(), reason="this torch build has no oneDNN linear")


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max().detach() / b.abs().max().detach())


@pytest.mark.parametrize("bias", [True, False])
def test_onednn_linear_equals_f_linear_with_gradients(bias: bool) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 50, 64, generator=g, requires_grad=True)
    w = torch.randn(96, 64, generator=g, requires_grad=True)
    b = torch.randn(96, generator=g, requires_grad=True) if bias else None
    inputs = (x, w) + ((b,) if bias else ())
    upstream = torch.randn(3, 50, 96, generator=g)
    ours, reference = onednn_linear(x, w, b), F.linear(x, w, b)
    assert type(ours.grad_fn).__name__ == "_OneDnnLinearFunctionBackward"  # the oneDNN path, not a fallback
    assert relative_error(ours, reference) < 1e-5
    for got, want in zip(
        torch.autograd.grad((ours * upstream).sum(), inputs),
        torch.autograd.grad((reference * upstream).sum(), inputs),
        strict=True,
    ):
        assert relative_error(got, want) < 1e-5


def test_falls_back_under_autocast_and_for_other_dtypes() -> None:
    x, w = torch.randn(4, 8), torch.randn(5, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert onednn_linear(x, w).dtype == torch.bfloat16  # autocast's bf16 product, as F.linear gives
    assert torch.equal(onednn_linear(x.double(), w.double()), F.linear(x.double(), w.double()))


def loss_and_grads(model: Transformer, src, tgt_in, tgt_out) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    real = tgt_out != PAD
    loss, _ = label_smoothed_nll_loss(model(src, tgt_in, real), tgt_out[real], 0.1, PAD)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("norm_first", [False, True])
def test_model_on_onednn_gives_the_same_loss_and_gradients(norm_first: bool) -> None:
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(0)
    plain = Transformer(tiny_config(norm_first=norm_first))
    fast = copy.deepcopy(plain)
    assert swap_linears(fast) == sum(type(m) is torch.nn.Linear for m in plain.modules())
    assert any(isinstance(m, OneDnnLinear) for m in fast.modules())
    assert all(m.packed is None for m in fast.modules() if isinstance(m, OneDnnLinear))  # training: unpacked
    assert list(plain.state_dict()) == list(fast.state_dict())  # a kernel swap: the same parameters
    src, _ = random_batch(4, 9, 37, g)
    tgt, _ = random_batch(4, 8, 37, g, min_length=2)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    loss, grads = loss_and_grads(plain, src, tgt_in, tgt_out)
    fast_loss, fast_grads = loss_and_grads(fast, src, tgt_in, tgt_out)
    assert abs(float(loss - fast_loss)) <= 1e-5 * float(loss)
    for name, grad in grads.items():
        assert relative_error(fast_grads[name], grad) < 1e-4, name


def test_a_copy_uses_its_own_weights() -> None:
    model = Transformer(tiny_config())
    swap_linears(model)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for p in twin.parameters():
            p.zero_()
        out = twin.project(torch.ones(2, model.config.d_model))
        q = twin.decoder.layers[0].cross_attn.w_q(torch.ones(2, model.config.d_model))
    assert torch.equal(out, torch.zeros_like(out)) and torch.equal(q, torch.zeros_like(q))
    assert any(p.abs().sum() > 0 for p in model.parameters())  # the original is untouched


def test_linear_kernel_setting() -> None:
    cpu = torch.device("cpu")
    assert choose_linear("auto", cpu, torch.float32, sharded=False) == "onednn"
    assert choose_linear("auto", cpu, torch.bfloat16, sharded=False) == "torch"  # autocast uses oneDNN already
    assert choose_linear("auto", cpu, torch.float32, sharded=True) == "torch"
    assert choose_linear("torch", cpu, torch.float32, sharded=False) == "torch"
    with pytest.raises(ValueError, match="linear kernel onednn"):
        choose_linear("onednn", cpu, torch.bfloat16, sharded=False)


def test_min_rows_sends_few_rows_to_f_linear_and_many_to_onednn() -> None:
    """A packed module runs products of fewer than `min_rows` rows on F.linear (bit for bit) and the rest on
    oneDNN (equal to rounding); small weights need more rows than large ones."""
    torch.manual_seed(0)
    linear = nn.Linear(24, 40)
    module = OneDnnLinear.from_linear(linear, packed=True)
    assert module.min_rows == packed_min_rows(40, 24) > 1000  # a 40 x 24 weight: F.linear for any decoding batch
    module.min_rows = 8
    with torch.no_grad():
        few, many = torch.randn(2, 3, 24), torch.randn(4, 3, 24)  # 6 and 12 rows
        onednn = torch.ops.mkldnn._linear_pointwise(many.reshape(-1, 24), linear.weight, linear.bias, "none", [], "")
        assert torch.equal(module(few), F.linear(few, linear.weight, linear.bias))
        assert torch.equal(module(many).reshape(-1, 40), onednn)
        torch.testing.assert_close(module(many), F.linear(many, linear.weight, linear.bias))
    assert packed_min_rows(8000, 512) == 1 and packed_min_rows(512, 512) == 4 and packed_min_rows(128, 128) == 1024
