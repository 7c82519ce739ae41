"""`aiayn import marian SRC --out DIR` and `aiayn import fairseq CHECKPOINT --dict-dir D --out DIR`: a model made
elsewhere as an aiayn model directory that translate, evaluate, visualize and bench read (docs/INTEROP.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "import a pretrained model (Hugging Face MarianMTModel / OPUS-MT, fairseq transformer) as a model directory"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=["marian", "fairseq"], help="what SOURCE is")
    parser.add_argument("source", help="marian: a MarianMTModel directory or hub id (Helsinki-NLP/opus-mt-en-de); "
                                       "fairseq: a checkpoint .pt")
    parser.add_argument("--out", required=True, type=Path, help="model directory to write")
    parser.add_argument("--dict-dir", type=Path, help="fairseq: the directory with dict.{src,tgt}.txt")
    parser.add_argument("--src-lang", default="en", help="fairseq: source language (dict.SRC.txt; Moses rules)")
    parser.add_argument("--tgt-lang", default="de", help="fairseq: target language")
    parser.add_argument("--spm", type=Path, help="fairseq: the sentencepiece model it was trained with")
    parser.add_argument("--bpe-codes", type=Path, help="fairseq: subword-nmt BPE codes (with Moses tokenization)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and any(args.out.iterdir()) and not args.force:
        raise FileExistsError(f"{args.out} already exists; pass --force to replace it")
    if args.kind == "marian":
        from aiayn.interop.marian import import_marian

        out = import_marian(args.source, args.out)
    else:
        from aiayn.interop.fairseq import import_fairseq

        if args.dict_dir is None:
            raise ValueError("aiayn import fairseq needs --dict-dir (the folder with dict.{src,tgt}.txt)")
        out = import_fairseq(args.source, args.out, args.dict_dir, args.src_lang, args.tgt_lang, args.spm,
                             args.bpe_codes)
    print(f"imported {args.kind} {args.source} -> {out}")
    return 0
