"""Checkpoints: round trip, weights_only training state, atomic writes, keep-last-K, averaging = mean."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from aiayn.model import Transformer
from aiayn.model.pretrained import ModelDirectoryError
from aiayn.training import checkpoint as ckpt
from tests.conftest import tiny_config


def model(seed: int) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config())


def save(run: Path, step: int, net: Transformer, **state: object) -> Path:
    return ckpt.save_checkpoint(run, ckpt.checkpoint_name(step), net, {"step": step}, None, {"step": step, **state})


def test_round_trip_model_optimizer_and_rng(tmp_path: Path) -> None:
    net = model(0)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.tensor([[5, 6, 2]]), torch.tensor([[1, 7]])).sum().backward()
    optimizer.step()
    rng = ckpt.capture_rng()
    path = save(tmp_path, 3, net, optimizer=optimizer.state_dict(), rng=rng)
    expected = (random.random(), np.random.rand(), torch.rand(3))

    # weights_only: only tensors and plain values inside
    state = torch.load(path / ckpt.TRAINING_STATE, weights_only=True)
    assert state["step"] == 3 and state["format"] == "aiayn-training-state"
    other = model(1)
    ckpt.load_model_weights(other, path)
    for (name, a), b in zip(net.state_dict().items(), other.state_dict().values()):
        assert torch.equal(a, b), name
    fresh = torch.optim.Adam(other.parameters(), lr=1e-3)
    fresh.load_state_dict(ckpt.load_training_state(path)["optimizer"])
    for a, b in zip(optimizer.state.values(), fresh.state.values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])
    ckpt.restore_rng(ckpt.load_training_state(path)["rng"])
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert expected[:2] == again[:2] and torch.equal(expected[2], again[2])
    assert Transformer.from_pretrained(path).config == net.config  # an ordinary model directory
    info = ckpt.checkpoint_info(path)
    assert info.pop("training_state").keys() == {"sha256", "bytes"} and info == {"step": 3}


def test_latest_keep_last_and_temporaries(tmp_path: Path) -> None:
    net = model(0)
    for step in (10, 20, 30, 40):
        save(tmp_path, step, net)
    ckpt.save_checkpoint(tmp_path, ckpt.BEST_NAME, net, {"step": 20})
    (tmp_path / ".tmp-checkpoint-0000050-abc").mkdir()  # what a kill during a save leaves
    (tmp_path / "checkpoint-0000050").mkdir()  # no training state: not resumable, ignored
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)][-1] == "checkpoint-0000040"
    removed = ckpt.prune_checkpoints(tmp_path, keep_last=2)
    assert [p.name for p in removed] == ["checkpoint-0000010", "checkpoint-0000020"]
    assert ckpt.latest_checkpoint(tmp_path).name == "checkpoint-0000040"
    assert (tmp_path / ckpt.BEST_NAME).is_dir()
    ckpt.clean_temporaries(tmp_path)
    assert not list(tmp_path.glob(".tmp-*"))
    save(tmp_path, 40, model(5))  # saving over an existing checkpoint replaces it whole
    assert torch.equal(Transformer.from_pretrained(tmp_path / "checkpoint-0000040").src_embed.weight,
                       model(5).src_embed.weight)  # fmt: skip



def test_clean_temporaries_restores_a_checkpoint_cut_off_mid_swap(tmp_path: Path) -> None:
    """A kill between the two renames of a replacing save leaves only `.checkpoint-N.old-X`; the next start
    (clean_temporaries) renames it back, so the checkpoint is resumable again, and a stale copy beside a
    complete checkpoint is removed."""
    path = save(tmp_path, 40, model(0))
    path.rename(tmp_path / ".checkpoint-0000040.old-0badc0de")  # what the kill leaves
    save(tmp_path, 50, model(1))
    (tmp_path / ".checkpoint-0000050.old-12345678").mkdir()  # killed after the second rename
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["checkpoint-0000050"]
    ckpt.clean_temporaries(tmp_path)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["checkpoint-0000040", "checkpoint-0000050"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-0000040", "checkpoint-0000050"]
    assert torch.equal(Transformer.from_pretrained(path).src_embed.weight, model(0).src_embed.weight)

def test_failed_save_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ckpt.save_checkpoint(tmp_path, "checkpoint-0000001", model(0), {}, tmp_path / "missing.model", {"step": 1})
    assert list(tmp_path.iterdir()) == []


def test_corrupt_training_state_is_named(tmp_path: Path) -> None:
    path = save(tmp_path, 1, model(0))
    (path / ckpt.TRAINING_STATE).write_bytes(b"not a torch file")
    with pytest.raises(ModelDirectoryError, match=r"training_state\.pt: (size differs|checksum mismatch|unreadable)"):
        ckpt.load_training_state(path)


def test_average_is_the_mean_of_parameters(tmp_path: Path) -> None:
    nets = [model(seed) for seed in (1, 2, 3)]
    paths = [save(tmp_path, 10 * (k + 1), net) for k, net in enumerate(nets)]
    averaged = ckpt.average_checkpoints(paths)
    for name, tensor in nets[0].state_dict().items():
        expected = torch.stack([n.state_dict()[name].double() for n in nets]).mean(0).to(tensor.dtype)
        torch.testing.assert_close(averaged[name], expected, rtol=0, atol=0)
    out = ckpt.write_average(paths, tmp_path / "averaged")
    loaded = Transformer.from_pretrained(out)
    assert loaded.output_weight() is loaded.src_embed.weight  # tying survives
    torch.testing.assert_close(loaded.src_embed.weight, averaged["src_embed.weight"], rtol=0, atol=0)


def test_average_rejects_different_models(tmp_path: Path) -> None:
    a = save(tmp_path, 1, model(0))
    b = ckpt.save_checkpoint(tmp_path, "other", Transformer(tiny_config(d_ff=32)), {}, None, {"step": 2})
    with pytest.raises(ModelDirectoryError, match=r"other: weight .* has shape"):
        ckpt.average_checkpoints([a, b])
