"""`aiayn info`: parameter count, count without embeddings, and forward FLOPs per token of a configuration."""

from __future__ import annotations

import argparse
import json

import torch

from aiayn.config import PRESETS, preset
from aiayn.config_loading import parse_assignments
from aiayn.model import Transformer
from aiayn.model.pretrained import read_config

HELP = "Describe a model: parameters (with and without embeddings) and forward FLOPs per token."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", choices=sorted(PRESETS), default="base")
    source.add_argument("--model", help="a model directory (config.json + model.safetensors)")
    parser.add_argument("--vocab-size", type=int, default=37000, help="shared vocabulary size (with --preset)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="override a field")
    parser.add_argument("--seq-len", type=int, default=32, help="sentence length assumed for attention FLOPs")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--runtime", action="store_true", help="also the CPU's features and the fast paths `auto` picks on it"
    )


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """`--set FIELD=VALUE` (or model.FIELD=VALUE) as text that `with_overrides` parses to each field's type."""
    return {key.removeprefix("model."): value for key, value in parse_assignments(pairs).items()}


def run(args: argparse.Namespace) -> int:
    if args.model:
        config, _ = read_config(args.model)
        config = config.with_overrides(**parse_sets(args.set))
    else:
        sizes = {"src_vocab_size": args.vocab_size, "tgt_vocab_size": args.vocab_size}
        config = preset(args.preset, **sizes, **parse_sets(args.set))
    with torch.device("meta"):  # shapes only: `info --preset big` allocates nothing
        model = Transformer(config)
    flops = model.flops_per_token(args.seq_len, args.seq_len)
    report = {
        "config": config.to_dict(),
        "parameters": model.num_parameters(),
        "parameters_without_embeddings": model.num_parameters(embeddings=False),
        "seq_len": args.seq_len,
        "forward_flops_per_source_token": flops["encoder_per_source_token"],
        "forward_flops_per_target_token": flops["decoder_per_target_token"],
        "forward_flops_per_token_pair": flops["encoder_per_source_token"] + flops["decoder_per_target_token"],
    }
    if args.runtime:
        report["runtime"] = runtime_report(config.d_model)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    c = config
    name = args.model or f"preset {args.preset}"
    print(f"aiayn model: {name}")
    print(
        f"  N={c.N} (decoder {c.decoder_layers})  d_model={c.d_model}  d_ff={c.d_ff}  h={c.h}  "
        f"d_k={c.d_k}  d_v={c.d_v}  P_drop={c.P_drop}  eps_ls={c.eps_ls}  "
        f"{'pre-norm' if c.norm_first else 'post-norm'}  {c.positional} positions"
    )
    print(
        f"  vocabulary: source {c.src_vocab_size:,}  target {c.tgt_vocab_size:,}  "
        f"shared embeddings={c.share_embeddings}  tied output={c.tie_output}"
    )
    print(f"  parameters:                    {report['parameters']:>15,}  ({report['parameters'] / 1e6:.1f}M)")
    print(f"  parameters without embeddings: {report['parameters_without_embeddings']:>15,}")
    print(f"  forward FLOPs per token (sentences of {args.seq_len} tokens, 2 FLOPs per multiply-add):")
    print(f"    encoder, per source token:   {report['forward_flops_per_source_token']:>15,.0f}")
    print(
        f"    decoder, per target token:   {report['forward_flops_per_target_token']:>15,.0f}"
        "  (incl. the output projection)"
    )
    print(f"    source + target token pair:  {report['forward_flops_per_token_pair']:>15,.0f}")
    if args.runtime:
        r = report["runtime"]
        print(f"  runtime: {r['cpu']}, torch {r['torch']}, {r['threads']} threads")
        print(f"    decoding (auto): precision {r['decode_precision']}, attention encoder/decoder "
              f"{r['decode_attention']}, float32 linear kernel {r['linear']}")  # fmt: skip
        print(f"    training (auto): precision {r['train_precision']}, attention {r['train_attention']}, "
              f"loss {r['train_loss']}")  # fmt: skip
        print(f"    training (fastest): {r['train_fastest']}")
    return 0


def runtime_report(d_model: int | None = None) -> dict[str, object]:
    """What `auto` picks on this machine (CPU) for a model of width `d_model`, from the feature probe."""
    from aiayn.kernels import (
        choose_attention,
        choose_decode_precision,
        choose_linear,
        choose_loss,
        cpu_features,
        precision_candidates,
        resolve_precision,
    )

    cpu = torch.device("cpu")
    train = resolve_precision("auto", cpu, d_model=d_model)
    candidates = precision_candidates("fastest", cpu, d_model=d_model)
    fastest = (
        "times " + " and ".join(str(c).removeprefix("torch.") for c in candidates) + " at the start of a run"
        if len(candidates) > 1
        else f"precision {str(candidates[0]).removeprefix('torch.')} (nothing to time here)"
    )
    decode = choose_decode_precision("auto", cpu, d_model=d_model)
    decode_dtype = torch.float32  # activations are float32 at every decoding precision
    return {
        "cpu": cpu_features().describe(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "decode_precision": decode,
        "decode_attention": "/".join(choose_attention("auto", cpu, decode_dtype, training=False)),
        "linear": choose_linear("auto", cpu, decode_dtype),
        "train_precision": str(train).removeprefix("torch."),
        "train_fastest": fastest,
        "train_attention": "/".join(choose_attention("auto", cpu, train, training=True, max_keys=257)),
        "train_loss": choose_loss("auto", train),
    }
