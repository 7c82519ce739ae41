"""Old against new, side by side in one run: `aiayn bench decoding` (ours) and `aiayn bench training` (aiayn)
from two source trees, alternating round by round (each benchmark keeps its own process layout: one fresh
process per system), keeping each tree's best figure per point.

    git worktree add /tmp/old <commit>
    python scripts/ab_bench.py --old /tmp/old --new . --rounds 3 --out docs/benchmarks/core-redesign-ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run(tree: Path, module: str, args: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str((tree / "src").resolve())}
    result = subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True, check=True)
    return result.stdout


def decoding(tree: Path, tokenizer: Path, sizes: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "d.json"
        run(tree, "aiayn.benchmarks.decoding", ["--systems", "ours", "--sizes", sizes, "--lengths", "20,40",
                                                "--beams", "4,1", "--repeats", "1", "--tokenizer", str(tokenizer),
                                                "--json", str(out)])  # fmt: skip
        rows = json.loads(out.read_text())["results"]
    return {f"decode {r['size']} {r['search']} L={r['length']}": r["tokens_per_s"] for r in rows}


def training(tree: Path, sizes: str, precision: str) -> dict[str, float]:
    report = json.loads(run(tree, "aiayn.benchmarks.training", ["--impls", "aiayn", "--sizes", sizes, "--steps", "4",
                                                                 "--precision", precision, "--json"]))  # fmt: skip
    return {f"train {r['size']} {precision} tgt tok/s": r["tgt_tokens_per_s"] for r in report["rows"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, default=Path("."))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--decode-sizes", default="small")
    parser.add_argument("--train-sizes", default="tiny")
    parser.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer.model (both trees use it)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    best: dict[str, dict[str, float]] = {"old": {}, "new": {}}
    for round_ in range(args.rounds):
        order = [("old", args.old), ("new", args.new)] if round_ % 2 == 0 else [("new", args.new), ("old", args.old)]
        for name, tree in order:
            figures = {**decoding(tree, args.tokenizer, args.decode_sizes), **training(tree, args.train_sizes, "fp32")}
            for key, value in figures.items():
                best[name][key] = max(best[name].get(key, 0.0), value)
            print(f"round {round_ + 1} {name}: " + ", ".join(f"{k} {v:.0f}" for k, v in figures.items()), flush=True)
    rows = [{"point": k, "old": best["old"][k], "new": best["new"][k], "new_over_old": best["new"][k] / best["old"][k]}
            for k in best["old"]]  # fmt: skip
    print(f"\nCPU: {cpu_model()}, {os.cpu_count()} cores; best of {args.rounds} rounds, old/new alternating")
    print(f"{'point':<36}{'old':>10}{'new':>10}{'new/old':>9}")
    for r in rows:
        print(f"{r['point']:<36}{r['old']:>10.0f}{r['new']:>10.0f}{r['new_over_old']:>9.3f}")
    if args.out:
        args.out.write_text(json.dumps({"cpu": cpu_model(), "rounds": args.rounds, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
