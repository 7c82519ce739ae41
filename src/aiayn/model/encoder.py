"""The encoder (3.1): a stack of N layers, each multi-head self-attention then a position-wise FFN."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.sublayer import Residual


class EncoderLayer(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(c.d_model, c.h, c.d_k, c.d_v, c.attention_dropout)
        self.self_attn_residual = Residual(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)
        self.feed_forward = PositionwiseFeedForward(c.d_model, c.d_ff, c.activation_dropout, c.activation)
        self.feed_forward_residual = Residual(c.d_model, c.P_drop, c.norm_first, c.layer_norm_eps)

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x [B,S,d_model], mask [B,1,1,S] (True = real token) -> ([B,S,d_model], weights [B,h,S,S] or None)."""
        y = self.self_attn_residual.sublayer_input(x)
        attended, weights = self.self_attn(y, y, mask, need_weights=need_weights)
        x = self.self_attn_residual(x, attended)
        x = self.feed_forward_residual(x, self.feed_forward(self.feed_forward_residual.sublayer_input(x)))
        return x, weights


class Encoder(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.N))
        # Pre-norm leaves the residual stream unnormalised, so the stack ends with a LayerNorm.
        self.final_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else None

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, mask, need_weights)
            if weights is not None:
                attentions.append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, attentions
