"""`aiayn evaluate`: translate a test set and score it with sacrebleu BLEU and chrF (section 6.1, Table 2).

    aiayn evaluate --model DIR [DIR ...] --src test.en --ref test.de [--hyp-out hyps.de]

prints

    BLEU = 37.21 68.1/45.0/31.9/22.8 (BP = 0.98 ...)
      signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x
    chrF2 = 62.10
      signature: nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.x

BLEU is sacrebleu's on detokenized text (13a tokenization); `--tokenize none --lowercase` scores already
tokenized, lowercased references (such as Multi30k's tok/ files) the way many Multi30k papers do.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.translate import (
    add_decode_arguments,
    add_model_argument,
    check_device,
    check_model_dir,
    decode_overrides,
    load_reranker,
    read_lines,
    translate_lines,
)

HELP = "translate --src and score it against --ref: sacrebleu BLEU and chrF with their signatures"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_argument(parser)
    parser.add_argument("--src", required=True, type=Path, help="source text, one sentence per line")
    parser.add_argument("--ref", required=True, type=Path, help="reference translations, line by line")
    parser.add_argument("--hyp-out", type=Path, help="also write the hypotheses here (atomically)")
    parser.add_argument("--tokenize", default="13a", help="sacrebleu BLEU tokenizer (default: 13a; none, intl...)")
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    parser.add_argument(
        "--moses-lc-tok",
        metavar="LANG",
        help="score as Multi30k papers do: normalise, lowercase and Moses-tokenize the hypotheses (sacremoses) and "
        "compare them with an already tokenized --ref (e.g. tok/test2016.lc.norm.tok.de) using --tokenize none",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar or warnings on stderr")
    add_decode_arguments(parser)


def check_tokenize(name: str) -> None:
    """An unknown `--tokenize` is refused before anything is translated."""
    from sacrebleu.metrics.bleu import BLEU

    known = list(BLEU.TOKENIZERS)
    if name not in known:
        raise ValueError(f"--tokenize {name!r}: not a sacrebleu tokenizer; choose one of {', '.join(known)}")


def run(args: argparse.Namespace) -> int:
    import torch

    from aiayn.decoding import Translator
    from aiayn.evaluation.metrics import corpus_bleu, corpus_chrf
    from aiayn.io import atomic_write_bytes

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    check_device(args.device)
    for model_dir in args.model:
        check_model_dir(model_dir)
    check_tokenize(args.tokenize)
    sources, src_name = read_lines(args.src)
    references, ref_name = read_lines(args.ref)
    if len(sources) != len(references):
        raise ValueError(
            f"{src_name} has {len(sources)} lines but {ref_name} has {len(references)}; line i of --ref must "
            "translate line i of --src"
        )
    reranker = load_reranker(args)
    translator = Translator.from_pretrained(args.model, device=args.device, **decode_overrides(args))
    results = translate_lines(translator, sources, src_name, args.quiet, not args.quiet, reranker)
    hypotheses = [result.text for result in results]
    if args.hyp_out is not None:
        atomic_write_bytes(args.hyp_out, "".join(h.replace("\n", " ") + "\n" for h in hypotheses).encode("utf-8"))
    if args.moses_lc_tok:
        from aiayn.evaluation.moses import moses_lc_tok

        hypotheses = moses_lc_tok(hypotheses, args.moses_lc_tok)
        args.tokenize = "none"
    bleu = corpus_bleu(hypotheses, references, tokenize=args.tokenize, lowercase=args.lowercase)
    for score in (bleu, corpus_chrf(hypotheses, references)):
        print(score.text)
        print(f"  signature: {score.signature}")
    return 0
