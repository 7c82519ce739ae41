"""`aiayn translate`: one translation per input line (section 6.1 decoding), in input order.

    aiayn translate --model DIR [DIR ...] [--input FILE] [--output FILE] [--beam 4] [--greedy] [--lenpen 0.6]
                    [--lenpen-form gnmt|power] [--nbest N] [--max-len-a 1] [--max-len-b 50]

Several --model directories decode as an ensemble: at each step the mean of their next-token probabilities
(fairseq's ensemble), or with --ensemble-mean geometric their renormalised geometric mean; their tokenizers must
be the same.

Reads --input (or stdin, to its end), writes --output (atomically) or stdout. An empty line gives an empty
line. A line with more subword tokens than the model accepts is truncated with a warning naming its line
number, or, with --on-long-line error, stops the run with an error naming it. Input must be UTF-8; a bad
byte is reported with its line number.

With --rerank-with DIR --rerank-direction r2l|channel, a second model rescores --model's n-best (a beam of --beam
ranked by log P/|Y|): a model that writes the target right to left (its own n-best joins the candidates), or one
of the opposite direction that scores the source given each candidate (the channel P(x|y)); each candidate's
score is --model's log P/|Y| plus --rerank-weight times the second model's (aiayn.decoding.rerank).

With --nbest N > 1 each input line gives N lines in fairseq's n-best style,

    I ||| HYPOTHESIS ||| SCORE

where I is the 0-based input line index and SCORE the length-normalised log-probability (the beam's
ranking score; with --rerank-with the combined score); an empty input line gives the single line "I |||  ||| 0.0000".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiayn.config import DecodeConfig
from aiayn.io import read_text_lines

HELP = "translate text with a model directory (beam search, section 6.1): one output line per input line"

DEFAULTS = DecodeConfig()


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """Search flags shared by `translate` and `evaluate` (defaults: section 6.1)."""
    group = parser.add_argument_group("search (section 6.1)")
    group.add_argument("--beam", type=int, default=DEFAULTS.beam, help="beam size (default: %(default)s)")
    group.add_argument("--greedy", action="store_true", help="greedy search instead of beam search")
    group.add_argument("--lenpen", type=float, default=DEFAULTS.lenpen, help="length penalty alpha (default: 0.6)")
    group.add_argument(
        "--lenpen-form",
        choices=("gnmt", "power"),
        default=DEFAULTS.lenpen_form,
        help="gnmt: ((5+|Y|)/6)^alpha (Wu et al., the paper's); power: |Y|^alpha (fairseq/HF)",
    )
    group.add_argument(
        "--ensemble-mean",
        choices=("arithmetic", "geometric"),
        default=DEFAULTS.ensemble_mean,
        help="several --model: the mean of their probabilities (fairseq's) or their renormalised geometric mean",
    )
    group.add_argument("--max-len-a", type=float, default=DEFAULTS.max_len_a, help="max length a*|x|+b: a")
    group.add_argument("--max-len-b", type=int, default=DEFAULTS.max_len_b, help="max length a*|x|+b: b")
    group.add_argument("--min-len", type=int, default=DEFAULTS.min_len, help="minimum output tokens")
    group.add_argument(
        "--max-tokens", type=int, default=DEFAULTS.max_tokens, help="padded source tokens per batch (budget)"
    )
    group.add_argument(
        "--max-source-positions",
        type=int,
        default=DEFAULTS.max_source_positions,
        help="longest source in subwords incl. EOS (also capped by a model with learned positions)",
    )
    group.add_argument(
        "--on-long-line",
        choices=("truncate", "error"),
        default=DEFAULTS.on_long_line,
        help="an over-long line is truncated with a warning, or is an error (default: truncate)",
    )
    rerank = parser.add_argument_group("reranking with a second model (aiayn.decoding.rerank)")
    rerank.add_argument(
        "--rerank-with",
        type=Path,
        metavar="DIR",
        help="a second model that rescores --model's n-best (a beam of --beam, log P/|Y|); each candidate's score "
        "is --model's log P/|Y| plus --rerank-weight times the second model's",
    )
    rerank.add_argument(
        "--rerank-direction",
        choices=("r2l", "channel"),
        help="r2l: the second model writes the target in reverse word order (its n-best joins the candidates); "
        "channel: it translates the other way and scores the source given each candidate, log P(x|y)/|x|",
    )
    rerank.add_argument("--rerank-weight", type=float, default=1.0, help="the second model's weight (default: 1)")
    rerank.add_argument(
        "--rerank-pool",
        choices=("both", "first"),
        default="both",
        help="r2l: rerank both models' n-best (default) or --model's only",
    )
    group.add_argument("--sampling", action="store_true", help="sample --beam outputs per line instead of search")
    group.add_argument("--temperature", type=float, default=DEFAULTS.temperature)
    group.add_argument("--top-k", type=int, default=DEFAULTS.top_k, help="sample among the k best (0: all)")
    group.add_argument("--top-p", type=float, default=DEFAULTS.top_p, help="nucleus sampling mass (1: all)")
    group.add_argument("--seed", type=int, default=DEFAULTS.seed, help="random seed of sampling")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default: cpu)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument(
        "--precision",
        choices=("auto", "float32", "bf16", "int8"),
        default=DEFAULTS.precision,
        help="weights' arithmetic; auto: bf16 where the CPU has native bf16 matrix units, else float32",
    )


def decode_overrides(args: argparse.Namespace, nbest: int = 1) -> dict[str, object]:
    return dict(
        beam=args.beam,
        greedy=args.greedy,
        lenpen=args.lenpen,
        lenpen_form=args.lenpen_form,
        ensemble_mean=args.ensemble_mean,
        max_len_a=args.max_len_a,
        max_len_b=args.max_len_b,
        min_len=args.min_len,
        nbest=nbest,
        max_tokens=args.max_tokens,
        max_source_positions=args.max_source_positions,
        on_long_line=args.on_long_line,
        sampling=args.sampling,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        precision=args.precision,
    )


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    """`--model DIR [DIR ...]`, shared by `translate` and `evaluate`: several directories are an ensemble."""
    parser.add_argument(
        "--model",
        required=True,
        type=Path,
        nargs="+",
        metavar="DIR",
        help="model directory (config, weights, tokenizer); several decode as an ensemble (their mean probability)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    add_model_argument(parser)
    parser.add_argument("--input", type=Path, help="input text, one sentence per line (default: stdin)")
    parser.add_argument("--output", type=Path, help="write here, atomically (default: stdout)")
    parser.add_argument("--nbest", type=int, default=1, help="hypotheses per line, as 'I ||| HYP ||| SCORE' lines")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or warnings on stderr")
    parser.add_argument("--verbose", action="store_true", help="say on stderr which fast paths were chosen")
    add_decode_arguments(parser)


MAX_INPUT_BYTES = 1 << 30  # 1 GiB of text in one run; more is refused before it fills the memory


def read_lines(path: Path | None) -> tuple[list[str], str]:
    """Lines of a UTF-8 file, pipe or /dev/fd/N (or stdin) without their line ends (`aiayn.io.read_text_lines`:
    split at "\\n" only), and the name to cite in messages. NUL bytes are refused with their line."""
    name = str(path) if path is not None else "<stdin>"
    if path is not None and not path.exists():
        raise FileNotFoundError(f"{path}: input file not found")
    if path is not None and path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, not a text file")
    if path is None and sys.stdin is None:
        raise OSError("<stdin> is closed; pass --input FILE")
    try:
        if path is not None:
            with path.open("rb") as handle:  # a FIFO or /dev/fd/N has no size: read it, bounded
                data = handle.read(MAX_INPUT_BYTES + 1)
        else:
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    except (ValueError, AttributeError):  # stdin closed (ValueError: I/O on closed file)
        raise OSError(f"{name} is closed or unreadable; pass --input FILE") from None
    if len(data) > MAX_INPUT_BYTES:
        raise ValueError(f"{name}: more than {MAX_INPUT_BYTES} bytes of input; split it into smaller files")
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise ValueError(f"{name}:{line}: NUL byte in the text")
    return read_text_lines(data, name), name


def write_stdout(text: str) -> None:
    """Write to stdout; a closed stdout or a reader that went away is one clear error."""
    try:
        if sys.stdout is None:
            raise BrokenPipeError
        sys.stdout.write(text)
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # ValueError: I/O operation on closed file
        raise OSError("stdout is closed (or its reader exited); pass --output FILE") from None


def check_device(device: str) -> str:
    """`--device` as torch reads it, or one clear error before anything is loaded."""
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"--device {device!r}: not a device; use cpu, cuda or cuda:N") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available on this machine")
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise ValueError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def check_model_dir(path: Path, flag: str = "--model") -> None:
    """`--model` names a model directory; a file or a missing path is one clear error."""
    if not path.exists():
        raise FileNotFoundError(f"{flag} {path}: no such directory")
    if not path.is_dir():
        raise NotADirectoryError(f"{flag} {path}: is a file; {flag} takes a model directory (config.json, ...)")


def load_reranker(args: argparse.Namespace) -> dict[str, object] | None:
    """The second model of `--rerank-with` and how it reranks, or None; mismatched flags are one clear error."""
    if args.rerank_with is None:
        if args.rerank_direction is not None:
            raise ValueError("--rerank-direction needs --rerank-with DIR (the second model)")
        return None
    if args.rerank_direction is None:
        raise ValueError("--rerank-with needs --rerank-direction r2l or channel (how the second model reads)")
    if len(args.model) > 1:
        raise ValueError("--rerank-with rescores one --model's n-best; pass one --model, not an ensemble")
    if args.greedy or args.sampling:
        raise ValueError("--rerank-with reranks a beam's n-best; drop --greedy / --sampling")
    check_model_dir(args.rerank_with, "--rerank-with")
    from aiayn.decoding import Translator

    second = Translator.from_pretrained(args.rerank_with, device=args.device, precision=args.precision)
    return dict(second=second, direction=args.rerank_direction, pool=args.rerank_pool, weight=args.rerank_weight)


def translate_lines(
    translator, lines: list[str], name: str, quiet: bool, progress: bool, reranker: dict | None = None, **overrides
):
    """Translations of `lines` (reranked by `reranker`, from `load_reranker`, when given); warnings and errors
    about over-long lines cite `name:line`."""
    from aiayn.decoding import LongInputError

    try:
        if reranker is not None:
            results = _reranked(translator, lines, reranker, progress)
        else:
            results = translator.translate_detailed(lines, progress=progress, **overrides)
    except LongInputError as error:
        raise ValueError(
            f"{name}:{error.index + 1}: the line has {error.length} subword tokens, more than the model's limit "
            f"of {error.limit} (use --on-long-line truncate to translate its beginning)"
        ) from None
    limit = translator.source_limit(translator.config)
    for line, result in enumerate(results, start=1):
        if result.truncated_from is not None and not quiet:
            print(
                f"aiayn translate: warning: {name}:{line}: {result.truncated_from} subword tokens exceed the "
                f"model's limit of {limit}; translated the first {limit}",
                file=sys.stderr,
            )
    return results


def _reranked(translator, lines: list[str], reranker: dict, progress: bool):
    """`aiayn.decoding.rerank` as Translation objects: the candidates best first with their combined scores."""
    from aiayn.decoding import Translation
    from aiayn.decoding.rerank import rerank

    config = translator.config
    ranked = rerank(translator, reranker["second"], lines, reranker["direction"], beam=config.beam,
                    pool=reranker["pool"], weights=(1.0, reranker["weight"]), progress=progress)  # fmt: skip
    kept = [candidates[: config.nbest] for candidates in ranked]
    return [Translation(line, [c.text for c in cs], [c.score for c in cs]) for line, cs in zip(lines, kept)]


def format_output(results, nbest: int) -> str:
    out = []
    for index, result in enumerate(results):
        if nbest == 1:
            out.append(result.text.replace("\n", " "))
            continue
        if not result.hypotheses:
            out.append(f"{index} |||  ||| 0.0000")
        for hypothesis, score in zip(result.hypotheses, result.scores):
            out.append(f"{index} ||| {hypothesis.replace(chr(10), ' ')} ||| {score:.4f}")
    return "".join(line + "\n" for line in out)


def run(args: argparse.Namespace) -> int:
    import torch

    from aiayn.decoding import Translator
    from aiayn.io import atomic_write_bytes

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    check_device(args.device)
    for model_dir in args.model:
        check_model_dir(model_dir)
    lines, name = read_lines(args.input)
    overrides = decode_overrides(args, nbest=args.nbest)
    reranker = load_reranker(args)
    translator = Translator.from_pretrained(args.model, device=args.device, **overrides)
    if args.verbose and translator.runtime is not None:
        print(f"aiayn translate: {translator.runtime.describe()}", file=sys.stderr)
    progress = args.input is not None and not args.quiet
    results = translate_lines(translator, lines, name, args.quiet, progress, reranker)
    text = format_output(results, args.nbest)
    if args.output is not None:
        atomic_write_bytes(args.output, text.encode("utf-8"))
    else:
        write_stdout(text)
    return 0
