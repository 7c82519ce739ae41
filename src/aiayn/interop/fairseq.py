"""fairseq `transformer` checkpoints as aiayn model directories.

    import_fairseq("checkpoint_best.pt", "models/wmt-en-de", dict_dir="data-bin/", bpe_codes="bpecodes")

The checkpoint is read with `torch.load(weights_only=True)` (argparse.Namespace, the only class fairseq's
`args` needs, is allowed; anything that needs code unpickled is refused). Its model is the paper's with named
differences: concatenated sinusoids with fairseq's frequencies 10000^(-i/(d/2-1)) counted from padding_idx + 1
(`positional_layout="concat"`, `positional_frequencies="fairseq"`, `positional_offset=2`), the decoder starting
from EOS (`decoder_start="eos"`), and fairseq's dictionary ids (<s>=0, <pad>=1, </s>=2, <unk>=3). Pre-norm
(`--encoder-normalize-before`) maps to `norm_first`; learned positions to `positional="learned"` (the table
without its first padding_idx + 1 rows). Alignment heads, adaptive softmax, LayerNorm on embeddings, cross
self-attention and mixed pre/post-norm stacks are refused, naming the option.

Tokenization as shipped: a sentencepiece model (`--spm`), or Moses + subword-nmt codes (`--bpe-codes`); each
side's `dict.{lang}.txt` becomes a {piece: id} JSON in the model directory (aiayn.data.vocab_tokenizer).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import ConfigError, ModelConfig
from aiayn.interop.marian import LAYER_NAMES, InteropError, _build, copy_layers  # fairseq names layers as Marian
from aiayn.model.pretrained import save_model

FAIRSEQ_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # fairseq.data.Dictionary's first four ids
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish"}
REFUSED = [  # (option, the value aiayn represents, what it is)
    ("layernorm_embedding", False, "a LayerNorm on the embeddings"),
    ("no_token_positional_embeddings", False, "a model without positions"),
    ("adaptive_softmax_cutoff", None, "the adaptive softmax"),
    ("adaptive_input", False, "adaptive input embeddings"),
    ("cross_self_attention", False, "cross self-attention"),
    ("no_cross_attention", False, "a decoder without encoder-decoder attention"),
    ("full_context_alignment", False, "full-context alignment"),
    ("quant_noise_pq", 0, "quant-noise"),
    ("tie_adaptive_weights", False, "adaptive weights"),
    ("no_decoder_final_norm", False, "a pre-norm decoder without its final LayerNorm"),
]


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """torch.load with weights_only=True; argparse.Namespace (fairseq's `args`) is the one class allowed."""
    path = Path(path)
    if not path.is_file():
        raise InteropError(f"{path}: checkpoint not found")
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise InteropError(
            f"{path}: refused, loading it needs code unpickled that weights_only=True does not allow ({error}); "
            "re-save it with plain tensors and dicts (e.g. cfg as a dict) to import it"
        ) from None
    if not isinstance(checkpoint, dict) or "model" not in checkpoint:
        raise InteropError(f"{path}: not a fairseq checkpoint (no 'model' state dict)")
    return checkpoint


def checkpoint_options(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The model options: `cfg["model"]` (fairseq >= 0.10, a dict) or `args` (an argparse.Namespace)."""
    cfg = checkpoint.get("cfg")
    if isinstance(cfg, dict) and isinstance(cfg.get("model"), dict | argparse.Namespace):
        model = cfg["model"]
        return dict(vars(model)) if isinstance(model, argparse.Namespace) else dict(model)
    args = checkpoint.get("args")
    if isinstance(args, argparse.Namespace):
        return dict(vars(args))
    if isinstance(args, dict):
        return dict(args)
    raise InteropError("checkpoint has neither cfg['model'] nor args: cannot tell its architecture")


def read_dictionary(path: Path, rows: int | None = None) -> dict[str, int]:
    """fairseq `dict.txt` ("piece count [#fairseq:overwrite]" per line) -> {piece: id}, the four specials first;
    rows beyond the file (padding to a multiple of 8) are fairseq's madeupwordNNNN."""
    if not path.is_file():
        raise InteropError(f"{path}: dictionary not found")
    pieces = list(FAIRSEQ_SPECIALS)
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        piece = line.rstrip().rsplit(" ", 1)[0] if " " in line.rstrip() else line.rstrip()
        if line.rstrip().endswith("#fairseq:overwrite"):
            piece = line.rstrip().rsplit(" ", 2)[0]
        pieces.append(piece)
    vocab: dict[str, int] = {}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))  # a #fairseq:overwrite duplicate keeps the first id
    if rows is not None:
        if len(vocab) > rows:
            raise InteropError(f"{path}: {len(vocab)} entries but the embedding has {rows} rows")
        for i in range(rows - len(vocab)):
            vocab[f"madeupword{i:04d}"] = len(vocab)
    return vocab


def fairseq_config(options: dict[str, Any], src_vocab: int, tgt_vocab: int, learned: bool) -> ModelConfig:
    o = options
    arch = str(o.get("arch", o.get("_name", "transformer")))
    if "align" in arch:
        raise InteropError(f"arch={arch!r}: alignment heads (transformer_align) are not supported")
    if not arch.startswith("transformer") or arch.startswith("transformer_lm"):
        raise InteropError(f"arch={arch!r}: only fairseq's encoder-decoder `transformer` family is imported")
    for key, allowed, what in REFUSED:
        value = o.get(key, allowed)
        if value not in (allowed, None, False, 0, "", "None"):
            raise InteropError(f"{key}={value!r}: {what} is not supported")
    d = int(o.get("encoder_embed_dim", 512))
    pairs = [("encoder_embed_dim", "decoder_embed_dim"), ("encoder_ffn_embed_dim", "decoder_ffn_embed_dim"),
             ("encoder_attention_heads", "decoder_attention_heads"),
             ("encoder_normalize_before", "decoder_normalize_before"), ("encoder_learned_pos", "decoder_learned_pos")]
    for a, b in pairs:
        if o.get(a, False) != o.get(b, o.get(a, False)):
            raise InteropError(f"{a}={o.get(a)!r} != {b}={o.get(b)!r}: aiayn's two stacks share this setting")
    for key in ("decoder_output_dim", "decoder_input_dim"):
        if o.get(key) not in (None, d):
            raise InteropError(f"{key}={o[key]} != decoder_embed_dim={d} is not supported")
    activation = ACTIVATIONS.get(str(o.get("activation_fn", "relu")))
    if activation is None:
        known = ", ".join(ACTIVATIONS)
        raise InteropError(f"activation_fn={o.get('activation_fn')!r} is not supported (known: {known})")
    h = int(o.get("encoder_attention_heads", 8))
    if d % h:
        raise InteropError(f"encoder_embed_dim={d} is not a multiple of encoder_attention_heads={h}")
    layers, dec_layers = int(o.get("encoder_layers", 6)), int(o.get("decoder_layers", 6))
    max_positions = int(max(o.get("max_source_positions", 1024), o.get("max_target_positions", 1024)))
    try:
        return ModelConfig(
            src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, N=layers,
            N_dec=None if dec_layers == layers else dec_layers, d_model=d,
            d_ff=int(o.get("encoder_ffn_embed_dim", 2048)),
            h=h, d_k=d // h, d_v=d // h, P_drop=float(o.get("dropout", 0.1)),
            attention_dropout=float(o.get("attention_dropout", 0.0)),
            activation_dropout=float(o.get("activation_dropout", o.get("relu_dropout", 0.0)) or 0.0),
            norm_first=bool(o.get("encoder_normalize_before", False)), layer_norm_eps=1e-5,
            positional="learned" if learned else "sinusoidal", max_positions=max_positions,
            share_embeddings=bool(o.get("share_all_embeddings", False)),
            tie_output=bool(o.get("share_decoder_input_output_embed", False) or o.get("share_all_embeddings", False)),
            scale_embeddings=not bool(o.get("no_scale_embedding", False)),
            pad_id=1, bos_id=0, eos_id=2, unk_id=3, activation=activation, positional_layout="concat",
            positional_frequencies="fairseq", positional_offset=0 if learned else 2, decoder_start="eos",
        )
    except ConfigError as error:
        raise InteropError(f"fairseq options: {error}") from None


def fairseq_state(weights: dict[str, Tensor], config: ModelConfig) -> dict[str, Tensor]:
    used = {k for k in weights if k.endswith(("embed_positions._float_tensor", ".version"))}

    def take(name: str) -> Tensor:
        if name not in weights:
            raise InteropError(f"checkpoint: weight {name} not found")
        used.add(name)
        return weights[name]

    state = {"src_embed.weight": take("encoder.embed_tokens.weight")}
    if config.share_embeddings:
        used.add("decoder.embed_tokens.weight")
    else:
        state["tgt_embed.weight"] = take("decoder.embed_tokens.weight")
    if config.tie_output:
        used.add("decoder.output_projection.weight")
    else:
        state["output_proj.weight"] = take("decoder.output_projection.weight")
    if config.positional == "learned":  # fairseq's rows 0..pad are never read: positions start at pad + 1
        table = take("encoder.embed_positions.weight")[config.pad_id + 1 :]
        decoder_table = take("decoder.embed_positions.weight")[config.pad_id + 1 :]
        if not torch.equal(table, decoder_table):
            raise InteropError("encoder and decoder learned positions differ: aiayn shares one table")
        state["positions.weight"] = table
    copy_layers(state, take, config, LAYER_NAMES)
    for stack in ("encoder", "decoder") if config.norm_first else ():
        for kind in ("weight", "bias"):
            state[f"{stack}.final_norm.{kind}"] = take(f"{stack}.layer_norm.{kind}")
    unused = sorted(k for k in weights if k not in used)
    if unused:
        raise InteropError(f"weights aiayn would not use (a different architecture?): {unused[:5]}")
    return state


def import_fairseq(
    checkpoint: str | Path,
    out_dir: str | Path,
    dict_dir: str | Path,
    src_lang: str = "en",
    tgt_lang: str = "de",
    spm: str | Path | None = None,
    bpe_codes: str | Path | None = None,
) -> Path:
    """Write an aiayn model directory for a fairseq transformer checkpoint and its dict.{src,tgt}.txt, with its
    tokenization (`spm`: a sentencepiece model; `bpe_codes`: Moses + subword-nmt)."""
    if (spm is None) == (bpe_codes is None):
        raise InteropError("give the tokenization as shipped: exactly one of --spm or --bpe-codes")
    state_in = load_checkpoint(checkpoint)
    weights = {k: v for k, v in state_in["model"].items() if isinstance(v, Tensor)}
    options = checkpoint_options(state_in)
    dict_dir = Path(dict_dir)
    src_rows = int(weights["encoder.embed_tokens.weight"].shape[0])
    tgt_rows = int(weights.get("decoder.embed_tokens.weight", weights["encoder.embed_tokens.weight"]).shape[0])
    src_vocab = read_dictionary(dict_dir / f"dict.{src_lang}.txt", src_rows)
    tgt_vocab = read_dictionary(dict_dir / f"dict.{tgt_lang}.txt", tgt_rows)
    learned = bool(options.get("encoder_learned_pos", False))
    config = fairseq_config(options, src_rows, tgt_rows, learned)
    if learned:  # the table fairseq trained, without its first padding_idx + 1 rows
        rows = int(weights["encoder.embed_positions.weight"].shape[0]) - (config.pad_id + 1)
        config = dataclasses.replace(config, max_positions=rows)
    if config.share_embeddings and src_vocab != tgt_vocab:
        raise InteropError("share_all_embeddings needs one joint dictionary, but dict files differ")
    model = _build(config, fairseq_state(weights, config))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sides = {}
    for side, lang, vocab in (("source", src_lang, src_vocab), ("target", tgt_lang, tgt_vocab)):
        name = f"vocab.{side}.json"
        (out_dir / name).write_text(json.dumps(vocab, ensure_ascii=False, indent=0), encoding="utf-8")
        if spm is not None:
            shutil.copyfile(spm, out_dir / "sentencepiece.model")
            sides[side] = {"spm": "sentencepiece.model", "vocab": name}
        else:
            shutil.copyfile(bpe_codes, out_dir / "bpecodes")
            sides[side] = {"moses": lang, "bpe_codes": "bpecodes", "vocab": name}
    extra = {"tokenizers": sides, "imported_from": {"format": "fairseq", "source": str(checkpoint)}}
    save_model(model, out_dir, extra=extra)
    return out_dir


__all__ = ["fairseq_config", "fairseq_state", "import_fairseq", "load_checkpoint", "read_dictionary"]
