"""`aiayn.cpu.keep_freed_memory`, observed in fresh processes: with it, glibc serves a large block from its heap
(reused after free) instead of mapping fresh pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

GLIBC_ONLY = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/maps").exists(), reason="glibc on Linux only"
)

PROBE = """
import sys, torch
{setup}
t = torch.empty(16 * 2**20)  # a 64 MB block: glibc maps it separately unless told to keep its heap
heap = [l.split()[0] for l in open("/proc/self/maps") if l.rstrip().endswith("[heap]")]
bounds = [tuple(int(x, 16) for x in h.split("-")) for h in heap]
print(any(lo <= t.data_ptr() < hi for lo, hi in bounds))
"""


def large_block_in_heap(setup: str) -> bool:
    done = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup)], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1] == "True"


@GLIBC_ONLY
def test_keep_freed_memory_serves_large_blocks_from_the_heap() -> None:
    assert not large_block_in_heap("")
    assert large_block_in_heap("from aiayn.cpu import keep_freed_memory; assert keep_freed_memory()")
