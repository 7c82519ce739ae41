"""Optimizer and learning-rate schedule of section 5.3: Adam with beta1=0.9, beta2=0.98, eps=1e-9, and eq. 3:

    lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)

a linear warmup for `warmup_steps` updates, then decay proportional to the inverse square root of the step;
the peak, at step_num = warmup_steps, is (d_model * warmup_steps)^-0.5. `scale` multiplies the whole
(1.0 is the paper; small corpora often use 2). Update k (counted from 1) uses lrate(k).

Not in the paper: `decay="linear"` keeps eq. 3's warmup and peak, then falls linearly to 0 at update `total`
(a budget known in advance: a short run ends at a small rate instead of eq. 3's tail). Where the budget is
wall time, the line is a `DecayLine` the trainer redraws as the run goes (`train.decay_updates: auto`): from the
rate of the last update to 0 at the update the remaining minutes are projected to reach.

Also not in the paper: `train.optimizer: muon` (`optimizer_for`), Muon for the layers' matrices with Adam for the
rest (`aiayn.training.muon`), under the same schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from aiayn.config import TrainConfig


def inverse_sqrt_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Eq. 3 at update `step` (1-based); 0 at step 0."""
    if step <= 0:
        return 0.0
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def linear_decay_lr(step: int, d_model: int, warmup: int, total: int, scale: float = 1.0) -> float:
    """Eq. 3's warmup to its peak at `warmup`, then linear to 0 at update `total` (> warmup); 0 after."""
    if step <= warmup:
        return inverse_sqrt_lr(step, d_model, warmup, scale)
    return inverse_sqrt_lr(warmup, d_model, warmup, scale) * max(0.0, (total - step) / (total - warmup))


@dataclass
class DecayLine:
    """After the warmup, the fraction of the peak rate: `start_factor` at update `start`, falling linearly to 0 at
    update `end` (0 after). `redraw` moves the end and keeps the rate continuous."""

    start: int  # the warmup's last update, or the update the line was last redrawn at
    end: int  # the update the rate reaches 0 at; 0 = not drawn yet (then the factor stays start_factor)
    start_factor: float = 1.0

    def factor(self, step: int) -> float:
        if step <= self.start or self.end <= self.start:
            return self.start_factor
        return self.start_factor * max(0.0, (self.end - step) / (self.end - self.start))

    def redraw(self, step: int, end: int) -> None:
        """From the factor update `step` ran at (or the peak, before the warmup ends) to 0 at `end` (> step)."""
        if step > self.start:
            self.start_factor, self.start = self.factor(step), step
        self.end = max(end, self.start + 1)


def inverse_sqrt_schedule(
    optimizer: Optimizer,
    d_model: int,
    warmup: int,
    scale: float = 1.0,
    decay: str = "inverse_sqrt",
    total: int = 0,
    line: DecayLine | None = None,
) -> LambdaLR:
    """A LambdaLR that sets every parameter group's lr to eq. 3 (or `decay="linear"` to `total`, or along
    `line`, a value the caller may redraw) before each update.

    Call `scheduler.step()` after each `optimizer.step()`. After k calls the lr is lrate(k + 1), the rate of
    the next update; the optimizer's own lr is overwritten. Its state_dict is plain numbers (weights_only).
    """
    for group in optimizer.param_groups:
        group["lr"] = 1.0  # LambdaLR multiplies this base by the lambda
        group.pop("initial_lr", None)

    if decay == "linear" and line is None and total <= warmup:
        raise ValueError(f"a linear decay needs its last update ({total}) after the warmup ({warmup})")
    peak = inverse_sqrt_lr(warmup, d_model, warmup, scale)

    def rate(completed: int) -> float:
        step = completed + 1
        if decay == "linear" and line is not None and step > warmup:
            return peak * line.factor(step)
        if decay == "linear":
            return linear_decay_lr(step, d_model, warmup, total, scale)
        return inverse_sqrt_lr(step, d_model, warmup, scale)

    return LambdaLR(optimizer, rate)


def reapply(scheduler: LambdaLR) -> None:
    """Set the next update's rate again (LambdaLR computes it in `step()`), after its `DecayLine` was redrawn."""
    completed = scheduler.last_epoch
    for group, base, rate in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        group["lr"] = base * rate(completed)
    scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]


def optimizer_for(model: nn.Module, c: TrainConfig, ns_dtype: torch.dtype = torch.float32) -> Optimizer:
    """`train.optimizer`: Adam as in 5.3 for every parameter, or `aiayn.training.muon.MuonAdam`: Muon (its
    orthogonalisation in `ns_dtype`) for the encoder's and decoder's matrices, Adam for the rest."""
    if c.optimizer == "adam":
        return adam(model, c)
    if not hasattr(torch.optim, "Muon"):
        raise RuntimeError(f"train.optimizer: muon needs torch >= 2.9 (torch.optim.Muon); this is {torch.__version__}")
    from aiayn.training.muon import Muon, MuonAdam, muon_parameters

    matrices, rest = muon_parameters(model)
    muon = Muon(matrices, ns_dtype=ns_dtype, weight_decay=c.weight_decay, momentum=c.muon_momentum,
                adjust_lr_fn="match_rms_adamw")  # fmt: skip
    return MuonAdam(muon, adam_over(rest, c))


def adam_over(parameters: list[nn.Parameter], c: TrainConfig) -> torch.optim.Adam:
    """Adam with `train`'s betas, eps and weight decay over `parameters`; fused where torch has the kernel."""
    options = dict(betas=(c.adam_beta1, c.adam_beta2), eps=c.adam_eps, weight_decay=c.weight_decay)
    try:
        return torch.optim.Adam(parameters, fused=True, **options)
    except RuntimeError:  # no fused kernel for this device or dtype
        return torch.optim.Adam(parameters, **options)


def adam(model: nn.Module, c: TrainConfig) -> torch.optim.Adam:
    """Adam as in 5.3 (beta1=0.9, beta2=0.98, eps=1e-9 by default); the fused kernel where torch has one
    (CUDA, and CPU since torch 2.4: one pass over the parameters instead of ~10)."""
    return adam_over(list(model.parameters()), c)


__all__ = [
    "DecayLine",
    "adam",
    "adam_over",
    "inverse_sqrt_lr",
    "inverse_sqrt_schedule",
    "linear_decay_lr",
    "optimizer_for",
    "reapply",
]
