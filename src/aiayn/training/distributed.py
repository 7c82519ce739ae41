"""Data-parallel set-up for `torchrun` (section 5.2: the paper trained on 8 GPUs), on PyTorch's own engine.

    torchrun --nproc_per_node=8 -m aiayn train CONFIG.yaml

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK; `init_distributed` then joins the process group with `nccl`
on CUDA or `gloo` on CPU. Each rank trains on its own deterministic shard of every epoch's batches
(`aiayn.data.TokenBudgetBatches.shard`), DistributedDataParallel averages the gradients, and the all-reduce is
skipped on non-final accumulation micro-steps (`no_sync`). Rank 0 alone writes checkpoints, logs and progress.
With `train.fsdp`, FSDP2 (`torch.distributed.fsdp.fully_shard`) shards parameters, gradients and Adam state
instead (`shard_model`); checkpoints gather the full weights and optimizer state (`full_model_state`,
`full_optimizer_state`) and keep the single-process formats.
Without those variables (WORLD_SIZE unset or 1) nothing here touches `torch.distributed`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class DistContext:
    """This process's place in the job; the defaults are a single process."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def pick_device(name: str = "auto", local_rank: int = 0) -> torch.device:
    """Device "cpu", "cuda", "cuda:N", or "auto": this rank's GPU when CUDA is available, else the CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"train.device={name} but CUDA is not available")
        if device.index is None:
            device = torch.device("cuda", local_rank)
    return device


def init_distributed(device: str = "auto") -> DistContext:
    """Read torchrun's environment and join the process group when WORLD_SIZE > 1."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    chosen = pick_device(device, local_rank)
    if world_size <= 1:
        return DistContext(device=chosen)
    import torch.distributed as dist

    if chosen.type == "cuda":
        torch.cuda.set_device(chosen)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if chosen.type == "cuda" else "gloo")
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=chosen)


def wrap_model(model: nn.Module, ctx: DistContext) -> nn.Module:
    """DistributedDataParallel around `model` when distributed, else the model itself."""
    if not ctx.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def shard_model(model: nn.Module) -> nn.Module:
    """FSDP2 in place: every element of every nn.ModuleList (the encoder and decoder layers) is one unit, the
    rest (embeddings, shared with the output projection, 3.4) the root's. Gradients are averaged over ranks."""
    from torch.distributed.fsdp import fully_shard

    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
    for module_list in reversed(lists):  # innermost first: fully_shard goes bottom-up
        for layer in module_list:
            fully_shard(layer)
    fully_shard(model)
    return model


def _state_options(rank0_only: bool) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=rank0_only)


def full_model_state(model: nn.Module, rank0_only: bool = False) -> dict[str, torch.Tensor]:
    """The full (unsharded) state dict of an FSDP model; a collective. rank0_only: on the CPU of rank 0 only,
    the other ranks get {}."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model, options=_state_options(rank0_only))


def load_full_model_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Scatter a full state dict (the same on every rank) into an FSDP model's shards; a collective. Each tied
    tensor is given once, under its first name (`named_parameters`), as FSDP holds it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    names = [name for name, _ in model.named_parameters()]
    missing = [name for name in names if name not in state]
    names += [name for name, _ in model.named_buffers() if name in state]  # persistent ones
    if missing:
        raise KeyError(f"full state dict lacks {', '.join(missing)}")
    options = StateDictOptions(full_state_dict=True, strict=False)  # strict would demand the tied aliases too
    set_model_state_dict(model, {name: state[name] for name in names}, options=options)


def full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer state of an FSDP model, unsharded and keyed by parameter name, on rank 0's CPU ({} on the
    other ranks); a collective."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer, options=_state_options(True))


def load_full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Shard a `full_optimizer_state` (the same on every rank) into `optimizer`; a collective."""
    from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

    set_optimizer_state_dict(model, optimizer, state, options=_state_options(False))


@contextlib.contextmanager
def no_sync(model: nn.Module, skip_sync: bool) -> Iterator[None]:
    """Skip the gradient all-reduce (DDP) or reduce-scatter (FSDP2) for this backward (non-final micro-steps
    of an accumulated update)."""
    inner = getattr(model, "_orig_mod", model)
    if skip_sync and hasattr(inner, "no_sync"):
        with inner.no_sync():
            yield
    elif skip_sync and hasattr(inner, "set_requires_gradient_sync"):
        inner.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            inner.set_requires_gradient_sync(True)
    else:
        yield


def all_reduce_sum(values: list[float], ctx: DistContext) -> list[float]:
    """Sum a few numbers over all ranks (float64 on the communication device)."""
    if not ctx.distributed:
        return list(values)
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def all_gather_object(obj: Any, ctx: DistContext) -> list[Any]:
    """Every rank's `obj`, in rank order (e.g. per-rank RNG states for a checkpoint)."""
    if not ctx.distributed:
        return [obj]
    import torch.distributed as dist

    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def barrier(ctx: DistContext) -> None:
    if ctx.distributed:
        import torch.distributed as dist

        dist.barrier()


def shutdown(ctx: DistContext) -> None:
    if ctx.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


__all__ = [
    "DistContext",
    "all_gather_object",
    "all_reduce_sum",
    "barrier",
    "full_model_state",
    "full_optimizer_state",
    "init_distributed",
    "load_full_model_state",
    "load_full_optimizer_state",
    "no_sync",
    "pick_device",
    "shard_model",
    "shutdown",
    "wrap_model",
]
