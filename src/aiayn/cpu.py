"""CPU speed for training and decoding alike: keep freed memory in the process.

Each training step or decoding step allocates and frees the same tensors (logits [tokens, V], activations).
glibc returns blocks of more than a few MB to the operating system on free and maps fresh, zeroed pages on the
next allocation, so every step pays page faults; inside a virtual machine this can cost more than the
arithmetic (figures: docs/benchmarks/notes.md).
`keep_freed_memory` tells glibc to serve all allocations from its heap and never trim it, so later steps
reuse warm pages. The price: the process keeps its peak memory until it exits. Training applies it with
`train.reuse_memory` (default on), `Translator.from_pretrained` with `reuse_memory=True` (the default).

This module depends on nothing in the package: any layer may call it."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # mallopt parameters (glibc malloc.h)


def keep_freed_memory() -> bool:
    """Make glibc malloc reuse freed memory instead of unmapping it; True if applied (Linux with glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))


__all__ = ["keep_freed_memory"]
