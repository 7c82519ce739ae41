"""Peers for the decoding benchmark: Hugging Face `MarianMTModel.generate` and CTranslate2 (float32, int8) on
models of the same shape as ours (Marian is the same post-norm Transformer of section 3: sinusoidal positions,
scaled and shared embeddings, tied output; here with ReLU as in eq. 2). Weights are random: only speed is
compared. Both are optional (`pip install -c constraints-cpu.txt -e '.[peers]'`).
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.data import Tokenizer


def available(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


class HuggingFaceMarian:
    """A random `MarianMTModel` with our model's sizes; its vocabulary is ours plus Marian's trailing <pad>."""

    def __init__(self, config: ModelConfig, seed: int = 0) -> None:
        from transformers import MarianConfig, MarianMTModel

        vocab = config.tgt_vocab_size
        self.pad_id = vocab  # Marian's convention: <pad> is the last id and also starts the decoder
        marian = MarianConfig(
            vocab_size=vocab + 1,
            decoder_vocab_size=vocab + 1,
            d_model=config.d_model,
            encoder_layers=config.N,
            decoder_layers=config.decoder_layers,
            encoder_attention_heads=config.h,
            decoder_attention_heads=config.h,
            encoder_ffn_dim=config.d_ff,
            decoder_ffn_dim=config.d_ff,
            activation_function="relu",
            max_position_embeddings=1024,
            pad_token_id=vocab,
            eos_token_id=config.eos_id,
            decoder_start_token_id=vocab,
            forced_eos_token_id=None,
            scale_embedding=True,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
        )
        torch.manual_seed(seed)
        self.model = MarianMTModel(marian).eval()

    def inputs(self, sources: list[list[int]]) -> tuple[Tensor, Tensor]:
        """ids + EOS, right-padded with Marian's pad, and the attention mask."""
        length = max(map(len, sources)) + 1
        ids = torch.full((len(sources), length), self.pad_id, dtype=torch.long)
        mask = torch.zeros(len(sources), length, dtype=torch.long)
        for row, source in enumerate(sources):
            ids[row, : len(source) + 1] = torch.tensor([*source, 2])
            mask[row, : len(source) + 1] = 1
        return ids, mask

    def generate(self, sources: list[list[int]], beam: int, length: int) -> int:
        """Decode exactly `length` tokens per sentence (EOS forbidden before); returns the tokens produced."""
        ids, mask = self.inputs(sources)
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                num_beams=beam,
                do_sample=False,
                max_new_tokens=length,
                min_new_tokens=length,
                early_stopping=False,
            )
        produced = out.size(1) - 1  # without the decoder start token
        if produced != length:
            raise RuntimeError(f"Marian produced {produced} tokens per sentence, expected {length}")
        return produced * len(sources)


class CTranslate2Marian:
    """The Marian model converted with `ctranslate2.converters.TransformersConverter` (float32 or int8)."""

    def __init__(self, marian: HuggingFaceMarian, tokenizer: Tokenizer, compute_type: str, threads: int) -> None:
        import ctranslate2

        pieces = tokenizer.pieces(range(tokenizer.vocab_size))
        pieces[0] = "<unused-pad>"  # Marian's <pad> is the extra last id; names must be unique

        class Vocabulary:  # what the converter reads from a tokenizer
            eos_token, unk_token = "</s>", "<unk>"

            def get_vocab(self) -> dict[str, int]:
                return {**{piece: i for i, piece in enumerate(pieces)}, "<pad>": len(pieces)}

        class Converter(ctranslate2.converters.TransformersConverter):
            def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):  # noqa: ARG002
                return Vocabulary()

        self.tokenizer = tokenizer
        self._tmp = tempfile.TemporaryDirectory(prefix="aiayn-ct2-")
        root = Path(self._tmp.name)
        marian.model.save_pretrained(root / "hf")
        Converter(str(root / "hf")).convert(str(root / compute_type), quantization=compute_type, force=True)
        self.translator = ctranslate2.Translator(
            str(root / compute_type), device="cpu", compute_type=compute_type, intra_threads=threads, inter_threads=1
        )

    def generate(self, sources: list[list[int]], beam: int, length: int) -> int:
        batch = [[*self.tokenizer.pieces(source), "</s>"] for source in sources]
        results = self.translator.translate_batch(
            batch, beam_size=beam, max_decoding_length=length, min_decoding_length=length, max_batch_size=0
        )
        produced = {len(r.hypotheses[0]) for r in results}
        if produced != {length}:
            raise RuntimeError(f"CTranslate2 produced {sorted(produced)} tokens per sentence, expected {length}")
        return length * len(sources)


def timed(fn) -> tuple[float, int]:
    start = time.perf_counter()
    tokens = fn()
    return time.perf_counter() - start, tokens


__all__ = ["CTranslate2Marian", "HuggingFaceMarian", "available", "timed"]
