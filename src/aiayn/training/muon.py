"""`train.optimizer: muon` (not in the paper): Muon (Jordan et al. 2024) for the matrices of the encoder and decoder
layers, Adam as in section 5.3 for everything else, one learning-rate schedule for both.

Muon replaces a matrix's Nesterov momentum by its nearest semi-orthogonal matrix (5 Newton-Schulz steps) and, with
`adjust_lr_fn="match_rms_adamw"` (Liu et al. 2025), scales it to the RMS of an Adam update, so eq. 3 (or the linear
decay) drives both halves unchanged. `Muon` is `torch.optim.Muon` with the Newton-Schulz products in a dtype the
caller chooses (`aiayn.kernels.choose_orthogonalization_dtype`): torch's casts them to bf16, which on a CPU without
bf16 matrix units is about 20x slower than float32 (docs/benchmarks/training.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import Optimizer


def newton_schulz(
    g: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float, dtype: torch.dtype
) -> Tensor:
    """The quintic Newton-Schulz iteration of `torch.optim.Muon`, in `dtype`, on one matrix [r, c] or a stack of
    them [n, r, c]: X <- aX + (bA + cA^2)X with A = XX^T, from X = G / ||G||_F in the wide orientation; an
    approximately semi-orthogonal matrix of G's shape (its singular values mapped into about [0.5, 1.5])."""
    a, b, c = coefficients
    one = g.ndim == 2
    x = g.to(dtype).unsqueeze(0) if one else g.to(dtype)
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / x.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.mT
        x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    if tall:
        x = x.mT
    return x.squeeze(0) if one else x


_TorchMuon: type[Optimizer] = getattr(torch.optim, "Muon", Optimizer)  # torch >= 2.9; `optimizer_for` checks


class Muon(_TorchMuon):  # type: ignore[valid-type,misc]
    """`torch.optim.Muon` (same arguments, state and update) with the orthogonalisation in `ns_dtype`."""

    def __init__(self, params: Any, *, ns_dtype: torch.dtype = torch.bfloat16, **options: Any) -> None:
        super().__init__(params, **options)
        self.ns_dtype = ns_dtype

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        from torch.optim._muon import _adjust_lr  # torch's own scaling rule ("original" or "match_rms_adamw")

        for group in self.param_groups:
            params: list[Tensor] = []
            grads: list[Tensor] = []
            buffers: list[Tensor] = []
            self._init_group(group, params, grads, buffers)
            lr, momentum = float(group["lr"]), group["momentum"]
            updates = []
            for grad, buffer in zip(grads, buffers):
                buffer.lerp_(grad, 1 - momentum)
                updates.append(grad.lerp(buffer, momentum) if group["nesterov"] else buffer)
            by_shape: dict[torch.Size, list[int]] = {}
            for i, param in enumerate(params):
                by_shape.setdefault(param.shape, []).append(i)
            for shape, members in by_shape.items():  # one stacked iteration per shape: fewer, larger products
                stacked = torch.stack([updates[i] for i in members])
                orthogonal = newton_schulz(
                    stacked, group["ns_coefficients"], group["ns_steps"], group["eps"], self.ns_dtype
                )
                step_size = _adjust_lr(lr, group["adjust_lr_fn"], shape)
                decay = 1 - lr * group["weight_decay"]
                for i, update in zip(members, orthogonal):
                    if decay != 1:  # no pass over the weights for a decay of 0 (the recipe's)
                        params[i].mul_(decay)
                    params[i].add_(update, alpha=-step_size)


class MuonAdam(Optimizer):
    """Two optimizers as one: their groups are this one's `param_groups` (the same dicts), so a scheduler that sets
    `group["lr"]` sets both; the state dict holds the two states."""

    def __init__(self, muon: Muon, adam: torch.optim.Adam) -> None:
        self.muon, self.adam = muon, adam
        super().__init__([*muon.param_groups, *adam.param_groups], {})

    def describe(self) -> str:
        """What each half updates, for the run's log."""
        halves = (("muon", self.muon), ("adam", self.adam))
        counts = [(name, [p for g in o.param_groups for p in g["params"]]) for name, o in halves]
        return ", ".join(
            f"{name} for {len(ps)} tensors ({sum(p.numel() for p in ps):,} weights)" for name, ps in counts
        )

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        self.muon.step()
        self.adam.step()

    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        return {"muon": self.muon.state_dict(), "adam": self.adam.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:  # type: ignore[override]
        if set(state_dict) != {"muon", "adam"}:
            raise ValueError("this optimizer state is not train.optimizer: muon's (a run trained with Adam?)")
        self.muon.load_state_dict(state_dict["muon"])
        self.adam.load_state_dict(state_dict["adam"])
        self.param_groups = [*self.muon.param_groups, *self.adam.param_groups]  # loading made new group dicts


def muon_parameters(model: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(Muon's, Adam's): the 2-D weights inside `model.encoder` and `model.decoder`; the rest (embeddings and the
    output projection tied to them, biases, LayerNorm)."""
    muon: list[nn.Parameter] = []
    rest: list[nn.Parameter] = []
    for name, parameter in model.named_parameters():
        hidden = name.startswith(("encoder.", "decoder.")) and parameter.ndim == 2
        (muon if hidden else rest).append(parameter)
    return muon, rest


__all__ = ["Muon", "MuonAdam", "muon_parameters", "newton_schulz"]
