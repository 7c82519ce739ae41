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
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.activation_dropout)
        self.feed_forward_residual = Residual(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)

    def forward(
        self,
        x: Tensor,
        memory: Memory,
        index: int,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x [B,t,d_model] -> ([B,t,d_model], self weights [B,h,t,T], cross weights [B,h,t,S])."""
        # Masked self-attention (3.2.3): with a cache the keys are the cached prefix plus the new positions.
        y = self.self_attn_residual.sublayer_input(x)
        q, k, v = self.self_attn.project_qkv(y)
        if cache is None:
            attended, self_weights = self.self_attn.attend(q, k, v, None, need_weights, is_causal=True)
        else:
            k, v = cache.append(index, k, v)
            mask = None if q.size(2) == 1 else causal_mask(q.size(2), k.size(2), q.device)
            attended, self_weights = self.self_attn.attend(q, k, v, mask, need_weights)
        x = self.self_attn_residual(x, attended)

        # Encoder-decoder attention (3.2.3): queries from the decoder, keys and values from the encoder output.
        y = self.cross_attn_residual.sublayer_input(x)
        q = self.cross_attn.project_q(y)
        if cache is None:
            k, v = self.cross_attn.project_kv(memory.hidden)
            groups = 1
        else:  # once per sentence: its `cache.group` rows attend as that many query rows
            k, v, groups = cache.cross_k[index], cache.cross_v[index], cache.group
        mask = key_padding_mask(memory.mask)
        attended, cross_weights = self.cross_attn.attend(q, k, v, mask, need_weights, query_groups=groups)
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

    def build_cache(self, memory: Tensor, memory_mask: Tensor, capacity: int, group: int = 1) -> KVCache:
        """Encoder-decoder keys/values of every layer, computed once per source sentence, and empty
        self-attention buffers for `group` rows (hypotheses) per sentence."""
        first = self.layers[0].self_attn
        self_k, self_v = KVCache.allocate(
            memory.size(0) * group, len(self.layers), first.h, first.d_k, first.d_v, capacity, like=memory
        )
        cross = [layer.cross_attn.project_kv(memory) for layer in self.layers]
        # Contiguous [B,h,S,d] copies (project_kv returns head views of one fused product), so each step's
        # products read them in place instead of copying them again.
        cross_k = [k.contiguous() for k, _ in cross]
        cross_v = [v.contiguous() for _, v in cross]
        return KVCache(self_k, self_v, cross_k, cross_v, memory_mask, group=group)
