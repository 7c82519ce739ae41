"""Tokenizers of models made elsewhere: a sentencepiece model whose pieces map to the model's ids through a
vocabulary file (Marian's `vocab.json`), and the model directory's record of which files to use.

Marian (OPUS-MT) splits text with `source.spm` (and writes with `target.spm`), but its ids are positions in a
joint vocabulary `vocab.json` ({piece: id}), not the sentencepiece ids: "</s>" = 0, "<unk>" = 1, ... and
"<pad>" last. A piece missing from the vocabulary is "<unk>". A leading target-language token such as
`>>deu<<` (multilingual OPUS-MT models) is looked up in the vocabulary as one piece, as `MarianTokenizer` does.

A model directory with separate tokenizers records them in config.json:

    "tokenizers": {"source": {"spm": "source.spm", "vocab": "vocab.json"},
                   "target": {"spm": "target.spm", "vocab": "vocab.json"}}

fairseq models split text with sentencepiece too, or with Moses tokenization and subword-nmt BPE codes
(`{"moses": "en", "bpe_codes": "bpecodes", "vocab": "vocab.src.json"}`: sacremoses and subword-nmt, the
packages fairseq itself calls); their `dict.*.txt` is recorded as the same {piece: id} JSON.

Without that entry the directory holds one `tokenizer.model` with the package's fixed ids (`aiayn.data.Tokenizer`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from aiayn.data.corpus import CorpusError
from aiayn.data.tokenizer import TOKENIZER_FILENAME, Tokenizer


class SentencePieceSegmenter:
    """Text <-> pieces with a sentencepiece model (its own ids are not used)."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.is_file():
            raise CorpusError(f"{path}: tokenizer file not found")
        self.processor = spm.SentencePieceProcessor()
        try:
            self.processor.Load(str(path))
        except (OSError, RuntimeError) as error:
            raise CorpusError(f"{path}: not a sentencepiece model ({error})") from None

    def split(self, text: str) -> list[str]:
        return self.processor.encode(text, out_type=str)

    def join(self, pieces: list[str]) -> str:
        return self.processor.decode_pieces(pieces)


class MosesBpeSegmenter:
    """Moses tokenization (sacremoses) + subword-nmt BPE, "@@ " marking a word that continues, as fairseq's
    `--tokenizer moses --bpe subword_nmt` (and its inverse: remove "@@ ", Moses-detokenize)."""

    def __init__(self, lang: str, codes: str | Path) -> None:
        try:
            from sacremoses import MosesDetokenizer, MosesTokenizer
            from subword_nmt.apply_bpe import BPE
        except ImportError:
            raise CorpusError("Moses + BPE tokenization needs `pip install sacremoses subword-nmt`") from None
        codes = Path(codes)
        if not codes.is_file():
            raise CorpusError(f"{codes}: BPE codes not found")
        self.tokenizer, self.detokenizer = MosesTokenizer(lang), MosesDetokenizer(lang)
        with open(codes, encoding="utf-8") as f:
            self.bpe = BPE(f)

    def split(self, text: str) -> list[str]:
        words = self.tokenizer.tokenize(text, aggressive_dash_splits=True, return_str=True, escape=False)
        return self.bpe.process_line(words).split()

    def join(self, pieces: list[str]) -> str:
        words = (" ".join(pieces) + " ").replace("@@ ", "").split()
        return self.detokenizer.detokenize(words)


class VocabTokenizer:
    """Pieces of a segmenter (sentencepiece, or Moses + BPE) mapped to model ids by a {piece: id} vocabulary;
    `encode` adds no EOS.

    The same interface as `Tokenizer`: vocab_size, encode, encode_batch, decode, pieces, pad/bos/eos/unk ids.
    """

    def __init__(
        self,
        segmenter: SentencePieceSegmenter | MosesBpeSegmenter,
        vocab: dict[str, int],
        path: Path | None = None,
        unk_piece: str = "<unk>",
        eos_piece: str = "</s>",
        pad_piece: str = "<pad>",
        bos_piece: str = "<s>",
    ) -> None:
        if unk_piece not in vocab or eos_piece not in vocab or pad_piece not in vocab:
            raise CorpusError(f"{path or 'vocabulary'}: needs {unk_piece!r}, {eos_piece!r} and {pad_piece!r} entries")
        self.segmenter, self.vocab, self.path = segmenter, dict(vocab), path
        self.id_to_piece = {int(i): piece for piece, i in vocab.items()}
        if len(self.id_to_piece) != len(vocab):
            raise CorpusError(f"{path or 'vocabulary'}: two pieces share one id")
        self.unk_id, self.eos_id, self.pad_id = vocab[unk_piece], vocab[eos_piece], vocab[pad_piece]
        self.bos_id = vocab.get(bos_piece)
        self._special = frozenset(i for i in (self.pad_id, self.eos_id, self.bos_id) if i is not None)

    @classmethod
    def from_files(cls, spm_path: str | Path, vocab_path: str | Path) -> VocabTokenizer:
        return cls(SentencePieceSegmenter(spm_path), read_vocab(vocab_path), Path(vocab_path))

    @property
    def vocab_size(self) -> int:
        return max(self.id_to_piece) + 1

    def __len__(self) -> int:
        return self.vocab_size

    def _ids(self, pieces: Sequence[str]) -> list[int]:
        return [self.vocab.get(piece, self.unk_id) for piece in pieces]

    def encode(self, text: str) -> list[int]:
        """Model ids of one sentence, without EOS; a leading `>>xx<<` language token is one piece."""
        code: list[str] = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[: end + 2]], text[end + 2 :]
        return self._ids(code + self.segmenter.split(text))

    def encode_batch(self, texts: Sequence[str], threads: int | None = None) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of model ids; pad, eos (and bos) are dropped, pieces unknown to sentencepiece render as " ⁇ "."""
        pieces = self.pieces([i for i in map(int, ids) if i not in self._special])
        return self.segmenter.join(pieces)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        bad = [int(i) for i in ids if int(i) not in self.id_to_piece]
        if bad:
            raise ValueError(f"ids {bad[:5]} are not in the vocabulary {self.path}")
        return [self.id_to_piece[int(i)] for i in ids]

    def __repr__(self) -> str:
        return f"VocabTokenizer(path={str(self.path)!r}, vocab_size={self.vocab_size})"


def read_vocab(path: str | Path) -> dict[str, int]:
    """A {piece: id} JSON vocabulary."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: tokenizer file not found")
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorpusError(f"{path}: not a JSON vocabulary ({error})") from None
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise CorpusError(f"{path}: expected a JSON object {{piece: id}}")
    return vocab


def tokenizer_from_spec(model_dir: Path, spec: dict[str, Any], side: str) -> VocabTokenizer:
    """One side's tokenizer from its config.json record (module docstring)."""
    if not isinstance(spec, dict) or "vocab" not in spec or not ("spm" in spec or "bpe_codes" in spec):
        raise CorpusError(f"{model_dir / 'config.json'}: tokenizers.{side} needs 'vocab' and 'spm' or 'bpe_codes'")
    if "spm" in spec:
        segmenter: SentencePieceSegmenter | MosesBpeSegmenter = SentencePieceSegmenter(model_dir / spec["spm"])
    else:
        segmenter = MosesBpeSegmenter(str(spec.get("moses", "en")), model_dir / spec["bpe_codes"])
    vocab_path = model_dir / spec["vocab"]
    return VocabTokenizer(segmenter, read_vocab(vocab_path), vocab_path)


def load_model_tokenizers(model_dir: str | Path, document: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """(source, target) tokenizers of a model directory: the config.json "tokenizers" entry, else the one
    `tokenizer.model` for both sides."""
    model_dir = Path(model_dir)
    if document is None:
        config_path = model_dir / "config.json"
        document = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    entry = document.get("tokenizers")
    if not entry:
        tokenizer = Tokenizer.from_file(model_dir / TOKENIZER_FILENAME)
        return tokenizer, tokenizer
    if not isinstance(entry, dict):
        raise CorpusError(f"{model_dir / 'config.json'}: 'tokenizers' must map source and target to their files")
    return tuple(tokenizer_from_spec(model_dir, entry.get(side), side) for side in ("source", "target"))


__all__ = ["MosesBpeSegmenter", "SentencePieceSegmenter", "VocabTokenizer", "load_model_tokenizers", "read_vocab"]
