"""`aiayn bench NAME [OPTIONS]`: benchmarks (section 4's Table 1, decoding and training throughput).

Each benchmark is a module `aiayn.benchmarks.<NAME>` exposing `add_arguments(parser)` and `run(args) -> int`.
Modules are imported only when their benchmark runs, so a missing one makes only that benchmark unavailable;
`aiayn bench NAME --help` lists its options.
"""

from __future__ import annotations

import argparse
import importlib
import sys

HELP = "run a benchmark: complexity (Table 1 measured), decoding or training throughput"
BENCHMARKS = {
    "complexity": "Table 1 measured: attention vs LSTM vs convolution time over n, and the decoder KV cache",
    "decoding": "translation throughput and latency",
    "training": "training throughput",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "benchmarks:\n" + "\n".join(f"  {name:<12}{text}" for name, text in BENCHMARKS.items())
    parser.epilog += "\n\n`aiayn bench NAME --help` lists a benchmark's options."
    parser.add_argument("benchmark", choices=sorted(BENCHMARKS), metavar="NAME", help="which benchmark")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's own options")


def load(name: str):
    """The benchmark module, or None when it is not installed (only that benchmark is then unavailable)."""
    try:
        return importlib.import_module(f"aiayn.benchmarks.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"aiayn.benchmarks.{name}":
            raise
        return None


def run(args: argparse.Namespace) -> int:
    module = load(args.benchmark)
    if module is None:
        print(
            f"aiayn bench {args.benchmark}: not available (no module aiayn.benchmarks.{args.benchmark})",
            file=sys.stderr,
        )
        return 2
    parser = argparse.ArgumentParser(prog=f"aiayn bench {args.benchmark}", description=BENCHMARKS[args.benchmark])
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(args.options)) or 0)
