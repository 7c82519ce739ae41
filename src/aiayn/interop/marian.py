"""Hugging Face `MarianMTModel` directories (the OPUS-MT family) in and out of aiayn model directories.

    import_marian("opus-mt-en-de/", "models/opus-mt-en-de")     # config.json + weights + source/target.spm
    export_hf("runs/demo/checkpoint-best", "hf/")                # MarianMTModel that transformers loads

Marian is the paper's post-norm Transformer with four real differences, each a named `ModelConfig` setting:
the FFN activation (`activation="swish"`), concatenated sinusoids (`positional_layout="concat"`), a logits bias
(`final_logits_bias`), and a decoder that starts from the padding row (`decoder_start="pad"`, no BOS; eos = 0,
pad = the last id). Weights are renamed one to one; nothing is permuted on import.

Exporting our interleaved positions: PE_concat = PE_interleaved[:, perm] with perm = (0, 2, 4, ..., 1, 3, ...),
so a model whose every hidden-dimension index is permuted by `perm` (embeddings, the rows written into the
residual stream, the columns reading it, LayerNorm parameters; LayerNorm itself is permutation-equivariant)
computes exactly the same function with Marian's table. The export records our configuration under "aiayn" in
the Hugging Face config.json, and import undoes the permutation, so import(export(M)) == M bit for bit.

What cannot be represented faithfully is refused with `InteropError` naming the setting (docs/INTEROP.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import ConfigError, ModelConfig
from aiayn.data.tokenizer import TOKENIZER_FILENAME
from aiayn.model import Transformer
from aiayn.model.pretrained import read_config, save_model


class InteropError(ValueError):
    """A model from elsewhere uses something aiayn (or the target format) cannot represent faithfully."""


ACTIVATIONS_IN = {"relu": "relu", "swish": "swish", "silu": "swish", "gelu": "gelu"}
ACTIVATIONS_OUT = {"relu": "relu", "swish": "swish", "gelu": "gelu"}
# MarianConfig's defaults, for keys a config.json leaves out
MARIAN_DEFAULTS: dict[str, Any] = {
    "activation_function": "gelu", "scale_embedding": False, "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True, "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0,
    "max_position_embeddings": 1024, "decoder_vocab_size": None, "eos_token_id": 0, "bos_token_id": None,
}
# (key, value that aiayn can represent, why): anything else is refused
REFUSED = [
    ("normalize_before", False, "pre-norm Marian variants (transformers' MarianMTModel ignores this key too)"),
    ("normalize_embedding", False, "a LayerNorm on the embeddings"),
    ("add_final_layer_norm", False, "a final LayerNorm after each stack"),
    ("static_position_embeddings", True, "learned positions in a Marian model"),
    ("add_bias_logits", False, "a bias in the output projection other than final_logits_bias"),
    ("scale_attn_by_inverse_layer_idx", False, "per-layer attention scaling"),
]
LAYER_NAMES = {  # Hugging Face Marian (and fairseq: the same names) layer module -> ours
    "self_attn.q_proj": "self_attn.w_q", "self_attn.k_proj": "self_attn.w_k", "self_attn.v_proj": "self_attn.w_v",
    "self_attn.out_proj": "self_attn.w_o", "self_attn_layer_norm": "self_attn_residual.norm",
    "encoder_attn.q_proj": "cross_attn.w_q", "encoder_attn.k_proj": "cross_attn.w_k",
    "encoder_attn.v_proj": "cross_attn.w_v", "encoder_attn.out_proj": "cross_attn.w_o",
    "encoder_attn_layer_norm": "cross_attn_residual.norm",
    "fc1": "feed_forward.w_1", "fc2": "feed_forward.w_2", "final_layer_norm": "feed_forward_residual.norm",
}


# --- reading a Marian directory -----------------------------------------------------------------------------

def copy_layers(state: dict, take: Any, config: ModelConfig, names: dict[str, str]) -> None:
    """state[ours] = take(theirs) for every encoder and decoder layer's weights and biases; `names` maps their
    per-layer module names to ours (encoder layers have no encoder_attn)."""
    for stack, count in (("encoder", config.N), ("decoder", config.decoder_layers)):
        for i in range(count):
            for theirs, ours in names.items():
                if stack == "encoder" and theirs.startswith("encoder_attn"):
                    continue
                for kind in ("weight", "bias"):
                    state[f"{stack}.layers.{i}.{ours}.{kind}"] = take(f"{stack}.layers.{i}.{theirs}.{kind}")


def resolve_source(source: str | Path) -> Path:
    """A local MarianMTModel directory, or a hub id downloaded with huggingface_hub (network needed)."""
    path = Path(source)
    if path.is_dir():
        return path
    if path.exists():
        raise InteropError(f"{path}: expected a MarianMTModel directory")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise InteropError(f"{source}: no such directory (a hub id needs `pip install huggingface_hub`)") from None
    patterns = ["config.json", "generation_config.json", "*.safetensors", "pytorch_model.bin", "*.spm", "*.json"]
    return Path(snapshot_download(str(source), allow_patterns=patterns))


def read_hf_weights(directory: Path) -> dict[str, Tensor]:
    """model.safetensors (safe), else pytorch_model.bin loaded with weights_only=True (no code unpickled)."""
    safetensors = directory / "model.safetensors"
    if safetensors.is_file():
        from safetensors.torch import load_file

        return load_file(str(safetensors))
    pickle = directory / "pytorch_model.bin"
    if pickle.is_file():
        try:
            return torch.load(pickle, map_location="cpu", weights_only=True)
        except Exception as error:  # the unpickler refuses code: say so, never fall back to an unsafe load
            raise InteropError(f"{pickle}: cannot be loaded with weights_only=True ({error})") from None
    raise InteropError(f"{directory}: no model.safetensors or pytorch_model.bin")


def _vocab(directory: Path, name: str) -> dict[str, int]:
    path = directory / name
    if not path.is_file():
        raise InteropError(f"{path}: missing (a Marian directory holds source.spm, target.spm and vocab.json)")
    return json.loads(path.read_text(encoding="utf-8"))


def marian_config(hf: dict[str, Any], unk_id: int) -> ModelConfig:
    """Our ModelConfig for a Marian config.json, or InteropError naming what is not representable."""
    hf = {**MARIAN_DEFAULTS, **hf}
    if hf.get("model_type") != "marian":
        raise InteropError(f"model_type {hf.get('model_type')!r}: only 'marian' (MarianMTModel) is imported here")
    for key, allowed, what in REFUSED:
        if key in hf and bool(hf[key]) != allowed:
            raise InteropError(f"{key}={hf[key]!r}: {what} is not supported")
    activation = ACTIVATIONS_IN.get(str(hf["activation_function"]))
    if activation is None:
        raise InteropError(f"activation_function={hf['activation_function']!r} is not supported "
                           f"(known: {', '.join(ACTIVATIONS_IN)})")
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if hf[a] != hf[b]:
            raise InteropError(f"{a}={hf[a]} != {b}={hf[b]}: aiayn's stacks share h and d_ff")
    h, d_model = int(hf["encoder_attention_heads"]), int(hf["d_model"])
    if d_model % h:
        raise InteropError(f"d_model={d_model} is not a multiple of encoder_attention_heads={h}")
    if isinstance(hf["eos_token_id"], list):
        raise InteropError(f"eos_token_id={hf['eos_token_id']}: several EOS ids are not supported")
    pad, eos = int(hf["pad_token_id"]), int(hf["eos_token_id"])
    start = int(hf.get("decoder_start_token_id", pad))
    if start not in (pad, eos):
        raise InteropError(f"decoder_start_token_id={start} is neither pad ({pad}) nor eos ({eos})")
    vocab = int(hf["vocab_size"])
    shared = bool(hf["share_encoder_decoder_embeddings"])
    tgt_vocab = vocab if shared else int(hf["decoder_vocab_size"] or vocab)
    layers, dec_layers = int(hf["encoder_layers"]), int(hf["decoder_layers"])
    try:
        return ModelConfig(
            src_vocab_size=vocab, tgt_vocab_size=tgt_vocab, N=layers,
            N_dec=None if dec_layers == layers else dec_layers,
            d_model=d_model, d_ff=int(hf["encoder_ffn_dim"]), h=h, d_k=d_model // h, d_v=d_model // h,
            P_drop=float(hf["dropout"]), attention_dropout=float(hf["attention_dropout"]),
            activation_dropout=float(hf["activation_dropout"]), norm_first=False, layer_norm_eps=1e-5,
            positional="sinusoidal", max_positions=int(hf["max_position_embeddings"]),
            share_embeddings=shared, tie_output=bool(hf["tie_word_embeddings"]),
            scale_embeddings=bool(hf["scale_embedding"]), pad_id=pad, bos_id=None, eos_id=eos, unk_id=unk_id,
            activation=activation, positional_layout="concat", final_logits_bias=True,
            decoder_start="pad" if start == pad else "eos",
        )
    except ConfigError as error:
        raise InteropError(f"Marian config.json: {error}") from None


def marian_state(weights: dict[str, Tensor], hf: dict[str, Any], config: ModelConfig) -> dict[str, Tensor]:
    """Our state dict (tied matrices once, under their first name) from a MarianMTModel state dict."""
    weights = {k.removeprefix("model.") if k.startswith("model.") else k: v for k, v in weights.items()}
    used: set[str] = {"encoder.embed_positions.weight", "decoder.embed_positions.weight"}

    def take(*names: str) -> Tensor:
        for name in names:
            if name in weights:
                used.add(name)
                return weights[name]
        raise InteropError(f"weights: none of {', '.join(names)} found")

    state: dict[str, Tensor] = {}
    if config.share_embeddings:
        state["src_embed.weight"] = take("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
        used |= {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}
    else:
        state["src_embed.weight"] = take("encoder.embed_tokens.weight")
        state["tgt_embed.weight"] = take("decoder.embed_tokens.weight")
    if config.tie_output:
        used.add("lm_head.weight")
    else:
        state["output_proj.weight"] = take("lm_head.weight")
    bias = weights.get("final_logits_bias")
    used.add("final_logits_bias")
    state["final_logits_bias"] = (torch.zeros(config.tgt_vocab_size) if bias is None else bias.reshape(-1)).float()
    copy_layers(state, take, config, LAYER_NAMES)
    unused = sorted(k for k in weights if k not in used)
    if unused:
        raise InteropError(f"weights aiayn would not use (a different architecture?): {unused[:5]}")
    return state


def hidden_permutation(d_model: int) -> Tensor:
    """perm with PE_concat = PE_interleaved[:, perm]: the even (sine) dimensions first, then the odd ones."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def permute_hidden(state: dict[str, Tensor], perm: Tensor) -> dict[str, Tensor]:
    """Every tensor indexed by the hidden dimension, re-indexed by perm (module docstring)."""
    out = {}
    for name, t in state.items():
        if name.endswith(("embed.weight", "output_proj.weight")) or name.endswith(
            ("w_q.weight", "w_k.weight", "w_v.weight", "w_1.weight")
        ):
            t = t[:, perm]  # reads the residual stream: columns
        elif name.endswith(("w_o.weight", "w_2.weight")):
            t = t[perm, :]  # writes into it: rows
        elif name.endswith(("w_o.bias", "w_2.bias", "norm.weight", "norm.bias")):
            t = t[perm]
        out[name] = t.contiguous()
    return out


def _build(config: ModelConfig, state: dict[str, Tensor]) -> Transformer:
    model = Transformer(config)
    expected = set(model.state_dict())
    tied = {"tgt_embed.weight"} if config.share_embeddings else set()
    if config.tie_output:
        tied.add("output_proj.weight")
    full = dict(state)
    if "tgt_embed.weight" in tied:
        full["tgt_embed.weight"] = state["src_embed.weight"]
    if "output_proj.weight" in tied:
        full["output_proj.weight"] = full["tgt_embed.weight"]
    missing, unexpected = expected - set(full), set(full) - expected
    if missing or unexpected:
        raise InteropError(f"weights do not match: missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}")
    for name, tensor in model.state_dict().items():
        if tuple(full[name].shape) != tuple(tensor.shape):
            shape = tuple(full[name].shape)
            raise InteropError(f"weight {name}: shape {shape}, the config implies {tuple(tensor.shape)}")
    model.load_state_dict(full)
    return model


def import_marian(source: str | Path, out_dir: str | Path) -> Path:
    """Write an aiayn model directory (config.json, model.safetensors, source/target tokenizers) for a
    MarianMTModel directory or hub id; returns `out_dir`."""
    directory = resolve_source(source)
    hf = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    tokenizer_config = {}
    if (directory / "tokenizer_config.json").is_file():
        tokenizer_config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    separate = bool(tokenizer_config.get("separate_vocabs")) or (directory / "target_vocab.json").is_file()
    source_vocab = _vocab(directory, "vocab.json")
    target_vocab_file = "target_vocab.json" if separate else "vocab.json"
    _vocab(directory, target_vocab_file)
    if "<unk>" not in source_vocab:
        raise InteropError(f"{directory / 'vocab.json'}: no '<unk>' entry")
    ours = hf.get("aiayn")
    if ours is not None:  # written by export_hf: our exact configuration, and the layout to restore
        config = ModelConfig.from_dict(ours["model"])
    else:
        config = marian_config(hf, int(source_vocab["<unk>"]))
    weights = read_hf_weights(directory)
    state = marian_state(weights, hf, config)
    if ours is not None:
        if not config.final_logits_bias:
            if bool(state["final_logits_bias"].ne(0).any()):
                raise InteropError("final_logits_bias is non-zero but the recorded aiayn config has none")
            del state["final_logits_bias"]
        if config.positional_layout == "interleaved":
            state = permute_hidden(state, torch.argsort(hidden_permutation(config.d_model)))
    model = _build(config, state)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if ours is not None and ours.get("tokenizer") == TOKENIZER_FILENAME:
        shutil.copyfile(directory / "source.spm", out_dir / TOKENIZER_FILENAME)
        extra: dict[str, Any] = {}
    else:
        for name in {"source.spm", "target.spm", "vocab.json", target_vocab_file}:
            shutil.copyfile(directory / name, out_dir / name)
        extra = {"tokenizers": {"source": {"spm": "source.spm", "vocab": "vocab.json"},
                                "target": {"spm": "target.spm", "vocab": target_vocab_file}}}
    extra["imported_from"] = {"format": "marian", "source": str(source)}
    save_model(model, out_dir, extra=extra)
    return out_dir


# --- writing a Marian directory -----------------------------------------------------------------------------

def hf_config(config: ModelConfig) -> dict[str, Any]:
    """MarianConfig keyword arguments for our config, or InteropError naming what Marian cannot express."""
    c = config
    refusals = [
        (c.norm_first, "norm_first=True: transformers' Marian is post-norm only"),
        (c.positional != "sinusoidal", "positional='learned': Marian's positions are sinusoidal"),
        (c.positional_frequencies != "paper", "positional_frequencies='fairseq': Marian uses the paper's"),
        (c.positional_offset != 0, f"positional_offset={c.positional_offset}: Marian counts positions from 0"),
        (c.layer_norm_eps != 1e-5, f"layer_norm_eps={c.layer_norm_eps}: Marian's LayerNorm uses 1e-5"),
        (c.d_k * c.h != c.d_model or c.d_v != c.d_k, "d_k = d_v = d_model / h is required by Marian"),
    ]
    for refused, why in refusals:
        if refused:
            raise InteropError(f"cannot export to MarianMTModel: {why}")
    return dict(
        vocab_size=c.src_vocab_size, decoder_vocab_size=c.tgt_vocab_size, encoder_layers=c.N,
        decoder_layers=c.decoder_layers, d_model=c.d_model, encoder_ffn_dim=c.d_ff, decoder_ffn_dim=c.d_ff,
        encoder_attention_heads=c.h, decoder_attention_heads=c.h, activation_function=ACTIVATIONS_OUT[c.activation],
        dropout=c.P_drop, attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
        max_position_embeddings=c.max_positions, scale_embedding=c.scale_embeddings, pad_token_id=c.pad_id,
        eos_token_id=c.eos_id, bos_token_id=c.bos_id, decoder_start_token_id=c.decoder_start_id,
        forced_eos_token_id=c.eos_id, share_encoder_decoder_embeddings=c.share_embeddings,
        tie_word_embeddings=c.tie_output,
    )


def hf_state(model: Transformer) -> dict[str, Tensor]:
    """A MarianMTModel state dict (every tied alias filled) computing the same function as `model`."""
    c = model.config
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    if c.positional_layout == "interleaved":
        state = permute_hidden(state, hidden_permutation(c.d_model))
    out: dict[str, Tensor] = {}
    out["model.encoder.embed_tokens.weight"] = state["src_embed.weight"]
    out["model.decoder.embed_tokens.weight"] = state["tgt_embed.weight"]
    if c.share_embeddings:
        out["model.shared.weight"] = state["src_embed.weight"]
    out["lm_head.weight"] = state["output_proj.weight"]
    bias = state.get("final_logits_bias", torch.zeros(c.tgt_vocab_size))
    out["final_logits_bias"] = bias.reshape(1, -1)
    for stack, count in (("encoder", c.N), ("decoder", c.decoder_layers)):
        for i in range(count):
            for theirs, ours in LAYER_NAMES.items():
                if stack == "encoder" and theirs.startswith("encoder_attn"):
                    continue
                for kind in ("weight", "bias"):
                    out[f"model.{stack}.layers.{i}.{theirs}.{kind}"] = state[f"{stack}.layers.{i}.{ours}.{kind}"]
    return out


def _write_tokenizer_files(model_dir: Path, document: dict[str, Any], out_dir: Path) -> tuple[bool, str | None]:
    """source.spm, target.spm, vocab.json (+ target_vocab.json) for MarianTokenizer; (separate_vocabs, ours)."""
    entry = document.get("tokenizers")
    if entry:
        src, tgt = entry["source"], entry["target"]
        shutil.copyfile(model_dir / src["spm"], out_dir / "source.spm")
        shutil.copyfile(model_dir / tgt["spm"], out_dir / "target.spm")
        shutil.copyfile(model_dir / src["vocab"], out_dir / "vocab.json")
        separate = src["vocab"] != tgt["vocab"]
        if separate:
            shutil.copyfile(model_dir / tgt["vocab"], out_dir / "target_vocab.json")
        return separate, None
    path = model_dir / TOKENIZER_FILENAME
    if not path.is_file():
        return False, None
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor()
    processor.Load(str(path))
    vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}  # our ids are spm's
    for name in ("source.spm", "target.spm"):
        shutil.copyfile(path, out_dir / name)
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=1), encoding="utf-8")
    return False, TOKENIZER_FILENAME


def export_hf(model_dir: str | Path, out_dir: str | Path) -> Path:
    """Write `model_dir` as a MarianMTModel directory (config.json, model.safetensors, tokenizer files)."""
    from transformers import MarianConfig, MarianMTModel

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    model = Transformer.from_pretrained(model_dir)
    _, document = read_config(model_dir)
    hf = MarianMTModel(MarianConfig(**hf_config(model.config))).eval()
    missing, unexpected = hf.load_state_dict(hf_state(model), strict=False)
    missing = [k for k in missing if not k.endswith("embed_positions.weight")]
    if missing or unexpected:
        raise InteropError(f"MarianMTModel weights: missing {missing[:5]}, unexpected {unexpected[:5]}")
    out_dir.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(out_dir)
    separate, ours_tokenizer = _write_tokenizer_files(model_dir, document, out_dir)
    tokenizer_config = {"tokenizer_class": "MarianTokenizer", "separate_vocabs": separate, "model_max_length": 512,
                        "unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>"}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=1), encoding="utf-8")
    config_path = out_dir / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["aiayn"] = {"model": model.config.to_dict(), "tokenizer": ours_tokenizer}  # for an exact import
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return out_dir


__all__ = ["InteropError", "export_hf", "hf_config", "hf_state", "import_marian", "marian_config", "marian_state"]
