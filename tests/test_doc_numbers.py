"""Numbers quoted in docs/RESULTS.md and docs/walkthrough.md come from the tools: parameter counts from the model
the config builds (what `aiayn info` prints), updates, epochs and validation figures from the committed
metrics.jsonl, test BLEU from the committed output of scripts/multi30k_results.sh."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aiayn.config import load_run_config
from aiayn.model import Transformer

DOCS = Path(__file__).resolve().parents[1] / "docs"
CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def parameters(config: str) -> int:
    """What `aiayn info` prints for the model the config trains (its vocabulary is `data.vocab_size`)."""
    run = load_run_config(CONFIGS / config)
    vocab = run.data.vocab_size
    return Transformer(run.model.with_overrides(src_vocab_size=vocab, tgt_vocab_size=vocab)).num_parameters()


def records(name: str) -> list[dict]:
    return [json.loads(line) for line in (DOCS / name).read_text().splitlines() if line.strip()]


def number(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.parametrize("doc", ["RESULTS.md", "walkthrough.md"])
def test_multi30k_tiny_parameter_count_is_the_models(doc: str) -> None:
    text = (DOCS / doc).read_text()
    quoted = re.findall(r"([\d,.]+M?) parameters", text.split("configs/multi30k-wu.yaml")[0])
    assert quoted, f"{doc} quotes no parameter count"
    assert number(quoted[0]) == parameters("multi30k-tiny.yaml")


def test_multi30k_tiny_updates_epochs_and_validation_bleu_are_the_metrics() -> None:
    text = (DOCS / "RESULTS.md").read_text()
    metrics = records("multi30k-tiny.metrics.jsonl")
    end = next(r for r in metrics if r["kind"] == "end")
    # validation runs at each epoch end (valid_every 0) and once more when the run stops mid-epoch
    epochs = sum(1 for r in metrics if r["kind"] == "valid" and r["step"] < end["step"])
    claim = re.search(r"- ([\d,]+) updates, (\d+) epochs", text)
    assert claim, "RESULTS.md: the training paragraph of the multi30k-tiny run is missing"
    assert number(claim.group(1)) == end["step"]
    assert int(claim.group(2)) == epochs
    bleu = re.search(r"every (\d+) updates: ([\d.,\s]+)\(the last", text)
    assert bleu
    quoted = [float(x) for x in re.sub(r"\s", "", bleu.group(2)).strip(",").split(",") if x]
    measured = [round(r["bleu"], 1) for r in metrics if r["kind"] == "bleu"]
    assert quoted == measured
    best_ppl = min(r["ppl"] for r in metrics if r["kind"] == "valid")
    assert f"{best_ppl:.2f} at" in text


def results_file_scores(path: Path) -> dict[tuple[str, str], float]:
    """{(model, 'raw'|'lc-tok'): BLEU} from scripts/multi30k_results.sh's output."""
    scores: dict[tuple[str, str], float] = {}
    model = kind = ""
    for line in path.read_text().splitlines():
        header = re.match(r"== \S*/([\w-]+): (raw|lowercased)", line)
        if header:
            model, kind = header.group(1), "raw" if header.group(2) == "raw" else "lc-tok"
            continue
        bleu = re.match(r"BLEU[^=]*= ([\d.]+)", line)
        if bleu and model:
            scores[(model, kind)] = float(bleu.group(1))
            model = ""
    return scores


def results_section(section: str) -> str:
    """The part of RESULTS.md under the heading `section`, up to the next heading of its level or above."""
    text = (DOCS / "RESULTS.md").read_text()
    assert section in text, f"RESULTS.md has no section {section!r}"
    level = section.split(" ", 1)[0]  # "##" or "###"
    return re.split(rf"\n#{{2,{len(level)}}} ", text.split(section, 1)[1], maxsplit=1)[0]


def assert_rows_quote(part: str, scores: dict[tuple[str, str], float], section: str) -> None:
    """Each scored model has a table row in `part` (one section of RESULTS.md) that quotes its BLEU."""
    for (model, kind), bleu in scores.items():
        row = re.search(rf"\| \*?\*?`{model}`[^\n]*", part)
        assert row, f"RESULTS.md has no row for {model} in {section!r}"
        assert f"{bleu:.2f}" in row.group(0), f"RESULTS.md's {model} row does not quote {kind} BLEU {bleu:.2f}"


@pytest.mark.parametrize(
    "name, section, config",
    [
        ("multi30k-wu", "## The recipe of issue 15: `configs/multi30k-wu.yaml`", "multi30k-wu"),
        ("multi30k-wu-tok", "## The recipe on tok/: `configs/multi30k-wu-tok.yaml`", "multi30k-wu-tok"),
        ("multi30k-wu-tok-linear", "## The linear decay: `configs/multi30k-wu-tok-linear.yaml`",
         "multi30k-wu-tok-linear"),
        ("multi30k-wu-tok-linear-4467", "### The +1.8 split: the linear decay at the bf16 hour's 4,467 updates",
         "multi30k-wu-tok-linear"),
        ("multi30k-wu-tok-drop02", "## Dropout 0.2: `configs/multi30k-wu-tok-drop02.yaml`, an hour on an AMX Xeon",
         "multi30k-wu-tok-drop02"),
        ("multi30k-wu-tok-dff256", "## d_ff 256: `configs/multi30k-wu-tok-dff256.yaml`, an hour on an AMX Xeon",
         "multi30k-wu-tok-dff256"),
        ("multi30k-wu-tok-dff256-auto", "## d_ff 256 with the decay fitted to the hour (`train.decay_updates: auto`)",
         "multi30k-wu-tok-dff256"),
        ("multi30k-wu-tok-dff256-auto-s2", "### Seed 2 of the same hour", "multi30k-wu-tok-dff256"),
        ("multi30k-wu-tok-b2k-v4k", "## Half batches and a 4k vocabulary: `configs/multi30k-wu-tok-b2k-v4k.yaml`",
         "multi30k-wu-tok-b2k-v4k"),
        ("multi30k-wu-tok-v4k", "## A 4k vocabulary: `configs/multi30k-wu-tok-v4k.yaml`", "multi30k-wu-tok-v4k"),
        ("multi30k-wu-tok-b2k", "## Half batches at the 8k vocabulary: `configs/multi30k-wu-tok-b2k.yaml`",
         "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-s2", "### Seed 2 of the half-batch hour", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-s3", "### Seed 3 of the half-batch hour", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b1k", "## Batches of 1,024 tokens: `configs/multi30k-wu-tok-b1k.yaml`",
         "multi30k-wu-tok-b1k"),
        ("multi30k-wu-tok-b2k-v10k", "## A 10k vocabulary at half batches: `configs/multi30k-wu-tok-b2k-v10k.yaml`",
         "multi30k-wu-tok-b2k-v10k"),
        ("multi30k-wu-tok-b2k-drop03", "## Wu et al.'s dropout 0.3 at half batches", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-drop015", "## Dropout 0.15 at half batches", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-zen3", "### The recipe itself on the same Zen 3", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-wu1k", "## Eq. 3's warmup 1,000 at half batches", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-lr14", "## A lower peak at half batches", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-wu1k-lr10", "## Warmup 1,000 at the lower peak", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-wu1k-lr10-s2", "### Seed 2 of the warmup-1,000 hour", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-zen3-s2", "## The recipe's second seed on the Zen 3", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-prenorm", "## Pre-norm at half batches", "multi30k-wu-tok-b2k-prenorm"),
        ("multi30k-wu-tok-b2k-prenorm-s2", "### Seed 2 of the pre-norm hour", "multi30k-wu-tok-b2k-prenorm"),
        ("multi30k-wu-tok-b2k-ls02", "## Label smoothing 0.2 at half batches", "multi30k-wu-tok-b2k-ls02"),
        ("multi30k-wu-tok-b2k-ls02-s2", "### Seed 2 of the label-smoothing hour", "multi30k-wu-tok-b2k-ls02"),
        ("multi30k-wu-tok-b2k-bits", "## The recipe with 16-bit dropout masks", "multi30k-wu-tok-b2k"),
        ("multi30k-wu-tok-b2k-muon", "## Muon for the layers' matrices", "multi30k-wu-tok-b2k-muon"),
        ("multi30k-wu-tok-b2k-muon-drop03", "## Muon with Wu et al.'s dropout 0.3", "multi30k-wu-tok-b2k-muon-drop03"),
        ("multi30k-wu-tok-b2k-muon-drop03-s2", "### Seed 2 of the Muon dropout-0.3 hour",
         "multi30k-wu-tok-b2k-muon-drop03"),
        ("multi30k-wu-tok-b2k-muon-drop03-zen4", "## Muon with dropout 0.3 on an AMD Zen 4",
         "multi30k-wu-tok-b2k-muon-drop03"),
        ("multi30k-wu-tok-b2k-muon-drop03-zen4-s2", "### Seed 2 of the Zen 4 Muon hour",
         "multi30k-wu-tok-b2k-muon-drop03"),
        ("multi30k-wu-tok-b2k-bpedrop-src", "### BPE-dropout on the source side only",
         "multi30k-wu-tok-b2k-bpedrop-src"),
    ],
)  # fmt: skip
def test_recipe_bleu_quoted_is_the_results_file(name: str, section: str, config: str) -> None:
    results = DOCS / f"{name}.results.txt"
    if not results.exists():
        pytest.skip(f"the {name} recipe has not been run and committed yet")
    scores = results_file_scores(results)
    assert scores, f"docs/{name}.results.txt holds no BLEU lines"
    part = results_section(section)  # this run's own part
    assert_rows_quote(part, scores, section)
    metrics = records(f"{name}.metrics.jsonl")
    end = next(r for r in metrics if r["kind"] == "end")
    assert f"{end['step']:,} updates" in part
    assert f"{parameters(config + '.yaml'):,} parameters" in part


ENSEMBLE_PAIRS = ["multi30k-wu-tok-b2k-1t"] + [f"multi30k-wu-tok-b2k-1t-pair{i}" for i in (2, 3, 4, 5)]
# the first four pairs decoded again with --ensemble-mean geometric (the fifth pair's results file has that row)
GEOMETRIC_REDECODES = [f"multi30k-wu-tok-b2k-1t-geometric-pair{i}" for i in (1, 2, 3, 4)]
ENSEMBLE_ROWS = {"member1-power1", "member2-power1", "ensemble-power1", "ensemble"}


@pytest.mark.parametrize(
    "section, results, seeds",
    [(f"### The {nth} pair (seeds {2 * i + 1} and {2 * i + 2}", name, (2 * i + 1, 2 * i + 2))
     for i, (nth, name) in enumerate(zip(("first", "second", "third", "fourth", "fifth"), ENSEMBLE_PAIRS,
                                         strict=True))],
)  # fmt: skip
def test_ensemble_pair_quoted_is_its_results_and_metrics(section: str, results: str, seeds: tuple[int, int]) -> None:
    """The side-by-side pairs of scripts/multi30k_ensemble_hour.sh: each scored row, each member's updates, the
    recipe's parameter count."""
    path = DOCS / f"{results}.results.txt"
    if not path.exists():
        pytest.skip(f"docs/{results}.results.txt is not committed yet")
    part = results_section(section)
    scores = results_file_scores(path)
    assert {model for model, _ in scores} - {"ensemble-geometric-power1"} == ENSEMBLE_ROWS
    assert_rows_quote(part, scores, section)
    for seed in seeds:
        end = next(r for r in records(f"multi30k-wu-tok-b2k-1t-s{seed}.metrics.jsonl") if r["kind"] == "end")
        assert f"{end['step']:,} updates" in part
    assert f"{parameters('multi30k-wu-tok-b2k.yaml'):,} parameters" in part


@pytest.mark.parametrize("section, pairs", [("### The two pairs against the target", 2),
                                            ("### The four pairs against the target", 4)])  # fmt: skip
def test_ensemble_pairs_mean_is_the_results_files(section: str, pairs: int) -> None:
    """The summary table of the side-by-side pairs: each pair's fixed row (ensemble-power1, lowercased tokenized)
    is its results file's, and the mean quoted is their mean."""
    paths = [DOCS / f"{name}.results.txt" for name in ENSEMBLE_PAIRS[:pairs]]
    if not all(path.exists() for path in paths):
        pytest.skip(f"not all of the first {pairs} pairs' results are committed yet")
    part = results_section(section)
    fixed = [results_file_scores(path)[("ensemble-power1", "lc-tok")] for path in paths]
    rows = re.findall(r"^\| seeds (\d+) and (\d+) \|([^\n]*)$", part, flags=re.M)
    assert [int(a) for a, _, _ in rows] == list(range(1, 2 * pairs, 2)), f"{section!r} lists other pairs"
    for (_, _, cells), bleu in zip(rows, fixed, strict=True):
        assert f"| {bleu:.2f} |" in cells, f"{section!r}: a pair's row does not quote its fixed BLEU {bleu:.2f}"
    mean = re.search(r"^\| mean \|[^\n]*$", part, flags=re.M)
    assert mean, f"{section!r} has no mean row"
    assert f"**{sum(fixed) / pairs:.2f}**" in mean.group(0)


def test_ensemble_means_on_val_are_the_committed_output() -> None:
    """The val table that chose the geometric mean quotes docs/multi30k-wu-tok-b2k-1t-val-ensemble-means.txt (the
    output of `aiayn evaluate`): each pair's two BLEU scores, their difference, and the means."""
    text = (DOCS / "multi30k-wu-tok-b2k-1t-val-ensemble-means.txt").read_text()
    found = re.findall(r"^== val, \S+-s(\d+)/averaged \S+-s(\d+)/averaged,[^\n]*--ensemble-mean (\w+)\nBLEU = ([\d.]+)",
                       text, flags=re.M)  # fmt: skip
    bleu = {(int(a), mean): float(score) for a, _, mean, score in found}
    assert sorted(bleu) == [(i, m) for i in (1, 3, 5, 7) for m in ("arithmetic", "geometric")]
    part = results_section("## The members' geometric mean, chosen on val")
    for first in (1, 3, 5, 7):
        row = re.search(rf"^\| seeds {first} and {first + 1} \|([^\n]*)$", part, flags=re.M)
        assert row, f"the val table has no row for seeds {first} and {first + 1}"
        a, g = bleu[(first, "arithmetic")], bleu[(first, "geometric")]
        assert row.group(1).split("|")[:3] == [f" {a:.2f} ", f" {g:.2f} ", f" {g - a:+.2f} "]
    mean = re.search(r"^\| mean \|([^\n]*)$", part, flags=re.M)
    assert mean
    a = sum(bleu[(i, "arithmetic")] for i in (1, 3, 5, 7)) / 4
    g = sum(bleu[(i, "geometric")] for i in (1, 3, 5, 7)) / 4
    assert mean.group(1).split("|")[:3] == [f" {a:.2f} ", f" {g:.2f} ", f" {g - a:+.2f} "]


def test_ensemble_five_pairs_geometric_mean_is_the_results_files() -> None:
    """The five pairs' summary: each pair's geometric row (the first four re-decoded, the fifth in its own results
    file) and its arithmetic row come from the results files, and the means quoted are theirs."""
    geometric_paths = [DOCS / f"{name}.results.txt" for name in [*GEOMETRIC_REDECODES, ENSEMBLE_PAIRS[4]]]
    arithmetic_paths = [DOCS / f"{name}.results.txt" for name in ENSEMBLE_PAIRS]
    if not all(path.exists() for path in geometric_paths + arithmetic_paths):
        pytest.skip("not all five pairs' geometric results are committed yet")
    for path in geometric_paths[:4]:
        assert {model for model, _ in results_file_scores(path)} == {"ensemble-geometric-power1"}
    geometric = [results_file_scores(path)[("ensemble-geometric-power1", "lc-tok")] for path in geometric_paths]
    arithmetic = [results_file_scores(path)[("ensemble-power1", "lc-tok")] for path in arithmetic_paths]
    part = results_section("### The five pairs against the target")
    rows = re.findall(r"^\| seeds (\d+) and (\d+) \|([^\n]*)$", part, flags=re.M)
    assert [int(a) for a, _, _ in rows] == [1, 3, 5, 7, 9]
    for (_, _, cells), a, g in zip(rows, arithmetic, geometric, strict=True):
        assert cells.split("|")[1:4] == [f" {a:.2f} ", f" {g:.2f} ", f" {g - a:+.2f} "], cells
    mean = re.search(r"^\| mean \|([^\n]*)$", part, flags=re.M)
    assert mean, "the five pairs' table has no mean row"
    a, g = sum(arithmetic) / 5, sum(geometric) / 5
    assert mean.group(1).split("|")[1:4] == [f" {a:.2f} ", f" **{g:.2f}** ", f" {g - a:+.2f} "]


RERANK_ROW = (r"^member \d+ \S+-s(\d+)/averaged: \| alone ([\d.]+) \(BP [\d.]+\) \| R ([\d.]+) \(BP [\d.]+\) "
              r"\| R0 ([\d.]+) \(BP [\d.]+\) \| C ([\d.]+)")


def test_rerank_val_table_is_the_committed_output() -> None:
    """The second-direction hour: its val table quotes docs/multi30k-wu-tok-b2k-1t-val-rerank.txt (the output of
    scripts/multi30k_rerank.py), each member's four BLEU scores and their means; the five pairs' geometric val
    scores it lost to come from the committed `aiayn evaluate` outputs; the two models' updates from their
    metrics."""
    found = re.findall(RERANK_ROW, (DOCS / "multi30k-wu-tok-b2k-1t-val-rerank.txt").read_text(), flags=re.M)
    assert [int(seed) for seed, *_ in found] == list(range(1, 11))
    part = results_section("### The hour (right-to-left and German-English side by side")
    for seed, *scores in found:
        row = re.search(rf"^\| {seed} \|([^\n]*)$", part, flags=re.M)
        assert row, f"the val table has no row for seed {seed}"
        assert row.group(1).split("|")[:4] == [f" {score} " for score in scores]
    means = [sum(float(row[i]) for row in found) / len(found) for i in (1, 2, 3, 4)]
    mean = re.search(r"^\| mean \|([^\n]*)$", part, flags=re.M)
    assert mean, "the val table has no mean row"
    quoted = [f" {means[0]:.2f} ", f" **{means[1]:.2f}** ", f" {means[2]:.2f} ", f" {means[3]:.2f} "]
    assert mean.group(1).split("|")[:4] == quoted
    val = "".join((DOCS / f"multi30k-wu-tok-b2k-1t-val-{name}.txt").read_text()
                  for name in ("ensemble-means", "pair5-geometric"))  # fmt: skip
    geometric = [float(bleu) for bleu in re.findall(r"--ensemble-mean geometric\nBLEU = ([\d.]+)", val)]
    assert len(geometric) == 5
    listed = ", ".join(f"{g:.2f}" for g in geometric[:4]) + f" and {geometric[4]:.2f}"
    assert listed in part.replace("\n", " ")
    assert f"mean **{sum(geometric) / 5:.2f}**" in part
    for run in ("r2l-s1", "deen-s1"):
        end = next(r for r in records(f"multi30k-wu-tok-b2k-1t-{run}.metrics.jsonl") if r["kind"] == "end")
        assert f"{end['step']:,} updates" in part
    weights = (DOCS / "multi30k-wu-tok-b2k-1t-val-rerank-weights.txt").read_text()
    low, high = re.search(r"^mean over 10 members.*\| R@0.5 ([\d.]+) \| R@1.5 ([\d.]+)$", weights, flags=re.M).groups()
    text = part.replace("\n", " ")
    assert f"0.5 instead of 1 gave a mean of {low}, at 1.5 {high}" in text
    assert f"cost {float(low) - means[1]:.2f}" in text and f"(by {sum(geometric) / 5 - float(low):.2f})" in text


@pytest.mark.parametrize(
    "section, base, recipe, change",
    [
        ("## Dropout 0.2: `configs/multi30k-wu-tok-drop02.yaml`", "multi30k-wu-tok-linear", "multi30k-wu-tok-drop02",
         "model.P_drop=0.2"),
        ("## d_ff 256: `configs/multi30k-wu-tok-dff256.yaml`", "multi30k-wu-tok-drop02", "multi30k-wu-tok-dff256",
         "model.d_ff=256"),
        ("## Half batches and a 4k vocabulary", "multi30k-wu-tok-dff256", "multi30k-wu-tok-b2k-v4k",
         "data.max_tokens=2048"),
        ("## A 4k vocabulary", "multi30k-wu-tok-dff256", "multi30k-wu-tok-v4k", "data.vocab_size=4000"),
        ("## Half batches at the 8k vocabulary", "multi30k-wu-tok-dff256", "multi30k-wu-tok-b2k",
         "data.max_tokens=2048"),
        ("## Batches of 1,024 tokens", "multi30k-wu-tok-dff256", "multi30k-wu-tok-b1k",
         "data.max_tokens=1024"),
        ("## A 10k vocabulary at half batches", "multi30k-wu-tok-b2k", "multi30k-wu-tok-b2k-v10k",
         "data.vocab_size=10000"),
        ("## Pre-norm at half batches", "multi30k-wu-tok-b2k", "multi30k-wu-tok-b2k-prenorm",
         "model.norm_first=true"),
        ("## Label smoothing 0.2 at half batches", "multi30k-wu-tok-b2k", "multi30k-wu-tok-b2k-ls02",
         "model.eps_ls=0.2"),
        ("## Muon for the layers' matrices", "multi30k-wu-tok-b2k", "multi30k-wu-tok-b2k-muon",
         "train.optimizer=muon"),
        ("## Muon with Wu et al.'s dropout 0.3", "multi30k-wu-tok-b2k-muon", "multi30k-wu-tok-b2k-muon-drop03",
         "model.P_drop=0.3"),
        ("## BPE-dropout at half batches", "multi30k-wu-tok-b2k", "multi30k-wu-tok-b2k-bpedrop",
         "data.bpe_dropout=0.1"),
        ("### BPE-dropout on the source side only", "multi30k-wu-tok-b2k-bpedrop", "multi30k-wu-tok-b2k-bpedrop-src",
         "data.bpe_dropout_target=0.0"),
    ],
)  # fmt: skip
def test_recipe_is_the_command_its_hour_ran(section: str, base: str, recipe: str, change: str) -> None:
    """configs/RECIPE.yaml is BASE with the overrides RESULTS.md quotes for its hour (but the run directory, the
    progress bar and how many checkpoints it keeps on disk)."""
    part = (DOCS / "RESULTS.md").read_text().split(section, 1)[1]
    command = re.search(rf"aiayn train configs/{re.escape(base)}\.yaml((?:.|\n)*?)#", part)
    assert command, f"RESULTS.md quotes no training command on {base}.yaml for {recipe}'s hour"
    display = ("train.out_dir", "train.progress", "train.keep_last")  # where it writes, what it shows and keeps
    sets = [s for s in re.findall(r"--set (\S+)", command.group(1)) if s.split("=")[0] not in display]
    assert change in sets
    ran = load_run_config(CONFIGS / f"{base}.yaml", sets + [f"train.out_dir=runs/{recipe}"])
    assert load_run_config(CONFIGS / f"{recipe}.yaml") == ran


SWEEPS = sorted(path.parent.name for path in (DOCS / "ablations").glob("*/sweep.json"))


@pytest.mark.parametrize("name", SWEEPS)
def test_committed_sweep_tables_are_the_tools_report_of_their_runs(name: str) -> None:
    """A sweep committed with its runs' results: table.json and table.md are what `aiayn ablate` writes from them,
    and the doc that links to it (docs/ABLATIONS.md, or docs/RESULTS.md for a recipe sweep) quotes its rows as they
    are."""
    from aiayn.experiments.report import build_table, markdown
    from aiayn.experiments.sweep import load_results

    sweep = DOCS / "ablations" / name
    meta = json.loads((sweep / "sweep.json").read_text())
    results = load_results(sweep)
    assert results and all(r["fingerprint"]["id"] == meta["fingerprint"]["id"] for r in results)
    table = build_table(meta, results)
    assert table == json.loads((sweep / "table.json").read_text())
    assert markdown(table) == (sweep / "table.md").read_text()
    docs = [doc for doc in ("ABLATIONS.md", "RESULTS.md") if f"ablations/{name}/" in (DOCS / doc).read_text()]
    assert docs, f"neither docs/ABLATIONS.md nor docs/RESULTS.md links to ablations/{name}/"
    text = "\n".join((DOCS / doc).read_text() for doc in docs)
    rows = [line for line in markdown(table).splitlines() if line.startswith("| ") and not line.startswith("| row")]
    missing = [line for line in rows if line not in text]
    assert not missing, f"docs/{docs[0]} does not quote these rows of ablations/{name}/table.md: {missing[:2]}"
