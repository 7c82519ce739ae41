"""Every limit answers its documented status and names itself; timeouts and a full queue do not block others;
concurrent requests are merged into one model call and routed back; failures never leak a traceback or path."""

from __future__ import annotations

import threading
import time

import pytest

from aiayn.decoding import Translator
from aiayn.serving import ApiKey
from tests.serving.conftest import Slow, make_service, running
from tests.serving.test_api import LIMITS


@pytest.fixture(scope="module")
def client(serve_model_dir):
    with running(make_service(serve_model_dir, **LIMITS)) as client:
        yield client


@pytest.mark.parametrize(
    "body, status, limit",
    [
        ({"texts": ["a" * 401]}, 400, "max_chars"),
        ({"texts": ["A dog."] * 7}, 400, "max_texts"),
        ({"texts": ["a dog runs. " * 25] * 4}, 400, "max_tokens_per_request"),
        ({"texts": ["A dog."], "beam": 6}, 400, "max_beam"),
        ({"texts": ["A dog."], "beam": 5, "nbest": 4}, 400, "max_nbest"),
        ({"texts": ["A dog. " * 9], "return_attention": True}, 400, "max_attention_sentences"),
        ({"texts": ["x" * 70000]}, 413, "max_body_bytes"),
    ],
)
def test_each_limit_names_itself(client, body, status, limit):
    reply = client.post_json("/v1/translate", body)
    assert reply.status == status, reply.body
    assert reply.json()["limit"] == limit
    assert str(LIMITS.get(limit, "")) in reply.json()["error"]


def test_libretranslate_limits(client):
    too_long = client.post_json("/translate", {"q": "a" * 401, "source": "en", "target": "de"})
    assert too_long.status == 400 and too_long.json()["limit"] == "max_chars"
    assert too_long.json()["error"] == "q has 401 characters, more than the limit of 400"
    too_many = client.post_json("/translate", {"q": ["a"] * 7, "source": "en", "target": "de"})
    assert too_many.status == 400 and too_many.json()["limit"] == "max_texts"
    alternatives = client.post_json("/translate", {"q": "a", "source": "en", "target": "de", "alternatives": 3})
    assert alternatives.status == 400 and alternatives.json()["limit"] == "max_nbest"


def test_nbest_above_beam_is_422_naming_nbest(client):
    reply = client.post_json("/v1/translate", {"texts": ["A dog."], "beam": 2, "nbest": 3})
    assert reply.status == 422 and reply.json()["field"] == "nbest"


def _in_thread(function, *args):
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("reply", function(*args)))
    thread.start()
    return thread, out


def test_timeout_answers_504_without_blocking_others(serve_model_dir):
    slow = Slow(Translator.from_pretrained(serve_model_dir), delay=1.0)
    with running(make_service(serve_model_dir, slow, request_timeout_s=0.3)) as client:
        start = time.monotonic()
        thread, out = _in_thread(client.post_json, "/v1/translate", {"texts": ["A dog runs."]})
        time.sleep(0.05)
        assert client.get("/v1/health").status == 200 and time.monotonic() - start < 0.9  # the loop is free
        thread.join()
        reply = out["reply"]
        assert reply.status == 504 and reply.json()["limit"] == "request_timeout_s"
        assert time.monotonic() - start >= 0.3  # and before the model call's 1 s were over: not a 200
        slow.delay = 0.0
        time.sleep(1.0)  # the worker finishes the abandoned call and goes on
        assert client.post_json("/v1/translate", {"texts": ["A dog runs."]}).status == 200


def test_full_queue_is_503_with_retry_after(serve_model_dir):
    slow = Slow(Translator.from_pretrained(serve_model_dir), delay=0.6)
    with running(make_service(serve_model_dir, slow, queue_sentences=2)) as client:
        first, _ = _in_thread(client.post_json, "/v1/translate", {"texts": ["A dog."]})
        time.sleep(0.2)  # the worker holds the first request; the queue is empty again
        second, out = _in_thread(client.post_json, "/v1/translate", {"texts": ["A cat.", "A cow."]})
        time.sleep(0.2)
        refused = client.post_json("/v1/translate", {"texts": ["A bird."]})
        assert refused.status == 503 and refused.json()["limit"] == "queue_sentences"
        assert int(refused.headers["retry-after"]) >= 1
        first.join()
        second.join()
        assert out["reply"].status == 200


def test_concurrent_requests_are_merged_and_routed_back(serve_model_dir, translator):
    slow = Slow(Translator.from_pretrained(serve_model_dir), delay=1.0)
    texts = ["A dog runs.", "Two men sit on a bench.", "A girl plays.", "A red car.", "People walk."]
    with running(make_service(serve_model_dir, slow)) as client:
        first, _ = _in_thread(client.post_json, "/v1/translate", {"texts": ["A cat."]})
        deadline = time.monotonic() + 30  # wait until the worker holds the first request: on a loaded machine
        while not slow.calls and time.monotonic() < deadline:  # that can take longer than any fixed sleep
            time.sleep(0.01)
        assert slow.calls == [["A cat."]]
        threads = [_in_thread(client.post_json, "/v1/translate", {"texts": [t]}) for t in texts]
        for thread, _ in threads:
            thread.join()
        first.join()
        metrics = client.get("/metrics").body.decode()
    assert sorted(slow.calls[1]) == sorted(texts)  # all five waiting requests in one model call
    expected = translator.translate(texts)
    for (_, out), want in zip(threads, expected):
        assert out["reply"].json()["translations"][0]["text"] == want
    assert 'aiayn_batch_requests_bucket{le="4.0",model="en-de"} 1.0' in metrics  # the first call: 1 request


def test_no_batching_runs_sentences_one_by_one(serve_model_dir, translator):
    slow = Slow(Translator.from_pretrained(serve_model_dir))
    with running(make_service(serve_model_dir, slow, batching=False)) as client:
        reply = client.post_json("/v1/translate", {"texts": ["A dog runs.", "A cat sleeps."]})
    assert slow.calls == [["A dog runs."], ["A cat sleeps."]]
    assert [t["text"] for t in reply.json()["translations"]] == translator.translate(["A dog runs.", "A cat sleeps."])


def test_failure_is_500_without_traceback_or_path(serve_model_dir):
    failing = Slow(Translator.from_pretrained(serve_model_dir), fail=True)
    with running(make_service(serve_model_dir, failing)) as client:
        native = client.post_json("/v1/translate", {"texts": ["A dog."]})
        lt = client.post_json("/translate", {"q": "A dog.", "source": "en", "target": "de"})
        assert client.get("/v1/health").json()["status"] == "ok"  # the worker survived
    for reply in (native, lt):
        assert reply.status == 500
        assert reply.json() == {"error": "Cannot translate text: translation failed"}


def test_api_keys_and_quotas(serve_model_dir):
    keys = {"k1": ApiKey(requests=2), "k2": ApiKey(characters=10)}
    with running(make_service(serve_model_dir, api_keys=keys, quota_window_s=30)) as client:
        missing = client.post_json("/translate", {"q": "A dog.", "source": "en", "target": "de"})
        assert missing.status == 403 and missing.json()["error"].startswith("Invalid API key")
        wrong = client.post_json("/v1/translate", {"texts": ["A dog."], "api_key": "nope"})
        assert wrong.status == 403 and wrong.json()["limit"] == "api_key"
        body = {"q": "A dog.", "source": "en", "target": "de", "api_key": "k1"}
        assert client.post_json("/translate", body).status == 200
        assert client.post_form("/translate", body).status == 200
        over = client.post_json("/translate", body)
        assert over.status == 429 and over.json()["error"].startswith("Slowdown:")
        assert 1 <= int(over.headers["retry-after"]) <= 30
        assert client.post_json("/v1/translate", {"texts": ["A dog."], "api_key": "k2"}).status == 200
        chars = client.post_json("/v1/translate", {"texts": ["A cat."], "api_key": "k2"})
        assert chars.status == 429 and "10 characters" in chars.json()["error"]
