"""`flops_per_token` against PyTorch's own FLOP counter on a real forward pass."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from aiayn.model import Transformer
from tests.conftest import tiny_config


def test_flops_per_token_matches_flop_counter() -> None:
    model = Transformer(tiny_config(src_vocab_size=50, tgt_vocab_size=50, d_k=16, d_v=8)).eval()
    batch, length = 3, 10
    src = torch.randint(4, 50, (batch, length))
    tgt = torch.randint(4, 50, (batch, length))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        memory = model.encode(src, need_weights=True)  # explicit attention: every matmul visible
        model.decode(tgt, memory, need_weights=True)
    measured = counter.get_total_flops()
    predicted = model.flops_per_token(length, length)
    encoder = predicted["encoder_per_source_token"] * batch * length
    decoder = predicted["decoder_per_target_token"] * batch * length
    # The explicit causal path multiplies the masked half too: T keys per query instead of (T+1)/2 on average.
    c = model.config
    masked_half = c.N * 2 * (length - (length + 1) / 2) * c.h * (c.d_k + c.d_v) * batch * length
    assert abs(measured - (encoder + decoder + masked_half)) / measured < 0.01, (measured, encoder + decoder)
