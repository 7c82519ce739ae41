"""`aiayn serve`: an HTTP translation service (LibreTranslate-compatible and native API) and a web page
that shows the attention of each translation live.

    aiayn serve --model DIR [--model SRC-TGT=DIR ...] [--host 127.0.0.1] [--port 8000] [--beam 4]

Each model directory is one language pair, read from its config.json or given as SRC-TGT=DIR. API keys:
--api-key KEY[:REQUESTS[:CHARACTERS]] (quotas per --quota-window seconds; 0 = unlimited), repeatable.
See docs/SERVING.md.
"""

from __future__ import annotations

import argparse

from aiayn.serving.settings import ServeConfig

HELP = "serve models over HTTP (LibreTranslate-compatible API, native API, metrics, attention web page)"

DEFAULTS = ServeConfig()


def decode_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The DecodeConfig defaults every model of the server starts from."""
    names = ("beam", "lenpen", "lenpen_form", "min_len", "precision")
    return {name: getattr(args, name) for name in names}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument(
        "--model", action="append", required=True, metavar="[SRC-TGT=]DIR", help="model directory (repeatable)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s; 0 picks a free one)")
    parser.add_argument("--beam", type=int, default=4, help="default beam size (default: 4, section 6.1)")
    parser.add_argument("--lenpen", type=float, default=0.6, help="default length penalty alpha (default: 0.6)")
    parser.add_argument(
        "--lenpen-form", choices=("gnmt", "power"), default="gnmt",
        help="gnmt: ((5+|Y|)/6)^alpha (the paper's); power: |Y|^alpha (fairseq, HF, CTranslate2)",
    )  # fmt: skip
    parser.add_argument(
        "--precision", choices=("auto", "float32", "bf16", "int8"), default="auto",
        help="decoding precision (default: auto, what this machine does best; aiayn info --runtime)",
    )  # fmt: skip
    parser.add_argument(
        "--min-len", type=int, default=0, help="default minimum output tokens (load tests force lengths with it)"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default: cpu)")
    limits = parser.add_argument_group("limits (each answers a 4xx naming it)")
    for name, help_text in (
        ("max_chars", "characters per text"),
        ("max_texts", "texts per request"),
        ("max_tokens_per_request", "subword tokens per request"),
        ("max_beam", "beam size"),
        ("max_nbest", "hypotheses per sentence"),
        ("max_body_bytes", "request body bytes"),
        ("request_timeout_s", "seconds per request"),
    ):
        default = getattr(DEFAULTS, name)
        limits.add_argument(
            "--" + name.replace("_", "-"), type=type(default), default=default, help=f"{help_text} ({default})"
        )
    batching = parser.add_argument_group("dynamic batching")
    batching.add_argument("--batch-tokens", type=int, default=DEFAULTS.batch_tokens, help="token budget per batch")
    batching.add_argument("--batch-wait-ms", type=float, default=DEFAULTS.batch_wait_ms, help="wait window (ms)")
    batching.add_argument("--queue-sentences", type=int, default=DEFAULTS.queue_sentences, help="queue bound")
    batching.add_argument(
        "--no-batching", action="store_true", help="one request at a time, one sentence at a time (a baseline)"
    )
    keys = parser.add_argument_group("API keys (none: open)")
    keys.add_argument("--api-key", action="append", default=[], metavar="KEY[:REQ[:CHARS]]", help="repeatable")
    keys.add_argument("--quota-window", type=float, default=DEFAULTS.quota_window_s, help="quota window (s)")
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))


def parse_api_key(spec: str):
    from aiayn.serving.settings import ApiKey

    key, *quotas = spec.split(":")
    if not key or len(quotas) > 2 or not all(q.isdigit() for q in quotas):
        raise ValueError(f"--api-key {spec}: expected KEY, KEY:REQUESTS or KEY:REQUESTS:CHARACTERS")
    numbers = [int(q) for q in quotas] + [0] * (2 - len(quotas))
    return key, ApiKey(requests=numbers[0], characters=numbers[1])


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    return ServeConfig(
        max_chars=args.max_chars,
        max_texts=args.max_texts,
        max_tokens_per_request=args.max_tokens_per_request,
        max_beam=args.max_beam,
        max_nbest=args.max_nbest,
        max_body_bytes=args.max_body_bytes,
        request_timeout_s=args.request_timeout_s,
        batch_tokens=args.batch_tokens,
        batch_wait_ms=args.batch_wait_ms,
        queue_sentences=args.queue_sentences,
        batching=not args.no_batching,
        api_keys=dict(parse_api_key(spec) for spec in args.api_key),
        quota_window_s=args.quota_window,
    )


def model_specs(specs: list[str]):
    from aiayn.serving.languages import pair_from_metadata, parse_model_spec

    out = []
    for spec in specs:
        pair, path = parse_model_spec(spec)
        if not path.is_dir():
            raise FileNotFoundError(f"--model {spec}: {path} is not a directory")
        pair = pair or pair_from_metadata(path)
        if pair is None:
            raise ValueError(
                f"--model {spec}: {path}/config.json does not name its languages; give them: --model en-de={path}"
            )
        out.append((pair, path))
    return out


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from aiayn.serving import Service, create_app
    except ModuleNotFoundError as error:
        missing = error.name
        raise RuntimeError(f"serving needs the serve extra: pip install 'aiayn[serve]' ({missing} missing)") from None
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    config = config_from_args(args)
    service = Service.load(model_specs(args.model), config, device=args.device, **decode_overrides(args))
    app = create_app(service)
    print(f"aiayn serve: {', '.join(service.models)} on http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.log_level == "debug")
    return 0
