"""The model equals torch.nn.Transformer's encoder/decoder with the same weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from aiayn.model import Transformer
from tests.conftest import PAD, random_batch, tiny_config


def reference_positional(length: int, d_model: int) -> torch.Tensor:
    """Section 3.5 written independently of aiayn.model.positional."""
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    for pos in range(length):
        for i in range(0, d_model, 2):
            pe[pos, i] = math.sin(pos / 10000 ** (i / d_model))
            pe[pos, i + 1] = math.cos(pos / 10000 ** (i / d_model))
    return pe.float()


def build_reference(model: Transformer) -> tuple[nn.TransformerEncoder, nn.TransformerDecoder]:
    c = model.config
    kwargs = dict(d_model=c.d_model, nhead=c.h, dim_feedforward=c.d_ff, dropout=0.0, batch_first=True)
    kwargs.update(norm_first=c.norm_first, layer_norm_eps=c.layer_norm_eps)
    final = (lambda: nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)) if c.norm_first else (lambda: None)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(**kwargs), c.N, norm=final(), enable_nested_tensor=False)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(**kwargs), c.N, norm=final())
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, encoder.layers):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_ffn(ours.feed_forward, theirs)
            theirs.norm1.load_state_dict(ours.self_attn_residual.norm.state_dict())
            theirs.norm2.load_state_dict(ours.feed_forward_residual.norm.state_dict())
        for ours, theirs in zip(model.decoder.layers, decoder.layers):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_attention(ours.cross_attn, theirs.multihead_attn)
            copy_ffn(ours.feed_forward, theirs)
            theirs.norm1.load_state_dict(ours.self_attn_residual.norm.state_dict())
            theirs.norm2.load_state_dict(ours.cross_attn_residual.norm.state_dict())
            theirs.norm3.load_state_dict(ours.feed_forward_residual.norm.state_dict())
        if c.norm_first:
            encoder.norm.load_state_dict(model.encoder.final_norm.state_dict())
            decoder.norm.load_state_dict(model.decoder.final_norm.state_dict())
    return encoder.eval(), decoder.eval()


def copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))  # [W^Q; W^K; W^V]
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


def copy_ffn(ours, theirs) -> None:
    theirs.linear1.load_state_dict(ours.w_1.state_dict())
    theirs.linear2.load_state_dict(ours.w_2.state_dict())


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_log_probs_equal_torch_nn_transformer(norm_first: bool, generator: torch.Generator) -> None:
    torch.manual_seed(1)
    model = Transformer(tiny_config(N=3, norm_first=norm_first)).eval()
    # Random (non-zero) LayerNorm affine parameters so the norms are really compared.
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
    encoder, decoder = build_reference(model)
    c = model.config
    for trial in range(3):
        src, _ = random_batch(5, 9, c.src_vocab_size, generator)
        tgt, tgt_lengths = random_batch(5, 7, c.tgt_vocab_size, generator)
        with torch.no_grad():
            ours = model.log_probs(src, tgt)

            pe = reference_positional(16, c.d_model)
            emb = model.src_embed.weight
            src_x = emb[src] * math.sqrt(c.d_model) + pe[: src.size(1)]
            tgt_x = emb[tgt] * math.sqrt(c.d_model) + pe[: tgt.size(1)]
            memory = encoder(src_x, src_key_padding_mask=src.eq(PAD))
            causal = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).triu(1)  # True = blocked (nn)
            hidden = decoder(
                tgt_x,
                memory,
                tgt_mask=causal,
                tgt_is_causal=True,
                tgt_key_padding_mask=tgt.eq(PAD),
                memory_key_padding_mask=src.eq(PAD),
            )
            theirs = F.log_softmax(hidden @ emb.T, dim=-1)
        real = tgt.ne(PAD)
        assert real.sum() < real.numel(), "the batch must contain target padding"
        difference = (ours - theirs).abs()[real].max().item()
        assert difference <= 1e-5, f"trial {trial}: max |log p_ours - log p_torch| = {difference}"
