"""Subword tokenizer: one joint sentencepiece BPE model over source and target text (section 5.1).

The paper encodes WMT 2014 En-De with "byte-pair encoding, which has a shared source-target vocabulary of
about 37000 tokens"; here the BPE is sentencepiece's, trained on both sides of the training corpus together,
so one vocabulary (and, with `share_embeddings`, one embedding matrix) serves both languages.

Special ids are fixed across the package and match `ModelConfig`: pad=0, bos=1, eos=2, unk=3. Byte fallback
is on, so a character never seen in training becomes its UTF-8 bytes instead of <unk>. Text is normalized
with sentencepiece's default NFKC rule (`nmt_nfkc`), which also collapses runs of spaces; so
decode(encode(x)) == x exactly for text already in that form (most sentences), and otherwise up to it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

from aiayn.data.corpus import CorpusError

TOKENIZER_FILENAME = "tokenizer.model"
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_PIECES = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}


# Whitespace runs, a compatibility ligature, a vulgar fraction, full-width letters, accents, digits, an emoji.
FINGERPRINT_PROBE = "  A man  \ufb01xes a \u00bd-price  \uff22\uff29\uff2b\uff25, caf\u00e9 n\u00b02024 \U0001f600 "


class Tokenizer:
    """A sentencepiece model with the package's special ids; `encode` adds no BOS/EOS."""

    pad_id = PAD_ID
    bos_id = BOS_ID
    eos_id = EOS_ID
    unk_id = UNK_ID

    def __init__(self, processor: spm.SentencePieceProcessor, path: Path | None = None) -> None:
        expected = {"pad": PAD_ID, "bos": BOS_ID, "eos": EOS_ID, "unk": UNK_ID}
        found = {
            "pad": processor.pad_id(),
            "bos": processor.bos_id(),
            "eos": processor.eos_id(),
            "unk": processor.unk_id(),
        }
        if found != expected:
            where = path if path is not None else "sentencepiece model"
            raise CorpusError(f"{where}: special ids {found} differ from the package's fixed ids {expected}")
        self.processor = processor
        self.path = path
        self._special = frozenset((PAD_ID, BOS_ID, EOS_ID))

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        """Load a `tokenizer.model`; a directory is taken to contain one."""
        path = Path(path)
        if path.is_dir():
            path = path / TOKENIZER_FILENAME
        if not path.is_file():
            raise CorpusError(f"{path}: tokenizer model not found")
        processor = spm.SentencePieceProcessor()
        try:
            processor.Load(str(path))
        except (OSError, RuntimeError) as error:
            raise CorpusError(f"{path}: not a sentencepiece model ({error})") from None
        return cls(processor, path)

    @classmethod
    def train(
        cls,
        files: Sequence[str | Path],
        vocab_size: int,
        model_path: str | Path,
        *,
        sample_size: int = 1_000_000,
        threads: int | None = None,
        character_coverage: float = 1.0,
        byte_fallback: bool = True,
        normalization: str = "nmt_nfkc",
        max_sentence_bytes: int = 4192,
        seed: int = 1,
        quiet: bool = True,
    ) -> Tokenizer:
        """Train one joint BPE model on all `files` and write `model_path` and its `.vocab` beside it.

        `sample_size` sentences (over all files together) are drawn at random when the files hold more,
        so a 4.5M-pair corpus is sampled rather than loaded whole. Lines longer than `max_sentence_bytes`
        are skipped for training only.
        """
        model_path = Path(model_path)
        name = str(model_path)
        prefix = name[: -len(".model")] if name.endswith(".model") else name
        model_path.parent.mkdir(parents=True, exist_ok=True)
        for file in files:
            if not Path(file).is_file():
                raise CorpusError(f"{file}: tokenizer training file not found")
        spm.set_random_generator_seed(seed)
        options = dict(
            input=[str(file) for file in files],
            model_prefix=prefix,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            byte_fallback=byte_fallback,
            normalization_rule_name=normalization,
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            unk_id=UNK_ID,
            pad_piece=SPECIAL_PIECES[PAD_ID],
            bos_piece=SPECIAL_PIECES[BOS_ID],
            eos_piece=SPECIAL_PIECES[EOS_ID],
            unk_piece=SPECIAL_PIECES[UNK_ID],
            input_sentence_size=sample_size,
            shuffle_input_sentence=True,
            max_sentence_length=max_sentence_bytes,
            num_threads=threads or os.cpu_count() or 1,
            minloglevel=2 if quiet else 0,
        )
        try:
            spm.SentencePieceTrainer.Train(**options)  # minloglevel=2 silences it; logstream needs a real stderr
        except RuntimeError as error:
            hint = ""
            if "vocab" in str(error).lower():
                hint = " (try a smaller --vocab-size for this corpus)"
            raise CorpusError(f"sentencepiece training on {', '.join(map(str, files))} failed: {error}{hint}") from None
        produced = Path(prefix + ".model")
        if produced != model_path:
            os.replace(produced, model_path)
        return cls.from_file(model_path)

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Subword ids of one sentence, without BOS/EOS."""
        return self.processor.encode(text, out_type=int)

    def encode_batch(self, texts: Sequence[str], threads: int | None = None) -> list[list[int]]:
        """Subword ids of many sentences (encoded in parallel by sentencepiece's thread pool)."""
        if not texts:
            return []
        return self.processor.encode(list(texts), out_type=int, num_threads=threads or -1)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of subword ids; pad, bos and eos are dropped, unk renders as sentencepiece's " ⁇ "."""
        ids = [int(i) for i in ids]
        size = self.vocab_size
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise ValueError(f"ids {bad[:5]} are outside the vocabulary of size {size}")
        return self.processor.decode([i for i in ids if i not in self._special])

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The subword string of each id ("▁" marks a word start), e.g. for attention-plot labels."""
        return [self.processor.id_to_piece(int(i)) for i in ids]

    def fingerprint(self) -> str:
        """SHA-256 of what the model does: every piece with its score and type, and the ids of a probe sentence
        (normalization, whitespace, dummy prefix). The `.model` file's own bytes also hold the paths it was
        trained from, so the same corpus prepared in another directory gives another file, not another tokenizer."""
        sp = self.processor
        vocab = [[sp.id_to_piece(i), sp.get_score(i), sp.is_control(i), sp.is_unknown(i), sp.is_unused(i),
                  sp.is_byte(i)] for i in range(self.vocab_size)]  # fmt: skip
        document = {"vocab": vocab, "probe": self.encode(FINGERPRINT_PROBE)}
        return hashlib.sha256(json.dumps(document).encode()).hexdigest()

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer(path={str(self.path)!r}, vocab_size={self.vocab_size})"


__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "TOKENIZER_FILENAME", "Tokenizer", "UNK_ID"]
