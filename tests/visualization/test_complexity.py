"""The complexity benchmark (Table 1 measured): the exponent fitter, the crossover, the
quick run's JSON (every field present and documented), and growth near n^2 for eq. (1) at large n."""

from __future__ import annotations

import importlib
import json
import random
from pathlib import Path

import pytest

from aiayn.benchmarks.complexity import FIELDS, LAYERS
from aiayn.benchmarks.timing import crossover, fit_exponent
from aiayn.cli import bench, main


def test_fitted_exponent_of_synthetic_quadratic_timings() -> None:
    rng = random.Random(0)
    ns = [2**i for i in range(4, 13)]
    d = 64
    attention = [3e-9 * n * n * d * (1 + rng.uniform(-0.1, 0.1)) for n in ns]  # c n^2 d + 10% noise
    assert fit_exponent(ns[-4:], attention[-4:])["exponent"] == pytest.approx(2.0, abs=0.1)
    mixed = [1e-9 * (n * n * d + 4 * n * d * d) for n in ns]  # attention with its projections: n^2 wins for n >> d
    assert fit_exponent(ns[-3:], mixed[-3:])["exponent"] == pytest.approx(2.0, abs=0.25)
    assert fit_exponent(ns[:3], mixed[:3])["exponent"] == pytest.approx(1.0, abs=0.25)
    exact = fit_exponent([10, 100, 1000], [5e-3, 5e-1, 5e1])
    assert exact["exponent"] == pytest.approx(2.0) and exact["coefficient"] == pytest.approx(5e-5)
    assert exact["r2"] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        fit_exponent([1], [1.0])


def test_crossover_where_n_squared_d_meets_n_d_squared() -> None:
    d = 256
    ns = [2**i for i in range(4, 13)]
    attention = [n * n * d for n in ns]
    rnn = [n * d * d for n in ns]
    assert crossover(ns, attention, rnn) == pytest.approx(d)  # Table 1: self-attention cheaper when n < d
    assert crossover(ns, [1.0] * len(ns), [2.0] * len(ns)) is None
    assert crossover(ns, [3.0] * len(ns), [2.0] * len(ns)) == ns[0]


def flatten(value: object, prefix: str = "") -> set[str]:
    """Dotted field names, with the layer names replaced by *; lists and objects under documented leaves kept."""
    if not isinstance(value, dict) or prefix in ("machine", "fields", "generation.config"):
        return {prefix}
    names = set()
    for key, item in value.items():
        part = "*" if prefix == "layers" else key
        names |= flatten(item, f"{prefix}.{part}" if prefix else part)
    return names


def test_quick_run_writes_every_documented_field(tmp_path: Path) -> None:
    assert main(["bench", "complexity", "--quick", "--threads", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "complexity.json").read_text())
    assert flatten(report) == set(FIELDS)  # every field present, and every field documented
    assert report["fields"] == FIELDS
    assert set(report["layers"]) == set(LAYERS)
    lengths = report["config"]["lengths"]
    for entry in report["layers"].values():
        assert len(entry["seconds"]) == len(lengths) and all(t > 0 for t in entry["seconds"])
    assert [e["expected_exponent"] for e in report["layers"].values()] == [2, 2, 1, 1]
    # Eq. (1) alone at the quick run's largest lengths (n >> d_k): loosely quadratic, whatever the machine's load.
    assert 1.3 < report["layers"]["attention_scores_only"]["exponent_large_n"] < 3.2
    generation = report["generation"]
    assert generation["max_abs_logit_difference"] < 1e-4  # the cache changes the cost, not the result
    assert len(generation["cached_seconds_per_token"]) == len(generation["checkpoints"])
    for name in ("complexity.md", "complexity.png", "complexity.svg"):
        assert (tmp_path / name).stat().st_size > 500
    markdown = (tmp_path / "complexity.md").read_text()
    assert "| Self-attention layer | O(n^2 d) | O(1) | O(1) | 2 |" in markdown


def test_every_listed_benchmark_is_a_module_and_others_are_refused(capsys) -> None:
    """Each name `aiayn bench` lists is a module of aiayn.benchmarks with add_arguments and run; any other
    name is refused by the argument parser (exit status 2) before anything is imported."""
    for name in bench.BENCHMARKS:
        module = importlib.import_module(f"aiayn.benchmarks.{name}")
        assert callable(module.add_arguments) and callable(module.run), name
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "no_such_benchmark"])
    assert exit_info.value.code == 2 and "invalid choice: 'no_such_benchmark'" in capsys.readouterr().err
