"""`aiayn ablate CONFIG --rows A,B,C,D,E,big --out DIR`: Table 3's variations of CONFIG's model, trained with the
same data, budget and seeds, scored (dev PPL, beam-4 dev BLEU, parameters) and tabulated beside the paper's.

Rerunning the same command skips finished runs and resumes an interrupted one; `aiayn ablate --collect DIR1 DIR2
--out DIR` merges sweeps of different --rows (same config, budget and data). How each row scales to CONFIG's
size: `aiayn.experiments.ablate`; `--plan` prints the runs with the values they use and their parameter counts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "rerun Table 3's variations (and --vary sweeps) of a config; resumable, divisible (--collect)"

EXAMPLE = """examples:
  aiayn ablate configs/multi30k-tiny.yaml --rows A,B,C,D,E,big --budget-minutes 5 --seeds 1,2 --out runs/ablate
  aiayn ablate configs/multi30k-tiny.yaml --rows C,D --updates 2000 --out runs/ablate-cd --plan
  aiayn ablate configs/multi30k-tiny.yaml --vary train.lr_scale=1,2,4 --vary model.P_drop=0.1,0.3 --out runs/lr
  aiayn ablate --collect runs/ablate-ab runs/ablate-cd --out runs/ablate
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXAMPLE
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("config", nargs="?", type=Path, help="YAML run config: the base row")
    parser.add_argument("--rows", help="Table 3 rows (A,B,C,D,E,big), variant ids (C-N2, D-ls0.0) or all; the base "
                        "always runs (default: all, or only the base with --vary)")  # fmt: skip
    parser.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="extra rows, one per value of a config key, e.g. train.lr_scale=1,2 (repeatable)",
    )
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--updates", type=int, help="train every run for N updates (deterministic)")
    budget.add_argument("--budget-minutes", type=float, help="train every run for M minutes of wall time")
    parser.add_argument("--seeds", help="comma-separated seeds (default: the config's train.seed)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="override a config field for every run, as `aiayn train --set` (repeatable)")  # fmt: skip
    parser.add_argument("--dev-sentences", type=int, default=0, metavar="N",
                        help="dev BLEU on the first N valid sentences (default 0: all; PPL uses all)")  # fmt: skip
    parser.add_argument("--collect", nargs="+", type=Path, metavar="DIR", help="merge these sweeps into --out")
    parser.add_argument("--plan", action="store_true", help="print the runs and their values, train nothing")
    parser.add_argument("--out", required=True, type=Path, help="sweep directory: runs/, results/, table.md ...")


def _seeds(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected comma-separated integers, e.g. 1,2") from None


def run(args: argparse.Namespace) -> int:
    from aiayn.experiments import sweep as sw

    if args.collect:
        given = (args.config, args.rows, args.vary, args.set, args.updates, args.budget_minutes, args.seeds, args.plan)
        if any(given) or args.dev_sentences:
            raise ValueError("--collect merges finished sweeps: give only the directories and --out")
        print(sw.collect(args.collect, args.out))
        return 0
    if args.config is None:
        raise ValueError("give CONFIG (a YAML run config) or --collect DIR ...")
    if args.updates is not None and args.updates <= 0 or args.budget_minutes is not None and args.budget_minutes <= 0:
        raise ValueError("--updates and --budget-minutes must be positive")
    from aiayn.config import load_run_config
    from aiayn.experiments.ablate import parameters, select, table3_variants, vary_variants

    base = load_run_config(args.config, args.set)
    rows = args.rows if args.rows is not None else ("base" if args.vary else "all")
    variants, skipped = table3_variants(base.model, select(rows))
    variants += vary_variants(args.vary)
    seeds = _seeds(args.seeds) if args.seeds else [base.train.seed]
    budget = None
    if args.updates or args.budget_minutes:
        budget = sw.Budget(args.updates or 0, args.budget_minutes or 0.0)
    if args.dev_sentences < 0:
        raise ValueError("--dev-sentences must be >= 0 (0: all)")
    sweep = sw.plan(args.config, args.set, variants, seeds, budget, args.out, skipped, args.dev_sentences)
    if args.plan:
        from aiayn.data import ParallelDataset

        data = Path(base.data.dir)
        vocab = ParallelDataset(data, "train").vocab_size if data.is_dir() else base.data.vocab_size
        wide = max([len(v.id) for v in sweep.variants] + [len(name) for name in skipped] + [14])
        values = max([len(v.values) for v in sweep.variants] + [42])
        for variant in sweep.variants:
            model = sweep.run_config(variant, seeds[0]).model.with_overrides(src_vocab_size=vocab,
                                                                             tgt_vocab_size=vocab)  # fmt: skip
            paper = f"  (paper: {variant.change})" if variant.row not in ("base", "vary") else ""
            print(f"{variant.id:{wide}} {variant.values:{values}} {parameters(model):>12,} parameters{paper}")
        for name, reason in skipped.items():
            print(f"{name:{wide}} skipped: {reason}")
        print(f"{len(sweep.variants)} rows x {len(seeds)} seeds; budget {vars(sweep.budget)}")
        return 0
    print(sw.run_sweep(sweep))
    return 0
