"""`aiayn average --run DIR --last 5 --out DIR`: average the last N checkpoints of a run into one model
directory, as section 6.1 did (last 5 for the base model, 20 for big)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "average the weights of a run's last N checkpoints into a model directory (section 6.1)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, type=Path, help="run directory (train.out_dir) with checkpoint-*/")
    parser.add_argument("--last", type=int, default=5, help="how many of the newest checkpoints (default: 5)")
    parser.add_argument("--out", required=True, type=Path, help="model directory to write (atomically)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def run(args: argparse.Namespace) -> int:
    from aiayn.training.checkpoint import list_checkpoints, write_average

    if args.last < 1:
        raise ValueError(f"--last must be >= 1, got {args.last}")
    checkpoints = list_checkpoints(args.run)
    if not checkpoints:
        raise FileNotFoundError(f"{args.run}: no checkpoint-NNNNNNN directories to average")
    if len(checkpoints) < args.last:
        raise ValueError(
            f"{args.run} holds {len(checkpoints)} checkpoint(s), fewer than --last {args.last} "
            "(train.keep_last limits how many a run keeps)"
        )
    if args.out.exists() and not args.force:
        raise FileExistsError(f"{args.out} already exists; pass --force to replace it")
    chosen = checkpoints[-args.last :]
    write_average(chosen, args.out)
    print(f"averaged {', '.join(p.name for p in chosen)} -> {args.out}")
    return 0
