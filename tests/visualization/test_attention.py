"""The attention figures show exactly what the model computes.

The weights behind every plot are the model's own (an independent `encode`/`decode` call returns the same);
rows sum to 1 and masked entries are 0; the three-panel view, recomputed from the layer's projections on the
captured inputs, reproduces the weights and the sub-layer's real output; the model is left untouched; the
command writes non-empty PNG and SVG files, byte-identical on a second run.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from aiayn.cli import main
from aiayn.data.tokenizer import Tokenizer
from aiayn.model import Transformer
from aiayn.visualization.attention import pair_maps, plot_grid, plot_query, plot_zoom, translation_ids
from aiayn.visualization.attention_data import KINDS, query_view
from tests.visualization.conftest import SOURCE, TARGET


@pytest.fixture(scope="module", params=["post-norm", "pre-norm"])
def loaded(request, model_dir: Path, prenorm_model_dir: Path):
    folder = model_dir if request.param == "post-norm" else prenorm_model_dir
    return Transformer.from_pretrained(folder).eval(), Tokenizer.from_file(folder)


def test_maps_equal_what_the_model_returns(loaded) -> None:
    model, tokenizer = loaded
    target = tokenizer.encode(TARGET)
    maps = pair_maps(model, tokenizer, SOURCE, target)
    src = torch.tensor([tokenizer.encode(SOURCE) + [tokenizer.eos_id]])
    tgt = torch.tensor([[tokenizer.bos_id] + target])
    with torch.no_grad():
        memory = model.encode(src, need_weights=True)
        out = model.decode(tgt, memory, need_weights=True)
    assert maps.encoder.shape == (model.config.N, model.config.h, src.size(1), src.size(1))
    assert maps.decoder.shape == (model.config.decoder_layers, model.config.h, tgt.size(1), tgt.size(1))
    assert maps.cross.shape == (model.config.decoder_layers, model.config.h, tgt.size(1), src.size(1))
    torch.testing.assert_close(maps.encoder, torch.stack([w[0] for w in memory.attentions]))
    torch.testing.assert_close(maps.decoder, torch.stack([w[0] for w in out.self_attentions]))
    torch.testing.assert_close(maps.cross, torch.stack([w[0] for w in out.cross_attentions]))
    for kind in KINDS:
        torch.testing.assert_close(maps.weights(kind).sum(-1), torch.ones(maps.weights(kind).shape[:-1]))
        assert (maps.weights(kind) >= 0).all()
    future = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).triu(1)
    assert (maps.decoder[..., future] == 0).all()  # masked entries are exactly 0 (3.2.3)
    assert (maps.decoder[..., ~future] > 0).all()
    assert len(maps.source_pieces) == src.size(1) and maps.source_pieces[-1] == "</s>"
    assert maps.target_pieces[0] == "<s>" and maps.output_pieces[-1] == "</s>"
    assert maps.target_pieces[1:] == maps.output_pieces[:-1]


def test_query_view_reproduces_weights_and_the_real_sublayer_output(loaded) -> None:
    model, tokenizer = loaded
    maps = pair_maps(model, tokenizer, SOURCE, tokenizer.encode(TARGET))
    for kind in KINDS:
        layers = maps.weights(kind).size(0)
        for layer in range(layers):
            for head in (0, model.config.h - 1):
                query = len(maps.query_labels(kind)) // 2
                view = query_view(model, maps, kind, layer, head, query)
                torch.testing.assert_close(view.weights, maps.weights(kind)[layer, head, query])
                torch.testing.assert_close(torch.softmax(view.scores, -1), view.weights)
                torch.testing.assert_close(view.output, view.weights @ view.v)
                scale = math.sqrt(view.q.numel())
                finite = view.scores.isfinite()
                torch.testing.assert_close(view.scores[finite], (view.k @ view.q / scale)[finite])
                # Concat(heads) W^O recomputed here equals what the layer produced in the model's own pass.
                torch.testing.assert_close(view.layer_output, view.model_output, atol=1e-5, rtol=1e-4)
                if kind == "decoder":
                    assert (~finite).sum() == len(view.key_labels) - query - 1
                    assert (view.weights[~finite] == 0).all()
                else:
                    assert finite.all()


def test_model_is_left_untouched(model_dir: Path) -> None:
    model = Transformer.from_pretrained(model_dir).train()
    tokenizer = Tokenizer.from_file(model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    attributes = [set(vars(m)) for m in model.modules()]
    pair_maps(model, tokenizer, SOURCE, tokenizer.encode(TARGET))
    assert model.training
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert [set(vars(m)) for m in model.modules()] == attributes  # nothing stored on any module


def test_plots_draw_exactly_the_maps(loaded) -> None:
    model, tokenizer = loaded
    maps = pair_maps(model, tokenizer, SOURCE, tokenizer.encode(TARGET))
    for kind in KINDS:
        weights = maps.weights(kind)
        grid = plot_grid(maps, kind)
        images = [ax.images[0].get_array() for ax in grid.axes if ax.images]
        assert len(images) == weights.size(0) * weights.size(1)
        for index, image in enumerate(images):
            layer, head = divmod(index, weights.size(1))
            assert torch.equal(torch.from_numpy(image.filled(0.0)), weights[layer, head])
        zoom = plot_zoom(maps, kind, weights.size(0) - 1, 1)
        ax = zoom.axes[0]
        assert torch.equal(torch.from_numpy(ax.images[0].get_array().filled(0.0)), weights[-1, 1])
        assert [t.get_text() for t in ax.get_yticklabels()] == maps.query_labels(kind)
        assert [t.get_text() for t in ax.get_xticklabels()] == maps.key_labels(kind)
        view = query_view(model, maps, kind, 0, 0, 1)
        figure = plot_query(view)
        bars = [ax for ax in figure.axes if ax.get_title().startswith("softmax")][0]
        widths = torch.tensor([patch.get_width() for patch in bars.patches])
        torch.testing.assert_close(widths, view.weights.double())


def read_all(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_command_writes_png_and_svg_deterministically(model_dir: Path, tmp_path: Path) -> None:
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / run
        argv = ["visualize", "attention", "--model", str(model_dir), "--text", SOURCE, "--target", TARGET]
        assert main(argv + ["--layer", "2", "--head", "3", "--out", str(out)]) == 0
        outputs.append(read_all(out))
    names = {
        f"attention_{figure}_{kind}.{fmt}"
        for figure in ("grid", "zoom", "query")
        for kind in KINDS
        for fmt in ("png", "svg")
    }
    assert set(outputs[0]) == names
    for name, data in outputs[0].items():
        assert len(data) > 1000
        assert data.startswith(b"\x89PNG") if name.endswith(".png") else b"<svg" in data[:400]
    assert outputs[0] == outputs[1]  # same input, identical bytes


def test_bad_layer_is_a_clear_error(model_dir: Path, tmp_path: Path, capsys) -> None:
    argv = ["visualize", "attention", "--model", str(model_dir), "--text", SOURCE, "--target", TARGET]
    assert main(argv + ["--layer", "7", "--out", str(tmp_path)]) == 1
    assert "layer 7 is out of range" in capsys.readouterr().err


def test_decoded_translation_reproduces_the_search_attention(model_dir: Path, tmp_path: Path) -> None:
    """Without --target the model translates; teacher forcing its output gives the search's own attention."""
    decoding = pytest.importorskip("aiayn.decoding")
    if not hasattr(decoding, "Translator"):
        pytest.skip("aiayn.decoding.Translator not available yet")
    model = Transformer.from_pretrained(model_dir).eval()
    tokenizer = Tokenizer.from_file(model_dir)
    ids = translation_ids(model, tokenizer, SOURCE, max_len_b=8)
    assert ids and all(i not in (tokenizer.bos_id, tokenizer.eos_id) for i in ids)
    translation = decoding.Translator(model, tokenizer).translate_detailed([SOURCE], max_len_b=8, need_attention=True)
    assert tokenizer.pieces(ids) == translation[0].pieces[0]
    maps = pair_maps(model, tokenizer, SOURCE, ids)
    # The search records the last decoder layer's encoder-decoder attention averaged over heads.
    searched = translation[0].attentions[0]
    assert searched is not None
    torch.testing.assert_close(maps.cross[-1].mean(0), searched.float(), atol=1e-5, rtol=1e-4)
    argv = ["visualize", "attention", "--model", str(model_dir), "--text", SOURCE, "--decode", "max_len_b=8"]
    argv += ["--decode", "beam=2", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert (tmp_path / "attention_zoom_cross.png").stat().st_size > 1000
