"""A search's view of the model's `KVCache`: several rows (beams, samples) per source sentence.

The encoder-decoder keys/values stay once per sentence, shared by its g = `cache.group` consecutive rows; these
operations keep it so while rows branch, are re-ranked within their sentence, or leave with finished sentences.
(`KVCache.reorder` alone is the general case: any row order, every row then gets its own copy.)
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.model import KVCache


def expand(cache: KVCache, copies: int) -> KVCache:
    """Each row becomes `copies` consecutive rows with its history (a first step run once per sentence, then
    branching into k beams); the encoder-decoder keys/values are not copied (the group grows)."""
    if copies == 1:
        return cache
    for buffers in (cache.self_k, cache.self_v):
        for i, old in enumerate(buffers):
            new = old.new_empty(old.size(0) * copies, *old.shape[1:])
            new[:, :, : cache.length] = old[:, :, : cache.length].repeat_interleave(copies, dim=0)
            buffers[i] = new
    return cache


def reorder_within(cache: KVCache, index: Tensor) -> KVCache:
    """Beams re-ranked within their own sentences (same number of rows): copy only the filled prefixes of the
    rows whose history changes (index[r] != r); the per-sentence keys/values stay."""
    index = index.to(cache.memory_mask.device)
    if index.numel() != cache.batch_size:
        raise ValueError(f"reorder_within keeps the batch size {cache.batch_size}; got {index.numel()} rows")
    moved = (index != torch.arange(index.numel(), device=index.device)).nonzero().squeeze(1)
    if moved.numel() == 0:
        return cache
    sources = index.index_select(0, moved)
    for buffers in (cache.self_k, cache.self_v):
        for buffer in buffers:
            prefix = buffer[:, :, : cache.length]
            prefix.index_copy_(0, moved, prefix.index_select(0, sources))
    return cache


def reorder_rows(cache: KVCache, index: Tensor) -> KVCache:
    """Row r becomes old row index[r]. When every group of g new rows reads one sentence (e.g. dropping finished
    sentences), the per-sentence keys/values follow the sentences; otherwise `KVCache.reorder` (one per row)."""
    index = index.to(cache.memory_mask.device)
    g = cache.group
    if g == 1 or index.numel() % g:
        return cache.reorder(index)
    groups = index.view(-1, g) // g  # [new groups, g] the sentence of each chosen row
    sentences = groups[:, 0]
    if not bool((groups == sentences[:, None]).all()):
        return cache.reorder(index)
    return cache.reorder(index, sentences)


__all__ = ["expand", "reorder_rows", "reorder_within"]
