"""The decoder's incremental state for generation (sections 3.2.3 and 4: "caching the keys and values of
earlier positions removes the recomputation").

A `KVCache` holds, per decoder layer, the self-attention keys/values of the positions decoded so far (in
preallocated buffers that grow by doubling, so a step writes one column instead of concatenating the whole
prefix) and the encoder-decoder keys/values, computed once per source sentence. It is an explicit object:
`Transformer.init_cache` makes it, `Transformer.step` reads and advances it, searches reorder it.

Rows and sentences: the self-attention buffers have one row per hypothesis; the encoder-decoder keys/values and
the source mask have one row per source sentence. `group` consecutive hypothesis rows share a sentence (a beam
search's k beams, or k samples): the decoder attends with them as `group` query rows of that sentence, so the
encoder-decoder keys/values are stored and read once per sentence, not once per beam.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class KVCache:
    self_k: list[Tensor]  # per layer [B, h, capacity, d_k]; positions [0, length) are filled
    self_v: list[Tensor]  # per layer [B, h, capacity, d_v]
    cross_k: list[Tensor]  # per layer [B / group, h, S, d_k]: W^K applied to the encoder output, once
    cross_v: list[Tensor]  # per layer [B / group, h, S, d_v]
    memory_mask: Tensor  # [B / group, S] bool, True at real source tokens
    length: int = 0  # target positions already decoded
    group: int = 1  # consecutive rows per source sentence (rows i*group .. i*group+group-1 read sentence i)

    @property
    def batch_size(self) -> int:
        """Rows (hypotheses) decoded at once."""
        return self.memory_mask.size(0) * self.group

    @property
    def capacity(self) -> int:
        return self.self_k[0].size(2)

    def append(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write the new positions' keys/values [B,h,t,d] at [length, length+t) of `layer` and return views of
        all positions so far. `advance(t)` must follow once every layer has appended."""
        end = self.length + k.size(2)
        if end > self.capacity:
            self._grow(end)
        self.self_k[layer][:, :, self.length : end] = k
        self.self_v[layer][:, :, self.length : end] = v
        return self.self_k[layer][:, :, :end], self.self_v[layer][:, :, :end]

    def advance(self, steps: int) -> None:
        self.length += steps

    def _grow(self, needed: int) -> None:
        capacity = max(needed, 2 * self.capacity)
        for buffers in (self.self_k, self.self_v):
            for i, old in enumerate(buffers):
                new = old.new_empty(old.size(0), old.size(1), capacity, old.size(3))
                new[:, :, : self.length] = old[:, :, : self.length]
                buffers[i] = new

    def reorder(self, index: Tensor, source_changed: bool = True) -> KVCache:
        """Keep batch rows `index` (a beam search's back-pointers, or the rows still alive), in place.

        Only the filled prefix of the self-attention buffers is copied. `source_changed=False` says every row
        keeps the same source sentence (beams re-ranked within their own sentence), so the encoder-decoder
        keys/values, identical across a sentence's beams, are left as they are. With `group` > 1 and an
        `index` that keeps each group's rows within one sentence (e.g. dropping finished sentences), the
        per-sentence keys/values follow the sentences; any other `index` first expands them to one per row.
        """
        index = index.to(self.memory_mask.device)
        same_size = index.numel() == self.batch_size
        sentences = index
        if self.group > 1 and (source_changed or not same_size):
            sentences = self._sentences_of(index)
            if sentences is None:  # rows leave their group: give every row its own copy
                self._ungroup()
                sentences = index
        for buffers in (self.self_k, self.self_v):
            for i, old in enumerate(buffers):
                if same_size:  # permute in place: copy only the positions decoded so far
                    old[:, :, : self.length] = old[:, :, : self.length].index_select(0, index)
                else:
                    buffers[i] = old.index_select(0, index)
        if source_changed or not same_size:
            self.cross_k = [t.index_select(0, sentences) for t in self.cross_k]
            self.cross_v = [t.index_select(0, sentences) for t in self.cross_v]
            self.memory_mask = self.memory_mask.index_select(0, sentences)
        return self

    def expand(self, copies: int) -> KVCache:
        """Each row becomes `copies` consecutive rows with its history, in place: a search's first step, run once
        per sentence, then branches into k beams (or samples). The encoder-decoder keys/values stay once per
        sentence (the group grows by `copies`); only the filled prefix of the self-attention buffers is copied."""
        if copies == 1:
            return self
        for buffers in (self.self_k, self.self_v):
            for i, old in enumerate(buffers):
                new = old.new_empty(old.size(0) * copies, *old.shape[1:])
                new[:, :, : self.length] = old[:, :, : self.length].repeat_interleave(copies, dim=0)
                buffers[i] = new
        self.group *= copies
        return self

    def _sentences_of(self, index: Tensor) -> Tensor | None:
        """The sentence of each new group when every group of `index` reads rows of a single sentence, else None."""
        g = self.group
        if index.numel() % g:
            return None
        groups = index.view(-1, g) // g  # [new groups, g] sentence of each chosen row
        first = groups[:, 0]
        return first if bool((groups == first[:, None]).all()) else None

    def _ungroup(self) -> None:
        """One copy of the encoder-decoder keys/values and mask per row (group 1)."""
        self.cross_k = [t.repeat_interleave(self.group, dim=0) for t in self.cross_k]
        self.cross_v = [t.repeat_interleave(self.group, dim=0) for t in self.cross_v]
        self.memory_mask = self.memory_mask.repeat_interleave(self.group, dim=0)
        self.group = 1

    def reorder_within(self, index: Tensor) -> KVCache:
        """`reorder(index, source_changed=False)` for a same-size `index`, copying only the rows that change.

        When a beam search re-ranks each sentence's beams, most rows keep their own history (index[r] == r); only
        the others' filled prefixes are gathered (into a temporary, then written back). Added for decoding speed.
        """
        index = index.to(self.memory_mask.device)
        if index.numel() != self.batch_size:
            raise ValueError(f"reorder_within keeps the batch size {self.batch_size}; got {index.numel()} rows")
        moved = (index != torch.arange(index.numel(), device=index.device)).nonzero().squeeze(1)
        if moved.numel() == 0:
            return self
        sources = index.index_select(0, moved)
        for buffers in (self.self_k, self.self_v):
            for buffer in buffers:
                prefix = buffer[:, :, : self.length]
                prefix.index_copy_(0, moved, prefix.index_select(0, sources))
        return self

    @staticmethod
    def allocate(
        batch: int, layers: int, h: int, d_k: int, d_v: int, capacity: int, like: Tensor
    ) -> tuple[list[Tensor], list[Tensor]]:
        """Empty self-attention buffers for `layers` decoder layers, with the dtype and device of `like`."""
        k = [torch.empty(batch, h, capacity, d_k, dtype=like.dtype, device=like.device) for _ in range(layers)]
        v = [torch.empty(batch, h, capacity, d_v, dtype=like.dtype, device=like.device) for _ in range(layers)]
        return k, v
