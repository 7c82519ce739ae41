"""Text in, text out (section 6.1): tokenize, batch by a token budget, search, detokenize.

    translator = Translator.from_pretrained("runs/m30k/checkpoint-best")
    translator.translate(["A man rides a bike."], beam=4)          # -> ["Ein Mann fährt Fahrrad."]
    Translator.from_pretrained(["runs/a/averaged", "runs/b/averaged"])   # an ensemble (aiayn.decoding.ensemble)

Sentences are sorted by length and cut into batches of at most `max_tokens` padded source positions, so a
batch holds sentences of similar length (little padding, and no short sentence waits for a long one); the
results come back in input order. An empty (or all-whitespace) sentence translates to the empty string without
running the model. A sentence longer than the model accepts is truncated (`on_long_line="truncate"`, noted in
`Translation.truncated_from`) or refused with a `LongInputError` naming it (`on_long_line="error"`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm import tqdm

from aiayn.config import DecodeConfig, with_overrides
from aiayn.cpu import keep_freed_memory
from aiayn.data import Tokenizer
from aiayn.data.vocab_tokenizer import load_model_tokenizers
from aiayn.decoding.ensemble import Ensemble
from aiayn.decoding.forced import sequence_log_probs
from aiayn.decoding.limits import check_search_budget
from aiayn.decoding.search import generate
from aiayn.kernels import Runtime, prepare_for_inference
from aiayn.model import Transformer


class LongInputError(ValueError):
    """A sentence has more subword tokens than the model accepts; `index` is its 0-based position."""

    def __init__(self, index: int, length: int, limit: int, side: str = "source") -> None:
        advice = "(truncate it, or decode with on_long_line='truncate')" if side == "source" else "to score"
        super().__init__(f"{side} sentence {index + 1} has {length} subword tokens, more than the limit of {limit} "
                         f"{advice}")  # fmt: skip
        self.index, self.length, self.limit = index, length, limit


@dataclass
class Translation:
    """One source sentence's n-best translations, best first."""

    source: str
    hypotheses: list[str] = field(default_factory=list)  # detokenized text
    scores: list[float] = field(default_factory=list)  # length-normalised log-probabilities
    log_probs: list[float] = field(default_factory=list)
    pieces: list[list[str]] = field(default_factory=list)  # subword pieces of each hypothesis (no BOS/EOS)
    source_pieces: list[str] = field(default_factory=list)  # what the model read, EOS excluded
    attentions: list[Tensor | None] = field(default_factory=list)  # [len(pieces)+1, len(source_pieces)+1]
    truncated_from: int | None = None  # the original subword length, when the source was truncated

    @property
    def text(self) -> str:
        return self.hypotheses[0] if self.hypotheses else ""


def _tokenizer_signature(tokenizer: Any) -> object:
    """What decides a tokenizer's ids: sentencepiece's fingerprint, or a vocabulary file's pieces and what it
    makes of a probe sentence (interop tokenizers)."""
    if hasattr(tokenizer, "fingerprint"):
        return tokenizer.fingerprint()
    return sorted(tokenizer.id_to_piece.items()), tokenizer.encode("A probe: 12 words, a comma and Ünïcode.")


def make_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of non-empty sources (length > 0, EOS not counted) sorted longest first and cut so that
    n * max(length + 1) <= max_tokens (a longer single sentence still gets a batch of its own)."""
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * (lengths[batches[-1][0]] + 1) <= max_tokens:
            batches[-1].append(i)  # sorted longest first: the batch's first sentence is its longest
        else:
            batches.append([i])
    return batches


class Translator:
    def __init__(
        self,
        model: Transformer | Ensemble,
        tokenizer: Tokenizer,
        config: DecodeConfig | None = None,
        device: str = "cpu",
        runtime: Runtime | None = None,
        target_tokenizer: Tokenizer | None = None,
    ) -> None:
        target_tokenizer = target_tokenizer or tokenizer  # one joint tokenizer unless the model has two
        for side, tok, size in (
            ("", tokenizer, model.config.src_vocab_size),
            ("target ", target_tokenizer, model.config.tgt_vocab_size),
        ):
            if tok.vocab_size != size:
                raise ValueError(
                    f"{side}tokenizer has {tok.vocab_size} pieces but the model's vocabulary is "
                    f"{size}; they do not belong together"
                )
        for side, tok in (("source", tokenizer), ("target", target_tokenizer)):
            for name in ("pad_id", "eos_id"):
                mine, theirs = getattr(model.config, name), getattr(tok, name, None)
                if isinstance(theirs, int) and theirs != mine:
                    raise ValueError(f"the {side} tokenizer's {name} is {theirs} but the model's config.json "
                                     f"says {mine}; they do not belong together")  # fmt: skip
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        members = model.members if isinstance(model, Ensemble) else [model]
        self.member_configs = [m.config for m in members]  # the search's memory counts each member's caches
        self.tokenizer = tokenizer  # reads the source
        self.target_tokenizer = target_tokenizer  # writes the output
        self.config = config or DecodeConfig()
        self.runtime = runtime  # the fast paths chosen by `from_pretrained` (None: the model as given)

    @classmethod
    def from_pretrained(
        cls,
        model_dir: str | Path | Sequence[str | Path],
        device: str = "cpu",
        reuse_memory: bool = True,
        **decode_overrides: Any,
    ) -> Translator:
        """Load a model directory: config.json + model.safetensors + tokenizer.model, with the fast paths that
        `decode.attention_impl`, `decode.linear_kernel` and `decode.precision` choose
        (`aiayn.kernels.prepare_for_inference`). A list of directories is decoded as an ensemble (their mean
        next-token probability, `aiayn.decoding.ensemble`); their tokenizers must have the same pieces.

        On CPU, `reuse_memory` (default) also makes this process's allocator keep freed memory
        (`aiayn.cpu.keep_freed_memory`, docs/benchmarks/decoding.md), at the price of keeping the peak memory
        until the process exits."""
        if reuse_memory and torch.device(device).type == "cpu":
            keep_freed_memory()
        config = with_overrides(DecodeConfig(), decode_overrides, section="decode")
        dirs = [model_dir] if isinstance(model_dir, (str, Path)) else list(model_dir)
        if not dirs:
            raise ValueError("no model directory given")
        models, runtime, tokenizers = [], None, None
        for path in dirs:
            model, prepared = prepare_for_inference(
                Transformer.from_pretrained(path, map_location=device),
                config.attention_impl,
                config.linear_kernel,
                precision=config.precision,
            )
            pair = load_model_tokenizers(path)  # tokenizer.model, or source/target files (interop)
            if tokenizers is None:
                runtime, tokenizers = prepared, pair
            else:
                for side, mine, first in zip(("source", "target"), pair, tokenizers):
                    if type(mine) is not type(first) or _tokenizer_signature(mine) != _tokenizer_signature(first):
                        raise ValueError(f"{path}: its {side} tokenizer differs from that of {dirs[0]}; the models "
                                         "of an ensemble must share their tokenizers")  # fmt: skip
            models.append(model)
        assert tokenizers is not None
        try:
            ensemble = models[0] if len(models) == 1 else Ensemble(models)
        except ValueError as error:  # the models' ids disagree: name the directories in their order
            raise ValueError(f"{', '.join(map(str, dirs))}: {error}") from None
        return cls(ensemble, tokenizers[0], config, device, runtime, target_tokenizer=tokenizers[1])

    def source_limit(self, config: DecodeConfig | None = None) -> int:
        """The most subword tokens of one source sentence (its EOS not counted)."""
        positions = (config or self.config).max_source_positions
        if self.model.config.positional == "learned":
            positions = min(positions, self.model.config.max_positions)
        return positions - 1

    def translate(self, sentences: Sequence[str], **overrides: Any) -> list[str]:
        """The best translation of each sentence, in input order; keyword arguments override DecodeConfig."""
        return [t.text for t in self.translate_detailed(sentences, **overrides)]

    def translate_detailed(
        self, sentences: Sequence[str], progress: bool = False, **overrides: Any
    ) -> list[Translation]:
        """n-best translations with scores, pieces and (with need_attention=True) attention, in input order."""
        if isinstance(sentences, str):
            raise TypeError("translate takes a list of sentences, not one string")
        config = with_overrides(self.config, overrides, section="decode")
        ids = self.tokenizer.encode_batch(list(sentences)) if sentences else []
        limit = self.source_limit(config)
        results = [Translation(source=s) for s in sentences]
        for i, sentence_ids in enumerate(ids):
            if len(sentence_ids) > limit:
                if config.on_long_line == "error":
                    raise LongInputError(i, len(sentence_ids), limit)
                results[i].truncated_from = len(sentence_ids)
                ids[i] = sentence_ids[:limit]
            results[i].source_pieces = self.tokenizer.pieces(ids[i])
        batches = make_batches([len(x) for x in ids], config.max_tokens)
        with tqdm(total=sum(map(len, batches)), disable=not progress, unit="sent", desc="translate") as bar:
            for batch in batches:
                longest = max(len(ids[i]) for i in batch) + 1  # sorted longest first; EOS included
                check_search_budget(config, self.member_configs, len(batch), longest, self.device)
                nbest = generate(self.model, self._source_tensor([ids[i] for i in batch]), config)
                for i, hypotheses in zip(batch, nbest):
                    self._fill(results[i], hypotheses)
                bar.update(len(batch))
        return results

    def score(
        self, sources: Sequence[str], targets: Sequence[str], max_tokens: int | None = None
    ) -> list[tuple[float, int]]:
        """(log P(target | source), |Y|) of each pair, teacher forced (aiayn.decoding.forced), in input order;
        |Y| counts the target's subwords and its EOS, so log P / |Y| is the beam's score with `--lenpen-form
        power --lenpen 1`. A source longer than the model accepts is truncated as `translate` truncates it."""
        if isinstance(self.model, Ensemble):
            raise ValueError("scoring given outputs takes one model directory, not an ensemble")
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        limit = self.source_limit()
        src_ids = [ids[:limit] for ids in self.tokenizer.encode_batch(list(sources))] if sources else []
        tgt_ids = self.target_tokenizer.encode_batch(list(targets)) if targets else []
        if self.model.config.positional == "learned":
            for i, ids in enumerate(tgt_ids):
                if len(ids) + 1 > self.model.config.max_positions:
                    raise LongInputError(i, len(ids), self.model.config.max_positions - 1, "output")
        lengths = [max(len(s), len(t)) + 1 for s, t in zip(src_ids, tgt_ids)]  # every pair is non-empty
        results: list[tuple[float, int]] = [(0.0, 0)] * len(sources)
        for batch in make_batches(lengths, max_tokens or self.config.max_tokens):
            log_probs = sequence_log_probs(
                self.model, self._source_tensor([src_ids[i] for i in batch]), [tgt_ids[i] for i in batch]
            )
            for i, value in zip(batch, log_probs.tolist()):
                results[i] = (value, len(tgt_ids[i]) + 1)
        return results

    def _source_tensor(self, batch: list[list[int]]) -> Tensor:
        """ids + [EOS], right-padded with PAD: [B,S] on the translator's device."""
        c = self.model.config
        src = torch.full((len(batch), max(map(len, batch)) + 1), c.pad_id, dtype=torch.long)
        for row, sentence_ids in enumerate(batch):
            src[row, : len(sentence_ids)] = torch.tensor(sentence_ids, dtype=torch.long)
            src[row, len(sentence_ids)] = c.eos_id
        return src.to(self.device)

    def _fill(self, result: Translation, hypotheses: list) -> None:
        for hypothesis in hypotheses:
            result.hypotheses.append(self.target_tokenizer.decode(hypothesis.tokens))
            result.scores.append(hypothesis.score)
            result.log_probs.append(hypothesis.log_prob)
            result.pieces.append(self.target_tokenizer.pieces(hypothesis.tokens))
            attention = hypothesis.attention
            result.attentions.append(None if attention is None else attention.cpu())


__all__ = ["LongInputError", "Translation", "Translator", "make_batches"]
