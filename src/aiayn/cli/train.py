"""`aiayn train CONFIG.yaml [--set section.field=value ...]`: train a model (section 5) as the config says.

A run directory (`train.out_dir`) that already holds a checkpoint is resumed from its last one, exactly:
same batches, same dropout masks, same losses. Under `torchrun --nproc_per_node=N -m aiayn train ...` the
same command trains data-parallel on N processes.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

HELP = "train a translation model from a YAML config (resumes the run directory's last checkpoint)"

EXAMPLE = """examples:
  aiayn train configs/multi30k-tiny.yaml
  aiayn train configs/multi30k-tiny.yaml --set train.max_updates=100 --set train.out_dir=runs/quick
  torchrun --nproc_per_node=8 -m aiayn train configs/wmt14-en-de-base.yaml
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXAMPLE
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("config", type=Path, help="YAML run config with sections model, data, train, decode")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override one config field, e.g. --set train.max_updates=3 (repeatable)",
    )
    parser.add_argument(
        "--no-resume", action="store_true", help="fail instead of resuming when train.out_dir has checkpoints"
    )
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")


def run(args: argparse.Namespace) -> int:
    from aiayn.config import dump_run_config, load_run_config

    config = load_run_config(args.config, args.set)
    if args.print_config:
        print(dump_run_config(config), end="")
        return 0
    from aiayn.training.run import train

    state = train(config, resume=not args.no_resume)
    if int(os.environ.get("RANK", "0")) == 0:  # under torchrun, rank 0 speaks
        print(f"trained {state.step} updates ({state.epoch - 1} full epochs); run directory {config.train.out_dir}")
    return 0
