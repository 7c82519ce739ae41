"""`aiayn export hf|ctranslate2|onnx DIR --out OUT`: an aiayn model directory where other runtimes run it."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "export a model directory to Hugging Face (MarianMTModel), CTranslate2 or ONNX (docs/INTEROP.md)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=["hf", "ctranslate2", "onnx"], help="target format")
    parser.add_argument("model", type=Path, help="aiayn model directory")
    parser.add_argument("--out", required=True, type=Path, help="directory to write")
    parser.add_argument("--quantization", choices=["int8", "int8_float32", "bfloat16", "float16"],
                        help="ctranslate2 only: weight quantization (default: float32)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and any(args.out.iterdir()) and not args.force:
        raise FileExistsError(f"{args.out} already exists; pass --force to replace it")
    if args.quantization and args.kind != "ctranslate2":
        raise ValueError("--quantization applies to ctranslate2 exports only")
    if args.kind == "hf":
        from aiayn.interop.marian import export_hf

        out = export_hf(args.model, args.out)
    elif args.kind == "onnx":
        from aiayn.interop.onnx import export_onnx

        out = export_onnx(args.model, args.out)
    else:
        from aiayn.interop.ctranslate2 import export_ctranslate2

        out = export_ctranslate2(args.model, args.out, args.quantization)
    print(f"exported {args.model} -> {out} ({args.kind})")
    return 0
