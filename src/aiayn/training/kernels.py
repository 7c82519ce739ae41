"""Which arithmetic a training run uses: the autocast precision (train.precision) and the kernel for float32
linear layers on CPU (train.linear_kernel)."""

from __future__ import annotations

import torch

from aiayn.training.onednn import onednn_available


def resolve_precision(name: str, device: torch.device) -> torch.dtype:
    """auto: bf16 on a GPU that supports it, else fp32; fp16 (with a gradient scaler) needs CUDA."""
    if name == "auto":
        name = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if name == "fp16" and device.type != "cuda":
        raise ValueError("train.precision=fp16 needs a CUDA device; use bf16 or fp32")
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def resolve_linear_kernel(name: str, device: torch.device, dtype: torch.dtype, fsdp: bool) -> bool:
    """Whether float32 linear layers run on oneDNN (`aiayn.training.onednn`): auto = on CPU in float32 without
    FSDP when this torch build has it; onednn insists (an error where it cannot apply); torch = never."""
    if name == "torch":
        return False
    applicable = device.type == "cpu" and dtype == torch.float32 and not fsdp and onednn_available()
    if name == "onednn" and not applicable:
        raise ValueError("train.linear_kernel=onednn needs float32 CPU training without FSDP, and a torch with oneDNN")
    return applicable


__all__ = ["resolve_linear_kernel", "resolve_precision"]
