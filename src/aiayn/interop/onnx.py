"""An aiayn model directory as ONNX graphs in the layout Hugging Face Optimum uses for seq2seq models:

    encoder_model.onnx             input_ids [B,S]                                  -> last_hidden_state [B,S,d]
    decoder_model.onnx             input_ids [B,1], encoder_attention_mask [B,S],
                                   encoder_hidden_states [B,S,d]                    -> logits [B,1,V],
                                   present.{i}.decoder.key/value [B,h,1,d_k], present.{i}.encoder.key/value [B,h,S,d_k]
    decoder_with_past_model.onnx   input_ids [B,1], encoder_attention_mask [B,S],
                                   past_key_values.{i}.decoder.key/value [B,h,T,d_k],
                                   past_key_values.{i}.encoder.key/value [B,h,S,d_k] -> logits [B,1,V],
                                   present.{i}.decoder.key/value [B,h,T+1,d_k]

The graphs are our own modules traced (the explicit eq. 1); the decoder reads position T = the past length,
starting from the model's `decoder_start` token. onnxruntime runs them (tests compare its log-probabilities
with ours step by step). The tokenizer files are copied beside them.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from aiayn.model import Transformer
from aiayn.model.masks import key_padding_mask
from aiayn.model.pretrained import read_config


def _embed(model: Transformer, embedding: nn.Module, tokens: Tensor, start: Tensor | int) -> Tensor:
    """Embedding * sqrt(d_model) + PE rows start.. read by index from the table (traced as a gather, so the
    position follows the past length at run time; positions beyond the table's rows are not exported)."""
    table = model.positions.table if hasattr(model.positions, "table") else model.positions.weight
    positions = torch.arange(tokens.shape[1], device=tokens.device) + start  # [t]
    return embedding(tokens) + table.index_select(0, positions).to(embedding.weight.dtype)


class EncoderGraph(nn.Module):
    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Tensor) -> Tensor:
        model = self.model
        x = _embed(model, model.src_embed, input_ids, 0)
        hidden, _ = model.encoder(x, key_padding_mask(input_ids.ne(model.config.pad_id)))
        return hidden


class DecoderStepGraph(nn.Module):
    """One decoder position from explicit past keys/values (a tuple per layer, no cache object)."""

    def __init__(self, model: Transformer, with_past: bool) -> None:
        super().__init__()
        self.model, self.with_past = model, with_past

    def forward(self, input_ids: Tensor, encoder_attention_mask: Tensor, *rest: Tensor) -> tuple[Tensor, ...]:
        model = self.model
        layers = model.decoder.layers
        if self.with_past:
            past = [rest[4 * i : 4 * i + 4] for i in range(len(layers))]  # self k, self v, cross k, cross v
            start = past[0][0].shape[2]
        else:
            hidden = rest[0]
            past = [(None, None, *layer.cross_attn.project_kv(hidden)) for layer in layers]
            start = 0
        x = _embed(model, model.tgt_embed, input_ids, start)
        mask = key_padding_mask(encoder_attention_mask.bool())
        outputs: list[Tensor] = []
        for layer, (k_past, v_past, k_cross, v_cross) in zip(layers, past):
            y = layer.self_attn_residual.sublayer_input(x)
            k, v = layer.self_attn.project_kv(y)
            if k_past is not None:
                k, v = torch.cat([k_past, k], dim=2), torch.cat([v_past, v], dim=2)  # [B,h,T+1,d_k]
            attended, _ = layer.self_attn(y, cache=(k, v), need_weights=True)
            x = layer.self_attn_residual(x, attended)
            y = layer.cross_attn_residual.sublayer_input(x)
            attended, _ = layer.cross_attn(y, mask=mask, cache=(k_cross, v_cross), need_weights=True)
            x = layer.cross_attn_residual(x, attended)
            x = layer.feed_forward_residual(x, layer.feed_forward(layer.feed_forward_residual.sublayer_input(x)))
            outputs += [k, v] if self.with_past else [k, v, k_cross, v_cross]
        if model.decoder.final_norm is not None:
            x = model.decoder.final_norm(x)
        return (model.project(x), *outputs)


def _names(layers: int, prefix: str, cross: bool) -> list[str]:
    names = []
    for i in range(layers):
        names += [f"{prefix}.{i}.decoder.key", f"{prefix}.{i}.decoder.value"]
        if cross:
            names += [f"{prefix}.{i}.encoder.key", f"{prefix}.{i}.encoder.value"]
    return names


def _export(*args, **kwargs) -> None:
    """torch.onnx.export (TorchScript tracing), quiet about what is constant here by construction: the
    Python-level checks it warns about (g > 1 rows per key row, sqrt(d_k)), and its own deprecation."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        torch.onnx.export(*args, **kwargs)


def export_onnx(model_dir: str | Path, out_dir: str | Path, opset: int = 17) -> Path:
    """Write the three graphs (module docstring) and the tokenizer files of `model_dir` into `out_dir`."""
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    model = Transformer.from_pretrained(model_dir).eval()
    model.set_attention("explicit")  # eq. (1) as written: plain ONNX operators
    c = model.config
    _, document = read_config(model_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        model.positions(max(c.max_positions, 1024))  # a sinusoidal table of at least 1024 rows goes into the graph
    layers = c.decoder_layers
    src = torch.tensor([[5, 6, 7, c.eos_id], [5, 6, c.eos_id, c.pad_id]])
    mask = src.ne(c.pad_id).long()
    with torch.no_grad():
        hidden = model.encode(src).hidden
        first = DecoderStepGraph(model, with_past=False)(torch.full((2, 1), c.decoder_start_id), mask, hidden)
    step_ids = torch.full((2, 1), c.decoder_start_id)
    batch = {0: "batch"}
    export = dict(opset_version=opset, dynamo=False, do_constant_folding=True)
    _export(
        EncoderGraph(model), (src,), str(out_dir / "encoder_model.onnx"), input_names=["input_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={"input_ids": {0: "batch", 1: "source"}, "last_hidden_state": {0: "batch", 1: "source"}},
        **export,
    )
    present = _names(layers, "present", cross=True)
    axes = {"input_ids": batch, "encoder_attention_mask": {0: "batch", 1: "source"},
            "encoder_hidden_states": {0: "batch", 1: "source"}, "logits": batch}
    axes.update({name: {0: "batch", 2: "source" if ".encoder." in name else "past"} for name in present})
    _export(
        DecoderStepGraph(model, with_past=False), (step_ids, mask, hidden), str(out_dir / "decoder_model.onnx"),
        input_names=["input_ids", "encoder_attention_mask", "encoder_hidden_states"],
        output_names=["logits", *present], dynamic_axes=axes, **export,
    )
    past_names = _names(layers, "past_key_values", cross=True)
    present_self = _names(layers, "present", cross=False)
    axes = {"input_ids": batch, "encoder_attention_mask": {0: "batch", 1: "source"}, "logits": batch}
    axes.update({name: {0: "batch", 2: "source" if ".encoder." in name else "past"} for name in past_names})
    axes.update({name: {0: "batch", 2: "past_plus_one"} for name in present_self})
    _export(
        DecoderStepGraph(model, with_past=True), (step_ids, mask, *first[1:]),
        str(out_dir / "decoder_with_past_model.onnx"),
        input_names=["input_ids", "encoder_attention_mask", *past_names], output_names=["logits", *present_self],
        dynamic_axes=axes, **export,
    )
    for name in ("tokenizer.model", *{f for side in (document.get("tokenizers") or {}).values() for f in side.values()
                                      if isinstance(f, str) and (model_dir / f).is_file()}):
        if (model_dir / name).is_file():
            shutil.copyfile(model_dir / name, out_dir / name)
    info = {"format": "aiayn-onnx", "layout": "optimum-seq2seq", "model": c.to_dict(),
            "decoder_start_token_id": c.decoder_start_id, "tokenizers": document.get("tokenizers")}
    (out_dir / "aiayn_onnx.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return out_dir


__all__ = ["DecoderStepGraph", "EncoderGraph", "export_onnx"]
