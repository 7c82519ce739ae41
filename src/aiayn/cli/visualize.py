"""`aiayn visualize`: the paper's figures from real models and runs (sections 3.2, 3.5, Figure 1, 5, Table 2).

Each subcommand writes PNG and SVG files into --out; the same input gives byte-identical files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "draw figures: attention maps, positional encodings, the architecture, training curves, results"

EXAMPLES = """examples:
  aiayn visualize attention --model runs/m30k/model --text "A man in an orange hat." --out docs/figures
  aiayn visualize attention --model DIR --text "A dog runs." --target "Ein Hund rennt." --out figs
  aiayn visualize positional --d-model 512 --positions 100 --out docs/figures
  aiayn visualize architecture --preset base --out docs/figures
  aiayn visualize curves --run runs/m30k --out docs/figures
  aiayn visualize results --results docs/results.json --out docs/figures
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXAMPLES
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    figures = parser.add_subparsers(dest="figure", required=True, metavar="FIGURE")

    attention = figures.add_parser("attention", help="attention weights of a trained model for one sentence")
    attention.add_argument("--model", required=True, type=Path, help="model directory with tokenizer.model")
    attention.add_argument("--text", required=True, help="the source sentence")
    attention.add_argument(
        "--target", help="a target sentence to force instead of decoding one (teacher forced, no search)"
    )
    attention.add_argument(
        "--layer", type=int, help="layer of the zoom and three-panel figures, from 1 (default: last)"
    )
    attention.add_argument("--head", type=int, default=1, help="head of the zoom and three-panel figures, from 1")
    attention.add_argument("--query", type=int, help="query position (0-based) of the three-panel figure")
    attention.add_argument(
        "--decode",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="search setting for the translation, e.g. --decode beam=1 (default: section 6.1's beam 4)",
    )
    attention.add_argument("--name", default="attention", help="file name prefix (default: attention)")

    positional = figures.add_parser("positional", help="sinusoidal positional encodings (3.5)")
    positional.add_argument("--d-model", type=int, default=512)
    positional.add_argument("--positions", type=int, default=100)

    architecture = figures.add_parser("architecture", help="the encoder-decoder diagram of a configuration")
    source = architecture.add_mutually_exclusive_group()
    source.add_argument("--preset", default="base", help="a configuration preset (default: base)")
    source.add_argument("--model", type=Path, help="a model directory; its config.json is drawn")
    architecture.add_argument("--vocab-size", type=int, default=37000, help="shared vocabulary (with --preset)")

    curves = figures.add_parser("curves", help="loss, perplexity, learning rate and BLEU of a training run")
    curves.add_argument("--run", required=True, type=Path, help="run directory (or its metrics.jsonl)")

    results = figures.add_parser("results", help="our BLEU next to the paper's Table 2")
    results.add_argument(
        "--results", required=True, type=Path, help='JSON {"entries": [{label, bleu, dataset, source}]}'
    )

    for sub in (attention, positional, architecture, curves, results):
        sub.add_argument("--out", required=True, type=Path, help="output directory for the PNG and SVG files")


def _attention(args: argparse.Namespace) -> list[Path]:
    from aiayn.data.vocab_tokenizer import load_model_tokenizers
    from aiayn.model import Transformer
    from aiayn.visualization.attention import attention_figures, pair_maps, translation_ids

    model = Transformer.from_pretrained(args.model).eval()
    tokenizer, target_tokenizer = load_model_tokenizers(args.model)  # one tokenizer.model, or source/target
    if args.target is not None:
        target, how = target_tokenizer.encode(args.target), "given target"
    else:
        from aiayn.config_loading import parse_assignments

        overrides = parse_assignments(args.decode, "--decode")
        target = translation_ids(model, tokenizer, args.text, target_tokenizer, **overrides)
        how = "model's translation"
    maps = pair_maps(model, tokenizer, args.text, target, target_tokenizer)
    layers = len(model.encoder.layers)
    layer = (args.layer if args.layer is not None else min(layers, model.config.decoder_layers)) - 1
    translation = "".join(ch if ch.isprintable() else "\ufffd" for ch in target_tokenizer.decode(target))
    caption = f"{args.text}  →  {translation}  ({how})"
    print(f"target ({how}): {translation}")
    return attention_figures(model, maps, args.out, layer, args.head - 1, args.query, args.name, caption)


def _positional(args: argparse.Namespace) -> list[Path]:
    from aiayn.io import atomic_write_json
    from aiayn.visualization.positional import plot_positional
    from aiayn.visualization.style import save_figure

    fig, fits = plot_positional(args.d_model, args.positions)
    written = save_figure(fig, args.out, "positional_encoding")
    numbers = args.out / "positional_encoding.json"
    atomic_write_json(numbers, {"d_model": args.d_model, "positions": args.positions, "relative_fits": fits})
    for fit in fits:
        print(
            f"k={fit['k']:>3}: M_k fitted on positions 0-{fit['fit_positions'] - 1}, max error on held-out "
            f"positions {fit['held_out_max_error']:.1e} (closed form {fit['exact_max_error']:.1e})"
        )
    return written + [numbers]


def _architecture(args: argparse.Namespace) -> list[Path]:
    from aiayn.config import preset
    from aiayn.model.pretrained import read_config
    from aiayn.visualization.architecture import plot_architecture
    from aiayn.visualization.style import save_figure

    if args.model is not None:
        config, _ = read_config(args.model)
        name = f"model {args.model.name}"
    else:
        config = preset(args.preset, src_vocab_size=args.vocab_size, tgt_vocab_size=args.vocab_size)
        name = f"preset {args.preset}"
    stem = "architecture" if args.model is not None else f"architecture_{args.preset}"
    return save_figure(plot_architecture(config, name), args.out, stem)


def _curves(args: argparse.Namespace) -> list[Path]:
    from aiayn.visualization.curves import metrics_path, plot_curves, read_records
    from aiayn.visualization.style import save_figure

    path = metrics_path(args.run)
    return save_figure(plot_curves(read_records(path), title=args.run.name), args.out, "training_curves")


def _results(args: argparse.Namespace) -> list[Path]:
    from aiayn.visualization.results import plot_results, read_results
    from aiayn.visualization.style import save_figure

    return save_figure(plot_results(read_results(args.results)), args.out, "results_bleu")


def run(args: argparse.Namespace) -> int:
    draw = {
        "attention": _attention,
        "positional": _positional,
        "architecture": _architecture,
        "curves": _curves,
        "results": _results,
    }[args.figure]
    written = draw(args)
    print(json.dumps({"figure": args.figure, "files": [str(p) for p in written]}, indent=2))
    return 0
