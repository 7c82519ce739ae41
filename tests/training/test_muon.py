"""`train.optimizer: muon`: Muon for the encoder's and decoder's matrices, Adam for the rest, one schedule.

Checked against `torch.optim.Muon` and `torch.optim.Adam` run side by side on the two halves of a copy of the
model (bit for bit, with the orthogonalisation in bf16 as torch computes it), the float32 orthogonalisation
against an SVD, and a state dict saved and loaded the way checkpoints are (torch.save, weights_only load)."""

from __future__ import annotations

import copy
import io
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aiayn.config import ConfigError, TrainConfig, dump_run_config, preset
from aiayn.kernels import CpuFeatures, choose_orthogonalization_dtype
from aiayn.model import Transformer
from aiayn.training.muon import muon_parameters, newton_schulz
from aiayn.training.schedule import inverse_sqrt_schedule, optimizer_for
from tests.training.conftest import tiny_run

pytestmark = pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch.optim.Muon needs torch >= 2.9")

CONFIG = TrainConfig(optimizer="muon", warmup=4, lr_scale=2.0, weight_decay=0.01)


def small_model(seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(
        preset("tiny", N=2, d_model=32, d_ff=64, h=4, d_k=8, d_v=8, P_drop=0.0, src_vocab_size=50, tgt_vocab_size=50)
    )


def loss_of(model: Transformer, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(4, 50, (3, 7), generator=g), torch.randint(4, 50, (3, 6), generator=g)
    return model(src, tgt).float().logsumexp(-1).mean()


def train(model: Transformer, optimizer: torch.optim.Optimizer, steps: range, saved: dict | None = None) -> dict:
    """Updates `steps` (losses seeded by the update's number), after loading `saved` states the way
    `Trainer.restore` does (optimizer, then schedule); returns the scheduler's state after them."""
    scheduler = inverse_sqrt_schedule(optimizer, 32, CONFIG.warmup, CONFIG.lr_scale)
    if saved is not None:
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["schedule"])
    for k in steps:
        loss_of(model, k).backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return scheduler.state_dict()


def test_matrices_of_the_layers_go_to_muon_and_the_rest_to_adam() -> None:
    model = small_model()
    muon, rest = muon_parameters(model)
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)] for p in muon} == {
        n for n, p in model.named_parameters() if n.startswith(("encoder.", "decoder.")) and p.ndim == 2
    }
    assert len(muon) == 2 * 6 + 2 * 10  # encoder: 4 attention + 2 feed-forward matrices; decoder: 8 + 2
    assert model.src_embed.weight in [p for p in rest]  # the shared embedding (and output projection): Adam
    assert all(p.ndim == 1 for p in rest if p is not model.src_embed.weight)  # biases, LayerNorm
    assert len(muon) + len(rest) == len(list(model.parameters()))


def test_each_half_updates_as_torchs_own_optimizers_bit_for_bit() -> None:
    ours, reference = small_model(), small_model()
    optimizer = optimizer_for(ours, CONFIG, torch.bfloat16)  # torch.optim.Muon's dtype
    muon, rest = muon_parameters(reference)
    references = [
        torch.optim.Muon(muon, weight_decay=0.01, momentum=0.95, adjust_lr_fn="match_rms_adamw"),
        torch.optim.Adam(rest, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01, fused=True),
    ]
    train(ours, optimizer, range(8))
    schedulers = [inverse_sqrt_schedule(o, 32, CONFIG.warmup, CONFIG.lr_scale) for o in references]
    for k in range(8):
        loss_of(reference, k).backward()
        for o, s in zip(references, schedulers):
            o.step()
            s.step()
            o.zero_grad(set_to_none=True)
    before = small_model()
    for (name, a), b, c in zip(ours.named_parameters(), reference.parameters(), before.parameters()):
        assert torch.equal(a, b), name
        assert not torch.equal(a, c), f"{name} did not move"


def test_state_dict_round_trip_continues_exactly() -> None:
    straight = small_model()
    train(straight, optimizer_for(straight, CONFIG), range(6))

    first = small_model()
    optimizer = optimizer_for(first, CONFIG)
    schedule = train(first, optimizer, range(3))
    buffer = io.BytesIO()
    torch.save({"model": first.state_dict(), "optimizer": optimizer.state_dict(), "schedule": schedule}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    resumed = small_model(seed=1)  # other weights, overwritten by the checkpoint's
    resumed.load_state_dict(saved["model"])
    optimizer = optimizer_for(resumed, CONFIG)
    train(resumed, optimizer, range(3, 6), saved)
    assert optimizer.param_groups[0] is optimizer.muon.param_groups[0]  # the scheduler still reaches both halves
    for (name, a), b in zip(straight.named_parameters(), resumed.parameters()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("shape", [(32, 32), (64, 32), (32, 96)])
def test_float32_orthogonalisation_keeps_the_singular_vectors(shape: tuple[int, int]) -> None:
    """NS(G) = U f(S) V^T with f(s) in about [0.5, 1.5] (the quintic's band; `torch.optim.Muon`'s docstring), so
    U^T NS(G) V is diagonal (f of the singular values that are not tiny within the band); and the float32 result
    is the bf16 one up to bf16's rounding."""
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[0] + shape[1]), dtype=torch.float64)
    u, singular, vh = torch.linalg.svd(g, full_matrices=False)
    coefficients = (3.4445, -4.775, 2.0315)
    x = newton_schulz(g.float(), coefficients, 5, 1e-7, torch.float32)
    assert x.dtype == torch.float32 and x.shape == g.shape
    core = u.T @ x.double() @ vh.T
    off_diagonal = core - torch.diag(torch.diagonal(core))
    assert off_diagonal.abs().max() < 1e-4
    f = torch.diagonal(core)
    assert f.min() > 0 and f.max() < 1.3
    settled = singular > 0.1 * singular.max()  # 5 steps lift the smallest singular values only part of the way
    assert settled.sum() >= len(singular) // 2 and f[settled].min() > 0.5
    half = newton_schulz(g.float(), coefficients, 5, 1e-7, torch.bfloat16).float()
    assert (half - x).norm() / x.norm() < 0.05


def test_orthogonalisation_dtype_follows_the_cpus_bf16_units() -> None:
    cpu = torch.device("cpu")
    assert choose_orthogonalization_dtype(cpu, CpuFeatures("Zen 3", frozenset({"avx2"}))) == torch.float32
    assert (
        choose_orthogonalization_dtype(cpu, CpuFeatures("Zen 4", frozenset({"avx2", "avx512_bf16"}))) == torch.bfloat16
    )
    assert choose_orthogonalization_dtype(cpu, CpuFeatures("Xeon", frozenset({"amx_bf16"}))) == torch.bfloat16


def test_an_adam_state_is_refused_in_one_line() -> None:
    model = small_model()
    adam_state = optimizer_for(model, TrainConfig()).state_dict()
    with pytest.raises(ValueError, match="not train.optimizer: muon's"):
        optimizer_for(copy.deepcopy(model), CONFIG).load_state_dict(adam_state)


def test_config_checks() -> None:
    with pytest.raises(ConfigError, match="train.muon_momentum"):
        TrainConfig(optimizer="muon", muon_momentum=1.0)
    with pytest.raises(ConfigError, match="train.fsdp"):
        TrainConfig(optimizer="muon", fsdp=True)
    with pytest.raises(ConfigError, match="train.optimizer"):
        TrainConfig(optimizer="sgd")  # type: ignore[arg-type]


def test_resuming_with_the_other_optimizer_is_refused_in_one_line(m30k_bin: Path, tmp_path: Path) -> None:
    """A run trained with Adam, restarted with train.optimizer=muon (and back): one line naming the checkpoint and
    the setting, and the run's files untouched."""
    out = tmp_path / "run"
    config = tmp_path / "tiny.yaml"
    config.write_text(dump_run_config(tiny_run(m30k_bin, out, max_updates=4, save_every=2)), encoding="utf-8")
    command = [sys.executable, "-m", "aiayn", "train", str(config), "--set", "train.max_updates=6"]
    assert subprocess.run(command[:5], capture_output=True, text=True, timeout=120).returncode == 0
    before = sorted((p.name, p.stat().st_mtime_ns) for p in out.rglob("*"))
    done = subprocess.run([*command, "--set", "train.optimizer=muon"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "checkpoint-0000004 was written with train.optimizer=adam" in last and "(this run has muon)" in last, last
    assert "Traceback" not in done.stderr
    assert sorted((p.name, p.stat().st_mtime_ns) for p in out.rglob("*")) == before
