"""Every layer's and head's attention for the hypothesis the search returned (sections 3.2.1-3.2.3).

Beam search keeps only what it needs; to show all three kinds of attention, the returned hypothesis is fed back
through the model teacher forced (`encode` and `decode` with `need_weights=True`): the weights the model would
compute when it produced exactly that output. Encoder-decoder attention of the last layer averaged over heads
equals the search's own `Translation.attentions` up to float rounding (a test checks it).
"""

from __future__ import annotations

import torch

from aiayn.decoding import Translation, Translator


def _rounded(weights: torch.Tensor) -> list:
    """[N,h,Tq,Tk] -> nested lists with 3 decimals (the page needs no more; the JSON stays small)."""
    return (weights.float() * 1000).round().div(1000).tolist()


def attention_maps(translator: Translator, source: str, translation: Translation) -> dict:
    """The attention of `translation`'s best hypothesis for `source`, teacher forced.

    Returns source labels (subwords + </s>), decoder-input labels (<s> + subwords), output labels (subwords +
    </s>), and per kind a [N][h][queries][keys] list: encoder [S,S], decoder [T,T], cross [T,S]."""
    tokenizer, model = translator.tokenizer, translator.model
    c = model.config
    source_ids = tokenizer.encode(source) + [c.eos_id]
    output = translation.pieces[0] if translation.pieces else []
    target_ids = [c.bos_id] + [tokenizer.processor.piece_to_id(piece) for piece in output]
    device = model.output_weight().device
    with torch.no_grad():
        memory = model.encode(torch.tensor([source_ids], device=device), need_weights=True)
        out = model.decode(torch.tensor([target_ids], device=device), memory, need_weights=True, project=False)
    return {
        "source": tokenizer.pieces(source_ids[:-1]) + ["</s>"],
        "target_in": ["<s>"] + list(output),
        "target": list(output) + ["</s>"],
        "encoder": _rounded(torch.stack([w[0] for w in memory.attentions])),  # [N,h,S,S]
        "decoder": _rounded(torch.stack([w[0] for w in out.self_attentions])),  # [N,h,T,T]
        "cross": _rounded(torch.stack([w[0] for w in out.cross_attentions])),  # [N,h,T,S]
    }


__all__ = ["attention_maps"]
