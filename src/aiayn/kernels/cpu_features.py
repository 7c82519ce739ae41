"""What the CPU offers for matrix products: the feature flags the fast-path choices depend on.

Read from /proc/cpuinfo (Linux); `AIAYN_CPU_FLAGS` (space-separated flags) replaces the probe, so a test or a
user can see what `auto` would pick on another kind of CPU.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import cache

# Flags (as Linux names them) that matter here.
BF16_MATMUL = ("amx_bf16", "avx512_bf16")  # native bf16 matrix arithmetic (AMX tiles, AVX-512 BF16)
INT8_MATMUL = ("amx_int8", "avx512_vnni", "avx_vnni")  # int8 dot products (fbgemm / oneDNN use them)


@dataclass(frozen=True)
class CpuFeatures:
    model: str
    flags: frozenset[str]

    @property
    def native_bf16(self) -> bool:
        return any(f in self.flags for f in BF16_MATMUL)

    @property
    def fast_int8(self) -> bool:
        return any(f in self.flags for f in INT8_MATMUL)

    def describe(self) -> str:
        shown = [f for f in ("avx2", "avx512f", *BF16_MATMUL, *INT8_MATMUL) if f in self.flags]
        return f"{self.model} [{' '.join(shown) or 'no AVX2'}]"


def _cpuinfo() -> tuple[str, frozenset[str]]:
    model, flags = platform.processor() or "unknown CPU", frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model in ("unknown CPU", platform.processor()):
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = frozenset(value.split())
    except OSError:
        pass
    return model, flags


@cache
def _probe() -> tuple[str, frozenset[str]]:
    return _cpuinfo()


def cpu_features() -> CpuFeatures:
    """This machine's CPU, or the flags in $AIAYN_CPU_FLAGS when set."""
    model, flags = _probe()
    forced = os.environ.get("AIAYN_CPU_FLAGS")
    if forced is not None:
        return CpuFeatures(f"{model} (flags from AIAYN_CPU_FLAGS)", frozenset(forced.split()))
    return CpuFeatures(model, flags)


__all__ = ["BF16_MATMUL", "INT8_MATMUL", "CpuFeatures", "cpu_features"]
