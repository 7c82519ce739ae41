"""Running an ablation sweep (Table 3): one training run per (variant, seed), each under DIR/runs/<id>, with the
project's trainer (`aiayn.training.run.train`, the code of `aiayn train CONFIG --set ...`), then its evaluation.

A run's configuration is CONFIG with, in order, the sweep's `--set`s, the budget, the variant's overrides, the seed,
`train.out_dir` and `train.bleu=false` (BLEU is scored once, at the end). After training, the newest checkpoint
(no averaging, as Table 3) is scored on CONFIG's valid split:

    dev PPL   exp of the per-token NLL (no label smoothing; target subwords, EOS included), `validation_loss`
    dev BLEU  sacreBLEU (13a, cased, detokenized) of beam search 4, alpha 0.6, by `Translator.from_pretrained` as
              `aiayn evaluate` decodes (CONFIG's decode: length limits and fast paths; first --dev-sentences)

and written atomically to DIR/results/<id>.json; then the run's numbered checkpoints but the newest are deleted
(checkpoint-best stays). Rerunning skips finished runs and lets the trainer resume an
unfinished one from its last checkpoint. DIR/sweep.json holds the fingerprint (config, budget, data) that every
later run in DIR and every `--collect` must share.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiayn.config import ConfigError, RunConfig, load_run_config
from aiayn.experiments.ablate import BASE, Variant
from aiayn.experiments.report import write_report
from aiayn.io import atomic_write_json

SWEEP_FILE, RESULTS, RUNS = "sweep.json", "results", "runs"
FORMAT, FORMAT_VERSION = "aiayn-ablation", 1
# Settings that change where or how fast a run goes, not what it learns: left out of the fingerprint.
MACHINE_KEYS = {"train": ("out_dir", "seed", "device", "threads", "progress", "tensorboard", "bleu"),
                "data": ("dir", "raw_dir")}  # fmt: skip
EVAL_DECODE = {"beam": 4, "lenpen": 0.6, "greedy": False, "sampling": False, "nbest": 1}  # 6.1 and Table 3
MODEL_KEYS = ("N", "N_dec", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "positional")

Say = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Budget:
    """The same budget for every run: updates (deterministic) or wall-clock minutes; 0 = not set."""

    updates: int = 0
    minutes: float = 0.0

    def sets(self) -> list[str]:
        return [f"train.max_updates={self.updates}", f"train.max_minutes={float(self.minutes)!r}"]


@dataclass(frozen=True)
class Sweep:
    config: Path
    sets: tuple[str, ...]
    variants: tuple[Variant, ...]  # the base first
    seeds: tuple[int, ...]
    budget: Budget
    out: Path
    skipped: dict[str, str] = field(default_factory=dict)  # variant id -> why it does not fit this base
    dev_sentences: int = 0  # dev BLEU on the first N valid sentences; 0 = all (PPL always on all)

    def run_config(self, variant: Variant, seed: int) -> RunConfig:
        run_dir = self.out / RUNS / run_id(variant, seed)
        own = [*self.budget.sets(), f"train.seed={seed}", f"train.out_dir={run_dir}", "train.bleu=false"]
        return load_run_config(self.config, [*self.sets, *own[:2], *variant.sets, *own[2:]])


def run_id(variant: Variant, seed: int) -> str:
    return f"{variant.id}-s{seed}"


def plan(config: Path, sets: list[str], variants: list[Variant], seeds: list[int], budget: Budget | None,
         out: Path, skipped: dict[str, str], dev_sentences: int = 0) -> Sweep:  # fmt: skip
    """The sweep, every run's configuration checked (an unknown or invalid override fails here, in one line)."""
    if not seeds:
        raise ConfigError("--seeds: give at least one seed")
    base = load_run_config(config, sets)
    budget = budget or Budget(base.train.max_updates, base.train.max_minutes)
    if not (budget.updates or budget.minutes or base.train.max_epochs):
        raise ConfigError(f"{config} sets no training budget: give --updates N or --budget-minutes M")
    sweep = Sweep(config, tuple(sets), (BASE, *variants), tuple(seeds), budget, out, skipped, dev_sentences)
    for variant in sweep.variants:
        try:
            sweep.run_config(variant, seeds[0])
        except ConfigError as error:
            raise ConfigError(f"row {variant.id}: {error}") from None
    return sweep


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint(sweep: Sweep, data_dir: Path) -> dict[str, str]:
    """Hashes of what every run in a sweep must share: the resolved config, the budget, the data, the scoring."""
    from aiayn.data import ParallelDataset
    from aiayn.training.trainer import data_fingerprint

    config = sweep.run_config(BASE, sweep.seeds[0]).to_dict()
    for section, keys in MACHINE_KEYS.items():
        for key in keys:
            config[section].pop(key)
    for key in ("max_updates", "max_minutes"):  # the budget, hashed on its own
        config["train"].pop(key)
    parts = {"config": _digest(config), "budget": _digest(vars(sweep.budget)),
             "data": _digest(data_fingerprint(ParallelDataset(data_dir, "train"))),
             "eval": _digest({"decode": EVAL_DECODE, "dev_sentences": sweep.dev_sentences})}  # fmt: skip
    return {"id": _digest(parts), **parts}


def _differ(a: dict[str, str], b: dict[str, str]) -> str:
    parts = [k for k in ("config", "budget", "data", "eval") if a.get(k) != b.get(k)] or ["fingerprint"]
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def claim(out: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Write DIR/sweep.json, or refuse when DIR already holds a sweep with another fingerprint."""
    path = out / SWEEP_FILE
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        fp, new = old.get("fingerprint", {}), meta["fingerprint"]
        if fp.get("id") != new["id"]:
            raise ValueError(f"{out} holds a sweep with another {_differ(fp, new)} (fingerprint {fp.get('id')} != "
                             f"{new['id']}); use another --out")  # fmt: skip
        meta = {**old, **meta, "skipped": {**old.get("skipped", {}), **meta["skipped"]}}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, meta)
    return meta


def _dev_bleu(checkpoint: Path, run: RunConfig, valid: Any, device: str, limit: int) -> dict[str, Any]:
    """Beam-4 BLEU of the first `limit` valid sentences (0 = all), decoded as `aiayn evaluate` decodes."""
    from aiayn.decoding import Translator
    from aiayn.evaluation import corpus_bleu
    from aiayn.io import read_text_file

    src, ref = valid.text_path(valid.src_lang), valid.text_path(valid.tgt_lang)
    if src is None or ref is None:
        _stderr(f"dev BLEU skipped: no raw text of split {valid.split!r} in {valid.data_dir}")
        return {"bleu": None, "bleu_signature": None, "sentences": 0}
    sources, references = read_text_file(src, limit or None), read_text_file(ref, limit or None)
    decode = {**dataclasses.asdict(run.decode), **EVAL_DECODE}
    translator = Translator.from_pretrained(checkpoint, device=device, **decode)
    score = corpus_bleu(translator.translate(sources), references)
    runtime = None if translator.runtime is None else translator.runtime.describe()
    return {"bleu": score.score, "bleu_signature": score.signature, "sentences": len(sources), "runtime": runtime}


def evaluate(run: RunConfig, dev_sentences: int = 0) -> dict[str, Any]:
    """Dev perplexity (float32, the whole split) and beam-4 BLEU of the run's newest checkpoint; its parameters."""
    from aiayn.data import ParallelDataset
    from aiayn.model import Transformer
    from aiayn.training.checkpoint import latest_checkpoint
    from aiayn.training.distributed import DistContext, pick_device
    from aiayn.training.validation import validation_loss

    checkpoint = latest_checkpoint(run.train.out_dir)
    if checkpoint is None:
        raise RuntimeError(f"{run.train.out_dir} has no checkpoint after training")
    device = pick_device(run.train.device)
    model = Transformer.from_pretrained(checkpoint, map_location=device).eval()
    valid = ParallelDataset(run.data.dir, run.data.valid_split)
    loss = validation_loss(model, valid, run.data.max_tokens, run.model.eps_ls, run.model.pad_id,
                           DistContext(device=device))  # fmt: skip
    dev = {"ppl": loss["ppl"], "nll_loss": loss["nll_loss"], "smoothed_loss": loss["loss"], "tokens": loss["tokens"]}
    dev.update(_dev_bleu(checkpoint, run, valid, str(device), dev_sentences))
    decode = {key: getattr(run.decode, key) for key in ("lenpen_form", "max_len_a", "max_len_b")}
    return {"checkpoint": checkpoint.name, "params": model.num_parameters(), "dev": dev,
            "decode": {**decode, **EVAL_DECODE}}  # fmt: skip


def load_results(out: Path) -> list[dict[str, Any]]:
    folder = out / RESULTS
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def run_sweep(sweep: Sweep, say: Say = _stderr) -> Path:
    """Train and score every (variant, seed) not yet done; the report is rewritten after each run."""
    from aiayn.training.checkpoint import prune_checkpoints
    from aiayn.training.distributed import DistContext
    from aiayn.training.run import ensure_data, train

    data_dir = ensure_data(sweep.run_config(BASE, sweep.seeds[0]), DistContext())
    meta = claim(sweep.out, {
        "format": FORMAT, "format_version": FORMAT_VERSION, "fingerprint": fingerprint(sweep, data_dir),
        "config": str(sweep.config), "sets": list(sweep.sets), "budget": vars(sweep.budget), "skipped": sweep.skipped,
        "dev_sentences": sweep.dev_sentences,
    })  # fmt: skip
    for name, reason in sweep.skipped.items():
        say(f"skipped {name}: {reason}")
    todo = [(variant, seed) for seed in sweep.seeds for variant in sweep.variants]  # one seed of every row first
    (sweep.out / RESULTS).mkdir(exist_ok=True)
    for i, (variant, seed) in enumerate(todo, start=1):
        rid = run_id(variant, seed)
        path = sweep.out / RESULTS / f"{rid}.json"
        if path.is_file():
            say(f"[{i}/{len(todo)}] {rid}: done already")
            continue
        run = sweep.run_config(variant, seed)
        say(f"[{i}/{len(todo)}] {rid}: training ({variant.values}) in {run.train.out_dir}")
        state = train(run)
        result = {"format": FORMAT + "-run", "format_version": FORMAT_VERSION, "fingerprint": meta["fingerprint"],
                  "run_id": rid, "variant": variant.to_dict(), "seed": seed,
                  "model": {k: getattr(run.model, k) for k in MODEL_KEYS}, "updates": state.step,
                  "train_seconds": state.train_seconds, **evaluate(run, sweep.dev_sentences)}  # fmt: skip
        atomic_write_json(path, result)
        prune_checkpoints(run.train.out_dir, 1)  # scored: only the newest (to train it on) stays; 1 run = 1 model
        bleu = "-" if result["dev"]["bleu"] is None else f"{result['dev']['bleu']:.2f}"
        say(f"[{i}/{len(todo)}] {rid}: dev PPL {result['dev']['ppl']:.3f}, BLEU {bleu}, "
            f"{result['params']:,} parameters, {state.step} updates")  # fmt: skip
        write_report(sweep.out, meta, load_results(sweep.out))
    return write_report(sweep.out, meta, load_results(sweep.out))


def collect(dirs: list[Path], out: Path, say: Say = _stderr) -> Path:
    """Merge the results of sweeps run with different --rows (same fingerprint) into `out` and report them."""
    metas = []
    for folder in dirs:
        if not (folder / SWEEP_FILE).is_file():
            raise FileNotFoundError(f"{folder} is not an ablation sweep (no {SWEEP_FILE})")
        metas.append(json.loads((folder / SWEEP_FILE).read_text(encoding="utf-8")))
    first = metas[0]["fingerprint"]
    for folder, meta in zip(dirs[1:], metas[1:]):
        other = meta["fingerprint"]
        if other["id"] != first["id"]:
            raise ValueError(f"cannot merge {dirs[0]} and {folder}: they differ in {_differ(first, other)} "
                             f"(fingerprint {first['id']} != {other['id']})")  # fmt: skip
    skipped = {k: v for meta in metas for k, v in meta.get("skipped", {}).items()}
    merged = claim(out, {**metas[0], "skipped": skipped, "collected_from": [str(d) for d in dirs]})
    (out / RESULTS).mkdir(exist_ok=True)
    for folder in dirs:
        for result in load_results(folder):
            target = out / RESULTS / f"{result['run_id']}.json"
            if result["fingerprint"]["id"] != first["id"]:
                raise ValueError(f"{folder}/{RESULTS}/{result['run_id']}.json has another fingerprint")
            if not target.is_file():  # a run in several inputs (the base of each half): the first one counts
                atomic_write_json(target, result)
    say(f"collected {len(load_results(out))} runs from {len(dirs)} sweeps into {out}")
    return write_report(out, merged, load_results(out))


__all__ = ["Budget", "Sweep", "claim", "collect", "evaluate", "fingerprint", "load_results", "plan", "run_id",
           "run_sweep"]  # fmt: skip
