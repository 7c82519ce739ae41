"""The variations of Table 3 (rows A-E and big), each a rule relative to a base `ModelConfig`, with the paper's figures.

The paper's base is N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=64, P_drop=0.1, eps_ls=0.1 (newstest2013: PPL 4.92,
BLEU 25.8, 65M parameters). A variation's absolute sizes only fit that base, so each is written as a rule that gives
the paper's row when applied to the paper's base and a scaled row on any other:

    A  h x {1/8, 1/2, 2, 4} (rounded, at least 1), d_k = d_v = h_base * d_k_base / h (h * d_k fixed)
    B  d_k x {1/4, 1/2} at the base's h (d_v unchanged, as in the paper's parameter counts)
    C  N x {2/6, 4/6, 8/6} (rounded, at least 1); d_model x {1/2, 2} with d_k = d_v = d_model / h; d_ff x {1/2, 2}
    D  P_drop in {0.0, 0.2}, eps_ls in {0.0, 0.2}: the paper's absolute values
    E  learned positional embeddings instead of sinusoids
    big  d_model x 2, d_ff x 2, h x 2 (d_k = d_v unchanged), P_drop 0.3 (the paper also trained it 3x longer)

A rule that gives a non-integral size, the base itself, or a size an earlier variation of its row already has is
skipped, with the reason. `Variant.sets` are `section.field=value` overrides, the strings of `aiayn train --set`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from aiayn.config import SECTIONS, ConfigError, ModelConfig

ROWS = ("A", "B", "C", "D", "E", "big")


@dataclass(frozen=True)
class Paper:
    """Table 3's figures for one row: dev perplexity (per word-piece), dev BLEU, parameters in millions."""

    ppl: float
    bleu: float
    params_m: float | None = None


@dataclass(frozen=True)
class Variant:
    """One row of the table: `id` is stable across configs (named by the paper's change), `sets` are ours."""

    id: str
    row: str  # "base", "A".."E", "big" or "vary"
    change: str  # the paper's wording ("N=2") or, for --vary rows, the override
    sets: tuple[str, ...] = ()
    paper: Paper | None = None
    order: int = 0  # position in Table 3 (vary rows after it)

    @property
    def values(self) -> str:
        """The overrides as the table prints them: `h=1, d_k=128`."""
        return ", ".join(s.removeprefix("model.") for s in self.sets) or "-"

    def to_dict(self) -> dict[str, Any]:
        paper = None if self.paper is None else vars(self.paper).copy()
        return {"id": self.id, "row": self.row, "change": self.change, "sets": list(self.sets), "paper": paper,
                "order": self.order}  # fmt: skip


Rule = Callable[[ModelConfig], dict[str, Any] | str]  # overrides of the base, or why the variation does not fit


def _round(x: float) -> int:
    return max(1, math.floor(x + 0.5))


def _whole(x: float) -> int | None:
    return int(x) if x >= 1 and float(x).is_integer() else None


def _heads(factor: float) -> Rule:
    def rule(b: ModelConfig) -> dict[str, Any] | str:
        h = _round(b.h * factor)
        d_k, d_v = _whole(b.h * b.d_k / h), _whole(b.h * b.d_v / h)
        if d_k is None or d_v is None:
            return f"h={h}: h*d_k={b.h * b.d_k} is not a multiple of {h}"
        return {"h": h, "d_k": d_k, "d_v": d_v}

    return rule


def _key_size(factor: float) -> Rule:
    def rule(b: ModelConfig) -> dict[str, Any] | str:
        d_k = _whole(b.d_k * factor)
        return {"d_k": d_k} if d_k else f"d_k={b.d_k}*{factor} is not a whole number"

    return rule


def _layers(factor: float) -> Rule:
    def rule(b: ModelConfig) -> dict[str, Any] | str:
        out: dict[str, Any] = {"N": _round(b.N * factor)}
        if b.N_dec is not None:
            out["N_dec"] = _round(b.N_dec * factor)
        return out

    return rule


def _width(factor: float) -> Rule:
    def rule(b: ModelConfig) -> dict[str, Any] | str:
        d_model = _whole(b.d_model * factor)
        d_k = None if d_model is None else _whole(d_model / b.h)
        if d_k is None or d_model % 2:
            return f"d_model={b.d_model}*{factor} is not an even multiple of h={b.h}"
        return {"d_model": d_model, "d_k": d_k, "d_v": d_k}

    return rule


def _inner(factor: float) -> Rule:
    return lambda b: {"d_ff": _round(b.d_ff * factor)}


def _fixed(**values: Any) -> Rule:
    return lambda b: dict(values)


def _big(b: ModelConfig) -> dict[str, Any] | str:
    return {"d_model": 2 * b.d_model, "d_ff": 2 * b.d_ff, "h": 2 * b.h, "d_k": b.d_k, "d_v": b.d_v, "P_drop": 0.3}


# Table 3 (newstest2013 dev, beam search, no checkpoint averaging): id, row, the paper's change, rule, figures.
TABLE3: tuple[tuple[str, str, str, Rule, Paper], ...] = (
    ("A-h1", "A", "h=1, d_k=d_v=512", _heads(1 / 8), Paper(5.29, 24.9)),
    ("A-h4", "A", "h=4, d_k=d_v=128", _heads(1 / 2), Paper(5.00, 25.5)),
    ("A-h16", "A", "h=16, d_k=d_v=32", _heads(2), Paper(4.91, 25.8)),
    ("A-h32", "A", "h=32, d_k=d_v=16", _heads(4), Paper(5.01, 25.4)),
    ("B-dk16", "B", "d_k=16", _key_size(1 / 4), Paper(5.16, 25.1, 58)),
    ("B-dk32", "B", "d_k=32", _key_size(1 / 2), Paper(5.01, 25.4, 60)),
    ("C-N2", "C", "N=2", _layers(2 / 6), Paper(6.11, 23.7, 36)),
    ("C-N4", "C", "N=4", _layers(4 / 6), Paper(5.19, 25.3, 50)),
    ("C-N8", "C", "N=8", _layers(8 / 6), Paper(4.88, 25.5, 80)),
    ("C-dmodel256", "C", "d_model=256, d_k=d_v=32", _width(1 / 2), Paper(5.75, 24.5, 28)),
    ("C-dmodel1024", "C", "d_model=1024, d_k=d_v=128", _width(2), Paper(4.66, 26.0, 168)),
    ("C-dff1024", "C", "d_ff=1024", _inner(1 / 2), Paper(5.12, 25.4, 53)),
    ("C-dff4096", "C", "d_ff=4096", _inner(2), Paper(4.75, 26.2, 90)),
    ("D-drop0.0", "D", "P_drop=0.0", _fixed(P_drop=0.0), Paper(5.77, 24.6)),
    ("D-drop0.2", "D", "P_drop=0.2", _fixed(P_drop=0.2), Paper(4.95, 25.5)),
    ("D-ls0.0", "D", "eps_ls=0.0", _fixed(eps_ls=0.0), Paper(4.67, 25.3)),
    ("D-ls0.2", "D", "eps_ls=0.2", _fixed(eps_ls=0.2), Paper(5.47, 25.7)),
    ("E-learned", "E", "learned positional embedding instead of sinusoids", _fixed(positional="learned"),
     Paper(4.92, 25.7)),
    ("big", "big", "N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3, 300K steps", _big, Paper(4.33, 26.4, 213)),
)  # fmt: skip
BASE = Variant("base", "base", "-", (), Paper(4.92, 25.8, 65), order=0)
VARIANT_IDS = tuple(entry[0] for entry in TABLE3)

# Keys a --vary row may not change: the sweep sets them itself, or they change the data every row must share.
SWEEP_KEYS = {"train.out_dir", "train.seed", "train.max_updates", "train.max_minutes", "train.max_epochs"}
DATA_KEYS = {f"data.{f.name}" for f in fields(SECTIONS["data"])} - {"data.max_tokens", "data.max_sentences"}


def _value(x: Any) -> str:
    return repr(x) if isinstance(x, float) else str(x)


def parameters(config: ModelConfig) -> int:
    """The parameter count of a model of this configuration (`Transformer.count_parameters`)."""
    from aiayn.model import Transformer

    return Transformer.count_parameters(config)


def select(rows: str) -> list[str]:
    """Variant ids for `--rows A,C-N2,big` (row names or variant ids; `all`; `base` alone adds nothing)."""
    chosen: list[str] = []
    for name in (part.strip() for part in rows.split(",")):
        if name in ("", "base"):
            continue
        ids = VARIANT_IDS if name == "all" else [v for v, row, *_ in TABLE3 if row == name or v == name]
        if not ids:
            raise ConfigError(f"unknown row {name!r} in --rows; choose from {', '.join(ROWS)}, all, base, or a "
                              f"variant id ({', '.join(VARIANT_IDS)})")  # fmt: skip
        chosen += [i for i in ids if i not in chosen]
    return chosen


def table3_variants(base: ModelConfig, ids: list[str]) -> tuple[list[Variant], dict[str, str]]:
    """The chosen variations scaled to `base`, in Table 3's order, and the skipped ones with their reasons."""
    out: list[Variant] = []
    skipped: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    base_values = base.to_dict()
    for order, (vid, row, change, rule, paper) in enumerate(TABLE3, start=1):
        result = rule(base)
        if isinstance(result, str):
            reason = result
        else:
            model = base.with_overrides(**result).to_dict()
            key = tuple(sorted((k, model[k]) for k in result))
            if model == base_values:
                reason = "equals the base"
            elif key in seen:
                reason = f"same as {seen[key]}"
            else:
                seen[key], reason = vid, ""
        if vid not in ids:
            continue
        if reason:
            skipped[vid] = reason
            continue
        sets = tuple(f"model.{k}={_value(v)}" for k, v in result.items() if base_values[k] != v)
        out.append(Variant(vid, row, change, sets, paper, order))
    return out, skipped


def vary_variants(specs: list[str], start: int = 100) -> list[Variant]:
    """Extra rows from `--vary KEY=V1,V2,...` (KEY a dotted config key such as train.lr_scale), one per value."""
    out: list[Variant] = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        section, _, name = key.partition(".")
        if not sep or not values.strip():
            raise ConfigError(f"--vary {spec!r}: expected KEY=V1,V2,... (e.g. train.lr_scale=0.5,1,2)")
        if section not in SECTIONS or name not in {f.name for f in fields(SECTIONS[section])}:
            raise ConfigError(f"--vary {spec!r}: unknown config key {key!r}; use section.field, e.g. model.d_ff")
        if key in SWEEP_KEYS or key in DATA_KEYS or name.endswith("vocab_size"):
            raise ConfigError(f"--vary {spec!r}: {key} is set by the sweep or changes the shared data")
        for value in (v.strip() for v in values.split(",") if v.strip()):
            vid = "vary-" + "".join(c if c.isalnum() or c in "._=-" else "_" for c in f"{key}={value}")
            out.append(Variant(vid, "vary", f"{key}={value}", (f"{key}={value}",), None, start + len(out)))
    return out


__all__ = ["BASE", "Paper", "ROWS", "TABLE3", "VARIANT_IDS", "Variant", "parameters", "select", "table3_variants",
           "vary_variants"]  # fmt: skip
