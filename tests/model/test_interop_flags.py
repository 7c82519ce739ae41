"""The settings that models made elsewhere need (docs/INTEROP.md), each against a closed form, and their
defaults reproducing the paper's model exactly."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.config import ConfigError, DecodeConfig, ModelConfig
from aiayn.decoding.search import generate
from aiayn.model import Transformer
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.positional import sinusoidal_encoding
from tests.conftest import tiny_config


def test_defaults_are_the_papers_model() -> None:
    c = ModelConfig()
    assert (c.activation, c.positional_layout, c.positional_frequencies, c.positional_offset) == (
        "relu", "interleaved", "paper", 0)
    assert (c.final_logits_bias, c.decoder_start, c.decoder_start_id) == (False, "bos", c.bos_id)
    model = Transformer(tiny_config())
    assert model.final_logits_bias is None and "final_logits_bias" not in model.state_dict()
    pe = model.positions(6)
    position = torch.arange(6, dtype=torch.float64)[:, None]
    angle = position / 10000 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32)
    torch.testing.assert_close(pe[:, 0::2], torch.sin(angle).float())
    torch.testing.assert_close(pe[:, 1::2], torch.cos(angle).float())


@pytest.mark.parametrize("activation, reference", [
    ("relu", F.relu),
    ("swish", lambda x: x * torch.sigmoid(x)),
    ("gelu", lambda x: 0.5 * x * (1 + torch.erf(x / 2**0.5))),
])
def test_activation_of_eq_2(activation, reference) -> None:
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 16, activation=activation)
    x = torch.randn(3, 5, 8)
    expected = ffn.w_2(reference(ffn.w_1(x)))
    torch.testing.assert_close(ffn(x), expected, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="activation"):
        PositionwiseFeedForward(8, 16, activation="tanh")
    with pytest.raises(ConfigError, match="activation"):
        tiny_config(activation="tanh")


def test_concat_layout_is_a_permutation_of_the_papers() -> None:
    interleaved, concat = sinusoidal_encoding(50, 16), sinusoidal_encoding(50, 16, layout="concat")
    perm = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])
    assert torch.equal(concat, interleaved[:, perm])


def test_fairseq_frequencies_and_offset() -> None:
    """fairseq's SinusoidalPositionalEmbedding.get_embedding, written out, with positions from pad + 1 = 2."""
    d, half, offset = 16, 8, 2
    scale = math.log(10000) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.float) * -scale)
    positions = torch.arange(offset, offset + 10, dtype=torch.float)[:, None] * freq[None, :]
    expected = torch.cat([torch.sin(positions), torch.cos(positions)], dim=1)
    ours = sinusoidal_encoding(10, d, offset, layout="concat", frequencies="fairseq")
    torch.testing.assert_close(ours, expected, atol=1e-6, rtol=0)
    model = Transformer(tiny_config(d_model=16, d_k=4, d_v=4, positional_layout="concat",
                                    positional_frequencies="fairseq", positional_offset=offset))
    torch.testing.assert_close(model.positions(4, start=3), ours[3:7])


def test_final_logits_bias_is_added_to_the_logits_and_saved(tmp_path) -> None:
    torch.manual_seed(0)
    model = Transformer(tiny_config(final_logits_bias=True)).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_()
    src, tgt = torch.randint(4, 37, (2, 5)), torch.randint(4, 37, (2, 4))
    out = model.decode(tgt, model.encode(src))
    torch.testing.assert_close(out.logits, out.hidden @ model.output_weight().T + model.final_logits_bias)
    back = Transformer.from_pretrained(model.save_pretrained(tmp_path / "m"))
    assert torch.equal(back.final_logits_bias, model.final_logits_bias)


@pytest.mark.parametrize("start", ["pad", "eos"])
def test_decoder_start_is_the_first_input(start) -> None:
    torch.manual_seed(0)
    model = Transformer(tiny_config(decoder_start=start, bos_id=None)).eval()
    c = model.config
    assert c.decoder_start_id == (c.pad_id if start == "pad" else c.eos_id)
    src = torch.tensor([[5, 6, 7, c.eos_id]])
    tokens = generate(model, src, DecodeConfig(greedy=True, max_len_a=0.0, max_len_b=6))[0][0].tokens
    prefix = [c.decoder_start_id]  # greedy by hand, from the start token
    memory = model.encode(src)
    for _ in range(len(tokens)):
        logits = model.decode(torch.tensor([prefix]), memory).logits[0, -1]
        logits[c.pad_id] = float("-inf")
        prefix.append(int(logits.argmax()))
    assert tokens == prefix[1:]


def test_bos_may_be_absent_only_with_another_start() -> None:
    with pytest.raises(ConfigError, match="decoder_start"):
        tiny_config(bos_id=None)
    assert tiny_config(bos_id=None, decoder_start="pad").bos_id is None
    with pytest.raises(ConfigError, match="positional_offset"):
        tiny_config(positional_offset=-1)


NEW_FIELDS = ("activation", "positional_layout", "positional_frequencies", "positional_offset", "final_logits_bias",
              "decoder_start")


def test_format_2_directories_load_with_the_papers_defaults(tmp_path) -> None:
    """Directories written before these settings existed (format 2) load unchanged; format 3 must name them."""
    import json

    from aiayn.model import ModelDirectoryError

    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    path = model.save_pretrained(tmp_path / "m") / "config.json"
    document = json.loads(path.read_text())
    assert document["format_version"] == 3 and all(name in document["model"] for name in NEW_FIELDS)
    fields = {k: v for k, v in document["model"].items() if k not in NEW_FIELDS}
    old = {**document, "format_version": 2, "model": fields}
    path.write_text(json.dumps(old))
    back = Transformer.from_pretrained(tmp_path / "m")
    assert back.config == model.config
    path.write_text(json.dumps({**old, "format_version": 3}))
    with pytest.raises(ModelDirectoryError, match="activation"):
        Transformer.from_pretrained(tmp_path / "m")
