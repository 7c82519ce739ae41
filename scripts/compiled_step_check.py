"""Does `torch.compile` pay for the decoder step on this CPU? Milliseconds per `Transformer.step` (one new token
per row, KV cache of 40 positions) for R rows: the eager model as `prepare_for_inference` prepares it (oneDNN
packed linears where they pay), the eager model with plain F.linear, and `torch.compile(model.step,
dynamic=True)` over the plain model (inductor; one compile for every row count and cache length).

    python scripts/compiled_step_check.py --model runs/demo/checkpoint-best
"""

from __future__ import annotations

import argparse
import time

import torch

from aiayn.kernels import cpu_features, prepare_for_inference
from aiayn.model import Transformer


def ms_per_step(model: Transformer, step, rows: int, steps: int = 40) -> float:
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(5, model.config.src_vocab_size, (max(rows // 4, 1), 20), generator=generator)
    with torch.inference_mode():
        memory = model.encode(src)
        cache = model.init_cache(memory, capacity=steps + 2, group=rows // src.size(0))
        tokens = torch.full((rows,), model.config.decoder_start_id)
        start = time.perf_counter()
        for _ in range(steps):
            step(tokens, cache)
        return (time.perf_counter() - start) / steps * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--rows", default="1,4,32")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [int(r) for r in args.rows.split(",")]
    print(f"cpu: {cpu_features().describe()}, torch {torch.__version__}, {args.threads} threads")
    prepared, runtime = prepare_for_inference(Transformer.from_pretrained(args.model))
    plain = Transformer.from_pretrained(args.model).eval()
    plain.set_attention(runtime.decoder_attention, "decoder")
    start = time.perf_counter()
    compiled = torch.compile(plain.step, dynamic=True)
    for r in rows:
        ms_per_step(plain, compiled, r)
    print(f"compile (first calls at {args.rows} rows): {time.perf_counter() - start:.1f} s")
    for r in rows:
        for _ in range(2):
            ms_per_step(prepared, prepared.step, r)
        eager = min(ms_per_step(prepared, prepared.step, r) for _ in range(3))
        plain_ms = min(ms_per_step(plain, plain.step, r) for _ in range(3))
        fused = min(ms_per_step(plain, compiled, r) for _ in range(3))
        print(f"R={r} eager-prepared {eager:.2f} ms/step  eager-plain {plain_ms:.2f}  compiled {fused:.2f}  "
              f"ratio {eager / fused:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
