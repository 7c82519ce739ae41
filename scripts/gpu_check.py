"""GPU check for issue 6: train the base Transformer (Table 3, row "base"; section 5) for a fixed number of
updates in bf16 on synthetic token batches and print step time, tokens/s and model FLOPs utilisation (MFU)
against this GPU's bf16 matmul rate, measured here with a large matmul.

    python scripts/gpu_check.py                                   # one GPU, DDP-free
    python scripts/gpu_check.py --compile                         # torch.compile the model
    torchrun --nproc_per_node=8 scripts/gpu_check.py [--fsdp]     # DDP (or FSDP2) over 8 GPUs

Model FLOPs per update count every matmul of the forward pass (projections, attention scores and weighted
sums over the padded lengths, FFN, output projection) as 2 x multiply-adds, times 3 for forward + backward.
It exits with status 2 and a message on a machine without CUDA; it never reports CPU figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from aiayn.config import ModelConfig, TrainConfig, preset
from aiayn.model import Transformer
from aiayn.training.distributed import init_distributed, no_sync, shard_model, shutdown, wrap_model
from aiayn.training.loss import label_smoothed_nll_loss
from aiayn.training.schedule import adam


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="base", help="model preset: base (default) or big")
    p.add_argument("--vocab", type=int, default=37000, help="shared BPE vocabulary (the paper's En-De: 37000)")
    p.add_argument("--max-tokens", type=int, default=12288, help="tokens per side per GPU micro-batch")
    p.add_argument("--length", type=int, default=32, help="source = target length of every synthetic pair")
    p.add_argument("--updates", type=int, default=30, help="timed updates")
    p.add_argument("--warmup", type=int, default=10, help="untimed updates first (allocator, compile, cuDNN)")
    p.add_argument("--update-freq", type=int, default=1, help="micro-batches per update")
    p.add_argument("--fsdp", action="store_true", help="FSDP2 instead of DDP (needs a process group)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--matmul-size", type=int, default=8192, help="n of the n x n x n bf16 matmul for the peak")
    return p.parse_args()


def matmul_rate(n: int, device: torch.device, repeats: int = 20) -> float:
    """Measured bf16 FLOP/s of an n x n @ n x n matmul (2 n^3 FLOPs each)."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    start.record()
    for _ in range(repeats):
        a @ b
    end.record()
    torch.cuda.synchronize(device)
    return 2 * n**3 * repeats / (start.elapsed_time(end) / 1e3)


def train_flops(c: ModelConfig, batch: int, src_len: int, tgt_len: int) -> float:
    """Forward + backward FLOPs of one micro-batch (3 x 2 x multiply-adds of the forward pass)."""
    d, ff, hk, hv, V = c.d_model, c.d_ff, c.h * c.d_k, c.h * c.d_v, c.tgt_vocab_size
    S, T = batch * src_len, batch * tgt_len  # padded token positions

    def attention(q: int, kv: int, kv_len: int) -> int:  # projections Q, K, V, O; then QK^T and the weighted sum
        return q * d * hk + kv * d * (hk + hv) + q * hv * d + q * kv_len * (hk + hv)

    encoder = c.N * (attention(S, S, src_len) + 2 * S * d * ff)
    # decoder self-attention is causal but computed over the full T x T scores, as counted here
    decoder = c.decoder_layers * (attention(T, T, tgt_len) + attention(T, S, src_len) + 2 * T * d * ff)
    return 3 * 2 * (encoder + decoder + T * d * V)


def main() -> int:
    args = parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: CUDA is not available on this machine (torch "
              f"{torch.__version__}, cuda build: {torch.version.cuda}); nothing measured", file=sys.stderr)  # fmt: skip
        return 2
    if args.fsdp and "WORLD_SIZE" not in os.environ:  # a process group of one, so that FSDP2 has a mesh
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
        torch.distributed.init_process_group("nccl")
    ctx = init_distributed("cuda")
    device = ctx.device
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        peak = matmul_rate(args.matmul_size, device)
        V = args.vocab
        config = preset(args.preset, src_vocab_size=V, tgt_vocab_size=V)
        torch.manual_seed(1)
        model = Transformer(config).to(device)
        net = shard_model(model) if args.fsdp else wrap_model(model, ctx)
        optimizer = adam(net, TrainConfig())
        if args.compile:
            net = torch.compile(net)
        B, L = max(1, args.max_tokens // args.length), args.length
        generator = torch.Generator(device=device).manual_seed(ctx.rank)
        src = torch.randint(4, V, (B, L), device=device, generator=generator)
        tgt = torch.randint(4, V, (B, L + 1), device=device, generator=generator)
        tokens = B * L  # per micro-batch and side, no padding
        times = []
        for update in range(args.warmup + args.updates):
            torch.cuda.synchronize(device)
            start = time.perf_counter()
            for i in range(args.update_freq):
                with no_sync(net, skip_sync=i < args.update_freq - 1), torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = net(src, tgt[:, :-1])
                    loss, _ = label_smoothed_nll_loss(logits, tgt[:, 1:], config.eps_ls, config.pad_id)
                    (loss / (tokens * args.update_freq)).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.synchronize(device)
            if update >= args.warmup:
                times.append(time.perf_counter() - start)
        step = statistics.median(times)
        flops = train_flops(config, B, L, L) * args.update_freq
        per_gpu_tokens = tokens * args.update_freq / step
        if ctx.is_main:
            mode = ("FSDP2" if args.fsdp else "DDP" if ctx.distributed else "single GPU") + " + compile" * args.compile
            print(f"device: {torch.cuda.get_device_name(device)} x {ctx.world_size}; torch {torch.__version__}; {mode}")
            print(f"model: {args.preset}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
                  f"vocab {V}; micro-batch {B} x {L} tokens per side, update_freq {args.update_freq}")  # fmt: skip
            print(f"measured bf16 matmul ({args.matmul_size}^3): {peak / 1e12:.1f} TFLOP/s per GPU")
            print(f"step time: median {step * 1e3:.1f} ms, min {min(times) * 1e3:.1f} ms over {len(times)} updates")
            total_tokens = per_gpu_tokens * ctx.world_size
            print(f"tokens/s (target side): {per_gpu_tokens:,.0f} per GPU, {total_tokens:,.0f} total")
            print(f"model FLOPs: {flops / 1e12:.2f} TFLOP per update per GPU, {flops / step / 1e12:.1f} TFLOP/s")
            print(f"MFU vs measured bf16 matmul rate: {flops / step / peak:.1%}")
            print(f"peak memory: {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB; final loss/token "
                  f"{loss.item() / tokens:.3f}")  # fmt: skip
        return 0
    finally:
        shutdown(ctx)
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
