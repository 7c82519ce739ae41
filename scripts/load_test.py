"""Bounded load test of `aiayn serve` on loopback: 1, 8 and 32 concurrent clients for a fixed time each.

    .venv/bin/python scripts/load_test.py --model en-de=runs/demo/checkpoint-best --duration 20 --soak 300

For each server, started here as its own process: the batched server (dynamic batching, the default) and the
one-request-at-a-time baseline (`--no-batching`: one request, one sentence at a time, LibreTranslate's loop).
Each client sends LibreTranslate-shaped `POST /translate` requests (one Multi30k test2016 sentence each, drawn
at random with a fixed seed) back to back over a kept-alive connection. Reported per level: requests/s,
sentences/s, latency p50/p95/p99, errors (any non-200 or broken connection), server RSS before/after; then a
soak of `--soak` seconds at 8 clients on the batched server with RSS sampled every 10 s. A CTranslate2-backed
baseline needs our model exported to CTranslate2 (`aiayn.interop`); it is skipped while that export is absent.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path


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
    def __init__(self, model: str, extra: list[str], threads: int) -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "aiayn", "serve", "--model", model, "--port", str(self.port)]
        command += ["--log-level", "warning", "--threads", str(threads), *extra]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.process.stderr.read().decode()[-2000:]}")
            try:
                if request(self.port, "GET", "/v1/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


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


def load(port: int, sentences: list[str], clients: int, duration: float, seed: int) -> dict:
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + duration

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.monotonic() < stop_at:
            body = json.dumps({"q": rng.choice(sentences), "source": "en", "target": "de"}).encode()
            start = time.perf_counter()
            try:
                status, _ = request(port, "POST", "/translate", body, connection)
                ok = status == 200
            except (OSError, http.client.HTTPException):
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="SRC-TGT=DIR, as for aiayn serve")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per concurrency level")
    parser.add_argument("--soak", type=float, default=300.0, help="soak seconds at 8 clients (0: none)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the server")
    parser.add_argument("--data", type=Path, default=Path("../shared/data/multi30k/test2016.en"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--serve-args", default="", help="more aiayn serve flags, e.g. '--min-len 20'")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    sentences = [line.strip() for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    levels = [int(c) for c in args.clients.split(",")]
    results: dict = {"cpu": cpu_model(), "cores": os.cpu_count(), "servers": {}}
    for name, extra in (("batched", []), ("one at a time", ["--no-batching"])):
        server = Server(args.model, extra + args.serve_args.split(), args.threads)
        try:
            load(server.port, sentences, 2, 3.0, args.seed + 99)  # warm-up
            before = rss_mib(server.process.pid)
            rows = [load(server.port, sentences, c, args.duration, args.seed) for c in levels]
            entry = {"rss_before_mib": before, "rss_after_mib": rss_mib(server.process.pid), "levels": rows}
            if name == "batched" and args.soak > 0:
                entry["soak"] = soak(server, sentences, args.soak, args.seed)
            results["servers"][name] = entry
            report(name, entry)
        finally:
            server.stop()
    results["servers"]["ctranslate2"] = "skipped: no CTranslate2 export of aiayn models (aiayn.interop) yet"
    print("ctranslate2 baseline:", results["servers"]["ctranslate2"])
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    failed = any(row["errors"] for entry in results["servers"].values() if isinstance(entry, dict)
                 for row in entry["levels"] + ([entry["soak"]["load"]] if "soak" in entry else []))  # fmt: skip
    return 1 if failed else 0


def soak(server: Server, sentences: list[str], seconds: float, seed: int) -> dict:
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        start = time.monotonic()
        while not done.is_set():
            samples.append((time.monotonic() - start, rss_mib(server.process.pid)))
            done.wait(10)

    sampler = threading.Thread(target=sample)
    sampler.start()
    row = load(server.port, sentences, 8, seconds, seed + 7)
    done.set()
    sampler.join()
    samples.append((seconds, rss_mib(server.process.pid)))
    rss = [r for _, r in samples]
    print(f"soak {seconds:.0f} s at 8 clients: {row['requests']} requests, {row['errors']} errors, "
          f"RSS {rss[0]:.0f} -> {rss[-1]:.0f} MiB (max {max(rss):.0f})")  # fmt: skip
    return {"load": row, "rss_mib": samples}


def report(name: str, entry: dict) -> None:
    print(f"\n{name}: RSS {entry['rss_before_mib']:.0f} -> {entry['rss_after_mib']:.0f} MiB")
    print("| clients | req/s | sentences/s | p50 ms | p95 ms | p99 ms | errors |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in entry["levels"]:
        print(f"| {r['clients']} | {r['req_s']:.1f} | {r['sent_s']:.1f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} "
              f"| {r['p99_ms']:.0f} | {r['errors']} |")  # fmt: skip
    sys.stdout.flush()


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
