"""The decoder (3.1): a stack of N layers, each masked multi-head self-attention, encoder-decoder attention
over the encoder output, and a position-wise FFN. Self-attention is masked so that position i sees only
positions < i + 1 (3.2.3). With a `KVCache` the same layers run incrementally, one or more positions at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.cache import KVCache
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.masks import causal_mask, key_padding_mask
from aiayn.model.sublayer import Residual


@dataclass
class Memory:
    """What the decoder attends to: the encoder output, or the per-layer keys/values a cache holds."""

    hidden: Tensor | None  # [B,S,d_model] encoder output (None when the cache holds the keys/values)
    mask: Tensor  # [B,S] bool, True at real source tokens


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(c.d_model, c.h, c.d_k, c.d_v, c.attention_dropout)
        self.self_attn_residual = Residual(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)
        self.cross_attn = MultiHeadAttention(c.d_model, c.h, c.d_k, c.d_v, c.attention_dropout)
        self.cross_attn_residual = Residual(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.activation_dropout, c.activation)
        self.feed_forward_residual = Residual(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)

    def forward(
        self, x: Tensor, memory: Memory, index: int, cache: KVCache | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x [B,t,d_model] -> ([B,t,d_model], self weights [B,h,t,T], cross weights [B,h,t,S])."""
        # Masked self-attention (3.2.3): with a cache the keys are the cached prefix plus the new positions.
        y = self.self_attn_residual.sublayer_input(x)
        if cache is None:
            attended, self_weights = self.self_attn(y, y, causal=True, need_weights=need_weights)
        else:
            keys = cache.append(index, *self.self_attn.project_kv(y))
            mask = None if y.size(1) == 1 else causal_mask(y.size(1), keys[0].size(2), y.device)
            attended, self_weights = self.self_attn(y, mask=mask, cache=keys, need_weights=need_weights)
        x = self.self_attn_residual(x, attended)

        # Encoder-decoder attention (3.2.3): queries from the decoder, keys and values from the encoder output.
        y = self.cross_attn_residual.sublayer_input(x)
        keys = None if cache is None else (cache.cross_k[index], cache.cross_v[index])
        mask = key_padding_mask(memory.mask)
        attended, cross_weights = self.cross_attn(y, memory.hidden, mask, cache=keys, need_weights=need_weights)
        x = self.cross_attn_residual(x, attended)

        x = self.feed_forward_residual(x, self.feed_forward(self.feed_forward_residual.sublayer_input(x)))
        return x, self_weights, cross_weights


class Decoder(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.decoder_layers))
        self.final_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else None

    def forward(
        self, x: Tensor, memory: Memory, cache: KVCache | None = None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        self_attentions, cross_attentions = [], []
        for index, layer in enumerate(self.layers):
            x, self_weights, cross_weights = layer(x, memory, index, cache, need_weights)
            if need_weights:
                self_attentions.append(self_weights)
                cross_attentions.append(cross_weights)
        if cache is not None:
            cache.advance(x.size(1))
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, self_attentions, cross_attentions

    def init_cache(self, memory: Tensor, memory_mask: Tensor, capacity: int, group: int = 1) -> KVCache:
        """Encoder-decoder keys/values of every layer, once per source sentence, and empty self-attention
        buffers for `group` rows (hypotheses) per sentence."""
        rows, first = memory.size(0) * group, self.layers[0].self_attn
        self_k = [memory.new_empty(rows, first.h, capacity, first.d_k) for _ in self.layers]
        self_v = [memory.new_empty(rows, first.h, capacity, first.d_v) for _ in self.layers]
        cross = [layer.cross_attn.project_kv(memory) for layer in self.layers]
        # contiguous [B,h,S,d] (not head views of [B,S,h*d]): each step's products then read them in place
        cross_k = [k.contiguous() for k, _ in cross]
        cross_v = [v.contiguous() for _, v in cross]
        return KVCache(self_k, self_v, cross_k, cross_v, memory_mask)
