"""BLEU cost and agreement of each decoding precision against float32, on Multi30k test2016 with a trained model.

    python scripts/precision_check.py --model runs/demo/checkpoint-best --out docs/benchmarks/precision.json

For float32, bf16 and int8: greedy output token agreement with float32 (position by position), beam-4 BLEU both
ways (sacreBLEU raw cased; lowercased Moses-tokenized against Multi30k's tok/ references), chrF, and the
seconds each beam-4 pass took (one pass, this machine; benchmarks measure speed properly).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from aiayn.data.download import resolve_data_dir
from aiayn.decoding import Translator
from aiayn.evaluation import corpus_bleu, corpus_chrf
from aiayn.evaluation.moses import moses_lc_tok
from aiayn.kernels import choose_decode_precision, cpu_features


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--sentences", type=int, default=0, help="first N test sentences (0: all 1,000)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = resolve_data_dir(args.data_dir) / "multi30k"
    src, ref = read(data / "test2016.en"), read(data / "test2016.de")
    tok_ref = read(data / "tok" / "test2016.lc.norm.tok.de")
    if args.sentences:
        src, ref, tok_ref = src[: args.sentences], ref[: args.sentences], tok_ref[: args.sentences]
    rows, greedy_ref = [], None
    for precision in ("float32", "bf16", "int8"):
        translator = Translator.from_pretrained(args.model, precision=precision)
        greedy = [t.pieces[0] if t.pieces else [] for t in translator.translate_detailed(src, greedy=True)]
        if greedy_ref is None:
            greedy_ref = greedy
        same = sum(a == b for r, g in zip(greedy_ref, greedy, strict=True) for a, b in zip(r, g))
        total = sum(max(len(r), len(g)) for r, g in zip(greedy_ref, greedy, strict=True))
        start = time.perf_counter()
        hyps = translator.translate(src, beam=4, lenpen=0.6)
        seconds = time.perf_counter() - start
        row = {
            "precision": precision,
            "runtime": translator.runtime.describe() if translator.runtime else None,
            "greedy_token_agreement": same / max(total, 1),
            "greedy_sentences_identical": sum(r == g for r, g in zip(greedy_ref, greedy, strict=True)) / len(src),
            "bleu_sacrebleu": corpus_bleu(hyps, ref).score,
            "bleu_lc_tok": corpus_bleu(moses_lc_tok(hyps, "de"), tok_ref, tokenize="none").score,
            "chrf": corpus_chrf(hyps, ref).score,
            "beam4_seconds": seconds,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    d_model = translator.model.config.d_model
    auto = choose_decode_precision("auto", torch.device("cpu"), d_model=d_model)
    report = {"cpu": cpu_features().describe(), "auto_picks": auto, "model": str(args.model), "sentences": len(src)}
    report["rows"] = rows
    print(f"auto picks {auto} for this model (d_model {d_model}) on this CPU ({report['cpu']})")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
