#!/usr/bin/env python3
"""Each English-German model's 5-best reranked with a second direction (aiayn.decoding.rerank), scored on Multi30k
tok/ (docs/RESULTS.md, "A second direction instead of a second seed"):

    AIAYN_DATA_DIR=... .venv/bin/python scripts/multi30k_rerank.py --split val \\
        --r2l runs/multi30k-wu-tok-b2k-1t-r2l-s1/averaged --channel runs/multi30k-wu-tok-b2k-1t-deen-s1/averaged \\
        --variants R R0 C --out DIR runs/multi30k-wu-tok-b2k-1t-s{1..10}/averaged

Variants: R = the member's and the right-to-left model's 5-best, reranked by the sum of both models' log P / |Y|;
R0 = the same among the member's 5-best only; C = the member's 5-best reranked with the German-English model's
log P(x | y) / |x| added. Prints, per member, lowercased tokenized BLEU (sacreBLEU --tokenize none on tok/, as
Wu et al. score) of the member alone (beam 5, log P / |Y|) and of each variant, then the means. Hypotheses go to
--out. The right-to-left model reads tok/ English and writes German in reverse word order (it was trained on
runs/data-r2l/, the German of tok/ reversed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import sacrebleu
import torch

from aiayn.data import resolve_data_dir
from aiayn.decoding import Translator
from aiayn.decoding.rerank import nbest, rerank

VARIANTS = {"R": ("r2l", "both"), "R0": ("r2l", "first"), "C": ("channel", "first")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("members", nargs="+", help="English-German model directories (each reranked on its own)")
    parser.add_argument("--split", default="val", choices=("val", "test2016"))
    parser.add_argument("--r2l", help="the right-to-left model directory (variants R, R0)")
    parser.add_argument("--channel", help="the German-English model directory (variant C)")
    parser.add_argument("--variants", nargs="+", default=["R", "R0", "C"], choices=sorted(VARIANTS))
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--weights", type=float, nargs="+", default=[1.0], help="second-model weights, a row each")
    parser.add_argument("--out", required=True, help="directory for the hypotheses")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (a quick check)")
    args = parser.parse_args()
    for variant in args.variants:
        needed = "r2l" if VARIANTS[variant][0] == "r2l" else "channel"
        if getattr(args, needed) is None:
            parser.error(f"variant {variant} needs --{needed}")
    torch.set_num_threads(args.threads)
    tok = resolve_data_dir() / "multi30k" / "tok"
    sources = (tok / f"{args.split}.lc.norm.tok.en").read_text(encoding="utf-8").splitlines()
    refs = (tok / f"{args.split}.lc.norm.tok.de").read_text(encoding="utf-8").splitlines()
    if args.limit:
        sources, refs = sources[: args.limit], refs[: args.limit]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load = dict(precision="float32")
    second = {
        "r2l": Translator.from_pretrained(args.r2l, **load) if args.r2l else None,
        "channel": Translator.from_pretrained(args.channel, **load) if args.channel else None,
    }
    r2l_nbest = None
    if any(VARIANTS[v] == ("r2l", "both") for v in args.variants):
        r2l_nbest = nbest(second["r2l"], sources, args.beam)
    names = [v if w == 1.0 else f"{v}@{w:g}" for v in args.variants for w in args.weights]
    table: dict[str, list[float]] = {"alone": [], **{name: [] for name in names}}
    for index, member in enumerate(args.members, 1):
        started = time.perf_counter()
        first = Translator.from_pretrained(member, **load)
        found = nbest(first, sources, args.beam)
        rows = {"alone": [next(iter(f), "") for f in found]}
        for variant in args.variants:
            direction, pool = VARIANTS[variant]
            for weight in args.weights:
                ranked = rerank(first, second[direction], sources, direction, args.beam, pool, (1.0, weight),
                                first_nbest=found, second_nbest=r2l_nbest)  # fmt: skip
                name = variant if weight == 1.0 else f"{variant}@{weight:g}"
                rows[name] = [candidates[0].text for candidates in ranked]
        line = [f"member {index} {member}:"]
        for name, hyps in rows.items():
            path = out / f"member{index}.{name}.{args.split}.hyp.tok.de"
            path.write_text("\n".join(hyps) + "\n", encoding="utf-8")
            bleu = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", force=True)
            table[name].append(bleu.score)
            line.append(f"{name} {bleu.score:.2f} (BP {bleu.bp:.3f})")
        print(" | ".join(line) + f" | {time.perf_counter() - started:.0f}s", flush=True)
    print(f"mean over {len(args.members)} members, {args.split}, lowercased tokenized, beam {args.beam}:",
          " | ".join(f"{name} {statistics.mean(scores):.2f}" for name, scores in table.items()))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
