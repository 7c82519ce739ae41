"""A real server on loopback for the serving tests: uvicorn in a thread on a free port, stopped after.

`running(service)` yields a `Client` speaking plain HTTP/1.1 (http.client) to it; `Slow` wraps a Translator so
that tests can hold the worker busy (timeouts, a full queue, merged batches) or make it fail.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import uvicorn  # noqa: E402

from aiayn.decoding import Translator  # noqa: E402
from aiayn.serving import ServeConfig, Service, create_app  # noqa: E402


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


class Client:
    def __init__(self, port: int) -> None:
        self.port = port

    def request(self, method: str, path: str, body=None, headers=None, chunked: bool = False) -> Reply:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def post_json(self, path: str, data) -> Reply:
        raw = data if isinstance(data, (bytes, str)) else json.dumps(data)
        return self.request("POST", path, raw, {"Content-Type": "application/json"})

    def post_form(self, path: str, fields) -> Reply:
        body = urllib.parse.urlencode(fields, doseq=True)
        return self.request("POST", path, body, {"Content-Type": "application/x-www-form-urlencoded"})


@contextlib.contextmanager
def running(service: Service):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield Client(port)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


class Slow:
    """A Translator that sleeps `delay` seconds per model call (or raises) and records each call's sentences."""

    def __init__(self, translator: Translator, delay: float = 0.0, fail: bool = False) -> None:
        self._translator, self.delay, self.fail = translator, delay, fail
        self.calls: list[list[str]] = []

    def __getattr__(self, name):
        return getattr(self._translator, name)

    def translate_detailed(self, sentences, **overrides):
        self.calls.append(list(sentences))
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("/secret/path/model.safetensors: boom")
        return self._translator.translate_detailed(sentences, **overrides)


@pytest.fixture(scope="session")
def serve_model_dir(tmp_path_factory) -> Path:
    from tests.decoding.model_dir import build_model_dir

    return build_model_dir(tmp_path_factory.mktemp("serving"))


@pytest.fixture(scope="session")
def translator(serve_model_dir) -> Translator:
    return Translator.from_pretrained(serve_model_dir)


def make_service(model_dir: Path, translator=None, **config) -> Service:
    translator = translator or Translator.from_pretrained(model_dir)
    return Service([("en-de", translator, model_dir.name)], ServeConfig(**config))
