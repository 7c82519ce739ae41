"""Bounded load test of `aiayn serve` on loopback: 1, 8 and 32 concurrent clients for a fixed time each.

    .venv/bin/python scripts/load_test.py --model en-de=runs/demo/checkpoint-best --duration 15 --soak 300 \
        --min-len 20 --json load.json --markdown load.md

Three servers, each started here as its own process, one after another, under the same load:
- "batched": `aiayn serve` with dynamic batching (the default);
- "one at a time": `aiayn serve --no-batching` (one request, one sentence at a time: LibreTranslate's loop);
- "ctranslate2": scripts/ct2_baseline_server.py, LibreTranslate's `POST /translate` over the same model exported
  by `aiayn export ctranslate2` (into a temporary directory, or `--ct2-model DIR`), one `translate_batch` call
  per request paragraph as LibreTranslate does (its docstring says exactly how), uvicorn with one worker.
All three get the same --threads, --beam, --lenpen and --min-len, and the same length penalty formula (|Y|^alpha,
CTranslate2's; our servers run with --lenpen-form power). Each client sends LibreTranslate-shaped `POST /translate`
requests (one Multi30k test2016 sentence each, drawn at random with a fixed seed) back to back over a kept-alive
connection. Reported per level: requests/s, sentences/s, latency p50/p95/p99, errors (any non-200 or broken
connection: must be 0), server RSS before/after; then a soak of `--soak` seconds at 8 clients on the batched
server with RSS sampled every 10 s. The header names the CPU (as `aiayn bench` prints it), the cores and the
load average; --json and --markdown write the figures (the Markdown is what docs/SERVING.md shows).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("batched", "one at a time", "ctranslate2")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    """A server process on a free loopback port; `command` is given the port; ready when `health` answers 200."""

    def __init__(self, command: list[str], health: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.process.stderr.read().decode()[-2000:]}")
            try:
                if request(self.port, "GET", health)[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def aiayn_command(args: argparse.Namespace, extra: list[str]) -> list[str]:
    command = [sys.executable, "-m", "aiayn", "serve", "--model", args.model, "--log-level", "warning"]
    command += ["--threads", str(args.threads), "--beam", str(args.beam), "--lenpen", str(args.lenpen)]
    command += ["--lenpen-form", "power"]  # CTranslate2's |Y|^alpha, so that all three search the same way
    return command + ["--min-len", str(args.min_len), *extra, *shlex.split(args.serve_args)]


def model_dir(spec: str) -> tuple[str, str, Path]:
    """(source, target, directory) of `SRC-TGT=DIR`."""
    pair, _, path = spec.rpartition("=")
    source, _, target = (pair or "en-de").partition("-")
    return source, target, Path(path)


def spm_files(directory: Path) -> tuple[Path, Path]:
    """The sentencepiece models of a model directory: its config.json `tokenizers` entry, else tokenizer.model."""
    document = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    entry = document.get("tokenizers") or {}
    if not entry:
        return directory / "tokenizer.model", directory / "tokenizer.model"
    if "spm" not in entry.get("source", {}) or "spm" not in entry.get("target", {}):
        raise SystemExit(f"{directory}: the CTranslate2 baseline needs sentencepiece tokenizers")
    return directory / entry["source"]["spm"], directory / entry["target"]["spm"]


def ct2_command(args: argparse.Namespace, ct2_dir: Path) -> list[str]:
    source, target, directory = model_dir(args.model)
    source_spm, target_spm = spm_files(directory)
    command = [sys.executable, str(ROOT / "scripts" / "ct2_baseline_server.py"), "--model", str(ct2_dir)]
    command += ["--spm", str(source_spm), "--target-spm", str(target_spm), "--source-lang", source]
    command += ["--target-lang", target, "--threads", str(args.threads), "--beam", str(args.beam)]
    return command + ["--lenpen", str(args.lenpen), "--min-len", str(args.min_len)]


def export_ct2(args: argparse.Namespace, workdir: Path) -> Path:
    if args.ct2_model:
        return args.ct2_model
    out = workdir / "ct2"
    command = [sys.executable, "-m", "aiayn", "export", "ctranslate2", str(model_dir(args.model)[2]), "--out", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return out


def request(port: int, method: str, path: str, body: bytes | None = None, connection=None):
    own = connection is None
    connection = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        if own:
            connection.close()


def load(port: int, sentences: list[str], clients: int, duration: float, seed: int, pair: tuple[str, str]) -> dict:
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + duration

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.monotonic() < stop_at:
            body = json.dumps({"q": rng.choice(sentences), "source": pair[0], "target": pair[1]}).encode()
            start = time.perf_counter()
            try:
                status, answer = request(port, "POST", "/translate", body, connection)
                ok = status == 200 and isinstance(json.loads(answer).get("translatedText"), str)
            except (OSError, http.client.HTTPException, ValueError):
                ok = False
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                if ok:
                    latencies.append(time.perf_counter() - start)
                else:
                    errors[0] += 1
        connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return {
        "clients": clients,
        "requests": len(latencies),
        "req_s": len(latencies) / elapsed,
        "sent_s": len(latencies) / elapsed,  # one sentence per request
        "p50_ms": q[49] * 1000,
        "p95_ms": q[94] * 1000,
        "p99_ms": q[98] * 1000,
        "errors": errors[0],
    }


def soak(server: Server, sentences: list[str], seconds: float, seed: int, pair: tuple[str, str]) -> dict:
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        start = time.monotonic()
        while not done.is_set():
            samples.append((time.monotonic() - start, rss_mib(server.process.pid)))
            done.wait(10)

    sampler = threading.Thread(target=sample)
    sampler.start()
    row = load(server.port, sentences, 8, seconds, seed + 7, pair)
    done.set()
    sampler.join()
    samples.append((seconds, rss_mib(server.process.pid)))
    return {"load": row, "rss_mib": samples}


def machine(args: argparse.Namespace) -> dict:
    from aiayn.kernels.cpu_features import cpu_features  # the CPU as `aiayn bench` prints it

    return {"cpu": cpu_features().describe(), "cores": os.cpu_count(), "loadavg_start": os.getloadavg(),
            "server_threads": args.threads}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="SRC-TGT=DIR, as for aiayn serve")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per concurrency level")
    parser.add_argument("--soak", type=float, default=300.0, help="soak seconds at 8 clients, batched (0: none)")
    parser.add_argument("--threads", type=int, default=2, help="model threads of every server")
    parser.add_argument("--beam", type=int, default=4, help="beam size of every server")
    parser.add_argument("--lenpen", type=float, default=0.6, help="length penalty alpha of every server")
    parser.add_argument("--min-len", type=int, default=0, help="minimum output tokens of every server")
    parser.add_argument("--servers", default=",".join(SERVERS), help="which servers (default: all three)")
    parser.add_argument("--ct2-model", type=Path, help="a CTranslate2 export of --model (default: export one)")
    data_dir = Path(os.environ.get("AIAYN_DATA_DIR") or ROOT.parent / "shared" / "data")
    parser.add_argument("--data", type=Path, default=data_dir / "multi30k" / "test2016.en", help="one sentence a line")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--serve-args", default="", help="more aiayn serve flags (not given to the baseline)")
    parser.add_argument("--json", "--out", dest="json", type=Path, help="write the figures as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the figures as Markdown tables here")
    args = parser.parse_args()
    names = [name.strip() for name in args.servers.split(",")]
    if unknown := [name for name in names if name not in SERVERS]:
        parser.error(f"--servers: unknown {unknown}; choose from {', '.join(SERVERS)}")
    sentences = [line.strip() for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    levels = [int(c) for c in args.clients.split(",")]
    source, target, _ = model_dir(args.model)
    pair = (source, target)
    settings = {"beam": args.beam, "lenpen": args.lenpen, "min_len": args.min_len, "duration_s": args.duration,
                "soak_s": args.soak}
    results: dict = {"command": shlex.join([Path(sys.executable).name, *sys.argv]), "machine": machine(args),
                     "model": args.model, "settings": settings, "servers": {}}  # fmt: skip
    m = results["machine"]
    print(f"load test: {results['command']}\nCPU: {m['cpu']}; {m['cores']} cores; load average "
          f"{m['loadavg_start'][0]:.2f}; server threads {args.threads}", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="aiayn-load-") as workdir:
        for name in names:
            if name == "ctranslate2":
                command, health = ct2_command(args, export_ct2(args, Path(workdir))), "/languages"
            else:
                extra = ["--no-batching"] if name == "one at a time" else []
                command, health = aiayn_command(args, extra), "/v1/health"
            server = Server(command, health)
            try:
                load(server.port, sentences, 2, 3.0, args.seed + 99, pair)  # warm-up
                before = rss_mib(server.process.pid)
                rows = [load(server.port, sentences, c, args.duration, args.seed, pair) for c in levels]
                entry = {"rss_before_mib": before, "rss_after_mib": rss_mib(server.process.pid), "levels": rows}
                if name == "batched" and args.soak > 0:
                    entry["soak"] = soak(server, sentences, args.soak, args.seed, pair)
                results["servers"][name] = entry
                print("\n" + "\n".join(server_section(name, entry)), flush=True)
            finally:
                server.stop()
    m["loadavg_end"] = os.getloadavg()
    print(f"\nload average at the end: {m['loadavg_end'][0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(results))
    failed = [name for name, entry in results["servers"].items() if errors(entry)]
    if failed:
        print(f"errors on: {', '.join(failed)}")
    return 1 if failed else 0


def errors(entry: dict) -> int:
    rows = entry["levels"] + ([entry["soak"]["load"]] if "soak" in entry else [])
    return sum(row["errors"] for row in rows)


TITLES = {
    "batched": "Batched `aiayn serve` (the default: 5 ms window, 2048-token budget)",
    "one at a time": "`aiayn serve --no-batching` (one request at a time, one sentence at a time: "
    "LibreTranslate's loop)",
    "ctranslate2": "CTranslate2 baseline (`scripts/ct2_baseline_server.py`: LibreTranslate's `/translate` over "
    "`ctranslate2.Translator`, one `translate_batch` per request)",
}


def server_section(name: str, entry: dict) -> list[str]:
    lines = [f"{TITLES[name]}; RSS {entry['rss_before_mib']:.0f} -> {entry['rss_after_mib']:.0f} MiB:", "",
             "| clients | req/s | sentences/s | p50 ms | p95 ms | p99 ms | errors |",
             "|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in entry["levels"]:
        lines.append(f"| {r['clients']} | {r['req_s']:.1f} | {r['sent_s']:.1f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} "
                     f"| {r['p99_ms']:.0f} | {r['errors']} |")  # fmt: skip
    if "soak" in entry:
        row, rss = entry["soak"]["load"], [r for _, r in entry["soak"]["rss_mib"]]
        lines += ["", f"Soak, 8 clients for {entry['soak']['rss_mib'][-1][0]:.0f} s: {row['requests']} requests, "
                  f"{row['errors']} errors, RSS {rss[0]:.0f} MiB at the start, {rss[-1]:.0f} MiB at the end, "
                  f"{max(rss):.0f} MiB at most (sampled every 10 s)."]  # fmt: skip
    return lines


def markdown(results: dict) -> str:
    m, s = results["machine"], results["settings"]
    lines = [f"`{results['command']}`", "",
             f"CPU {m['cpu']}, {m['cores']} cores, load average {m['loadavg_start'][0]:.2f} at the start and "
             f"{m['loadavg_end'][0]:.2f} at the end; server threads {m['server_threads']}; "
             f"model `{results['model']}`, beam {s['beam']}, alpha {s['lenpen']}, min length {s['min_len']}; "
             f"{s['duration_s']:g} s per level.", ""]  # fmt: skip
    for name, entry in results["servers"].items():
        lines += server_section(name, entry) + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
