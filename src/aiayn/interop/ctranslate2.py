"""An aiayn model directory as a CTranslate2 model (`ctranslate2.Translator` runs it).

    export_ctranslate2("runs/demo/checkpoint-best", "ct2/", quantization="int8")

Built with CTranslate2's own `TransformerSpec` (post-norm, our activation), so no permutation is needed: the
spec takes our positional table verbatim (interleaved or concatenated, with any offset). Vocabularies are the
tokenizers' pieces in id order; the decoder starts from our start token (`decoder_start`). A Marian-style
model that starts from a zero padding row appended last is written as CTranslate2's Marian converter writes it:
without the pad row, with `start_from_zero_embedding`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from aiayn.data.vocab_tokenizer import load_model_tokenizers
from aiayn.interop.marian import InteropError
from aiayn.model import Transformer
from aiayn.model.pretrained import read_config

QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")


def _pieces(tokenizer, size: int) -> list[str]:
    return tokenizer.pieces(list(range(size)))


def export_ctranslate2(model_dir: str | Path, out_dir: str | Path, quantization: str | None = None) -> Path:
    """Write `model_dir` as a CTranslate2 model directory; `quantization` as ctranslate2 names it."""
    from ctranslate2.specs import common_spec, transformer_spec

    if quantization is not None and quantization not in QUANTIZATIONS:
        raise InteropError(f"quantization {quantization!r}: choose one of {', '.join(QUANTIZATIONS)}")
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    model = Transformer.from_pretrained(model_dir).eval()
    c = model.config
    _, document = read_config(model_dir)
    source_tok, target_tok = load_model_tokenizers(model_dir, document)
    if c.d_k * c.h != c.d_model or c.d_v != c.d_k:
        raise InteropError("cannot export to CTranslate2: it needs d_k = d_v = d_model / h")
    activation = {"relu": common_spec.Activation.RELU, "swish": common_spec.Activation.SWISH,
                  "gelu": common_spec.Activation.GELU}[c.activation]
    spec = transformer_spec.TransformerSpec.from_config(
        (c.N, c.decoder_layers), c.h, pre_norm=c.norm_first, activation=activation
    )
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    positions = 1024 if c.positional == "sinusoidal" else c.max_positions
    with torch.no_grad():
        table = model.positions(max(positions, c.max_positions)).float().cpu()  # [P, d_model], verbatim

    def linear(spec_linear, *prefixes: str) -> None:
        spec_linear.weight = torch.cat([state[f"{p}.weight"] for p in prefixes]).numpy()
        spec_linear.bias = torch.cat([state[f"{p}.bias"] for p in prefixes]).numpy()

    def norm(spec_norm, prefix: str) -> None:
        spec_norm.gamma, spec_norm.beta = state[f"{prefix}.weight"].numpy(), state[f"{prefix}.bias"].numpy()

    scale = c.d_model**0.5 if c.scale_embeddings else 1.0
    drop_pad = (c.decoder_start == "pad" and c.pad_id == c.tgt_vocab_size - 1 and c.pad_id == c.src_vocab_size - 1
                and bool(state["tgt_embed.weight"][c.pad_id].eq(0).all()))
    rows = slice(0, c.pad_id) if drop_pad else slice(None)
    for stack in ("encoder", "decoder"):
        s = getattr(spec, stack)
        s.scale_embeddings = scale
        s.position_encodings.encodings = table.numpy()
        embedding = state["src_embed.weight" if stack == "encoder" else "tgt_embed.weight"][rows]
        (s.embeddings[0] if isinstance(s.embeddings, list) else s.embeddings).weight = embedding.numpy()
        if c.norm_first:
            norm(s.layer_norm, f"{stack}.final_norm")
        for i, layer in enumerate(s.layer):
            p = f"{stack}.layers.{i}"
            linear(layer.self_attention.linear[0], f"{p}.self_attn.w_q", f"{p}.self_attn.w_k", f"{p}.self_attn.w_v")
            linear(layer.self_attention.linear[1], f"{p}.self_attn.w_o")
            norm(layer.self_attention.layer_norm, f"{p}.self_attn_residual.norm")
            if stack == "decoder":
                linear(layer.attention.linear[0], f"{p}.cross_attn.w_q")
                linear(layer.attention.linear[1], f"{p}.cross_attn.w_k", f"{p}.cross_attn.w_v")
                linear(layer.attention.linear[2], f"{p}.cross_attn.w_o")
                norm(layer.attention.layer_norm, f"{p}.cross_attn_residual.norm")
            linear(layer.ffn.linear_0, f"{p}.feed_forward.w_1")
            linear(layer.ffn.linear_1, f"{p}.feed_forward.w_2")
            norm(layer.ffn.layer_norm, f"{p}.feed_forward_residual.norm")
    spec.decoder.projection.weight = state["output_proj.weight"][rows].numpy()
    if c.final_logits_bias:
        spec.decoder.projection.bias = state["final_logits_bias"][rows].numpy()
    source_vocab, target_vocab = _pieces(source_tok, c.src_vocab_size), _pieces(target_tok, c.tgt_vocab_size)
    if drop_pad:
        spec.decoder.start_from_zero_embedding = True
        source_vocab, target_vocab = source_vocab[: c.pad_id], target_vocab[: c.pad_id]
    spec.register_source_vocabulary(source_vocab)
    spec.register_target_vocabulary(target_vocab)
    spec.config.layer_norm_epsilon = c.layer_norm_eps
    spec.config.unk_token = target_vocab[c.unk_id]
    spec.config.eos_token = target_vocab[c.eos_id]
    spec.config.bos_token = target_vocab[c.bos_id] if c.bos_id is not None else target_vocab[c.eos_id]
    spec.config.decoder_start_token = target_vocab[c.eos_id] if drop_pad else target_vocab[c.decoder_start_id]
    spec.validate()
    spec.optimize(quantization=quantization)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec.save(str(out_dir))
    return out_dir


__all__ = ["QUANTIZATIONS", "export_ctranslate2"]
