"""Position-wise feed-forward network (section 3.3), eq. (2): FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation_dropout: float = 0.0) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation_dropout = nn.Dropout(activation_dropout)  # not in the paper; 0 by default
        for linear in (self.w_1, self.w_2):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.activation_dropout(F.relu(self.w_1(x))))
