"""The residual connection around each sub-layer (3.1, 5.4).

Post-norm (the paper): LayerNorm(x + Dropout(Sublayer(x))).
Pre-norm (flag `norm_first`): x + Dropout(Sublayer(LayerNorm(x))); the stack then ends with a LayerNorm.
"""

from __future__ import annotations

from torch import Tensor, nn


class Residual(nn.Module):
    def __init__(self, d_model: int, P_drop: float, norm_first: bool, eps: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(P_drop)
        self.norm_first = norm_first

    def sublayer_input(self, x: Tensor) -> Tensor:
        """What the sub-layer sees: x itself (post-norm) or LayerNorm(x) (pre-norm)."""
        return self.norm(x) if self.norm_first else x

    def forward(self, x: Tensor, sublayer_output: Tensor) -> Tensor:
        """Add the dropped-out sub-layer output to x, then normalise (post-norm)."""
        y = x + self.dropout(sublayer_output)
        return y if self.norm_first else self.norm(y)
