"""Importing a Hugging Face MarianMTModel: our log-probabilities, beam search, tokenization and translations equal
transformers' on a random OPUS-MT-shaped model (no network), and export hf round-trips bit for bit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from aiayn.config import DecodeConfig
from aiayn.data.vocab_tokenizer import VocabTokenizer, load_model_tokenizers
from aiayn.decoding import Translator
from aiayn.decoding.search import generate
from aiayn.interop.marian import InteropError, export_hf, import_marian
from aiayn.model import Transformer
from tests.conftest import multi30k_dir
from tests.interop.marian_fixture import write_marian_dir

transformers = pytest.importorskip("transformers")

MAX_NEW = 30  # Hugging Face max_new_tokens; ours: max_len_b = MAX_NEW - 1 output tokens, then EOS


@pytest.fixture(scope="module", params=[True, False], ids=["shared", "separate-vocabs"])
def marian(request, tmp_path_factory) -> tuple[Path, Path]:
    """(Marian directory, imported aiayn directory)."""
    root = tmp_path_factory.mktemp("marian")
    # EOS biases that end most beam hypotheses of this random model before the length limit (marian_fixture)
    boost = 12.0 if request.param else 8.0
    hf_dir = write_marian_dir(root / "hf", multi30k_dir(), shared=request.param, eos_boost=boost)
    return hf_dir, import_marian(hf_dir, root / "ours")


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    with open(multi30k_dir() / "test2016.en", encoding="utf-8") as f:
        return [next(f).strip() for _ in range(8)]


def hf_model(hf_dir: Path):
    return transformers.MarianMTModel.from_pretrained(hf_dir, attn_implementation="eager").eval()


def hf_tokenizer(hf_dir: Path):
    return transformers.MarianTokenizer.from_pretrained(hf_dir)


def test_imported_config_names_the_differences(marian):
    hf_dir, ours = marian
    c = Transformer.from_pretrained(ours).config
    assert (c.activation, c.positional_layout, c.final_logits_bias, c.decoder_start) == ("swish", "concat", True, "pad")
    assert c.bos_id is None and c.eos_id == 0 and c.unk_id == 1 and c.pad_id == c.src_vocab_size - 1
    shared = json.loads((hf_dir / "config.json").read_text())["share_encoder_decoder_embeddings"]
    assert c.share_embeddings == shared


def test_tokenization_matches_marian_tokenizer(marian, sentences):
    hf_dir, ours = marian
    source, target = load_model_tokenizers(ours)
    assert isinstance(source, VocabTokenizer)
    theirs = hf_tokenizer(hf_dir)
    for text in sentences + [">>deu<< " + sentences[0]]:
        assert source.encode(text) + [source.eos_id] == theirs(text).input_ids
    with open(multi30k_dir() / "test2016.de", encoding="utf-8") as f:
        refs = [next(f).strip() for _ in range(8)]
    decoded = 0
    for text in refs:
        ids = target.encode(text) + [target.eos_id]
        if target.unk_id not in ids:  # Hugging Face drops <unk> as a special token; we show it as " ⁇ "
            assert target.decode(ids) == theirs.decode(ids, skip_special_tokens=True)
            decoded += 1
    assert decoded > 0


def _batch(tokenizer, texts: list[str], pad: int) -> torch.Tensor:
    ids = [tokenizer.encode(t) + [tokenizer.eos_id] for t in texts]
    out = torch.full((len(ids), max(map(len, ids))), pad, dtype=torch.long)
    for row, x in enumerate(ids):
        out[row, : len(x)] = torch.tensor(x)
    return out


def test_log_probs_equal_transformers_on_padded_batches(marian, sentences):
    hf_dir, ours = marian
    model = Transformer.from_pretrained(ours).eval()
    theirs = hf_model(hf_dir)
    c = model.config
    source, target = load_model_tokenizers(ours)
    src = _batch(source, sentences, c.pad_id)
    with open(multi30k_dir() / "test2016.de", encoding="utf-8") as f:
        refs = [next(f).strip() for _ in range(len(sentences))]
    tgt = _batch(target, refs, c.pad_id)  # y + EOS, right-padded
    tgt_in = torch.cat([torch.full((len(refs), 1), c.decoder_start_id), tgt[:, :-1]], dim=1)
    real = tgt.ne(c.pad_id)
    with torch.no_grad():
        ours_lp = model.log_probs(src, tgt_in)
        logits = theirs(input_ids=src, attention_mask=src.ne(c.pad_id), decoder_input_ids=tgt_in).logits
        theirs_lp = F.log_softmax(logits.float(), dim=-1)
    assert real.sum() > 50
    torch.testing.assert_close(ours_lp[real], theirs_lp[real], atol=1e-4, rtol=0)


def test_beam_search_returns_the_tokens_of_generate(marian, sentences):
    """Beam 4, length penalty |Y|^0.6 (`lenpen_form="power"`, Hugging Face's form) and the same maximum length;
    early_stopping="never" is Hugging Face's exact stopping rule, the one our search applies."""
    hf_dir, ours = marian
    model = Transformer.from_pretrained(ours).eval()
    theirs = hf_model(hf_dir)
    c = model.config
    source, _ = load_model_tokenizers(ours)
    src = _batch(source, sentences, c.pad_id)
    config = DecodeConfig(beam=4, nbest=4, lenpen=0.6, lenpen_form="power", max_len_a=0.0, max_len_b=MAX_NEW - 1)
    nbest = generate(model, src, config)
    with torch.no_grad():
        out = theirs.generate(
            input_ids=src, attention_mask=src.ne(c.pad_id), num_beams=4, num_return_sequences=4, length_penalty=0.6,
            early_stopping="never", max_new_tokens=MAX_NEW, bad_words_ids=[[c.pad_id]], do_sample=False,
            output_scores=True, return_dict_in_generate=True,
        )
    sequences = out.sequences.view(len(sentences), 4, -1)
    scores = out.sequences_scores.view(len(sentences), 4)
    lengths, compared = set(), 0
    for i, hypotheses in enumerate(nbest):
        for j, hypothesis in enumerate(hypotheses):
            row = sequences[i, j, 1:].tolist()  # without the decoder start
            if c.eos_id not in row:  # stopped by the length limit: transformers ends without EOS, we force one
                continue
            expected = row[: row.index(c.eos_id)]
            assert hypothesis.tokens == expected, (i, j)
            assert hypothesis.score == pytest.approx(float(scores[i, j]), abs=1e-4)
            lengths.add(len(expected))
            compared += 1
    assert compared >= len(sentences) * 2 and len(lengths) > 2  # a real search: many hypotheses, several lengths


def test_translator_reads_imported_directories(marian, sentences):
    hf_dir, ours = marian
    theirs, tokenizer = hf_model(hf_dir), hf_tokenizer(hf_dir)
    translator = Translator.from_pretrained(ours, reuse_memory=False, precision="float32")
    settings = dict(beam=4, lenpen=0.6, lenpen_form="power", max_len_a=0.0, max_len_b=MAX_NEW - 1)
    ours_text = translator.translate(sentences, **settings)
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = theirs.generate(**batch, num_beams=4, length_penalty=0.6, early_stopping="never",
                              max_new_tokens=MAX_NEW, bad_words_ids=[[translator.model.config.pad_id]])
    ended = [translator.model.config.eos_id in row[1:].tolist() for row in out]  # not cut by the length limit
    theirs_text = tokenizer.batch_decode(out, skip_special_tokens=True)
    assert sum(ended) >= len(sentences) // 2
    assert [t for t, e in zip(ours_text, ended) if e] == [t for t, e in zip(theirs_text, ended) if e]


def test_export_hf_round_trips(marian, tmp_path):
    """export hf(import(Marian)) is the Marian model again, and import(export hf(M)) == M bit for bit."""
    hf_dir, ours = marian
    exported = export_hf(ours, tmp_path / "hf")
    original, again = hf_model(hf_dir).state_dict(), hf_model(exported).state_dict()
    for name, tensor in original.items():
        assert torch.equal(tensor, again[name]), name
    model = Transformer.from_pretrained(ours)
    back = Transformer.from_pretrained(import_marian(exported, tmp_path / "back"))
    assert back.config == model.config
    mine, theirs = model.state_dict(), back.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_refuses_what_it_cannot_represent(marian, tmp_path):
    hf_dir, _ = marian
    cases = {
        "normalize_before": True,
        "activation_function": "gelu_new",
        "static_position_embeddings": False,
        "decoder_attention_heads": 2,
    }
    for key, value in cases.items():
        broken = tmp_path / key
        shutil.copytree(hf_dir, broken)
        config = json.loads((broken / "config.json").read_text())
        config[key] = value
        (broken / "config.json").write_text(json.dumps(config))
        with pytest.raises(InteropError, match=key):
            import_marian(broken, tmp_path / f"{key}-out")
    extra = tmp_path / "extra"
    shutil.copytree(hf_dir, extra)
    from safetensors.torch import load_file, save_file

    weights = load_file(extra / "model.safetensors")
    weights["model.encoder.alignment_head.weight"] = torch.zeros(2)
    save_file(weights, extra / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(InteropError, match="alignment_head"):
        import_marian(extra, tmp_path / "extra-out")


def test_cli_import_and_export(marian, tmp_path, capsys):
    from aiayn.cli import main

    hf_dir, _ = marian
    assert main(["import", "marian", str(hf_dir), "--out", str(tmp_path / "m")]) == 0
    assert main(["import", "marian", str(hf_dir), "--out", str(tmp_path / "m")]) == 1  # exists, no --force
    assert "already exists" in capsys.readouterr().err
    assert main(["export", "hf", str(tmp_path / "m"), "--out", str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "config.json").is_file() and (tmp_path / "hf" / "source.spm").is_file()
    assert main(["export", "hf", str(tmp_path / "m"), "--out", str(tmp_path / "x"), "--quantization", "int8"]) == 1
    for kind, extra in (("ctranslate2", ["--quantization", "int8"]), ("onnx", [])):
        assert main(["export", kind, str(tmp_path / "m"), "--out", str(tmp_path / kind), *extra]) == 0, kind
    assert (tmp_path / "ctranslate2" / "model.bin").is_file()
    assert (tmp_path / "onnx" / "decoder_with_past_model.onnx").is_file()
