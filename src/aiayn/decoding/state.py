"""The decoder side of a search (section 3.2.3 / 6.1): one step of next-token logits per row, reorderable.

Searches depend only on this small protocol, so the same search runs on

- `CachedDecoderState`: the model's incremental protocol. The encoder output and the encoder-decoder keys and
  values are computed and stored once per sentence (`Transformer.init_cache`; after `beam_cache.expand` a
  sentence's rows attend to them as query rows); each step feeds one token per row and appends its
  self-attention keys/values; beams are re-ranked with `beam_cache.reorder_within(rows)` (copying only the
  rows whose history changes), and rows of finished sentences are dropped with `beam_cache.reorder_rows`
  (whole groups: the per-sentence keys/values follow).
- `RecomputeDecoderState`: the naive decoder, which runs the whole prefix through the decoder at every step
  (cost quadratic in the output length); a reference for tests and the benchmark's baseline.

A state starts with one row per sentence (all of a sentence's beams or samples would read the same BOS); after
the first step a search `expand`s it to `copies` rows per sentence, sentence-major: row i * copies + j is copy
j (a beam, or a sample) of sentence i.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from aiayn.decoding.beam_cache import expand, reorder_rows, reorder_within
from aiayn.decoding.ensemble import Ensemble, EnsembleDecoderState, EnsembleMemory
from aiayn.model import EncoderOutput, Transformer


class DecoderState(Protocol):
    def step(self, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        """tokens [R] (the last output of each row) -> (logits [R,V], cross-attention [R,S] or None)."""
        ...

    def reorder(self, rows: Tensor, source_changed: bool) -> None:
        """Keep rows `rows` (back-pointers; fewer rows when sentences finish)."""
        ...

    def expand(self, copies: int) -> None:
        """Each row becomes `copies` consecutive rows with the same history (a first step run once per sentence
        branching into k beams or samples)."""
        ...


def _last_cross_attention(cross_attentions: list[Tensor]) -> Tensor:
    return cross_attentions[-1][:, :, -1].mean(dim=1)  # last layer, last position: [R,h,T,S] -> [R,S]


class CachedDecoderState:
    def __init__(self, model: Transformer, memory: EncoderOutput, capacity: int, need_weights: bool = False) -> None:
        self.model = model
        self.need_weights = need_weights
        # Encoder-decoder keys/values once per sentence (its rows, once expanded, attend as query rows of it);
        # self-attention buffers allocated at full capacity.
        self.cache = model.init_cache(memory, capacity=capacity)

    def step(self, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        out = self.model.step(tokens, self.cache, need_weights=self.need_weights)
        return out.logits[:, -1], _last_cross_attention(out.cross_attentions) if self.need_weights else None

    def reorder(self, rows: Tensor, source_changed: bool) -> None:
        if source_changed or rows.numel() != self.cache.batch_size:
            reorder_rows(self.cache, rows)
        else:  # beams re-ranked within their sentences: copy only the rows whose history changes
            reorder_within(self.cache, rows)

    def expand(self, copies: int) -> None:
        expand(self.cache, copies)


class RecomputeDecoderState:
    def __init__(self, model: Transformer, memory: EncoderOutput, need_weights: bool = False) -> None:
        self.model = model
        self.need_weights = need_weights
        self.memory = EncoderOutput(memory.hidden, memory.mask, [])
        self.prefix = torch.empty(memory.hidden.size(0), 0, dtype=torch.long, device=memory.hidden.device)  # [R,t]

    def step(self, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)
        out = self.model.decode(self.prefix, self.memory, need_weights=self.need_weights, project=False)
        logits = self.model.project(out.hidden[:, -1])
        return logits, _last_cross_attention(out.cross_attentions) if self.need_weights else None

    def reorder(self, rows: Tensor, source_changed: bool) -> None:
        self.prefix = self.prefix.index_select(0, rows)
        if source_changed or rows.numel() != self.memory.mask.size(0):
            self.memory = EncoderOutput(
                self.memory.hidden.index_select(0, rows), self.memory.mask.index_select(0, rows), []
            )

    def expand(self, copies: int) -> None:
        self.reorder(torch.arange(self.prefix.size(0), device=self.prefix.device).repeat_interleave(copies), True)


def branch(state: DecoderState, copies: int, *per_row: Tensor | None) -> tuple[Tensor | None, ...]:
    """After a first step run once per sentence: expand `state` to `copies` rows per sentence, and repeat each
    per-row tensor of that step (logits, attention; None stays None) to match."""
    state.expand(copies)
    return tuple(None if x is None else x.repeat_interleave(copies, dim=0) for x in per_row)


def start_decoder(
    model: Transformer | Ensemble,
    memory: EncoderOutput | EnsembleMemory,
    capacity: int,
    use_cache: bool,
    need_weights: bool,
    ensemble_mean: str = "arithmetic",
) -> DecoderState:
    """A decoder state with one row per sentence of `memory` (searches `expand` it after their first step); for an
    ensemble, one state per member behind the same protocol, combined by `ensemble_mean`."""
    if isinstance(model, Ensemble):
        assert isinstance(memory, EnsembleMemory)
        return EnsembleDecoderState(
            [start_decoder(m, out, capacity, use_cache, need_weights) for m, out in zip(model.members, memory.outputs)],
            ensemble_mean,
        )
    assert isinstance(memory, EncoderOutput)
    if use_cache:
        return CachedDecoderState(model, memory, capacity, need_weights)
    return RecomputeDecoderState(model, memory, need_weights)


__all__ = ["CachedDecoderState", "DecoderState", "RecomputeDecoderState", "branch", "start_decoder"]
