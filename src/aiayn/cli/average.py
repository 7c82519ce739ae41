"""`aiayn average --run DIR --last 5 --out DIR`: average the last N checkpoints of a run into one model
directory, as section 6.1 did (last 5 for the base model, 20 for big)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "average the weights of a run's last N checkpoints into a model directory (section 6.1)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, type=Path, help="run directory (train.out_dir) with checkpoint-*/")
    parser.add_argument("--last", type=int, default=5, help="how many of the newest checkpoints (default: 5)")
    parser.add_argument("--out", required=True, type=Path, help="model directory to write (atomically)")
    parser.add_argument(
        "--force", action="store_true", help="replace --out if it is a model directory written by average"
    )


def check_average_output(out: Path, run_dir: Path, inputs: list[Path]) -> None:
    """`--force` replaces only a model directory that `average` wrote: never a run directory, one of its
    checkpoints (which resume or `checkpoint-best` users rely on), an input, or anything else."""
    from aiayn.io import check_replaceable
    from aiayn.model.pretrained import CONFIG_FILE, FORMAT

    check_replaceable(out, CONFIG_FILE, FORMAT, [*inputs, run_dir], what=f"--out {out}")
    if (out / "training_state.pt").exists():
        raise FileExistsError(f"--out {out} is a resumable checkpoint; --force will not delete it")
    document = json.loads((out / CONFIG_FILE).read_text(encoding="utf-8"))
    info = document.get("checkpoint")
    if not isinstance(info, dict) or "averaged_from" not in info:
        raise FileExistsError(f"--out {out} is a model directory average did not write; --force will not delete it")


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
    chosen = checkpoints[-args.last :]
    if args.out.exists() or args.out.is_symlink():
        if not args.force:
            raise FileExistsError(f"{args.out} already exists; pass --force to replace it")
        check_average_output(args.out, args.run, chosen)
    write_average(chosen, args.out)
    print(f"averaged {', '.join(p.name for p in chosen)} -> {args.out}")
    return 0
