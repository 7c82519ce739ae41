"""The `aiayn` command. Each subcommand lives in `aiayn/cli/<name>.py` and defines

    HELP: str                                   one line for `aiayn --help`
    add_arguments(parser: argparse.ArgumentParser) -> None
    run(args: argparse.Namespace) -> int        the exit status

Subcommand modules are imported lazily, so `aiayn info` does not pay for matplotlib or sacrebleu.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS = ("info", "prepare", "train", "average", "demo", "translate", "evaluate", "visualize", "bench", "serve")


def _available() -> dict[str, object]:
    modules = {}
    for name in COMMANDS:
        try:
            modules[name] = importlib.import_module(f"aiayn.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"aiayn.cli.{name}":
                raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiayn", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in _available().items():
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)  # type: ignore[attr-defined]
        module.add_arguments(sub)  # type: ignore[attr-defined]
        sub.set_defaults(_run=module.run)  # type: ignore[attr-defined]
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError) as error:
        # User-facing errors (bad files, bad configs, corrupt checkpoints) end with one clear line.
        if os.environ.get("AIAYN_DEBUG"):
            raise
        print(f"aiayn {args.command}: error: {error}", file=sys.stderr)
        return 1
