"""CTranslate2 export: `ctranslate2.Translator` gives our greedy output and our beam-4 BLEU (within 0.1) on
Multi30k test2016, with the trained multi30k-tiny model when runs/demo/checkpoint-best exists (else a random
model of the same recipe over the same sentences), and on an imported Marian model (pad start, pad row dropped)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu
import torch

from aiayn.config import preset
from aiayn.data import Tokenizer
from aiayn.decoding import Translator
from aiayn.interop.ctranslate2 import export_ctranslate2
from aiayn.interop.marian import import_marian
from aiayn.model import Transformer
from tests.conftest import multi30k_dir

ctranslate2 = pytest.importorskip("ctranslate2")

TRAINED = Path(__file__).resolve().parents[2] / "runs" / "demo" / "checkpoint-best"
SENTENCES = 50
MAX_LEN_B = 40


def _model_dir(tmp_path: Path) -> Path:
    if (TRAINED / "config.json").is_file() and (TRAINED / "tokenizer.model").is_file():
        return TRAINED
    data = multi30k_dir()
    tokenizer = Tokenizer.train([data / "train.en", data / "train.de"], 500, tmp_path / "tok" / "tokenizer.model",
                                sample_size=5000, threads=1)
    torch.manual_seed(0)
    model = Transformer(preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size))
    out = model.save_pretrained(tmp_path / "random")
    (out / "tokenizer.model").write_bytes((tmp_path / "tok" / "tokenizer.model").read_bytes())
    return out


def _ct2_translate(ct2_dir: Path, translator: Translator, sentences: list[str], beam: int) -> list[str]:
    threads = torch.get_num_threads()  # CTranslate2 sets the OpenMP thread count it shares with torch
    ct2 = ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=1)
    c = translator.model.config
    src_tok, tgt_tok = translator.tokenizer, translator.target_tokenizer
    tokens = [src_tok.pieces(src_tok.encode(s)) + [src_tok.pieces([c.eos_id])[0]] for s in sentences]
    names = ["target_vocabulary.json", "shared_vocabulary.json"]
    known = set(json.loads(next(ct2_dir / n for n in names if (ct2_dir / n).is_file()).read_text(encoding="utf-8")))
    specials = [c.pad_id] + ([c.bos_id] if c.bos_id is not None else [])
    suppress = [[piece] for piece in tgt_tok.pieces(specials) if piece in known]  # never generated, as ours
    results = ct2.translate_batch(
        tokens, beam_size=beam, length_penalty=0.0, max_decoding_length=MAX_LEN_B, suppress_sequences=suppress,
        return_end_token=False, min_decoding_length=0,  # ctranslate2 defaults to 1: no empty outputs
    )
    del ct2
    torch.set_num_threads(threads)  # later tests in this process train and time with torch's own setting
    vocab = tgt_tok.vocab if hasattr(tgt_tok, "vocab") else None
    out = []
    for result in results:
        pieces = result.hypotheses[0]
        ids = [vocab[p] for p in pieces] if vocab is not None else [tgt_tok.processor.piece_to_id(p) for p in pieces]
        out.append(tgt_tok.decode(ids))
    return out


def _settings(beam: int) -> dict:
    if beam == 1:
        return dict(greedy=True, max_len_a=0.0, max_len_b=MAX_LEN_B)
    # alpha = 0: both searches rank by log P alone (CTranslate2 stops once beam hypotheses finished, which is
    # exact only without length normalisation)
    return dict(beam=beam, lenpen=0.0, max_len_a=0.0, max_len_b=MAX_LEN_B)


def test_ctranslate2_greedy_and_beam_match_ours(tmp_path):
    model_dir = _model_dir(tmp_path)
    ct2_dir = export_ctranslate2(model_dir, tmp_path / "ct2")
    with open(multi30k_dir() / "test2016.en", encoding="utf-8") as f:
        sentences = [next(f).strip() for _ in range(SENTENCES)]
    with open(multi30k_dir() / "test2016.de", encoding="utf-8") as f:
        refs = [next(f).strip() for _ in range(SENTENCES)]
    translator = Translator.from_pretrained(model_dir, reuse_memory=False, precision="float32")
    ours = translator.translate(sentences, **_settings(1))
    theirs = _ct2_translate(ct2_dir, translator, sentences, beam=1)
    assert ours == theirs
    ours4 = translator.translate(sentences, **_settings(4))
    theirs4 = _ct2_translate(ct2_dir, translator, sentences, beam=4)
    bleu = [sacrebleu.corpus_bleu(x, [refs]).score for x in (ours4, theirs4)]
    assert abs(bleu[0] - bleu[1]) <= 0.1, bleu


def test_ctranslate2_runs_an_imported_marian_model(tmp_path):
    pytest.importorskip("transformers")
    from tests.interop.marian_fixture import write_marian_dir

    imported = import_marian(write_marian_dir(tmp_path / "hf", multi30k_dir()), tmp_path / "ours")
    ct2_dir = export_ctranslate2(imported, tmp_path / "ct2")
    with open(multi30k_dir() / "test2016.en", encoding="utf-8") as f:
        sentences = [next(f).strip() for _ in range(16)]
    translator = Translator.from_pretrained(imported, reuse_memory=False, precision="float32")
    assert translator.translate(sentences, **_settings(1)) == _ct2_translate(ct2_dir, translator, sentences, 1)
