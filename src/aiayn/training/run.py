"""A training run from a `RunConfig` (what `aiayn train` and `aiayn demo` call): prepare the data if needed,
build the model, resume from the run directory's last checkpoint if there is one, and train (section 5)."""

from __future__ import annotations

import gc
import random
import sys
from pathlib import Path

import numpy as np
import torch

from aiayn.config import RunConfig, build_run_config, dump_run_config
from aiayn.cpu import keep_freed_memory
from aiayn.data import ParallelDataset, prepare, resolve_data_dir
from aiayn.io import atomic_write_text, recover_swap
from aiayn.model import Transformer
from aiayn.model.pretrained import read_config
from aiayn.training.checkpoint import clean_temporaries, latest_checkpoint
from aiayn.training.distributed import DistContext, barrier, init_distributed, shutdown
from aiayn.training.trainer import Trainer, TrainState

RUN_CONFIG_FILE = "config.yaml"


def ensure_data(run: RunConfig, ctx: DistContext) -> Path:
    """The binarized directory `data.dir`, prepared first (by rank 0) when missing and raw prefixes are given."""
    d = run.data
    data_dir = Path(d.dir)
    if ctx.is_main:
        recover_swap(data_dir)  # a prepare killed while replacing it left the old copy aside: put it back
    barrier(ctx)
    if not data_dir.exists():
        if not (d.train_prefix and d.valid_prefix):
            raise FileNotFoundError(
                f"data.dir {data_dir} does not exist; run `aiayn prepare --out {data_dir} ...` first or set "
                "data.train_prefix and data.valid_prefix so that `aiayn train` prepares it"
            )
        if ctx.is_main:
            raw = resolve_data_dir(d.raw_dir)
            prepare(
                d.src_lang, d.tgt_lang, raw / d.train_prefix, raw / d.valid_prefix, data_dir, d.vocab_size,
                test=[raw / prefix for prefix in d.test_prefixes], max_len=d.max_len, filter_train=True,
                progress=run.train.progress,
            )  # fmt: skip
        barrier(ctx)
    return data_dir


def _check_same_model(checkpoint: Path, config: RunConfig) -> None:
    saved, _ = read_config(checkpoint)
    differ = [k for k, v in saved.to_dict().items() if config.model.to_dict()[k] != v]
    if differ:
        fields = ", ".join(f"model.{k}: {getattr(saved, k)!r} -> {getattr(config.model, k)!r}" for k in differ)
        raise ValueError(f"{checkpoint} was trained with a different model ({fields}); use another train.out_dir")


def _resumed_precision(checkpoint: Path | None) -> torch.dtype | None:
    """The autocast dtype the run being resumed trained in (recorded in each checkpoint's config.json; float32
    for checkpoints from before the record, which train.precision=fastest did not exist for)."""
    if checkpoint is None:
        return None
    info = read_config(checkpoint)[1].get("checkpoint")
    name = info.get("precision", "float32") if isinstance(info, dict) else "float32"
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(name)


def train(run: RunConfig, resume: bool = True) -> TrainState:
    """Train per `run`; continue from the last checkpoint in `train.out_dir` when there is one (`resume`)."""
    ctx = init_distributed(run.train.device)
    try:
        if run.train.threads:
            torch.set_num_threads(run.train.threads)
        if run.train.reuse_memory and ctx.device.type == "cpu":
            keep_freed_memory()
        data_dir = ensure_data(run, ctx)
        train_set = ParallelDataset(data_dir, run.data.train_split)
        valid_set = ParallelDataset(data_dir, run.data.valid_split)
        vocab = train_set.vocab_size
        run = build_run_config(run.to_dict())  # a copy, then the vocabulary the data fixes:
        run = RunConfig(run.model.with_overrides(src_vocab_size=vocab, tgt_vocab_size=vocab), run.data, run.train,
                        run.decode)  # fmt: skip
        out_dir = Path(run.train.out_dir)
        if ctx.is_main and out_dir.is_dir():
            clean_temporaries(out_dir)  # first: a swap killed midway puts its checkpoint back before we look
        barrier(ctx)
        checkpoint = latest_checkpoint(out_dir)
        if checkpoint is not None and not resume:
            raise FileExistsError(f"{out_dir} already has checkpoints ({checkpoint.name}); choose another out_dir")
        if checkpoint is not None:
            _check_same_model(checkpoint, run)

        seed = run.train.seed
        torch.manual_seed(seed)  # the same initial weights on every rank
        model = Transformer(run.model)
        torch.manual_seed(seed + 10_000 * (ctx.rank + 1))  # dropout: a different stream per rank
        random.seed(seed + ctx.rank)
        np.random.seed(seed + ctx.rank)
        trainer = Trainer(model, run, train_set, valid_set, ctx, precision=_resumed_precision(checkpoint))
        if checkpoint is not None:
            trainer.restore(checkpoint)  # first: a resume it refuses leaves the run's config.yaml as it was
            if ctx.is_main:
                print(f"resumed from {checkpoint} (update {trainer.state.step})", file=sys.stderr)
        if ctx.is_main:
            out_dir.mkdir(parents=True, exist_ok=True)
            clean_temporaries(out_dir)
            atomic_write_text(out_dir / RUN_CONFIG_FILE, dump_run_config(run))
            (out_dir / RUN_CONFIG_FILE).chmod(0o644)
        barrier(ctx)
        return trainer.fit()
    finally:
        # Free the model, DDP/FSDP state and any collective handles they hold while the interpreter is fully
        # alive, then leave the process group: gloo work objects destroyed later, during interpreter shutdown,
        # can abort the process (seen once: SIGABRT on one rank after an FSDP run had finished).
        trainer = model = None  # noqa: F841
        gc.collect()
        shutdown(ctx)


__all__ = ["RUN_CONFIG_FILE", "ensure_data", "train"]
