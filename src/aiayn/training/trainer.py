"""The training loop of section 5, knowing the model only by its protocol (`model(src, tgt_in) -> logits`,
`save_pretrained`/`from_pretrained` for checkpoints).

One update (5.1-5.3): `update_freq` token-budget micro-batches of this rank's shard of the epoch, each
forward + label-smoothed loss (5.4) + backward, the gradients summed (all-reduced by DDP on the last one only),
then Adam(0.9, 0.98, 1e-9) at the learning rate of eq. 3. The loss of an update is normalised by the number of
target tokens of the whole update over all ranks, known in advance from the batch plan, so 1 process
accumulating k micro-batches and k processes taking one each compute the same gradient.

Everything the loop depends on is in `TrainState` and the checkpoint (`aiayn.training.checkpoint`): the batch
plan is a function of (seed, epoch), so a resumed run replays exactly the updates the uninterrupted one made.

With `train.fsdp` on several ranks the trained module is sharded (FSDP2) and `self.model` is a full replica,
refreshed from the shards before validation, BLEU and checkpoints (a collective on every rank).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from aiayn.config import RunConfig
from aiayn.data import BPEDropout, EpochPairs, ParallelDataset, TokenBudgetBatches, Tokenizer, load_batch
from aiayn.io import sha256_file
from aiayn.kernels import choose_orthogonalization_dtype, precision_candidates, prepare_for_training
from aiayn.model.pretrained import read_config
from aiayn.training import checkpoint as ckpt
from aiayn.training.distributed import (
    DistContext,
    all_gather_object,
    all_reduce_sum,
    barrier,
    full_model_state,
    full_optimizer_state,
    load_full_model_state,
    load_full_optimizer_state,
    no_sync,
    shard_model,
    wrap_model,
)
from aiayn.training.loss import transduction_loss
from aiayn.training.metrics_log import MetricsLog, TrainMeter
from aiayn.training.plan import EpochPlan, plan_epoch
from aiayn.training.precision_probe import PrecisionProbe, measure_precisions
from aiayn.training.schedule import DecayLine, inverse_sqrt_schedule, optimizer_for, reapply
from aiayn.training.validation import validation_bleu, validation_loss


class TrainingDiverged(RuntimeError):
    """Too many updates in a row had a non-finite loss or gradient (`train.max_bad_updates`)."""


def data_fingerprint(dataset: ParallelDataset) -> dict[str, str]:
    """SHA-256 of the tokenizer's behaviour and of meta.json's content (vocabulary, splits, token counts).

    Where the raw corpus lay (each split's `prefix`, the paths inside the `.model` file) is left out: the same
    data prepared from another directory or machine has the same fingerprint, so a run resumes on it and
    `aiayn ablate --collect` merges sweeps run on several machines.
    """
    meta = json.loads((Path(dataset.data_dir) / "meta.json").read_text(encoding="utf-8"))
    splits = {name: {k: v for k, v in split.items() if k != "prefix"} for name, split in meta.get("splits", {}).items()}
    content = json.dumps({**meta, "splits": splits}, sort_keys=True).encode()
    return {"tokenizer_content_sha256": Tokenizer.from_file(dataset.tokenizer_path).fingerprint(),
            "meta_content_sha256": hashlib.sha256(content).hexdigest()}  # fmt: skip


@dataclass
class TrainState:
    step: int = 0  # updates done
    epoch: int = 1  # the epoch being trained (1-based)
    epoch_updates: int = 0  # updates done in `epoch`: the data position
    best_valid_loss: float = math.inf
    train_seconds: float = 0.0  # wall time over all resumptions


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        run: RunConfig,
        train_set: ParallelDataset,
        valid_set: ParallelDataset,
        ctx: DistContext | None = None,
        precision: torch.dtype | None = None,
    ) -> None:
        """`precision`: the autocast dtype a run being resumed trained in, used where `train.precision` leaves
        it open (fastest: float32 or bf16), so that a resumed run continues as it began."""
        self.ctx = ctx = ctx or DistContext()
        self.run, self.cfg = run, run.train
        self.train_set, self.valid_set = train_set, valid_set
        self._data: dict[str, str] | None = None  # data_fingerprint(train_set), computed once
        c = self.cfg
        if not (c.max_updates or c.max_epochs or c.max_minutes):
            raise ValueError("set at least one of train.max_updates, train.max_epochs, train.max_minutes")
        model = model.to(ctx.device)
        self.fsdp = c.fsdp and ctx.distributed
        self.batches = TokenBudgetBatches(
            train_set.src_lengths, train_set.tgt_lengths, run.data.max_tokens, c.seed, True, run.data.max_sentences
        )
        d = run.data
        target = d.bpe_dropout if d.bpe_dropout_target is None else d.bpe_dropout_target
        self.bpe_dropout = None  # rank 0 draws (and keeps) each epoch's pieces; every rank trains on them
        if d.bpe_dropout or target:
            kept = Path(c.out_dir) / "bpe-dropout" if ctx.is_main else None
            self.bpe_dropout = BPEDropout(train_set, d.bpe_dropout, c.seed, d.max_len, target, kept)
        self._pairs: ParallelDataset | EpochPairs = train_set  # the pairs (and pieces) of the epoch being trained
        self.probe: PrecisionProbe | None = None
        self.dtype = self._choose_precision(model, precision)
        self.runtime = prepare_for_training(
            model, c.attention_impl, c.linear_kernel, self.dtype, run.data.max_len + 1, sharded=self.fsdp,
            compiled=c.compile, loss=c.loss_kernel,
        )
        if self.fsdp:  # a full replica for checkpoints, validation and BLEU; the original is sharded in place
            self.model = copy.deepcopy(model)
            self.trained = self.net = shard_model(model)
        else:
            self.model = self.trained = model  # the bare model: checkpoints, validation, BLEU
            self.net = wrap_model(model, ctx)  # what forward/backward go through
        self._replica_step = 0  # the update the replica's weights are from
        self.optimizer = optimizer_for(self.trained, c, choose_orthogonalization_dtype(ctx.device))
        # train.decay_updates: auto: the line's end is drawn at the first validation and redrawn at each one
        self.line = DecayLine(c.warmup, 0) if c.decay_updates == "auto" else None
        total = 0 if self.line else c.decay_updates or c.max_updates
        self.scheduler = inverse_sqrt_schedule(
            self.optimizer, run.model.d_model, c.warmup, c.lr_scale, c.lr_decay, total, self.line
        )
        self.scaler = torch.amp.GradScaler(ctx.device.type, enabled=self.dtype == torch.float16)
        if c.compile:
            self.net = torch.compile(self.net)
        self.state = TrainState()
        self.out_dir = Path(c.out_dir)
        self.log = MetricsLog(self.out_dir, enabled=ctx.is_main, tensorboard=c.tensorboard)
        self._plan: EpochPlan | None = None
        self.meter = TrainMeter()
        self._last = {"valid": -1, "bleu": -1, "save": -1}
        self._bleu_ok = c.bleu
        self._lr = 0.0
        self._bad_updates = 0  # consecutive updates skipped for a non-finite loss or gradient

    def _choose_precision(self, model: nn.Module, resumed: torch.dtype | None) -> torch.dtype:
        """train.precision as settled by the device, or, where fastest leaves float32 and bf16 open, by the run
        being resumed or by timing both on this run's first batches (bf16 only where every rank finds it faster)."""
        run, ctx = self.run, self.ctx
        candidates = precision_candidates(self.cfg.precision, ctx.device, d_model=run.model.d_model)
        if len(candidates) == 1:
            return candidates[0]
        if resumed in candidates:
            return resumed
        plan = plan_epoch(self.batches, self.train_set.tgt_lengths, 1, ctx.rank, ctx.world_size, 1)
        batches = [load_batch(self.train_set, update[0]).to(ctx.device) for update in plan.updates[:2]]
        self.probe = measure_precisions(model, candidates, batches, run.data.max_len + 1)
        votes = all_reduce_sum([1.0 if self.probe.chosen == torch.bfloat16 else 0.0], ctx)[0]
        return torch.bfloat16 if votes == ctx.world_size else torch.float32

    # --- the loop --------------------------------------------------------------------------------------------

    def fit(self) -> TrainState:
        s = self.state
        self._clock = time.perf_counter() - s.train_seconds
        self._pace_mark = (s.step, time.perf_counter())  # where the pace of train.decay_updates: auto is timed from
        self.meter.reset_clock()
        show = self.cfg.progress and self.ctx.is_main
        total = self.cfg.max_updates or None
        self.bar = tqdm(total=total, initial=s.step, unit="upd", file=sys.stderr, disable=not show)
        if self.probe is not None and s.step == 0:
            self._say(self.probe.describe())
            self.log.write({"kind": "precision", "step": 0, "seconds": self.probe.seconds,
                            "chosen": self.runtime.precision})  # fmt: skip
        self._say(f"fast paths: {self.runtime.describe()}")
        if self.cfg.optimizer == "muon":
            self._say(f"optimizer: {self.optimizer.describe()}")  # type: ignore[attr-defined]
        while (reason := self._stop_reason()) is None:
            plan = self._epoch_plan(s.epoch)
            u = s.epoch_updates
            if u >= len(plan):  # possible only after resuming with another world_size x update_freq
                s.epoch, s.epoch_updates = s.epoch + 1, 0
                continue
            self._update(plan.updates[u], plan.tokens[u])
            s.step, s.epoch_updates = s.step + 1, u + 1
            epoch_end = s.epoch_updates >= len(plan)
            if epoch_end:
                s.epoch, s.epoch_updates = s.epoch + 1, 0
            self._after_update(epoch_end)
        self._finish(reason)
        return s

    def _epoch_plan(self, epoch: int) -> EpochPlan:
        if self._plan is None or self._plan.epoch != epoch:
            batches = self.batches if self.bpe_dropout is None else self._resegment(epoch)
            tgt = self._pairs.tgt_lengths
            self._plan = plan_epoch(batches, tgt, epoch, self.ctx.rank, self.ctx.world_size, self.cfg.update_freq)
        return self._plan

    def _resegment(self, epoch: int) -> TokenBudgetBatches:
        """BPE-dropout: train `epoch` on its own pieces (drawn or read back by rank 0, the same on every rank),
        batched by their own lengths."""
        d, plain, first = self.bpe_dropout, self.train_set, self._pairs is self.train_set
        assert d is not None
        pairs = d.epoch(epoch) if self.ctx.is_main else None
        self._pairs = pairs = all_gather_object(pairs, self.ctx)[0]
        if first:
            src = int(pairs.src_lengths.sum()) / max(1, int(plain.src_lengths.sum()))
            tgt = int(pairs.tgt_lengths.sum()) / max(1, int(plain.tgt_lengths.sum()))
            self._say(f"bpe-dropout p={d.p} (source), {d.p_target} (target): epoch {epoch} has {src:.2f}x and "
                      f"{tgt:.2f}x the plain segmentation's pieces")  # fmt: skip
        data = self.run.data
        return TokenBudgetBatches(pairs.src_lengths, pairs.tgt_lengths, data.max_tokens, self.cfg.seed, True,
                                  data.max_sentences)  # fmt: skip

    def _autocast(self) -> contextlib.AbstractContextManager:
        return torch.autocast(self.ctx.device.type, dtype=self.dtype, enabled=self.dtype != torch.float32)

    def _update(self, group: list[list[int]], global_tokens: int) -> None:
        run, ctx = self.run, self.ctx
        self.net.train()
        loss_sum = nll_sum = torch.zeros((), device=ctx.device)
        src_tokens = tgt_tokens = 0
        for i, indices in enumerate(group):
            batch = load_batch(self._pairs, indices).to(ctx.device, non_blocking=True)
            with no_sync(self.net, skip_sync=i < len(group) - 1):
                with self._autocast():
                    loss, nll = transduction_loss(
                        self.net, self.model, batch.src, batch.tgt_in, batch.tgt_out, run.model.eps_ls,
                        run.model.pad_id, self.runtime.loss,
                    )  # fmt: skip
                self.scaler.scale(loss * (ctx.world_size / global_tokens)).backward()  # DDP divides by W
            loss_sum, nll_sum = loss_sum + loss.detach(), nll_sum + nll
            src_tokens, tgt_tokens = src_tokens + batch.src_tokens, tgt_tokens + batch.tgt_tokens
        norm = None
        if self.cfg.clip_norm:
            self.scaler.unscale_(self.optimizer)
            norm = nn.utils.clip_grad_norm_(self.trained.parameters(), self.cfg.clip_norm)
        elif not self.scaler.is_enabled() and not self.fsdp:  # fp16's scaler skips overflowing steps itself
            grads = [p.grad for p in self.trained.parameters() if p.grad is not None]
            if grads:
                norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        grads_checked = norm is not None and not self.scaler.is_enabled() and not self.fsdp  # fp16: the scaler
        finite = torch.isfinite(loss_sum) & (torch.isfinite(norm) if grads_checked else True)
        if all_reduce_sum([0.0 if bool(finite) else 1.0], ctx)[0] > 0:  # every rank skips the same update
            self.optimizer.zero_grad(set_to_none=True)
            if self.scaler.is_enabled() and self.cfg.clip_norm:
                self.scaler.update()  # unscale_ ran: close this iteration of the scaler
            self._skip_update(float(loss_sum), None if norm is None else float(norm))
        else:
            self._bad_updates = 0
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
            self.meter.add(loss_sum, nll_sum, src_tokens, tgt_tokens)
        self._lr = self.scheduler.get_last_lr()[0]
        self.scheduler.step()

    def _skip_update(self, loss: float, norm: float | None) -> None:
        """A non-finite loss or gradient: no optimizer step, a log record, and a stop after too many in a row."""
        self._bad_updates += 1
        step = self.state.step + 1
        self.log.write({"kind": "skipped", "step": step, "loss": repr(loss), "grad_norm": repr(norm),
                        "in_a_row": self._bad_updates})  # fmt: skip
        self._say(f"warning: update {step} skipped: loss {loss}, gradient norm {norm} ({self._bad_updates} in a row)")
        if self._bad_updates >= self.cfg.max_bad_updates:
            last = ckpt.latest_checkpoint(self.out_dir)
            self.bar.close()
            self.log.close()
            raise TrainingDiverged(
                f"training diverged: {self._bad_updates} updates in a row (train.max_bad_updates) had a non-finite "
                f"loss or gradient, the last at update {step}; stopped without saving. The last good checkpoint is "
                f"{last if last is not None else '(none yet)'}; lower train.lr_scale or set train.clip_norm"
            )

    def _after_update(self, epoch_end: bool) -> None:
        c, step = self.cfg, self.state.step
        self.bar.update()
        if step % c.log_every == 0 and self.meter:
            self._log_train()
        if (c.valid_every and step % c.valid_every == 0) or (epoch_end and not c.valid_every):
            self._validate()
        if self._bleu_ok and ((c.bleu_every and step % c.bleu_every == 0) or (epoch_end and not c.bleu_every)):
            self._bleu()
        if c.save_every and step % c.save_every == 0:
            self._save()
        if self.line is not None and (self._last["valid"] == step or (step == c.warmup and not self.line.end)):
            self._redraw_decay()

    def _redraw_decay(self) -> None:
        """train.decay_updates: auto: the line from this update's rate to 0 at the update where train.max_minutes
        runs out, at the pace (seconds per update, validation, BLEU and checkpoints included) since the last
        redraw; then the next update's rate along the new line. Every rank draws the same line (rank 0's)."""
        c, s, line = self.cfg, self.state, self.line
        assert line is not None
        now = time.perf_counter()
        mark_step, mark_time = self._pace_mark
        if s.step <= mark_step:
            return
        pace = (now - mark_time) / (s.step - mark_step)
        left = 60 * c.max_minutes - (now - self._clock)
        end = s.step + max(1, int(left / pace))
        if c.max_updates:
            end = min(end, c.max_updates)
        end = int(all_gather_object(end, self.ctx)[0])
        first = line.end == 0
        line.redraw(s.step, end)
        reapply(self.scheduler)
        self._pace_mark = (s.step, now)
        self.log.write({"kind": "decay", "step": s.step, "end": line.end, "factor": line.start_factor,
                        "s_per_update": pace})  # fmt: skip
        if first:
            self._say(f"step {s.step}: linear decay to 0 at update {line.end} ({pace:.3f} s per update, "
                      f"{left / 60:.1f} of train.max_minutes left); redrawn at each validation")  # fmt: skip

    def _stop_reason(self) -> str | None:
        c, s = self.cfg, self.state
        if c.max_updates and s.step >= c.max_updates:
            return "max_updates"
        if c.max_epochs and s.epoch > c.max_epochs:
            return "max_epochs"
        if c.max_minutes:
            late = float(time.perf_counter() - self._clock >= 60 * c.max_minutes)
            if all_reduce_sum([late], self.ctx)[0] > 0:  # every rank stops at the same update
                return "max_minutes"
        return None

    def _finish(self, reason: str) -> None:
        step = self.state.step
        if self.meter:
            self._log_train()
        if self._last["valid"] != step:
            self._validate()
        if self._bleu_ok and self._last["bleu"] != step:
            self._bleu()
        if self._last["save"] != step:
            self._save()
        self.log.write({"kind": "end", "step": step, "reason": reason, "elapsed_s": self.state.train_seconds})
        self.bar.close()
        self.log.close()

    # --- logging, validation, checkpoints -------------------------------------------------------------------

    def _say(self, message: str) -> None:
        """A log line on stderr from rank 0, printed above the progress bar."""
        if self.ctx.is_main:
            tqdm.write(message, file=sys.stderr)

    def _log_train(self) -> None:
        s = self.state
        record = self.meter.record(self.ctx, s.step, s.epoch, self._lr, time.perf_counter() - self._clock)
        self.log.write(record)
        self.bar.set_postfix(loss=f"{record['loss']:.3f}", ppl=f"{record['ppl']:.1f}", lr=f"{self._lr:.2e}",
                             tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)  # fmt: skip

    def _sync_replica(self) -> None:
        """FSDP: gather the current weights into the full replica `self.model` (every rank takes part)."""
        if self.fsdp and self._replica_step != self.state.step:
            self.model.load_state_dict(full_model_state(self.trained))
            self._replica_step = self.state.step

    def _validate(self) -> None:
        run, s = self.run, self.state
        self._sync_replica()
        result = validation_loss(
            self.model, self.valid_set, run.data.max_tokens, run.model.eps_ls, run.model.pad_id, self.ctx,
            self._autocast,
        )  # fmt: skip
        self._last["valid"] = s.step
        self.log.write({"kind": "valid", "step": s.step, "epoch": s.epoch, **result})
        best = result["loss"] < s.best_valid_loss
        self._say(f"step {s.step}: valid loss {result['loss']:.4f} ppl {result['ppl']:.2f}{' (best)' * best}")
        if best:
            s.best_valid_loss = result["loss"]
            if self.ctx.is_main:
                info = {"step": s.step, "epoch": s.epoch, "valid_loss": result["loss"], "valid_ppl": result["ppl"]}
                ckpt.save_checkpoint(self.out_dir, ckpt.BEST_NAME, self.model, info, self.train_set.tokenizer_path)

    def _bleu(self) -> None:
        self._last["bleu"] = self.state.step
        self._sync_replica()
        if not self.ctx.is_main:
            return
        n = min(self.cfg.bleu_max_sentences, len(self.valid_set))
        score = validation_bleu(self.model, self.valid_set, self.run.decode, n, warn=self._say)
        if score is None:
            self._bleu_ok = False  # warned once; not retried
            return
        self.log.write({"kind": "bleu", "step": self.state.step, "bleu": score.score, "signature": score.signature,
                        "sentences": n})  # fmt: skip
        self._say(f"step {self.state.step}: valid BLEU {score.score:.2f} on {n} sentences ({score.signature})")

    def _save(self) -> None:
        if self.meter:
            self._log_train()
        s, c = self.state, self.cfg
        s.train_seconds = time.perf_counter() - self._clock
        rng = all_gather_object(ckpt.capture_rng(), self.ctx)
        self._sync_replica()
        optimizer = full_optimizer_state(self.trained, self.optimizer) if self.fsdp else self.optimizer.state_dict()
        if self.ctx.is_main:
            state = {
                **vars(s), "world_size": self.ctx.world_size, "update_freq": c.update_freq, "rng": rng,
                "fsdp": self.fsdp, "optimizer": optimizer, "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
                "decay_line": None if self.line is None else vars(self.line),
                "data": self._data_fingerprint(),
            }  # fmt: skip
            info = {"step": s.step, "epoch": s.epoch, "best_valid_loss": s.best_valid_loss,
                    "precision": self.runtime.precision}  # fmt: skip
            tokenizer = self.train_set.tokenizer_path
            ckpt.save_checkpoint(self.out_dir, ckpt.checkpoint_name(s.step), self.model, info, tokenizer, state)
            ckpt.prune_checkpoints(self.out_dir, c.keep_last)
        barrier(self.ctx)
        self._last["save"] = s.step

    def _data_fingerprint(self) -> dict[str, str]:
        if self._data is None:  # the same for the whole run: not recomputed at every checkpoint
            self._data = data_fingerprint(self.train_set)
        return self._data

    def _check_same_data(self, checkpoint: str | Path, saved: dict[str, str] | None) -> None:
        """Refuse to resume on data or a tokenizer other than the checkpoint's, unless train.allow_data_change."""
        if saved is None:  # written before the fingerprint was recorded
            return
        now = dict(self._data_fingerprint())
        if "meta_sha256" in saved:  # written before the paths were left out: the whole files' hashes
            now["tokenizer_sha256"] = sha256_file(self.train_set.tokenizer_path)
            now["meta_sha256"] = sha256_file(Path(self.train_set.data_dir) / "meta.json")
        changed = [key.removesuffix("_sha256").removesuffix("_content") for key in now
                   if key in saved and saved[key] != now[key]]  # fmt: skip
        if changed and not self.cfg.allow_data_change:
            raise ValueError(
                f"{checkpoint} was trained on other data: the {' and '.join(changed)} of {self.train_set.data_dir} "
                "changed since (re-prepared?); resuming would mix vocabularies. Set train.allow_data_change=true "
                "to resume anyway, or start a new train.out_dir"
            )
        if changed:
            self._say(f"warning: the {' and '.join(changed)} changed since {checkpoint}; resuming anyway")

    def restore(self, checkpoint: str | Path) -> None:
        """Continue from a checkpoint: weights, optimizer, schedule, data position and RNG states."""
        saved = ckpt.load_training_state(checkpoint)
        ckpt.require_keys(saved, checkpoint)
        self._check_same_data(checkpoint, saved.get("data"))
        if saved.get("fsdp", False) != self.fsdp:  # the two optimizer-state layouts differ
            raise ValueError(f"{checkpoint} was written with train.fsdp={saved.get('fsdp', False)} on "
                             f"{saved['world_size']} ranks; resume it with the same train.fsdp")  # fmt: skip
        if read_config(checkpoint)[1]["format_version"] == 1:  # one fused in_proj: other optimizer slots
            raise ValueError(f"{checkpoint} was written in model format 1; its weights load (translate, average),"
                             " but its optimizer state cannot resume this version: start a new run")  # fmt: skip
        trained_with = "muon" if set(saved["optimizer"]) == {"muon", "adam"} else "adam"
        if trained_with != self.cfg.optimizer:
            raise ValueError(f"{checkpoint} was written with train.optimizer={trained_with}; resume it with the same"
                             f" train.optimizer (this run has {self.cfg.optimizer})")  # fmt: skip
        ckpt.load_model_weights(self.model, checkpoint)
        if self.fsdp:
            load_full_model_state(self.trained, self.model.state_dict())
            load_full_optimizer_state(self.trained, self.optimizer, saved["optimizer"])
        else:
            self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        if self.line is not None and saved.get("decay_line"):
            vars(self.line).update(saved["decay_line"])  # in place: the scheduler holds this line
            reapply(self.scheduler)
        if saved["scaler"] is not None and self.scaler.is_enabled():
            self.scaler.load_state_dict(saved["scaler"])
        for key in vars(self.state):
            setattr(self.state, key, saved[key])
        same_layout = (saved["world_size"], saved["update_freq"]) == (self.ctx.world_size, self.cfg.update_freq)
        if same_layout:
            ckpt.restore_rng(saved["rng"][self.ctx.rank])
        else:  # the data position is approximate: the same number of pairs, not the same batches
            done = saved["epoch_updates"] * saved["world_size"] * saved["update_freq"]
            self.state.epoch_updates = done // (self.ctx.world_size * self.cfg.update_freq)
            torch.manual_seed(self.cfg.seed + 10_000 * (self.ctx.rank + 1) + self.state.step)
            layout = f"world_size x update_freq = {saved['world_size']} x {saved['update_freq']}"
            self._say(f"warning: {checkpoint} was written with {layout}; this resume is not exact")
        self._last["save"] = self._replica_step = self.state.step
        if self.ctx.is_main:
            self.log.truncate_after(self.state.step)


__all__ = ["TrainState", "Trainer", "TrainingDiverged", "data_fingerprint"]
