"""The server on models imported with `aiayn import marian`, over real loopback HTTP: a random tiny
MarianMTModel (tests/interop/marian_fixture.py; shared and separate vocabularies) whose decoder starts from the
pad row and has no BOS. Translations equal the Translator's; the page's attention view (`/v1/translate` with
`return_attention`, as static/app.js asks for it) has the shapes of the source and target tokens, rows that sum
to 1, and equals the attention of the ids beam search itself produced, teacher forced from the model's start id.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aiayn.cli import main
from aiayn.config import with_overrides
from aiayn.decoding import Translator
from aiayn.decoding.search import generate
from aiayn.serving.text import sentences as split_sentences
from tests.conftest import multi30k_dir
from tests.interop.marian_fixture import write_marian_dir
from tests.serving.conftest import make_service, running

pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=[True, False], ids=["shared", "separate-vocabs"])
def imported(request, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("imported")
    boost = 12.0 if request.param else 8.0  # as tests/interop/test_marian.py: most hypotheses end before the limit
    hf_dir = write_marian_dir(root / "hf", multi30k_dir(), shared=request.param, eos_boost=boost)
    assert main(["import", "marian", str(hf_dir), "--out", str(root / "ours")]) == 0  # the real CLI path
    return root / "ours"


@pytest.fixture(scope="module")
def served(imported):
    translator = Translator.from_pretrained(imported, reuse_memory=False, precision="float32")
    with running(make_service(imported, translator)) as client:
        yield client, translator


@pytest.fixture(scope="module")
def sentences(served) -> list[str]:
    _, translator = served
    limit = translator.source_limit()
    with open(multi30k_dir() / "test2016.en", encoding="utf-8") as f:
        lines = [next(f).strip() for _ in range(20)]
    chosen = [s for s in lines if split_sentences(s, "en") == [s] and len(translator.tokenizer.encode(s)) <= limit]
    assert len(chosen) >= 3
    return chosen[:3]


def test_the_model_is_marian_shaped(served):
    _, translator = served
    c = translator.model.config
    assert c.decoder_start == "pad" and c.bos_id is None and c.decoder_start_id == c.pad_id
    if not c.share_embeddings:  # two tokenizers that disagree: the source's ids would be the wrong ones
        source, target = translator.tokenizer, translator.target_tokenizer
        assert source is not target and source.vocab != target.vocab


def test_translations_equal_the_translators(served, sentences):
    client, translator = served
    expected = translator.translate_detailed(sentences, beam=3, lenpen=0.6, nbest=2)
    reply = client.post_json("/v1/translate", {"texts": sentences, "beam": 3, "lenpen": 0.6, "nbest": 2})
    assert reply.status == 200, reply.body
    got = reply.json()["translations"]
    assert [t["text"] for t in got] == [e.text for e in expected]
    assert [t["alternatives"] for t in got] == [e.hypotheses[1:] for e in expected]
    assert [t["sentences"][0]["pieces"] for t in got] == [e.pieces[0] for e in expected]
    libre = client.post_json("/translate", {"q": sentences, "source": "en", "target": "de"})
    assert libre.status == 200 and libre.json() == {"translatedText": translator.translate(sentences)}


def test_attention_is_the_searched_hypothesis_teacher_forced(served, sentences):
    client, translator = served
    model, c = translator.model, translator.model.config
    source_tok, target_tok = translator.tokenizer, translator.target_tokenizer
    info = client.get("/v1/info").json()["models"][0]  # what the page reads first
    assert (info["source"], info["target"]) == ("en", "de")
    assert info["target_vocabulary"] == target_tok.vocab_size
    for text in sentences:
        # the page's request: one text, the model's pair, return_attention
        body = {"texts": [text], "source": "en", "target": "de", "return_attention": True}
        reply = client.post_json("/v1/translate", body)
        assert reply.status == 200, reply.body
        (sentence,) = reply.json()["translations"][0]["sentences"]
        assert sentence["text"] == translator.translate([text])[0]
        # the ids the search produced, from the search itself (not from the server's pieces)
        source_ids = source_tok.encode(text) + [c.eos_id]
        config = with_overrides(translator.config, {}, section="decode")
        tokens = generate(model, torch.tensor([source_ids]), config)[0][0].tokens
        assert sentence["pieces"] == target_tok.pieces(tokens) and target_tok.decode(tokens) == sentence["text"]
        a = sentence["attention"]
        assert a["source"] == source_tok.pieces(source_ids) == sentence["source_pieces"] + ["</s>"]
        assert a["target_in"] == ["<pad>"] + target_tok.pieces(tokens)  # Marian's decoder starts from pad
        assert a["target"] == target_tok.pieces(tokens) + ["</s>"]
        N, h, S, T = c.N, c.h, len(source_ids), len(tokens) + 1
        encoder, decoder, cross = (torch.tensor(a[kind]) for kind in ("encoder", "decoder", "cross"))
        assert encoder.shape == (N, h, S, S) and decoder.shape == (N, h, T, T) and cross.shape == (N, h, T, S)
        for weights in (encoder, decoder, cross):  # rows sum to 1, up to the JSON's rounding to 3 decimals
            keys = weights.shape[-1]
            assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=5e-4 * keys + 1e-6)
        with torch.no_grad():
            memory = model.encode(torch.tensor([source_ids]), need_weights=True)
            out = model.decode(torch.tensor([[c.decoder_start_id] + tokens]), memory, need_weights=True, project=False)
        assert torch.allclose(cross, torch.stack([w[0] for w in out.cross_attentions]).float(), atol=1e-3)
        assert torch.allclose(decoder, torch.stack([w[0] for w in out.self_attentions]).float(), atol=1e-3)
        searched = translator.translate_detailed([text], need_attention=True)[0].attentions[0]
        assert torch.allclose(cross[-1].mean(0), searched.float(), atol=2e-3)  # what beam search saw
