"""`aiayn demo`: the main job. On a fresh clone it

1. finds Multi30k (the data directory: --data-dir, $AIAYN_DATA_DIR, ../shared/data; downloaded with checksums
   when missing), prepares En->De with a joint BPE vocabulary (section 5.1),
2. trains the `multi30k-tiny` recipe for a bounded time (section 5; rerunning resumes),
3. translates a few test2016 sentences with beam search (section 6.1) and prints test2016 BLEU and chrF,
4. draws the attention of every layer and head for one sentence,

and leaves the best checkpoint as a model directory for `aiayn translate --model DIR`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from aiayn.io import read_text_file

HELP = "train a small model on Multi30k En->De for a few minutes, translate, score BLEU, draw attention"

EXAMPLES = 4  # test sentences shown with their references


def default_config() -> Path:
    """configs/multi30k-tiny.yaml of this checkout (the package lives in src/aiayn/), else of the working dir."""
    here = Path(__file__).resolve().parents[3] / "configs" / "multi30k-tiny.yaml"
    return here if here.is_file() else Path("configs") / "multi30k-tiny.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=10.0, help="training wall time (default: 10)")
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="run directory (default: runs/demo)")
    parser.add_argument("--data-dir", help="folder holding multi30k/ (default: $AIAYN_DATA_DIR or ../shared/data)")
    parser.add_argument("--config", type=Path, default=None, help="recipe (default: configs/multi30k-tiny.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override")
    parser.add_argument("--beam", type=int, default=4, help="beam size for the test set (default: 4, as 6.1)")
    parser.add_argument("--no-figures", action="store_true", help="skip the attention figures")


def banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def run(args: argparse.Namespace) -> int:
    from aiayn.cli import main as aiayn
    from aiayn.config import load_run_config
    from aiayn.data import ensure_multi30k
    from aiayn.decoding import Translator
    from aiayn.training.checkpoint import BEST_NAME, latest_checkpoint
    from aiayn.training.run import train

    started = time.perf_counter()
    banner("1. data: Multi30k En->De")
    multi30k = ensure_multi30k(args.data_dir, langs=("en", "de"))
    print(f"corpus: {multi30k} (train 29,000 / val 1,014 / test2016 1,000 pairs)")
    config_path = args.config or default_config()
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path}: recipe not found; pass --config configs/multi30k-tiny.yaml")
    sets = [
        f"data.raw_dir={multi30k.parent}",
        f"train.out_dir={args.out}",
        f"train.max_minutes={args.minutes}",
        *args.set,
    ]
    run_config = load_run_config(config_path, sets)
    print(f"recipe: {config_path} (+ {' '.join(sets)})")

    banner(f"2. training for {args.minutes:g} minutes (section 5: Adam, eq. 3 schedule, label smoothing)")
    state = train(run_config)
    print(f"trained {state.step} updates in {state.train_seconds / 60:.1f} min of training wall time")

    model_dir = args.out / BEST_NAME
    if not model_dir.is_dir():
        model_dir = latest_checkpoint(args.out)
    if model_dir is None:
        raise RuntimeError(f"{args.out}: training wrote no checkpoint")

    banner(f"3. translations (beam {args.beam}, length penalty 0.6, section 6.1) from {model_dir}")
    test_src = multi30k / "test2016.en"
    test_ref = multi30k / "test2016.de"
    translator = Translator.from_pretrained(model_dir, beam=args.beam)
    sources, references = read_text_file(test_src, EXAMPLES), read_text_file(test_ref, EXAMPLES)
    for source, reference, hypothesis in zip(sources, references, translator.translate(sources)):
        print(f"  source:     {source}\n  reference:  {reference}\n  aiayn:      {hypothesis}\n")

    banner("4. test2016 BLEU and chrF (sacrebleu, raw cased text)")
    status = aiayn(
        ["evaluate", "--model", str(model_dir), "--src", str(test_src), "--ref", str(test_ref),
         "--beam", str(args.beam), "--hyp-out", str(args.out / "test2016.hyp.de")]
    )  # fmt: skip
    if status:
        return status

    if not args.no_figures:
        banner("5. attention of every layer and head (encoder, decoder, encoder-decoder)")
        figures = args.out / "figures"
        status = aiayn(
            ["visualize", "attention", "--model", str(model_dir), "--text", sources[0], "--out", str(figures)]
        )
        if status:
            return status
        aiayn(["visualize", "curves", "--run", str(args.out), "--out", str(figures)])
        print(f"figures: {figures}/ (PNG and SVG)")

    minutes = (time.perf_counter() - started) / 60
    print(f"\ndone in {minutes:.1f} min. Translate your own text with:")
    for line in follow_up(f"echo 'A dog runs across the grass.' | aiayn translate --model {model_dir}"):
        print(f"  {line}")
    return 0


def follow_up(command: str) -> list[str]:
    """`command` as it runs from the user's shell: after `make demo` the `aiayn` command is in .venv/bin, not
    on the PATH, so the activation of that environment comes first (as in the README's command block)."""
    if shutil.which("aiayn") or sys.prefix == sys.base_prefix:
        return [command]
    activate = Path(sys.prefix) / "bin" / "activate"
    try:
        activate = activate.relative_to(Path.cwd())
    except ValueError:
        pass
    return [f"source {activate}", command]
