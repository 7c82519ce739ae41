"""The decoder's keys and values of earlier positions, for generating one position at a time (3.2.3).

The decoder is auto-regressive (3.1): position i attends to positions <= i only, so the self-attention keys and
values of positions already decoded never change and can be kept; the encoder-decoder keys and values depend
only on the encoder output and are computed once. `Transformer.init_cache` makes a `KVCache`, `Transformer.step`
reads and advances it. Searches that keep several rows per sentence (beams) reorder it; their bookkeeping lives
in `aiayn.decoding.beam_cache`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class KVCache:
    self_k: list[Tensor]  # per decoder layer [R,h,capacity,d_k]; positions [0, length) are filled
    self_v: list[Tensor]  # per decoder layer [R,h,capacity,d_v]
    cross_k: list[Tensor]  # per decoder layer [R/g,h,S,d_k]: the encoder output times W^K, once
    cross_v: list[Tensor]  # per decoder layer [R/g,h,S,d_v]
    memory_mask: Tensor  # [R/g,S] bool, True at real source tokens
    length: int = 0  # target positions decoded so far

    @property
    def batch_size(self) -> int:
        """R, the rows (hypotheses) decoded at once."""
        return self.self_k[0].size(0)

    @property
    def group(self) -> int:
        """g, consecutive rows that read one source sentence (rows i*g .. i*g+g-1 read sentence i)."""
        return self.batch_size // self.memory_mask.size(0)

    @property
    def capacity(self) -> int:
        return self.self_k[0].size(2)

    def append(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store the new positions' k, v [R,h,t,d] of `layer`; returns all positions' keys and values so far.
        `advance(t)` follows once every layer has appended."""
        end = self.length + k.size(2)
        if end > self.capacity:  # grow by doubling: a step writes t columns instead of copying the prefix
            capacity = max(end, 2 * self.capacity)  # once: self.capacity reads the first buffer, replaced below
            for buffers in (self.self_k, self.self_v):
                for i, old in enumerate(buffers):
                    buffers[i] = old.new_empty(*old.shape[:2], capacity, old.size(3))
                    buffers[i][:, :, : self.length] = old[:, :, : self.length]
        self.self_k[layer][:, :, self.length : end] = k
        self.self_v[layer][:, :, self.length : end] = v
        return self.self_k[layer][:, :, :end], self.self_v[layer][:, :, :end]

    def advance(self, steps: int) -> None:
        self.length += steps

    def reorder(self, index: Tensor, sources: Tensor | None = None) -> KVCache:
        """Row r becomes old row index[r], with its decoded positions and its source sentence (in place).
        `sources` (one per new group of rows) keeps the keys of a sentence shared; by default every row gets
        its own copy."""
        index = index.to(self.memory_mask.device)
        sources = index // self.group if sources is None else sources.to(index.device)
        self.self_k = [self._select_prefix(buffer, index) for buffer in self.self_k]
        self.self_v = [self._select_prefix(buffer, index) for buffer in self.self_v]
        self.cross_k = [k.index_select(0, sources) for k in self.cross_k]
        self.cross_v = [v.index_select(0, sources) for v in self.cross_v]
        self.memory_mask = self.memory_mask.index_select(0, sources)
        return self

    def _select_prefix(self, buffer: Tensor, index: Tensor) -> Tensor:
        """Rows `index` of `buffer` in a new buffer of the same capacity; only the filled positions are copied."""
        new = buffer.new_empty(index.numel(), *buffer.shape[1:])
        prefix = buffer[:, :, : self.length]
        if buffer.requires_grad and torch.is_grad_enabled():  # out= does not record gradients
            new[:, :, : self.length] = prefix.index_select(0, index)
        else:
            torch.index_select(prefix, 0, index, out=new[:, :, : self.length])
        return new
