"""`aiayn prepare`: train the joint BPE tokenizer and binarize a parallel corpus (see aiayn.data.prepare)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "train a joint BPE tokenizer and binarize parallel text (PREFIX.src / PREFIX.tgt) for training"

EXAMPLE = """example (Multi30k en-de):
  aiayn prepare --src-lang en --tgt-lang de --data-dir ../shared/data \\
      --train multi30k/train --valid multi30k/val --test multi30k/test2016 \\
      --vocab-size 8000 --out data-bin/m30k
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXAMPLE
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--src-lang", required=True, help="source language suffix, e.g. en")
    parser.add_argument("--tgt-lang", required=True, help="target language suffix, e.g. de")
    parser.add_argument("--train", required=True, metavar="PREFIX", help="training text PREFIX.{src,tgt}")
    parser.add_argument("--valid", required=True, metavar="PREFIX", help="validation text PREFIX.{src,tgt}")
    parser.add_argument(
        "--test",
        nargs="+",
        action="extend",
        default=[],
        metavar="PREFIX",
        help="test text; each split is named by the prefix's basename (e.g. test2016)",
    )
    parser.add_argument("--vocab-size", type=int, required=True, help="joint BPE vocabulary size (paper: ~37000)")
    parser.add_argument("--out", required=True, type=Path, help="output directory (written atomically)")
    parser.add_argument("--data-dir", type=Path, help="resolve relative prefixes against this directory")
    parser.add_argument("--max-len", type=int, default=256, help="longest side in subwords (default: 256)")
    parser.add_argument(
        "--max-ratio", type=float, default=9.0, help="largest length ratio of the two sides (default: 9.0)"
    )
    parser.add_argument(
        "--filter",
        action="store_true",
        help="drop empty, over-long and extreme-ratio pairs from TRAIN (otherwise they are only reported)",
    )
    parser.add_argument(
        "--sample-size",
        type=int,
        default=1_000_000,
        help="sentences sampled for tokenizer training (default: 1000000)",
    )
    parser.add_argument("--character-coverage", type=float, default=1.0, help="sentencepiece character coverage")
    parser.add_argument("--threads", type=int, default=None, help="threads for sentencepiece (default: all)")
    parser.add_argument(
        "--force", action="store_true", help="replace --out if it exists and is a directory prepare wrote"
    )
    parser.add_argument(
        "--odd-line-breaks",
        choices=("keep", "error"),
        default="keep",
        help="U+2028, NEL, form feed, lone CR inside a line: keep them with a warning (default) or refuse the file",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars or log lines")


def run(args: argparse.Namespace) -> int:
    from aiayn.data.prepare import prepare

    def resolve(prefix: str) -> Path:
        path = Path(prefix).expanduser()
        return args.data_dir / path if args.data_dir is not None and not path.is_absolute() else path

    meta = prepare(
        args.src_lang,
        args.tgt_lang,
        train=resolve(args.train),
        valid=resolve(args.valid),
        test=[resolve(prefix) for prefix in args.test],
        out=args.out,
        vocab_size=args.vocab_size,
        max_len=args.max_len,
        max_ratio=args.max_ratio,
        filter_train=args.filter,
        sample_size=args.sample_size,
        threads=args.threads,
        character_coverage=args.character_coverage,
        force=args.force,
        odd_line_breaks=args.odd_line_breaks,
        progress=not args.quiet,
        log=(lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr)),
    )
    for name, split in meta["splits"].items():
        tokens = ", ".join(f"{lang} {count}" for lang, count in split["tokens"].items())
        print(f"{name}: {split['pairs']} pairs ({tokens} subword tokens)")
    print(f"vocab {meta['vocab_size']} -> {args.out}")
    return 0
