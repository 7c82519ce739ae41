"""`aiayn bench NAME [OPTIONS]`: benchmarks (section 4's Table 1, decoding and training throughput).

Each benchmark is a module `aiayn.benchmarks.<NAME>` exposing `add_arguments(parser)` and `run(args) -> int`.
Modules are imported only when their benchmark runs; `aiayn bench NAME --help` lists its options.
"""

from __future__ import annotations

import argparse
import importlib

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


def run(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"aiayn.benchmarks.{args.benchmark}")
    parser = argparse.ArgumentParser(prog=f"aiayn bench {args.benchmark}", description=BENCHMARKS[args.benchmark])
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(args.options)) or 0)
