"""Serving: an HTTP API (LibreTranslate-compatible and native) and a web page over the translator.

    from aiayn.serving import Service, ServeConfig, create_app
    service = Service.load([("en-de", Path("runs/demo/checkpoint-best"))], ServeConfig())
    uvicorn.run(create_app(service), host="127.0.0.1", port=8000)      # or: aiayn serve --model en-de=DIR

settings (limits, batching), text (lines, sentences, fitting), batcher (the model's worker thread), attention
(every layer and head, teacher forced), quota (API keys), errors (one error shape), service, app (routes).
FastAPI, uvicorn and sentencex come with the `serve` extra; they are imported only when used, so the rest of
aiayn (and `aiayn --help`) works without them.
"""

from __future__ import annotations

import importlib

from aiayn.serving.settings import ApiKey, ServeConfig

_LAZY = {"Service": "aiayn.serving.service", "create_app": "aiayn.serving.app"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aiayn.serving' has no attribute {name!r}")


__all__ = ["ApiKey", "ServeConfig", "Service", "create_app"]
