"""Every layer's and head's attention for the hypothesis the search returned (sections 3.2.1-3.2.3).

Beam search keeps only what it needs; to show all three kinds of attention, the returned hypothesis is fed back
through the model teacher forced (`encode` and `decode` with `need_weights=True`): the weights the model would
compute when it produced exactly that output. Encoder-decoder attention of the last layer averaged over heads
equals the search's own `Translation.attentions` up to float rounding (a test checks it).

The ids are the ones the search read and wrote, as the Translator handles them: the source through the source
tokenizer, the output through the target tokenizer (models imported from Marian or fairseq may have two), and
the decoder's first input is the model's `decoder_start_id` (our BOS, Marian's pad, fairseq's EOS). A
`Translation` records pieces, not ids; `piece_ids` maps them back by the tokenizer's own vocabulary, the exact
inverse of `pieces` (a vocabulary maps each piece to one id), and refuses a piece that does not round-trip.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from aiayn.data.vocab_tokenizer import VocabTokenizer
from aiayn.decoding import Translation, Translator


def _rounded(weights: torch.Tensor) -> list:
    """[N,h,Tq,Tk] -> nested lists with 3 decimals (the page needs no more; the JSON stays small)."""
    return (weights.float() * 1000).round().div(1000).tolist()


def piece_ids(tokenizer, pieces: Sequence[str]) -> list[int]:
    """The model ids of `pieces` (what `tokenizer.pieces` returned for them): a {piece: id} vocabulary's entry
    (Marian, fairseq) or sentencepiece's id. Raises ValueError for a piece that does not map back to itself."""
    if isinstance(tokenizer, VocabTokenizer):
        ids = [tokenizer.vocab.get(piece, -1) for piece in pieces]
    else:
        ids = [tokenizer.processor.piece_to_id(piece) for piece in pieces]
    if -1 in ids or tokenizer.pieces(ids) != list(pieces):
        raise ValueError(f"the pieces {list(pieces)[:8]} are not the tokenizer's own: cannot recover their ids")
    return ids


def attention_maps(translator: Translator, source: str, translation: Translation) -> dict:
    """The attention of `translation`'s best hypothesis for `source`, teacher forced.

    Returns source labels (subwords + </s>), decoder-input labels (the start token + subwords), output labels
    (subwords + </s>), and per kind a [N][h][queries][keys] list: encoder [S,S], decoder [T,T], cross [T,S]."""
    model, c = translator.model, translator.model.config
    source_tok, target_tok = translator.tokenizer, translator.target_tokenizer
    source_ids = piece_ids(source_tok, translation.source_pieces) + [c.eos_id]  # what the search read
    output = list(translation.pieces[0]) if translation.pieces else []
    target_in = [c.decoder_start_id] + piece_ids(target_tok, output)  # what the decoder read
    device = model.tgt_embed.weight.device  # embeddings stay float under every fast path
    with torch.no_grad():
        memory = model.encode(torch.tensor([source_ids], device=device), need_weights=True)
        out = model.decode(torch.tensor([target_in], device=device), memory, need_weights=True, project=False)
    return {
        "source": source_tok.pieces(source_ids),
        "target_in": target_tok.pieces(target_in[:1]) + output,
        "target": output + target_tok.pieces([c.eos_id]),
        "encoder": _rounded(torch.stack([w[0] for w in memory.attentions])),  # [N,h,S,S]
        "decoder": _rounded(torch.stack([w[0] for w in out.self_attentions])),  # [N,h,T,T]
        "cross": _rounded(torch.stack([w[0] for w in out.cross_attentions])),  # [N,h,T,S]
    }


__all__ = ["attention_maps", "piece_ids"]
