"""The real attention tensors of one sentence pair (sections 3.2.1-3.2.3), for the attention figures.

`capture_attention` runs the model once, teacher forced, with `need_weights=True` and keeps what it returns:
the weights of encoder self-attention, masked decoder self-attention and encoder-decoder attention for every
layer and head. Forward pre-hooks on each attention sub-layer's residual wrapper record, during that same pass,
the residual stream entering the sub-layer and the sub-layer's real output (after W^O); the hooks are removed
before returning, and nothing is stored on the model.

`query_view` then recomputes one head's eq. (1) for one query from those inputs with the layer's own
projections (`project_q`, `project_kv`): q, K, V, the scores q K^T / sqrt(d_k), the softmax
weights and the output, for the three-panel figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn

from aiayn.model import Transformer
from aiayn.model.attention import scaled_dot_product_attention
from aiayn.model.masks import causal_mask, key_padding_mask

Kind = Literal["encoder", "decoder", "cross"]
KINDS: tuple[Kind, ...] = ("encoder", "decoder", "cross")
TITLES = {
    "encoder": "encoder self-attention",
    "decoder": "decoder masked self-attention",
    "cross": "encoder-decoder attention",
}


@dataclass
class AttentionMaps:
    """Attention weights of one sentence pair, batch dimension removed. Masked entries are exactly 0."""

    source_pieces: list[str]  # S labels: the source subwords and </s>
    target_pieces: list[str]  # T labels of the decoder input: <s> and the target subwords
    output_pieces: list[str]  # T labels of what each decoder position predicts: the target subwords and </s>
    encoder: Tensor  # [N, h, S, S]
    decoder: Tensor  # [N_dec, h, T, T], zero above the diagonal
    cross: Tensor  # [N_dec, h, T, S]
    memory: Tensor  # [S, d_model] encoder output
    # Per kind, per layer: the residual stream entering the attention sub-layer, [Tq, d_model], and the
    # sub-layer's real output (heads concatenated and multiplied by W^O), [Tq, d_model].
    stream: dict[str, list[Tensor]] = field(default_factory=dict)
    attended: dict[str, list[Tensor]] = field(default_factory=dict)

    def weights(self, kind: Kind) -> Tensor:
        return {"encoder": self.encoder, "decoder": self.decoder, "cross": self.cross}[kind]

    def query_labels(self, kind: Kind) -> list[str]:
        """Row labels: source tokens, decoder input tokens, or (encoder-decoder) the token being predicted."""
        return {"encoder": self.source_pieces, "decoder": self.target_pieces, "cross": self.output_pieces}[kind]

    def key_labels(self, kind: Kind) -> list[str]:
        return self.target_pieces if kind == "decoder" else self.source_pieces


@dataclass
class QueryView:
    """Eq. (1) for one head and one query position, from the model's own tensors."""

    kind: Kind
    layer: int  # 0-based
    head: int  # 0-based
    query: int  # 0-based query position
    query_label: str
    key_labels: list[str]
    q: Tensor  # [d_k] the query q_i = x_i W_i^Q
    k: Tensor  # [Tk, d_k] the keys
    v: Tensor  # [Tk, d_v] the values
    scores: Tensor  # [Tk] q K^T / sqrt(d_k); -inf where masked
    weights: Tensor  # [Tk] softmax(scores); 0 where masked
    output: Tensor  # [d_v] weights @ V, this head's output
    layer_output: Tensor  # [d_model] Concat(head_1..head_h) W^O at this query, recomputed here
    model_output: Tensor  # [d_model] the same quantity as the model computed it in its forward pass


def _residuals(model: Transformer) -> dict[str, list[nn.Module]]:
    return {
        "encoder": [layer.self_attn_residual for layer in model.encoder.layers],
        "decoder": [layer.self_attn_residual for layer in model.decoder.layers],
        "cross": [layer.cross_attn_residual for layer in model.decoder.layers],
    }


def capture_attention(
    model: Transformer,
    source_ids: list[int],
    target_ids: list[int],
    source_pieces: list[str],
    target_pieces: list[str],
    output_pieces: list[str],
) -> AttentionMaps:
    """One teacher-forced pass over source `source_ids` (ending in eos) and decoder input `target_ids`
    (starting with bos). The model is run in eval mode and left as it was."""
    if len(source_pieces) != len(source_ids) or len(target_pieces) != len(target_ids):
        raise ValueError("one label per token is needed")
    if len(output_pieces) != len(target_ids):
        raise ValueError("one predicted-token label per decoder position is needed")
    stream: dict[str, list[Tensor]] = {kind: [] for kind in KINDS}
    attended: dict[str, list[Tensor]] = {kind: [] for kind in KINDS}

    def recorder(kind: str):
        def hook(_module: nn.Module, args: tuple) -> None:
            x, sublayer_output = args  # Residual.forward(x, sublayer_output)
            stream[kind].append(x[0].detach().clone())
            attended[kind].append(sublayer_output[0].detach().clone())

        return hook

    handles = [
        module.register_forward_pre_hook(recorder(kind))
        for kind, modules in _residuals(model).items()
        for module in modules
    ]
    was_training = model.training
    model.eval()
    try:
        device = model.tgt_embed.weight.device  # embeddings stay float under every fast path
        src = torch.tensor([source_ids], device=device)
        tgt = torch.tensor([target_ids], device=device)
        with torch.no_grad():
            memory = model.encode(src, need_weights=True)
            out = model.decode(tgt, memory, need_weights=True)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return AttentionMaps(
        source_pieces=list(source_pieces),
        target_pieces=list(target_pieces),
        output_pieces=list(output_pieces),
        encoder=torch.stack([w[0] for w in memory.attentions]).float().cpu(),  # [N,h,S,S]
        decoder=torch.stack([w[0] for w in out.self_attentions]).float().cpu(),  # [N,h,T,T]
        cross=torch.stack([w[0] for w in out.cross_attentions]).float().cpu(),  # [N,h,T,S]
        memory=memory.hidden[0].detach(),
        stream=stream,
        attended=attended,
    )


def query_view(model: Transformer, maps: AttentionMaps, kind: Kind, layer: int, head: int, query: int) -> QueryView:
    """Recompute eq. (1) for `head` of `layer` at position `query` with the layer's own projections."""
    layers = model.encoder.layers if kind == "encoder" else model.decoder.layers
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer {layer + 1} is out of range: the {kind} has {len(layers)} layers")
    h = model.config.h
    if not 0 <= head < h:
        raise ValueError(f"head {head + 1} is out of range: the model has h={h} heads")
    x = maps.stream[kind][layer][None]  # [1, Tq, d_model]
    if not 0 <= query < x.size(1):
        raise ValueError(f"query position {query} is out of range: the {kind} queries have {x.size(1)} positions")
    module = layers[layer]
    with torch.no_grad():
        if kind == "cross":
            attention = module.cross_attn
            q = attention.project_q(module.cross_attn_residual.sublayer_input(x))  # [1,h,T,d_k]
            k, v = attention.project_kv(maps.memory[None])  # [1,h,S,d_k], [1,h,S,d_v]
            mask = key_padding_mask(torch.ones(1, k.size(2), dtype=torch.bool, device=k.device))
        else:
            attention = module.self_attn
            y = module.self_attn_residual.sublayer_input(x)
            q, (k, v) = attention.project_q(y), attention.project_kv(y)  # [1,h,Tq,d_k], [1,h,Tq,d_k], [1,h,Tq,d_v]
            if kind == "encoder":
                mask = key_padding_mask(torch.ones(1, k.size(2), dtype=torch.bool, device=k.device))
            else:
                mask = causal_mask(q.size(2), k.size(2), k.device)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # [1,h,Tq,d_v], [1,h,Tq,Tk]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [1,h,Tq,Tk]
        scores = scores.masked_fill(~mask.expand_as(scores), float("-inf"))
        concat = heads.transpose(1, 2).reshape(1, heads.size(2), -1)  # [1,h,Tq,d_v] -> [1,Tq,h*d_v]
        layer_output = attention.w_o(concat)[0, query]  # [d_model]
    return QueryView(
        kind=kind,
        layer=layer,
        head=head,
        query=query,
        query_label=maps.query_labels(kind)[query],
        key_labels=maps.key_labels(kind),
        q=q[0, head, query].float().cpu(),
        k=k[0, head].float().cpu(),
        v=v[0, head].float().cpu(),
        scores=scores[0, head, query].float().cpu(),
        weights=weights[0, head, query].float().cpu(),
        output=heads[0, head, query].float().cpu(),
        layer_output=layer_output.float().cpu(),
        model_output=maps.attended[kind][layer][query].float().cpu(),
    )
