"""The HTTP API over real loopback HTTP: same outputs as the Translator, LibreTranslate's shapes, N lines in and
N lines out, long texts split rather than truncated, hostile inputs, the native API's 422s, metrics, OpenAPI."""

from __future__ import annotations

import json

import pytest
import torch

from aiayn.decoding import Translator
from aiayn.model import Transformer
from aiayn.serving.text import sentences as split_sentences
from tests.decoding.model_dir import multi30k_test_sentences
from tests.serving.conftest import make_service, running

LIMITS = dict(max_chars=400, max_texts=6, max_tokens_per_request=300, max_beam=5, max_nbest=3, max_body_bytes=65536)


@pytest.fixture(scope="module")
def client(serve_model_dir):
    service = make_service(serve_model_dir, **LIMITS)
    with running(service) as client:
        yield client


@pytest.fixture(scope="module")
def fitting(translator) -> list[str]:
    """Multi30k test sentences that are one sentence each and fit the tiny model's 23-token limit."""
    limit = translator.source_limit()
    chosen = [
        s
        for s in multi30k_test_sentences(60)
        if split_sentences(s, "en") == [s] and len(translator.tokenizer.encode(s)) <= limit
    ]
    assert len(chosen) >= 4
    return chosen[:6]


def test_native_outputs_equal_the_translators(client, translator, fitting):
    reply = client.post_json("/v1/translate", {"texts": fitting, "beam": 3, "lenpen": 0.6, "nbest": 2})
    assert reply.status == 200, reply.body
    expected = translator.translate_detailed(fitting, beam=3, lenpen=0.6, nbest=2)
    got = reply.json()["translations"]
    assert [t["text"] for t in got] == [e.text for e in expected]
    for item, e in zip(got, expected):
        (sentence,) = item["sentences"]
        assert [h["text"] for h in sentence["hypotheses"]] == e.hypotheses
        assert [h["score"] for h in sentence["hypotheses"]] == pytest.approx(e.scores, abs=1e-5)
        assert sentence["source_pieces"] == e.source_pieces
        assert item["alternatives"] == e.hypotheses[1:]


def test_libretranslate_outputs_equal_the_translators(client, translator, fitting):
    expected = translator.translate(fitting)  # the server's default settings: beam 4, lenpen 0.6
    one = client.post_json("/translate", {"q": fitting[0], "source": "en", "target": "de"})
    assert one.status == 200 and one.json() == {"translatedText": expected[0]}
    many = client.post_json("/translate", {"q": fitting, "source": "en", "target": "de", "format": "text"})
    assert many.json() == {"translatedText": expected}
    form = client.post_form("/translate", {"q": fitting[1], "source": "en", "target": "de"})
    assert form.status == 200 and form.json() == {"translatedText": expected[1]}


def test_libretranslate_shapes(client, translator, fitting):
    alt = client.post_json("/translate", {"q": fitting[0], "source": "auto", "target": "de", "alternatives": 2})
    body = alt.json()
    assert set(body) == {"translatedText", "alternatives", "detectedLanguage"}
    assert body["detectedLanguage"] == {"confidence": 100.0, "language": "en"}
    assert len(body["alternatives"]) == 2 and all(isinstance(a, str) for a in body["alternatives"])
    expected = translator.translate_detailed([fitting[0]], beam=4, nbest=3)[0]
    assert [body["translatedText"], *body["alternatives"]] == expected.hypotheses
    listed = client.post_form("/translate", {"q": fitting[:2], "source": "auto", "target": "de", "alternatives": "1"})
    body = listed.json()
    assert isinstance(body["translatedText"], list) and len(body["translatedText"]) == 2
    assert [len(a) for a in body["alternatives"]] == [1, 1] and len(body["detectedLanguage"]) == 2
    languages = client.get("/languages").json()
    assert {"code": "en", "name": "English", "targets": ["de"]} in languages
    assert all(set(entry) == {"code", "name", "targets"} for entry in languages)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"source": "en", "target": "de"}, "Invalid request: missing q parameter"),
        ({"q": "x", "target": "de"}, "Invalid request: missing source parameter"),
        ({"q": "x", "source": "en"}, "Invalid request: missing target parameter"),
        ({"q": "x", "source": "en", "target": "fr"}, "fr is not supported"),
        ({"q": "x", "source": "xx", "target": "de"}, "xx is not supported"),
        ({"q": 5, "source": "en", "target": "de"}, "Invalid request: q must be a string or a list of strings"),
        ({"q": "x", "source": "en", "target": "de", "format": "html"}, "Invalid request: format 'html' is not"),
        ({"q": "x", "source": "en", "target": "de", "alternatives": "two"}, "Invalid request: alternatives must"),
    ],
)
def test_libretranslate_errors(client, data, message):
    reply = client.post_json("/translate", data)
    assert reply.status == 400
    assert reply.json()["error"].startswith(message)


def test_libretranslate_malformed_json_is_400(client):
    reply = client.post_json("/translate", b'{"q": "x", ')
    assert reply.status == 400 and reply.json()["error"] == "Invalid request: the body is not valid JSON"


def test_n_lines_in_n_lines_out(client, translator, fitting):
    text = f"{fitting[0]}\n\n  {fitting[1]}  \r\n   \n{fitting[2]} {fitting[3]}\n"
    reply = client.post_json("/v1/translate", {"texts": [text]})
    out = reply.json()["translations"][0]["text"]
    lines = out.split("\n")
    assert len(lines) == len(text.split("\n")) == 6
    expected = translator.translate(fitting[:4])
    assert lines[0] == expected[0] and lines[1] == "" and lines[2] == f"  {expected[1]}  \r" and lines[3] == "   "
    assert lines[4] == f"{expected[2]} {expected[3]}" and lines[5] == ""
    lt = client.post_json("/translate", {"q": ["a\nb\n\nc", ""], "source": "en", "target": "de"}).json()
    assert [t.count("\n") for t in lt["translatedText"]] == [3, 0]


def test_long_text_is_split_never_truncated(client, translator):
    limit = translator.source_limit()
    long_sentence = " ".join(["a small brown dog runs quickly across the green field"] * 4)  # no full stop
    word = "x" * 120
    reply = client.post_json("/v1/translate", {"texts": [long_sentence, word]})
    assert reply.status == 200, reply.body
    for item, source in zip(reply.json()["translations"], (long_sentence, word)):
        assert len(item["sentences"]) > 1
        assert all(len(s["source_pieces"]) <= limit for s in item["sentences"])
        joined = "".join(s["source"] for s in item["sentences"]).replace(" ", "")
        assert joined == source.replace(" ", "")  # every character went to the model


@pytest.mark.parametrize(
    "body, field",
    [
        ({"texts": "A dog."}, "texts"),
        ({"texts": [1]}, "texts[0]"),
        ({"texts": []}, "texts"),
        ({"texts": ["A dog."], "beam": "4"}, "beam"),
        ({"texts": ["A dog."], "beam": 0}, "beam"),
        ({"texts": ["A dog."], "top_p": 2}, "top_p"),
        ({"texts": ["A dog."], "return_attention": "yes"}, "return_attention"),
        ({"texts": ["A dog."], "colour": "red"}, "colour"),
        ({"text": ["A dog."]}, "texts"),
    ],
)
def test_native_wrong_types_are_422_naming_the_field(client, body, field):
    reply = client.post_json("/v1/translate", body)
    assert reply.status == 422
    assert reply.json()["field"] == field and field in reply.json()["error"]


def test_native_malformed_json_is_422(client):
    for raw in (b'{"texts": ["A dog."', b"\xff\xfe", b""):
        reply = client.post_json("/v1/translate", raw)
        assert reply.status == 422 and "error" in reply.json(), raw


def test_hostile_texts_get_defined_answers(client):
    surrogate = client.post_json("/v1/translate", '{"texts": ["A dog \\ud800 runs."]}')
    assert surrogate.status == 400 and surrogate.json()["field"] == "texts[0]"
    assert "lone surrogate U+D800" in surrogate.json()["error"]
    lt = client.post_json("/translate", '{"q": "\\udfff", "source": "en", "target": "de"}')
    assert lt.status == 400 and "surrogate" in lt.json()["error"]
    controls = client.post_json("/v1/translate", {"texts": ["A\x00 dog\x07 runs\x1b.\u0085", "\x00\x01"]})
    assert controls.status == 200
    texts = [t["text"] for t in controls.json()["translations"]]
    assert texts[1] == "" and isinstance(texts[0], str)
    big = json.dumps({"texts": ["a" * (1 << 20)]})
    reply = client.post_json("/v1/translate", big)
    assert reply.status == 413 and reply.json()["limit"] == "max_body_bytes"
    chunked = client.request(
        "POST", "/v1/translate", iter([big[i : i + 65536].encode() for i in range(0, len(big), 65536)]),
        {"Content-Type": "application/json"}, chunked=True,
    )  # fmt: skip
    assert chunked.status == 413 and chunked.json()["limit"] == "max_body_bytes"
    assert client.get("/v1/health").status == 200  # and the server is fine


def test_attention_is_the_returned_hypothesis_teacher_forced(client, translator, fitting):
    reply = client.post_json("/v1/translate", {"texts": [fitting[0]], "return_attention": True})
    sentence = reply.json()["translations"][0]["sentences"][0]
    a = sentence["attention"]
    N, h = translator.model.config.N, translator.model.config.h
    S, T = len(sentence["source_pieces"]) + 1, len(sentence["pieces"]) + 1
    assert a["source"][:-1] == sentence["source_pieces"] and a["target"][:-1] == sentence["pieces"]
    assert torch.tensor(a["encoder"]).shape == (N, h, S, S)
    assert torch.tensor(a["decoder"]).shape == (N, h, T, T)
    cross = torch.tensor(a["cross"])
    assert cross.shape == (N, h, T, S)
    searched = translator.translate_detailed([fitting[0]], need_attention=True)[0].attentions[0]
    assert torch.allclose(cross[-1].mean(0), searched.float(), atol=2e-3)  # what beam search saw
    assert torch.allclose(cross.sum(-1), torch.ones(N, h, T), atol=5e-3)


def test_health_info_metrics_openapi(client):
    assert client.get("/v1/health").json()["status"] == "ok"
    info = client.get("/v1/info").json()
    (model,) = info["models"]
    assert model["source"] == "en" and model["vocabulary"] == 400 and model["parameters"] > 0
    assert model["config"]["N"] == 2 and info["limits"]["max_chars"] == 400
    assert "/" not in model["name"]
    text = client.get("/metrics").body.decode()
    for name in ("aiayn_requests_total", "aiayn_request_seconds_bucket", "aiayn_batch_sentences_bucket",
                 "aiayn_queue_sentences", "aiayn_target_tokens_per_second", "aiayn_sentences_total"):  # fmt: skip
        assert name in text
    schema = client.get("/openapi.json").json()
    assert {"/translate", "/languages", "/v1/translate", "/v1/info"} <= set(schema["paths"])
    page = client.get("/")
    assert page.status == 200 and b"<svg" in page.body and b"http" not in page.body.replace(b"http://www.w3", b"")
    assert client.get("/static/app.js").status == 200
    missing = client.get("/nothing")
    assert missing.status == 404 and missing.json() == {"error": "Not Found"}


def test_info_counts_the_parameters_of_an_int8_model(serve_model_dir):
    """int8 packs the linear weights out of the module's parameters; /v1/info still reports the model's count."""
    translator = Translator.from_pretrained(serve_model_dir, precision="int8", reuse_memory=False)
    assert "int8" in translator.runtime.precision
    with running(make_service(serve_model_dir, translator)) as client:
        (model,) = client.get("/v1/info").json()["models"]
    assert model["parameters"] == Transformer.from_pretrained(serve_model_dir).num_parameters()
