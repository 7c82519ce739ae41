"""The one place fast paths are chosen (`aiayn.kernels.select`): what `auto` picks where, that the choice is
applied by swapping modules and setting attributes (never by assigning methods onto instances), and that the
implementations it picks compute eq. (1) like the fused kernel in the regimes they are picked for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from aiayn.kernels import choose_attention, prepare_for_inference, prepare_for_training
from aiayn.model import MultiHeadAttention, Transformer
from aiayn.model.attention import ATTENTION
from aiayn.model.masks import key_padding_mask
from tests.conftest import random_batch, tiny_config

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_auto_attention_choices() -> None:
    assert choose_attention("auto", CPU, torch.float32, training=False) == ("sdpa", "explicit")
    assert choose_attention("auto", CPU, torch.float32, training=True) == ("sdpa", "explicit")
    assert choose_attention("auto", CPU, torch.bfloat16, training=True, max_keys=257) == ("sdpa", "explicit")
    assert choose_attention("auto", CPU, torch.bfloat16, training=True, max_keys=256) == ("explicit", "explicit")
    assert choose_attention("auto", CUDA, torch.bfloat16, training=True) == ("sdpa", "sdpa")
    assert choose_attention("explicit", CUDA, torch.float32, training=False) == ("explicit", "explicit")
    with pytest.raises(ValueError, match="attention implementation must be one of"):
        choose_attention("flash", CPU, torch.float32, training=False)


def test_prepare_sets_each_stack_and_reports_it() -> None:
    model = Transformer(tiny_config())
    runtime = prepare_for_training(model, precision=torch.bfloat16, max_keys=64)
    assert {m.impl for m in model.encoder.modules() if isinstance(m, MultiHeadAttention)} == {"explicit"}
    assert runtime.encoder_attention == "explicit" and runtime.precision == "bfloat16"
    _, runtime = prepare_for_inference(model, attention="sdpa", linear="torch")
    assert {m.impl for m in model.modules() if isinstance(m, MultiHeadAttention)} == {"sdpa"}
    assert "decoder_attention=sdpa" in runtime.describe() and runtime.linear == "torch"
    assert not any(isinstance(m, torch.nn.Dropout) for m in model.modules())  # identity in eval mode: removed


def test_prepared_model_computes_what_the_eval_model_does() -> None:
    """Dropout removed, float32 kernels chosen: the same logits as the model as built, in eval mode."""
    import copy

    built = Transformer(tiny_config()).eval()
    prepared, _ = prepare_for_inference(copy.deepcopy(built))
    src = torch.randint(4, built.config.src_vocab_size, (3, 7), generator=torch.Generator().manual_seed(0))
    tgt = torch.randint(4, built.config.tgt_vocab_size, (3, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(prepared(src, tgt), built(src, tgt), rtol=1e-5, atol=1e-5)


def test_no_method_is_assigned_onto_an_instance_anywhere_in_src() -> None:
    """`x.method = something`, where `method` names a method of one of the package's modules (nn.Module
    subclasses) or of torch's, would shadow it on one instance: fast paths swap modules instead (STYLE.md 13)."""
    src = Path(__file__).resolve().parents[2] / "src" / "aiayn"
    trees = {path: ast.parse(path.read_text()) for path in src.rglob("*.py")}
    classes = [node for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    modules = {"Module", "Linear", "LayerNorm", "Embedding", "Dropout"}
    grew = True
    while grew:  # the package's nn.Module subclasses, transitively
        names = {c.name for c in classes if any(ast.unparse(b).split(".")[-1] in modules for b in c.bases)}
        grew = not names <= modules
        modules |= names
    methods = {"forward", "extra_repr"} | {
        f.name
        for c in classes
        if c.name in modules
        for f in c.body
        if isinstance(f, ast.FunctionDef) and not f.name.startswith("__")
    }
    offenders = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in methods:
                    offenders.append(f"{path.relative_to(src)}:{node.lineno} .{target.attr} =")
    assert not offenders, offenders
    assert {"project", "step", "encode", "project_q"} <= methods  # the check sees the model's methods


@pytest.mark.parametrize("causal", [False, True])
def test_bf16_cpu_training_path_equals_fused_kernel(causal: bool, generator: torch.Generator) -> None:
    """bf16 training on CPU takes the explicit formula (faster there); output and gradients match the fused
    kernel's to bf16 precision, with or without the causal mask."""
    q, k, v = (torch.randn(3, 4, 9, 16, generator=generator).bfloat16().requires_grad_() for _ in range(3))
    mask = None if causal else key_padding_mask(torch.arange(9)[None].repeat(3, 1) < torch.tensor([[9], [5], [2]]))
    impl = choose_attention("auto", CPU, torch.bfloat16, training=True, max_keys=9)[0]
    assert impl == "explicit"
    out, _ = ATTENTION[impl](q, k, v, mask, 0.0, causal)
    assert out.dtype == torch.bfloat16
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    assert (out.float() - reference.float()).abs().max() < 2e-2
    upstream = torch.randn(out.shape, generator=generator).bfloat16()
    ours = torch.autograd.grad((out * upstream).sum(), (q, k, v))
    theirs = torch.autograd.grad((reference * upstream).sum(), (q, k, v))
    for a, b in zip(ours, theirs, strict=True):
        assert (a.float() - b.float()).abs().max() < 5e-2 * max(1.0, float(b.float().abs().max()))


@pytest.mark.parametrize("queries", [1, 4])
def test_decode_step_path_equals_fused_kernel(queries: int, generator: torch.Generator) -> None:
    """Decoding on CPU takes the explicit formula in the decoder (faster per step): same output as the fused
    kernel, on a strided cache slice, with and without a padding mask; a row whose keys are all masked gives
    finite values (no NaN)."""
    q = torch.randn(3, 2, queries, 8, generator=generator)
    cache = torch.randn(2, 3, 2, 12, 8, generator=generator)  # [k/v, B, h, capacity, d]
    k, v = cache[0, :, :, :7], cache[1, :, :, :7]  # filled prefix of a preallocated buffer: not contiguous
    lengths = torch.tensor([[7], [4], [1]])
    impl = choose_attention("auto", CPU, torch.float32, training=False)[1]
    assert impl == "explicit"
    for mask in (None, key_padding_mask(torch.arange(7)[None].repeat(3, 1) < lengths)):
        with torch.inference_mode():
            out, _ = ATTENTION[impl](q, k, v, mask)
        reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert (out - reference).abs().max() < 1e-5
    with torch.no_grad():
        empty = key_padding_mask(torch.zeros(3, 7, dtype=torch.bool))
        out, _ = ATTENTION[impl](q, k, v, empty)
    assert torch.isfinite(out).all()


def test_prepare_for_compile_leaves_products_and_dropout_to_torch() -> None:
    """train.compile: inductor cannot lower the oneDNN op, and fuses dropout itself; oneDNN asked for is an error."""
    model = Transformer(tiny_config(P_drop=0.1))
    runtime = prepare_for_training(model, compiled=True)
    assert runtime.linear == "torch" and runtime.dropout == "torch"
    assert {type(m) for m in model.modules() if "Dropout" in type(m).__name__} == {torch.nn.Dropout}
    with pytest.raises(ValueError, match="train.linear_kernel=onednn cannot be compiled"):
        prepare_for_training(Transformer(tiny_config()), linear="onednn", compiled=True)


def test_a_compiled_training_step_matches_the_eager_one(generator: torch.Generator) -> None:
    """The model as train.compile runs it (prepared for compiling, then torch.compile): the loss and every
    gradient of one step equal the eager model's (dropout 0, so both compute the same function)."""
    import copy

    eager = Transformer(tiny_config())
    compiled = copy.deepcopy(eager)
    prepare_for_training(eager)
    prepare_for_training(compiled, compiled=True)
    src, _ = random_batch(3, 7, 37, generator)
    tgt, _ = random_batch(3, 6, 37, generator)
    losses = []
    for model in (eager, torch.compile(compiled)):
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=0)
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-6)
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_loss_choices() -> None:
    """auto: the chunked projection and loss in float32 training, the logits path under autocast, FSDP and
    compile; chunked asked for where it cannot apply is an error naming the option."""
    from aiayn.kernels import choose_loss

    assert choose_loss("auto", torch.float32) == "chunked"
    assert choose_loss("auto", torch.bfloat16) == "logits"
    assert choose_loss("auto", torch.float32, sharded=True) == "logits"
    assert choose_loss("auto", torch.float32, compiled=True) == "logits"
    assert choose_loss("logits", torch.float32) == "logits"
    assert prepare_for_training(Transformer(tiny_config())).loss == "chunked"
    with pytest.raises(ValueError, match="train.loss_kernel=chunked needs float32"):
        choose_loss("chunked", torch.float16)
    with pytest.raises(ValueError, match="loss implementation must be one of"):
        choose_loss("fused", torch.float32)
