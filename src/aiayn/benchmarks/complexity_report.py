"""The complexity benchmark's markdown table and plot (section 4, Table 1), from its JSON report."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from aiayn.io import atomic_write_bytes  # noqa: E402

NAMES = {
    "self_attention": "Self-attention layer",
    "attention_scores_only": "Eq. (1) alone",
    "recurrent_lstm": "Recurrent (LSTM)",
    "convolution": "Convolutional",
}
COLORS = {
    "self_attention": "#0072B2",
    "attention_scores_only": "#CC79A7",
    "recurrent_lstm": "#D55E00",
    "convolution": "#009E73",
}
RC = {
    "svg.hashsalt": "aiayn",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


def _median_rate(entry: dict[str, Any]) -> float:
    rates = sorted(3 * f / t / 1e9 for f, t in zip(entry["forward_flops"], entry["seconds"]))
    return rates[len(rates) // 2]


def markdown(report: dict[str, Any]) -> str:
    c, layers, cross, gen = report["config"], report["layers"], report["crossover"], report["generation"]
    k = c["kernel"]
    lines = [
        "# Table 1, measured",
        "",
        f"`{report['command']}` on {report['machine']['processor']} (torch threads: "
        f"{report['machine']['torch_threads']}, torch {report['machine']['torch']}). One layer, forward + backward, "
        f"batch {c['batch']}, d_model = {c['d_model']}, h = {c['h']}; minimum over {c['rounds']} interleaved rounds, "
        "in milliseconds.",
        "",
        "| n | " + " | ".join(NAMES[name] for name in layers) + " | attention / LSTM |",
        "|---:|" + "---:|" * (len(layers) + 1),
    ]
    for i, n in enumerate(c["lengths"]):
        cells = [_ms(layers[name]["seconds"][i]) for name in layers]
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {cross['attention_over_lstm'][i]:.2f} |")
    lines += [
        "",
        "Achieved GFLOP/s, counting forward + backward as 3 × the forward FLOPs (2 per multiply-add):",
        "",
        "| n | " + " | ".join(NAMES[name] for name in layers) + " |",
        "|---:|" + "---:|" * len(layers),
    ]
    for i, n in enumerate(c["lengths"]):
        rates = [3 * layers[name]["forward_flops"][i] / layers[name]["seconds"][i] / 1e9 for name in layers]
        lines.append(f"| {n} | " + " | ".join(f"{rate:.1f}" for rate in rates) + " |")
    lines += [
        "",
        f"Growth exponents p (time ~ n^p), fitted over n >= {c['fit_from']}, next to Table 1:",
        "",
        "| layer | Table 1 complexity | sequential ops | max path length | expected p | FLOP-count p (large n) "
        "| measured p (large n) | measured p (small n) |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for name, entry in layers.items():
        small = entry["exponent_small_n"]
        complexity = entry["table1_complexity"].replace("k ", f"k={k} ") if name == "convolution" else None
        lines.append(
            f"| {NAMES[name]} | {complexity or entry['table1_complexity']} | {entry['table1_sequential_operations']} "
            f"| {entry['table1_max_path_length']} | {entry['expected_exponent']} "
            f"| {entry['flop_exponent_large_n']:.2f} | {entry['exponent_large_n']:.2f} "
            f"| {'-' if small is None else f'{small:.2f}'} |"
        )
    measured = cross["measured_n"]
    lines += [
        "",
        "Crossover (attention layer slower than the LSTM): "
        + (f"n ≈ {measured:.0f}" if measured is not None else f"not reached up to n = {c['lengths'][-1]}")
        + f"; Table 1 predicts n = d = {cross['table1_n']}, forward FLOP counts n = 2d = {cross['flop_n']}. "
        f"Per FLOP the attention layer ran at {_median_rate(layers['self_attention']):.0f} GFLOP/s and the LSTM "
        f"at {_median_rate(layers['recurrent_lstm']):.0f} GFLOP/s (medians over n), which moves the measured "
        "crossover away from the FLOP count's.",
        "",
        f"## Generation: seconds per token as the output grows ({gen['config']['N']}-layer decoder, "
        f"d_model = {gen['config']['d_model']}, vocabulary {gen['config']['vocab']}, source length "
        f"{gen['config']['source_length']}, batch {gen['config']['batch']})",
        "",
        "| output length t | with KV cache (ms/token) | re-running decode on the prefix (ms/token) | ratio |",
        "|---:|---:|---:|---:|",
    ]
    for t, a, b in zip(gen["checkpoints"], gen["cached_seconds_per_token"], gen["uncached_seconds_per_token"]):
        lines.append(f"| {t} | {_ms(a)} | {_ms(b)} | {b / a:.1f} |")
    lines += [
        "",
        f"{gen['steps']} tokens: {gen['cached_total_seconds']:.2f} s with the cache, "
        f"{gen['uncached_total_seconds']:.2f} s without; per-token growth exponent {gen['cached_exponent']:.2f} "
        f"with the cache, {gen['uncached_exponent']:.2f} without. Cached and uncached logits agree to "
        f"{gen['max_abs_logit_difference']:.1e}.",
        "",
    ]
    return "\n".join(lines)


def plot(report: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """complexity.png and complexity.svg: timings vs n, generation per token vs t, and Table 1 with p."""
    c, layers, cross, gen = report["config"], report["layers"], report["crossover"], report["generation"]
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(13.0, 9.0), layout="constrained")
        grid = fig.add_gridspec(2, 2, height_ratios=[2.4, 0.9])
        ax = fig.add_subplot(grid[0, 0])
        ns = c["lengths"]
        for name, entry in layers.items():
            ax.plot(
                ns,
                entry["seconds"],
                marker="o",
                color=COLORS[name],
                linewidth=1.5,
                label=f"{NAMES[name]}: p = {entry['exponent_large_n']:.2f}",
            )
            fitted = [n for n in ns if n >= c["fit_from"]]
            coefficient = entry["seconds"][-1] / ns[-1] ** entry["exponent_large_n"]
            ax.plot(
                fitted,
                [coefficient * n ** entry["exponent_large_n"] for n in fitted],
                color=COLORS[name],
                linestyle=":",
                linewidth=1.0,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        at_top = ax.get_xaxis_transform()  # x in data, y in axes fraction
        ax.axvline(cross["table1_n"], color="#777777", linestyle="--", linewidth=1.0)
        ax.text(
            cross["table1_n"] * 1.06,
            0.03,
            f"n = d = {cross['table1_n']}\n(Table 1 crossover)",
            fontsize=8.5,
            color="#555555",
            transform=at_top,
        )
        if cross["measured_n"] is not None:
            ax.axvline(cross["measured_n"], color=COLORS["self_attention"], linestyle="-.", linewidth=1.0)
            ax.text(
                cross["measured_n"] * 1.06,
                0.62,
                f"measured\ncrossover\nn ≈ {cross['measured_n']:.0f}",
                fontsize=8.5,
                color=COLORS["self_attention"],
                va="top",
                transform=at_top,
            )
        ax.set_xlabel("sequence length n")
        ax.set_ylabel("seconds, forward + backward (min over repeats)")
        ax.set_title(
            f"One layer, d_model = {c['d_model']}, batch {c['batch']}: time vs n (dotted: fit over "
            f"n ≥ {c['fit_from']})",
            fontsize=10,
        )
        ax.legend(fontsize=8.5, frameon=False, loc="upper left")

        ax = fig.add_subplot(grid[0, 1])
        ts = gen["checkpoints"]
        ax.plot(
            ts,
            [s * 1e3 for s in gen["uncached_seconds_per_token"]],
            marker="o",
            color="#D55E00",
            label=f"re-run decode on the prefix: p = {gen['uncached_exponent']:.2f}",
        )
        ax.plot(
            ts,
            [s * 1e3 for s in gen["cached_seconds_per_token"]],
            marker="o",
            color="#0072B2",
            label=f"step with KV cache: p = {gen['cached_exponent']:.2f}",
        )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain = FuncFormatter(lambda value, _: f"{value:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.set_xlabel("output length t (tokens generated so far)")
        ax.set_ylabel("milliseconds per generated token")
        g = gen["config"]
        ax.set_title(
            f"Generation, {g['N']}-layer decoder, d_model = {g['d_model']}: "
            f"{gen['uncached_total_seconds']:.2f} s vs {gen['cached_total_seconds']:.2f} s "
            f"for {gen['steps']} tokens",
            fontsize=10,
        )
        ax.legend(fontsize=8.5, frameon=False, loc="upper left")

        ax = fig.add_subplot(grid[1, :])
        ax.set_axis_off()
        header = [
            "Layer type",
            "Complexity per layer",
            "Sequential ops",
            "Max path length",
            "Expected p in n",
            f"FLOP-count p (n ≥ {c['fit_from']})",
            f"Measured p (n ≥ {c['fit_from']})",
        ]
        rows = []
        for name, entry in layers.items():
            complexity = entry["table1_complexity"]
            if name == "convolution":
                complexity += f", k = {c['kernel']}"
            rows.append(
                [
                    NAMES[name],
                    complexity,
                    entry["table1_sequential_operations"],
                    entry["table1_max_path_length"],
                    str(entry["expected_exponent"]),
                    f"{entry['flop_exponent_large_n']:.2f}",
                    f"{entry['exponent_large_n']:.2f}",
                ]
            )
        table = ax.table(cellText=rows, colLabels=header, loc="center", cellLoc="center")
        table.auto_set_font_size(False)
        table.set_fontsize(10)
        table.scale(1.0, 1.6)
        ax.set_title("Table 1 of the paper, with the growth exponents measured here", fontsize=11)
        fig.suptitle("Section 4, measured: self-attention vs recurrent vs convolutional layers")
        written = []
        for fmt, metadata in (("png", {"Software": None}), ("svg", {"Date": None, "Creator": None})):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, dpi=150, metadata=metadata)
            path = Path(out_dir) / f"complexity.{fmt}"
            atomic_write_bytes(path, buffer.getvalue())
            written.append(path)
    return written
