"""A random `MarianMTModel` directory written the way OPUS-MT ships one (no network): tiny sentencepiece models
trained on Multi30k lines, Marian's joint vocabulary ("</s>" = 0, "<unk>" = 1, "<pad>" last), config.json,
model.safetensors and tokenizer_config.json."""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm
import torch

SPECIALS = ("</s>", "<unk>", "<s>", "<pad>")


def train_spm(text_file: Path, lines: int, prefix: Path, vocab_size: int = 120) -> Path:
    sample = prefix.with_suffix(".txt")
    with open(text_file, encoding="utf-8") as f:
        sample.write_text("".join(next(f) for _ in range(lines)), encoding="utf-8")
    spm.SentencePieceTrainer.Train(
        input=str(sample), model_prefix=str(prefix), vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, minloglevel=2, num_threads=1, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
    )
    return prefix.with_suffix(".model")


def spm_pieces(path: Path) -> list[str]:
    processor = spm.SentencePieceProcessor()
    processor.Load(str(path))
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def marian_vocab(pieces: list[str], size: int | None = None) -> dict[str, int]:
    """Marian's order: </s>, <unk>, the pieces, (language tokens), <pad> last."""
    body = [p for p in dict.fromkeys(pieces) if p not in SPECIALS]
    body = body + [">>deu<<"]
    if size is not None:
        body = body[: size - 3]
    ordered = ["</s>", "<unk>", *body, "<pad>"]
    return {piece: i for i, piece in enumerate(ordered)}


def randomize(model: torch.nn.Module, pad_id: int, eos_id: int, seed: int = 0, eos_boost: float = 12.0) -> None:
    """Weights large enough for input-dependent, tie-free distributions; a non-zero final bias that favours
    EOS (most hypotheses end before the length limit); the padding row zero as in OPUS-MT."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_(p + 0.1 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=generator))
        bias = model.final_logits_bias
        bias.copy_(0.5 * torch.randn(bias.shape, generator=generator))
        # a random model's P(EOS) does not grow with the position: hypotheses end early or never; this bias
        # ends most of them (the tests compare those that end before the length limit)
        bias[0, eos_id] += eos_boost
        final = model.model.decoder.layers[-1].final_layer_norm  # sharper distributions: logits x 2
        final.weight.mul_(2.0)
        final.bias.mul_(2.0)
        bias[0, 1] -= 5.0  # <unk>: rarely generated (transformers' decode drops it, ours shows it)
        for embedding in (model.model.encoder.embed_tokens, model.model.decoder.embed_tokens):
            embedding.weight[pad_id].zero_()


def write_marian_dir(
    out: Path, data_dir: Path, shared: bool = True, seed: int = 0, lines: int = 300, eos_boost: float = 12.0
) -> Path:
    """Write a random MarianMTModel directory to `out`; shared=False: separate vocabularies and embeddings."""
    from transformers import MarianConfig, MarianMTModel

    out.mkdir(parents=True, exist_ok=True)
    source = train_spm(data_dir / "train.en", lines, out / "source")
    target = train_spm(data_dir / "train.de", lines, out / "target")
    source.rename(out / "source.spm")
    target.rename(out / "target.spm")
    if shared:
        vocab = marian_vocab(spm_pieces(out / "source.spm") + spm_pieces(out / "target.spm"))
        (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        size = target_size = len(vocab)
    else:
        src_vocab = marian_vocab(spm_pieces(out / "source.spm"))
        tgt_vocab = marian_vocab(spm_pieces(out / "target.spm"), size=len(src_vocab))
        src_vocab = marian_vocab(spm_pieces(out / "source.spm"), size=len(tgt_vocab))
        (out / "vocab.json").write_text(json.dumps(src_vocab, ensure_ascii=False), encoding="utf-8")
        (out / "target_vocab.json").write_text(json.dumps(tgt_vocab, ensure_ascii=False), encoding="utf-8")
        size, target_size = len(src_vocab), len(tgt_vocab)
    pad = size - 1
    config = MarianConfig(
        vocab_size=size, decoder_vocab_size=target_size, d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
        activation_function="swish", max_position_embeddings=128, scale_embedding=True, pad_token_id=pad,
        eos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=None, bos_token_id=None,
        share_encoder_decoder_embeddings=shared, dropout=0.1,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    randomize(model, pad, 0, seed, eos_boost)
    tokenizer_config = {"tokenizer_class": "MarianTokenizer", "source_lang": "en", "target_lang": "de",
                        "separate_vocabs": not shared, "model_max_length": 512}
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    model.save_pretrained(out)
    for name in ("source.vocab", "target.vocab", "source.txt", "target.txt"):
        (out / name).unlink(missing_ok=True)
    return out
