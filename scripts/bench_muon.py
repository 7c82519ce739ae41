"""One optimizer update of the recipe's model (configs/multi30k-wu-tok-b2k.yaml: 4+4 layers, d_model 128, d_ff 256,
8k vocabulary) on CPU, in one run: Adam over every parameter (section 5.3, the recipe), and Muon for the 64 layer
matrices + Adam for the rest as `torch.optim.Muon` computes it (Newton-Schulz products in bf16, one matrix at a
time) and as `aiayn.training.muon.Muon` does (stacked per shape, in float32 and in bf16).

    python scripts/bench_muon.py [--rounds 5] [--calls 5]

Prints the machine, then per optimizer the median over rounds (which alternate the optimizers) of the best of
`--calls` updates, in ms, and the ratio to Adam. Figures: docs/benchmarks/training.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from aiayn.benchmarks.timing import machine
from aiayn.config import TrainConfig, preset
from aiayn.model import Transformer
from aiayn.training.muon import MuonAdam, muon_parameters
from aiayn.training.schedule import adam_over, optimizer_for


def build() -> dict[str, Callable[[], None]]:
    torch.manual_seed(0)
    model = Transformer(preset("tiny", d_ff=256, src_vocab_size=8000, tgt_vocab_size=8000))
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter) * 1e-3
    config = TrainConfig(optimizer="muon")
    matrices, rest = muon_parameters(model)
    optimizers = {
        "adam (all parameters)": optimizer_for(model, TrainConfig()),
        "torch.optim.Muon (bf16) + adam": MuonAdam(
            torch.optim.Muon(matrices, weight_decay=0.0, adjust_lr_fn="match_rms_adamw"), adam_over(rest, config)
        ),
        "aiayn Muon, stacked, bf16 + adam": optimizer_for(model, config, torch.bfloat16),
        "aiayn Muon, stacked, float32 + adam": optimizer_for(model, config, torch.float32),
    }
    for optimizer in optimizers.values():
        for group in optimizer.param_groups:
            group["lr"] = 1e-6  # the weights barely move; the arithmetic is the same at any rate
    return {name: optimizer.step for name, optimizer in optimizers.items()}


def best_of(step: Callable[[], None], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default: 5)")
    parser.add_argument("--calls", type=int, default=5, help="updates per optimizer per round; best kept (default: 5)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be at least 1")
    torch.set_num_threads(args.threads)
    print(machine())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32 weights and gradients")
    steps = build()
    for step in steps.values():
        step()  # first call: state allocation
    seen: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            seen[name].append(best_of(step, args.calls))
    adam = statistics.median(seen["adam (all parameters)"])
    for name, times in seen.items():
        ms = statistics.median(times)
        print(f"{name:40s} {ms:9.2f} ms per update   {ms / adam:6.2f}x adam's")


if __name__ == "__main__":
    main()
