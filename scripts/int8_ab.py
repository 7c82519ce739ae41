"""float32 against int8 decoding in one process: the evidence behind `auto`'s int8 rule (INT8_MIN_D_MODEL).

    python scripts/int8_ab.py --sizes tiny,small,base

For each preset (random weights, 8k vocabulary), 64 random sources of 16 tokens, output forced to 40 tokens,
greedy and beam 4: output tokens/s of float32 (oneDNN-packed, as `prepare_for_inference` runs it), int8 with one
scale per input row (`aiayn.kernels.int8`, what precision int8 is) and int8 with one input scale per batch
(torch.ao dynamic quantization of the same layers, what it was before). Interleaved rounds, best of --rounds.
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings

import torch

from aiayn.benchmarks.decoding import forced_length
from aiayn.config import preset
from aiayn.decoding import generate
from aiayn.kernels import cpu_features, prepare_for_inference
from aiayn.kernels.int8 import int8_layer_names
from aiayn.kernels.select import remove_dropout
from aiayn.model import Transformer


def per_batch_int8(model: Transformer) -> torch.nn.Module:
    import torch.ao.quantization as tq

    spec = dict.fromkeys(int8_layer_names(model), tq.per_channel_dynamic_qconfig)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = tq.quantize_dynamic(copy.deepcopy(model).eval(), spec, dtype=torch.qint8)
    remove_dropout(quantized)
    return quantized


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="tiny,small,base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_features().describe()}, torch {torch.__version__}, {args.threads} threads")
    sentences, length = 64, 40
    for size in args.sizes.split(","):
        torch.manual_seed(0)
        model = Transformer(preset(size, src_vocab_size=8000, tgt_vocab_size=8000, P_drop=0.0)).eval()
        systems = {
            "float32": prepare_for_inference(copy.deepcopy(model), precision="float32")[0],
            "int8, per-row input scales": prepare_for_inference(copy.deepcopy(model), precision="int8")[0],
            "int8, per-batch input scale": per_batch_int8(model),
        }
        src = torch.randint(4, 8000, (sentences, 16), generator=torch.Generator().manual_seed(1))
        src[:, -1] = model.config.eos_id
        best: dict[tuple[int, str], float] = {}
        for round_ in range(args.rounds):
            for beam in (1, 4):
                for name, system in systems.items():
                    if round_ == 0:
                        generate(system, src, forced_length(beam, length))  # warm-up
                    start = time.perf_counter()
                    generate(system, src, forced_length(beam, length))
                    seconds = time.perf_counter() - start
                    best[(beam, name)] = min(best.get((beam, name), float("inf")), seconds)
        for beam in (1, 4):
            reference = sentences * length / best[(beam, "float32")]
            for name in systems:
                rate = sentences * length / best[(beam, name)]
                search = "greedy" if beam == 1 else f"beam {beam}"
                print(f"{size} (d_model {model.config.d_model}) {search}: {name}: {rate:,.0f} tok/s, "
                      f"{rate / reference:.2f}x float32")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
