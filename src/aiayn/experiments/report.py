"""The report of an ablation sweep, laid out like Table 3: DIR/table.json, DIR/table.md and DIR/ablation.png.

Per row: the paper's change and the values we used, parameters, our dev PPL and BLEU (mean +- sample std over
seeds), the paper's figures, the change against the base (paired by seed: variant - base of the same seed) ours
and the paper's, and whether the direction of the change (better or worse) agrees with the paper's; `n/a` where
the paper's row has no change in that metric or no figure, or the base is missing. Wall times stay in
DIR/results, out of the table, so two sweeps with the same --updates give equal tables.
"""

from __future__ import annotations

import io
import statistics
from pathlib import Path
from typing import Any

from aiayn.io import atomic_write_bytes, atomic_write_json, atomic_write_text

HIGHER_IS_BETTER = {"bleu": True, "ppl": False}
PAPER_BASE = {"ppl": 4.92, "bleu": 25.8}  # Table 3, base row


def _spread(values: list[float]) -> dict[str, float | None]:
    return {"mean": statistics.fmean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else None}  # fmt: skip


def _metric(result: dict[str, Any], name: str) -> float | None:
    return result["dev"][name]


def _direction(delta: float | None, metric: str) -> str | None:
    if delta is None:
        return None
    if delta == 0:
        return "same"
    return "better" if (delta > 0) == HIGHER_IS_BETTER[metric] else "worse"


def build_table(meta: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """table.json: one entry per variant in Table 3's order (then --vary rows), seeds aggregated."""
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for result in sorted(results, key=lambda r: (r["variant"]["order"], r["variant"]["id"], r["seed"])):
        by_variant.setdefault(result["variant"]["id"], []).append(result)
    base = {r["seed"]: r for r in by_variant.get("base", [])}
    rows = []
    for vid, runs in by_variant.items():
        variant = runs[0]["variant"]
        entry: dict[str, Any] = {
            "id": vid, "row": variant["row"], "change": variant["change"],
            "values": ", ".join(s.removeprefix("model.") for s in variant["sets"]) or "-",
            "model": runs[0]["model"], "params": runs[0]["params"], "seeds": [r["seed"] for r in runs],
            "updates": [r["updates"] for r in runs], "paper": variant["paper"],
        }  # fmt: skip
        entry["delta"], entry["paper_delta"], entry["agrees"] = {}, {}, {}
        for metric in ("ppl", "bleu"):
            values = [_metric(r, metric) for r in runs if _metric(r, metric) is not None]
            entry[metric] = {**_spread(values), "per_seed": {str(r["seed"]): _metric(r, metric) for r in runs}}
            paired = [
                _metric(r, metric) - _metric(base[r["seed"]], metric)
                for r in runs
                if r["seed"] in base and None not in (_metric(r, metric), _metric(base[r["seed"]], metric))
            ]
            entry["delta"][metric] = _spread(paired) if vid != "base" else {"mean": None, "std": None}
            paper = None if variant["paper"] is None or vid == "base" else variant["paper"][metric]
            paper_delta = None if paper is None else round(paper - PAPER_BASE[metric], 6)
            entry["paper_delta"][metric] = paper_delta
            ours, theirs = _direction(entry["delta"][metric]["mean"], metric), _direction(paper_delta, metric)
            known = ours is not None and theirs not in (None, "same")
            entry["agrees"][metric] = ("yes" if ours == theirs else "no") if known else "n/a"
        rows.append(entry)
    sentences = f"the first {meta['dev_sentences']} sentences" if meta.get("dev_sentences") else "all sentences"
    return {
        "format": "aiayn-ablation-table", "format_version": 1, "config": meta["config"], "sets": meta["sets"],
        "budget": meta["budget"], "fingerprint": meta["fingerprint"]["id"],
        "seeds": sorted({r["seed"] for r in results}), "skipped": meta.get("skipped", {}),
        "metrics": {"ppl": "exp of the per-token NLL on the valid split, no label smoothing (target subwords, EOS "
                           "included)",
                    "bleu": f"sacreBLEU (13a, cased) on {sentences} of the valid split, beam 4, alpha 0.6, newest "
                            "checkpoint, no checkpoint averaging"},
        "rows": rows,
    }  # fmt: skip


def _pm(spread: dict[str, Any], digits: int) -> str:
    if spread["mean"] is None:
        return "-"
    text = f"{spread['mean']:.{digits}f}"
    return text if spread["std"] is None else f"{text} ± {spread['std']:.{digits}f}"


def _signed(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:+.{digits}f}"


def markdown(table: dict[str, Any]) -> str:
    budget = table["budget"]
    limit = f"{budget['updates']} updates" if budget["updates"] else f"{budget['minutes']} minutes"
    lines = [
        f"# Table 3 rerun: {table['config']} {' '.join('--set ' + s for s in table['sets'])}".rstrip(), "",
        f"Budget per run: {limit}; seeds {', '.join(map(str, table['seeds']))}; fingerprint {table['fingerprint']}.",
        f"dev PPL: {table['metrics']['ppl']}. dev BLEU: {table['metrics']['bleu']}. "
        "Δ = variant - base of the same seed (mean ± std over seeds); the paper's Δ is against its base "
        "(PPL 4.92, BLEU 25.8).", "",
        "| row | id | change (paper) | values used | params | dev PPL | dev BLEU | updates | paper PPL | "
        "paper BLEU | paper params | ΔPPL ours / paper | ΔBLEU ours / paper | PPL agrees | BLEU agrees |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]  # fmt: skip
    for r in table["rows"]:
        paper = r["paper"] or {}
        updates = sorted(set(r["updates"]))
        cells = [
            r["row"], r["id"], r["change"], r["values"], f"{r['params'] / 1e6:.2f}M", _pm(r["ppl"], 3),
            _pm(r["bleu"], 2), "-".join(map(str, updates[:: max(1, len(updates) - 1)])),
            str(paper.get("ppl", "")), str(paper.get("bleu", "")),
            f"{paper['params_m']}M" if paper.get("params_m") else "",
            f"{_pm(r['delta']['ppl'], 3) if r['id'] != 'base' else '-'} / {_signed(r['paper_delta']['ppl'], 2)}",
            f"{_pm(r['delta']['bleu'], 2) if r['id'] != 'base' else '-'} / {_signed(r['paper_delta']['bleu'], 1)}",
            r["agrees"]["ppl"], r["agrees"]["bleu"],
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    if table["skipped"]:
        lines += ["", "Skipped (the rule does not fit this base): "
                  + "; ".join(f"{k}: {v}" for k, v in table["skipped"].items()) + "."]  # fmt: skip
    return "\n".join(lines) + "\n"


def figure(table: dict[str, Any]) -> bytes:
    """PNG: per variant the change in BLEU and in PPL against the base, ours (seed spread) beside the paper's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in table["rows"] if r["id"] != "base"]
    labels = [f"{r['id']} ({r['values']})" for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 1.5 + 0.38 * max(len(rows), 1)), sharey=True)
    titles = ("Δ dev BLEU (higher is better)", "Δ dev PPL (lower is better)")
    for ax, metric, title in zip(axes, ("bleu", "ppl"), titles):
        y = list(range(len(rows)))
        ours = [r["delta"][metric]["mean"] or 0.0 for r in rows]
        err = [r["delta"][metric]["std"] or 0.0 for r in rows]
        paper = [r["paper_delta"][metric] if r["paper_delta"][metric] is not None else float("nan") for r in rows]
        xerr = err if any(err) else None  # seed spread of the paired differences
        ax.barh([v - 0.2 for v in y], ours, height=0.38, xerr=xerr, capsize=3, label="ours", color="tab:blue")
        ax.barh([v + 0.2 for v in y], paper, height=0.38, label="paper (Table 3)", color="tab:orange")
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(title)
        ax.set_yticks(y, labels, fontsize=8)
    axes[0].invert_yaxis()  # Table 3's order from the top (the y axis is shared: invert it once)
    axes[0].legend(loc="best", fontsize=8)
    fig.suptitle(f"Table 3 variations against the base: {table['config']}", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()


def write_report(out: Path, meta: dict[str, Any], results: list[dict[str, Any]]) -> Path:
    """Write table.json, table.md and ablation.png into `out` (atomically); returns table.md's path."""
    table = build_table(meta, results)
    atomic_write_json(out / "table.json", table)
    atomic_write_text(out / "table.md", markdown(table))
    if results:
        atomic_write_bytes(out / "ablation.png", figure(table))
    return out / "table.md"


__all__ = ["build_table", "figure", "markdown", "write_report"]
