"""The page in a real browser: Debian's headless Chromium driven by Playwright for Python. It loads the page,
types a sentence, sees the translation, hovers a target token and sees the source highlight change, switches
layer, head and kind of attention, and fits a phone-sized screen."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.serving.conftest import make_service, running

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]  # fmt: skip

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


def weights(page, side: str) -> list[str]:
    return page.eval_on_selector_all(f"#view .tok.{side}", "nodes => nodes.map(n => n.dataset.weight)")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield browser
        browser.close()


def test_type_translate_hover_and_switch(browser, serve_model_dir, translator):
    sentence = "A dog runs in the snow."
    with running(make_service(serve_model_dir)) as client:
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"http://127.0.0.1:{client.port}/")
        page.wait_for_function("document.querySelector('#model').options.length > 0")
        page.fill("#source", sentence)
        expected = translator.translate([sentence])[0]
        page.wait_for_function(f"document.querySelector('#output').textContent === {expected!r}", timeout=15000)
        page.wait_for_selector("#view .tok.key")
        keys = weights(page, "key")
        assert set(keys) == {"0.000"}  # nothing focused: no highlight
        page.hover('#view .tok.query[data-i="0"]')
        first = weights(page, "key")
        assert first != keys and abs(sum(map(float, first)) - 1) < 0.02  # the first output token's attention
        page.hover('#view .tok.query[data-i="1"]')
        second = weights(page, "key")
        assert second != first
        page.select_option("#layer", "0")
        layer0 = weights(page, "key")
        assert layer0 != second  # layer 1 of 2 attends differently from layer 2
        page.select_option("#head", "0")
        head0 = weights(page, "key")
        assert head0 != layer0  # one head differs from the average of two
        page.hover('#view .tok.key[data-i="0"]')  # the reverse: a source token lights up the outputs
        assert any(w != "0.000" for w in weights(page, "query"))
        page.check("input[name=kind][value=encoder]")
        source_pieces = page.eval_on_selector_all("#view .tok.key text", "nodes => nodes.map(n => n.textContent)")
        query_pieces = page.eval_on_selector_all("#view .tok.query text", "nodes => nodes.map(n => n.textContent)")
        assert query_pieces == source_pieces and source_pieces[-1] == "</s>"
        page.check("input[name=kind][value=decoder]")
        assert page.eval_on_selector_all("#view .tok.query text", "n => n[0].textContent") == "<s>"
        assert errors == []
        phone = browser.new_page(viewport={"width": 375, "height": 740})
        phone.goto(f"http://127.0.0.1:{client.port}/")
        phone.fill("#source", sentence)
        phone.wait_for_selector("#view .tok.key")
        assert phone.evaluate("document.documentElement.scrollWidth") <= 375  # no sideways scrolling
