"""ONNX export: onnxruntime runs the encoder and the decoder step with past keys/values as inputs and outputs
(Optimum's layout) and reproduces our log-probabilities to 1e-4, step by step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aiayn.interop.onnx import export_onnx
from aiayn.model import Transformer
from tests.conftest import tiny_config

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


@pytest.mark.parametrize("overrides", [{}, dict(norm_first=True, activation="swish", final_logits_bias=True)],
                         ids=["paper", "pre-norm-swish-bias"])
def test_onnx_step_by_step_equals_our_log_probs(tmp_path, overrides):
    torch.manual_seed(0)
    model = Transformer(tiny_config(**overrides)).eval()
    if model.final_logits_bias is not None:
        with torch.no_grad():
            model.final_logits_bias.normal_()
    out = export_onnx(model.save_pretrained(tmp_path / "m"), tmp_path / "onnx")
    c = model.config
    src = torch.tensor([[5, 6, 7, 8, 9, c.eos_id], [10, 11, c.eos_id, c.pad_id, c.pad_id, c.pad_id]])
    tgt = torch.tensor([[c.bos_id, 12, 13, 14, 15, 16], [c.bos_id, 17, 18, 19, 20, 21]])
    with torch.no_grad():
        expected = model.log_probs(src, tgt)  # [B,T,V] teacher forced
    session = {name: ort.InferenceSession(str(out / f"{name}.onnx"), providers=["CPUExecutionProvider"])
               for name in ("encoder_model", "decoder_model", "decoder_with_past_model")}
    mask = src.ne(c.pad_id).long().numpy()
    hidden = session["encoder_model"].run(None, {"input_ids": src.numpy()})[0]
    first = session["decoder_model"].run(
        None, {"input_ids": tgt[:, :1].numpy(), "encoder_attention_mask": mask, "encoder_hidden_states": hidden}
    )
    logits, present = first[0], first[1:]
    layers = c.decoder_layers
    past = {}
    for i in range(layers):
        for j, part in enumerate(("decoder.key", "decoder.value", "encoder.key", "encoder.value")):
            past[f"past_key_values.{i}.{part}"] = present[4 * i + j]
    for t in range(tgt.size(1)):
        lp = torch.log_softmax(torch.from_numpy(logits[:, -1]).float(), dim=-1)
        torch.testing.assert_close(lp, expected[:, t], atol=1e-4, rtol=0)
        if t + 1 == tgt.size(1):
            break
        outputs = session["decoder_with_past_model"].run(
            None, {"input_ids": tgt[:, t + 1 : t + 2].numpy(), "encoder_attention_mask": mask, **past}
        )
        logits = outputs[0]
        for i in range(layers):
            past[f"past_key_values.{i}.decoder.key"] = outputs[1 + 2 * i]
            past[f"past_key_values.{i}.decoder.value"] = outputs[2 + 2 * i]
        assert outputs[1].shape[2] == t + 2  # the cache grew by one position
    assert np.isfinite(logits).all()
