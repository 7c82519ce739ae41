"""The README's screenshot of the serving page: docs/figures/serving.png, with Debian's headless chromium.

    .venv/bin/python scripts/serving_screenshot.py --model en-de=runs/demo/checkpoint-best

Starts `aiayn serve`, types a Multi30k test sentence, hovers an output token so that its source tokens light up,
and saves a screenshot of the page.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", default="A man in an orange hat starring at something.")
    parser.add_argument("--hover", type=int, default=2, help="output token to hover (0-based)")
    parser.add_argument("--out", type=Path, default=Path("docs/figures/serving.png"))
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--serve-args", default="", help="more `aiayn serve` flags, e.g. '--min-len 12'")
    args = parser.parse_args()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "aiayn", "serve", "--model", args.model, "--port", str(port), "--log-level"]
    server = subprocess.Popen(command + ["warning", *args.serve_args.split()])
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": args.width, "height": 800}, device_scale_factor=1)
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function("document.querySelector('#model').options.length > 0")
            page.fill("#source", args.text)
            page.wait_for_selector("#view .tok.key", timeout=30000)
            page.hover(f'#view .tok.query[data-i="{args.hover}"]')
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
