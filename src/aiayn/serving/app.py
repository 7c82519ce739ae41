"""The FastAPI application: LibreTranslate's API, the native API, health, info, metrics and the web page.

    app = create_app(service)      # uvicorn.run(app, host="127.0.0.1", port=8000)

LibreTranslate-compatible (a client written for LibreTranslate works by changing only the URL):
    POST /translate    q (string or list), source (code or "auto"), target, format ("text"), alternatives,
                       api_key; JSON or form body -> {"translatedText", "alternatives", "detectedLanguage"}
    GET  /languages    [{"code", "name", "targets"}]
Native:
    POST /v1/translate texts, source, target, beam, lenpen, nbest, sampling options, return_attention
    GET  /v1/health, GET /v1/info, GET /metrics (Prometheus text format), GET /openapi.json
Page:
    GET  /             translate-as-you-type and the attention of the returned hypothesis (static/)

Errors: `{"error": "..."}` with LibreTranslate's status codes (400 bad request or limit, 403 API key, 429 quota,
500 translation failure) and 413 (body too large), 422 (native API: malformed JSON or wrong types, naming the
field), 503 (queue full, Retry-After), 504 (request timeout).
"""

from __future__ import annotations

import dataclasses
import json
import time
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from aiayn.model import Transformer
from aiayn.serving import errors
from aiayn.serving.errors import ApiError
from aiayn.serving.languages import language_name
from aiayn.serving.service import Service

STATIC = files("aiayn.serving") / "static"
ENDPOINTS = {"/translate", "/languages", "/v1/translate", "/v1/health", "/v1/info", "/metrics", "/"}
Number = StrictFloat | StrictInt


class TranslateRequest(BaseModel):
    """Native translation request; unset search fields take the server's defaults (section 6.1)."""

    model_config = ConfigDict(extra="forbid")
    texts: list[StrictStr] = Field(min_length=1, description="texts; newlines are kept, N lines in, N lines out")
    source: StrictStr | None = Field(None, description="source language; optional when one model fits")
    target: StrictStr | None = Field(None, description="target language; optional when one model fits")
    beam: Annotated[StrictInt, Field(ge=1)] | None = None
    lenpen: Number | None = Field(None, ge=0, description="length penalty alpha")
    nbest: Annotated[StrictInt, Field(ge=1)] | None = None
    greedy: StrictBool | None = None
    sampling: StrictBool | None = None
    temperature: Number | None = Field(None, gt=0)
    top_k: Annotated[StrictInt, Field(ge=0)] | None = None
    top_p: Number | None = Field(None, gt=0, le=1)
    seed: StrictInt | None = None
    max_len_a: Number | None = Field(None, ge=0)
    max_len_b: Annotated[StrictInt, Field(ge=0)] | None = None
    return_attention: StrictBool = Field(False, description="every layer's and head's attention of each sentence")
    api_key: StrictStr | None = None

    def overrides(self) -> dict[str, Any]:
        names = ("beam", "lenpen", "nbest", "greedy", "sampling", "temperature", "top_k", "top_p", "seed")
        return {name: getattr(self, name) for name in names + ("max_len_a", "max_len_b")}


LIBRETRANSLATE_BODY = {
    "requestBody": {
        "content": {
            media: {
                "schema": {
                    "type": "object",
                    "required": ["q", "source", "target"],
                    "properties": {
                        "q": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                        "source": {"type": "string", "description": "language code or auto"},
                        "target": {"type": "string"},
                        "format": {"type": "string", "enum": ["text"], "default": "text"},
                        "alternatives": {"type": "integer", "minimum": 0, "default": 0},
                        "api_key": {"type": "string"},
                    },
                }
            }
            for media in ("application/json", "application/x-www-form-urlencoded", "multipart/form-data")
        }
    }
}


class Metered:
    """ASGI middleware: request count by endpoint and status, and latency by endpoint."""

    def __init__(self, app, service: Service) -> None:
        self.app, self.metrics = app, service.metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"
        start, status = time.perf_counter(), [500]

        async def sending(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.requests.labels(endpoint, str(status[0])).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)


async def _libretranslate_fields(request: Request) -> dict[str, Any]:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form()
        data: dict[str, Any] = {key: form.get(key) for key in form}
        if len(form.getlist("q")) > 1:
            data["q"] = form.getlist("q")
        return data
    body = await request.body()
    try:
        data = json.loads(body) if body else {}
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "Invalid request: the body is not valid JSON", field="body") from None
    if not isinstance(data, dict):
        raise ApiError(400, "Invalid request: the body must be a JSON object", field="body")
    return data


def _alternatives(value: Any, limit: int) -> int:
    try:
        count = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        count = None
    if count is None or count < 0:
        raise ApiError(400, "Invalid request: alternatives must be a non-negative integer", field="alternatives")
    if count + 1 > limit:
        raise ApiError(
            400, f"Invalid request: alternatives {count} exceeds the limit of {limit - 1}", limit="max_nbest",
            field="alternatives",
        )  # fmt: skip
    return count


def create_app(service: Service) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        service.stop()

    app = FastAPI(
        title="aiayn translation server",
        description=__doc__,
        version="1",
        docs_url=None,  # Swagger UI and ReDoc load their scripts from a CDN; the schema is at /openapi.json
        redoc_url=None,
        lifespan=lifespan,
    )
    errors.install(app)
    app.state.service = service

    # --- LibreTranslate ----------------------------------------------------------------------------------

    @app.post("/translate", openapi_extra=LIBRETRANSLATE_BODY, tags=["LibreTranslate"])
    async def libretranslate(request: Request) -> JSONResponse:
        """LibreTranslate's /translate: same fields, same answers, same error shape."""
        data = await _libretranslate_fields(request)
        q = data.get("q")
        for name in ("q", "source", "target"):
            if data.get(name) in (None, "", []):
                raise ApiError(400, f"Invalid request: missing {name} parameter", field=name)
        batch = isinstance(q, list)
        if not (isinstance(q, str) or (batch and all(isinstance(text, str) for text in q))):
            raise ApiError(400, "Invalid request: q must be a string or a list of strings", field="q")
        source, target = data["source"], data["target"]
        if not isinstance(source, str) or not isinstance(target, str):
            raise ApiError(400, "Invalid request: source and target must be strings", field="source")
        text_format = data.get("format") or "text"
        if text_format != "text":
            raise ApiError(400, f"Invalid request: format {text_format!r} is not supported (only text)", field="format")
        alternatives = _alternatives(data.get("alternatives", 0) or 0, service.config.max_nbest)
        api_key = data.get("api_key") if isinstance(data.get("api_key"), str) else None
        model = service.pick(source, target)
        overrides: dict[str, Any] = {}
        if alternatives:
            overrides = {"nbest": alternatives + 1, "beam": max(model.translator.config.beam, alternatives + 1)}
        settings = service.settings(model, overrides)
        texts = q if batch else [q]
        outcome = await service.translate(model, texts, settings, api_key=api_key, where="q")
        body: dict[str, Any] = {"translatedText": outcome.texts if batch else outcome.texts[0]}
        if alternatives:
            body["alternatives"] = outcome.alternatives if batch else outcome.alternatives[0]
        if source == "auto":
            detected = {"confidence": 100.0, "language": model.source}
            body["detectedLanguage"] = [detected] * len(texts) if batch else detected
        return JSONResponse(body)

    @app.get("/languages", tags=["LibreTranslate"])
    async def languages() -> list[dict[str, Any]]:
        """Every language served, with the targets it translates into."""
        targets: dict[str, list[str]] = {code: [] for code in service.languages()}
        for model in service.models.values():
            targets[model.source].append(model.target)
        return [{"code": code, "name": language_name(code), "targets": sorted(t)} for code, t in targets.items()]

    # --- native ----------------------------------------------------------------------------------------------

    @app.post("/v1/translate", tags=["native"])
    async def translate(request: TranslateRequest) -> JSONResponse:
        """Translate texts; with nbest > 1 each text has alternatives; with return_attention each sentence has
        the encoder self-, decoder self- and encoder-decoder attention of every layer and head."""
        model = service.pick(request.source, request.target)
        settings = service.settings(model, request.overrides())
        outcome = await service.translate(
            model, request.texts, settings, api_key=request.api_key, attention=request.return_attention
        )
        plan, result = outcome.plan, outcome.result
        sentences: list[list[dict[str, Any]]] = [[] for _ in request.texts]
        for i, (segment, translation) in enumerate(zip(plan.segments, result.translations)):
            entry: dict[str, Any] = {
                "source": segment,
                "text": translation.text,
                "score": translation.scores[0] if translation.scores else 0.0,
                "source_pieces": translation.source_pieces,
                "pieces": translation.pieces[0] if translation.pieces else [],
            }
            if len(translation.hypotheses) > 1:
                entry["hypotheses"] = [
                    {"text": text, "score": score} for text, score in zip(translation.hypotheses, translation.scores)
                ]
            if result.attention[i] is not None:
                entry["attention"] = result.attention[i]
            sentences[plan.text_of_segment[i]].append(entry)
        return JSONResponse(
            {
                "model": model.pair,
                "translations": [
                    {"text": text, "alternatives": alternatives, "sentences": mine}
                    for text, alternatives, mine in zip(outcome.texts, outcome.alternatives, sentences)
                ],
            }
        )

    @app.get("/v1/health", tags=["native"])
    async def health() -> JSONResponse:
        models = {
            pair: {"queue_sentences": m.batcher.waiting, "worker_alive": m.batcher.alive}
            for pair, m in service.models.items()
        }
        ok = all(entry["worker_alive"] for entry in models.values())
        return JSONResponse({"status": "ok" if ok else "failing", "models": models}, status_code=200 if ok else 503)

    @app.get("/v1/info", tags=["native"])
    async def info() -> dict[str, Any]:
        """Each model's configuration, parameters, vocabulary and languages; the server's limits."""
        limits = {k: v for k, v in vars(service.config).items() if k != "api_keys"}
        limits["api_keys_required"] = service.quotas.required
        return {
            "models": [
                {
                    "source": m.source,
                    "target": m.target,
                    "name": m.name,
                    "parameters": Transformer.count_parameters(m.translator.model.config),  # int8 packs weights
                    "vocabulary": m.translator.tokenizer.vocab_size,
                    "target_vocabulary": m.translator.target_tokenizer.vocab_size,
                    "source_limit_tokens": m.translator.source_limit(),
                    "config": m.translator.model.config.to_dict(),
                    "decode": dataclasses.asdict(m.translator.config),
                }
                for m in service.models.values()
            ],
            "limits": limits,
        }

    @app.get("/metrics", tags=["native"])
    async def metrics() -> Response:
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # --- the page --------------------------------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"), media_type="text/html")

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.add_middleware(errors.BodyLimit, max_bytes=service.config.max_body_bytes)
    app.add_middleware(Metered, service=service)
    return app


__all__ = ["TranslateRequest", "create_app"]
