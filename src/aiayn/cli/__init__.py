"""The `aiayn` command. Each subcommand lives in `aiayn/cli/<name>.py` and defines

    HELP: str                                   one line for `aiayn --help`
    add_arguments(parser: argparse.ArgumentParser) -> None
    run(args: argparse.Namespace) -> int        the exit status

Subcommands import their heavy dependencies inside `run`, so `aiayn info` does not pay for matplotlib or sacrebleu.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS = ("info", "prepare", "train", "average", "demo", "translate", "evaluate", "visualize", "bench", "serve",
            "import", "export", "ablate")
MODULES = {"import": "import_"}  # a subcommand whose name is a Python keyword lives in <name>_.py


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiayn", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also: AIAYN_DEBUG=1)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"aiayn.cli.{MODULES.get(name, name)}")
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)  # type: ignore[attr-defined]
        module.add_arguments(sub)  # type: ignore[attr-defined]
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
        sub.set_defaults(_run=module.run)  # type: ignore[attr-defined]
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError, MemoryError) as error:
        # User-facing errors (bad files, bad configs, corrupt checkpoints) end with one clear line.
        if args.debug or os.environ.get("AIAYN_DEBUG"):
            raise
        text = " ".join(str(error).split("\n")) or type(error).__name__
        if isinstance(error, MemoryError):
            text = f"out of memory{': ' + text if str(error) else ''}; try a smaller --beam, --max-tokens or model"
        print(f"aiayn {args.command}: error: {text}", file=sys.stderr)
        return 1
