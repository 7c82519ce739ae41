"""A LibreTranslate-equivalent baseline server: LibreTranslate's `POST /translate` over a CTranslate2 model.

    .venv/bin/aiayn export ctranslate2 runs/demo/checkpoint-best --out /tmp/ct2
    .venv/bin/python scripts/ct2_baseline_server.py --model /tmp/ct2 --spm runs/demo/checkpoint-best/tokenizer.model \
        --port 8001 --threads 2 --beam 4 --lenpen 0.6

What LibreTranslate 1.9 (with argos-translate 1.12) does, on our model exported by `aiayn export ctranslate2`,
without its Flask/waitress stack, its Argos package format and its model downloads (the load test's baseline,
scripts/load_test.py; LibreTranslate itself pins numpy<2 and older prometheus-client, packaging and requests
than our environment, so it does not install beside our torch):

- `POST /translate`: JSON or form body, `q` a string or a list of strings, `source`, `target`, `format`
  (`text`), `alternatives`; answers `{"translatedText": str or list}` (and `"alternatives"`), errors
  `{"error": "..."}` with 400. `GET /languages` lists the one pair served.
- Translation, as LibreTranslate's loop: for each text of `q` in turn, for each paragraph (the text split on
  "\\n"), the paragraph is split into sentences (here by sentencex, the splitter `aiayn serve` uses, so both
  servers translate the same segments; LibreTranslate uses minisbd), each sentence is split into pieces by
  sentencepiece (+ the model's `</s>`), and the paragraph's sentences go to ONE
  `ctranslate2.Translator.translate_batch` call (argos' arguments: `max_batch_size=32, batch_type="tokens",
  replace_unknowns=True`, beam max(nbest, --beam), `num_hypotheses` alternatives + 1, here our --lenpen instead
  of argos' fixed 0.2); the sentences' outputs are joined with a space, the paragraphs with "\\n". A request
  with one single-line text (what the load test sends) is therefore exactly one `translate_batch` call. There is
  no batching across texts or requests: concurrent requests each wait for their own calls, which the
  translator runs one at a time (`inter_threads=1`, `intra_threads=--threads`), as LibreTranslate's one shared
  `ctranslate2.Translator` does.
- The same search limits as `aiayn serve`'s defaults: `min_decoding_length=--min-len`,
  `max_decoding_length = floor(--max-len-a x longest source + --max-len-b)` per call (ours is per sentence; the
  same for one sentence), `<pad>` and `<s>` suppressed (our searches never generate them). CTranslate2's length
  penalty is |Y|^alpha (ours defaults to GNMT's ((5+|Y|)/6)^alpha) and it stops once `beam` hypotheses
  finished (docs/INTEROP.md).
- Served by uvicorn with one worker; the model calls run in Starlette's thread pool, never on the event loop.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import ctranslate2
import sentencepiece as spm
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sentencex import segment
from starlette.concurrency import run_in_threadpool


class Ct2Translator:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.translator = ctranslate2.Translator(
            str(args.model), device="cpu", inter_threads=1, intra_threads=args.threads
        )
        self.source = spm.SentencePieceProcessor(model_file=str(args.spm))
        self.target = spm.SentencePieceProcessor(model_file=str(args.target_spm or args.spm))
        config = json.loads((args.model / "config.json").read_text(encoding="utf-8"))
        self.eos = config.get("eos_token", "</s>")
        names = ("target_vocabulary.json", "shared_vocabulary.json")
        vocab_file = next(args.model / name for name in names if (args.model / name).is_file())
        known = set(json.loads(vocab_file.read_text(encoding="utf-8")))
        self.suppress = [[piece] for piece in ("<pad>", "<s>") if piece in known]

    def paragraph(self, text: str, nbest: int) -> list[str]:
        """One paragraph's `nbest` translations: one translate_batch call over its sentences."""
        sentences = [s for s in segment(self.args.source_lang, text) if s.strip()] if text.strip() else []
        if not sentences:
            return [text] * nbest
        tokens = [self.source.encode(s.strip(), out_type=str) + [self.eos] for s in sentences]
        a = self.args
        results = self.translator.translate_batch(
            tokens, max_batch_size=32, batch_type="tokens", replace_unknowns=True,
            beam_size=max(nbest, a.beam), num_hypotheses=nbest, length_penalty=a.lenpen,
            min_decoding_length=a.min_len, suppress_sequences=self.suppress or None, return_end_token=False,
            max_decoding_length=math.floor(a.max_len_a * (max(map(len, tokens)) - 1) + a.max_len_b),  # |x| without EOS
        )  # fmt: skip
        return [
            " ".join(self.target.decode_pieces(r.hypotheses[min(k, len(r.hypotheses) - 1)]) for r in results)
            for k in range(nbest)
        ]

    def text(self, text: str, nbest: int) -> list[str]:
        paragraphs = [self.paragraph(p, nbest) for p in text.split("\n")]
        return ["\n".join(p[k] for p in paragraphs) for k in range(nbest)]


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(model: Ct2Translator) -> FastAPI:
    app = FastAPI(title="CTranslate2 LibreTranslate-equivalent baseline", docs_url=None, redoc_url=None)
    pair = (model.args.source_lang, model.args.target_lang)

    @app.get("/languages")
    async def languages() -> list[dict]:
        return [{"code": pair[0], "name": pair[0], "targets": [pair[1]]},
                {"code": pair[1], "name": pair[1], "targets": []}]

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        if request.headers.get("content-type", "").startswith(("application/x-www-form-urlencoded", "multipart/")):
            form = await request.form()
            data = {key: form.get(key) for key in form}
            if len(form.getlist("q")) > 1:
                data["q"] = form.getlist("q")
        else:
            try:
                data = json.loads(await request.body())
            except ValueError:
                return error(400, "Invalid request: the body is not valid JSON")
            if not isinstance(data, dict):
                return error(400, "Invalid request: the body must be a JSON object")
        for name in ("q", "source", "target"):
            if not data.get(name):
                return error(400, f"Invalid request: missing {name} parameter")
        q, batch = data["q"], isinstance(data["q"], list)
        texts = q if batch else [q]
        if not all(isinstance(t, str) for t in texts):
            return error(400, "Invalid request: q must be a string or a list of strings")
        if (data["source"] not in (pair[0], "auto")) or data["target"] != pair[1]:
            return error(400, f"{data['source']}-{data['target']} is not supported")
        try:
            alternatives = int(data.get("alternatives") or 0)
        except (TypeError, ValueError):
            return error(400, "Invalid request: alternatives must be an integer")
        nbest = alternatives + 1
        outputs = await run_in_threadpool(lambda: [model.text(t, nbest) for t in texts])  # one text after another
        body: dict = {"translatedText": [o[0] for o in outputs] if batch else outputs[0][0]}
        if alternatives:
            body["alternatives"] = [o[1:] for o in outputs] if batch else outputs[0][1:]
        return JSONResponse(body)

    return app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a CTranslate2 directory (aiayn export ctranslate2)")
    parser.add_argument("--spm", type=Path, required=True, help="the source sentencepiece model (tokenizer.model)")
    parser.add_argument("--target-spm", type=Path, help="the target sentencepiece model (default: --spm)")
    parser.add_argument("--source-lang", default="en")
    parser.add_argument("--target-lang", default="de")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2 intra_threads (default: 2)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--lenpen", type=float, default=0.6, help="CTranslate2 length_penalty (|Y|^alpha)")
    parser.add_argument("--min-len", type=int, default=0, help="min_decoding_length")
    parser.add_argument("--max-len-a", type=float, default=1.0, help="max length = a x longest source + b")
    parser.add_argument("--max-len-b", type=int, default=50)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    app = create_app(Ct2Translator(args))
    uvicorn.run(app, host=args.host, port=args.port, workers=1, log_level=args.log_level, access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
