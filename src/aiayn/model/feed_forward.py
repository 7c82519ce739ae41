"""Position-wise feed-forward network (section 3.3), eq. (2): FFN(x) = max(0, x W_1 + b_1) W_2 + b_2.

`activation` replaces max(0, .) for models made elsewhere: "swish" (x * sigmoid(x), Marian's OPUS-MT models)
or "gelu" (BART, exact erf form); "relu" is the paper's.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

ACTIVATIONS = {"relu": F.relu, "swish": F.silu, "gelu": F.gelu}


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation_dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}")
        self.activation = activation
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation_dropout = nn.Dropout(activation_dropout)  # not in the paper; 0 by default
        for linear in (self.w_1, self.w_2):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.activation_dropout(ACTIVATIONS[self.activation](self.w_1(x))))
