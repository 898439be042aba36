"""The example notebook, executed from examples/, saved, then reopened in headless Chromium as a trusted notebook
shows it: every output's HTML on one page, in order, scripts run (classic Notebook, nbconvert's HTML, JupyterLab
without plotly's extension). Every figure must draw from the one plotly.js copy and answer the mouse.

Screenshots: artifacts/notebook-reopened.png (1280×720 wide), artifacts/notebook-untrusted.png. The notebook has
no interface language of its own: there is no 中文 variant to take.
"""

from __future__ import annotations

import nbformat
import pytest

from lens_testing.browser import ARTIFACTS, full_screenshot, have_browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

FIGURES = 6


@pytest.fixture(scope="module")
def saved_outputs(tmp_path_factory) -> list[str]:
    """Return the text/html of every output of the example notebook after it ran, was saved and read back."""
    from tests.notebook.test_notebook import execute_example

    tmp = tmp_path_factory.mktemp("notebook")
    with pytest.MonkeyPatch.context() as mp:
        nb = execute_example(tmp, mp)
    nbformat.write(nb, tmp / "saved.ipynb")
    reopened = nbformat.read(tmp / "saved.ipynb", as_version=4)
    return [
        out["data"]["text/html"]
        for cell in reopened.cells
        for out in cell.get("outputs", [])
        if "text/html" in out.get("data", {})
    ]


def _page(outputs: list[str]) -> str:
    cells = "\n".join(f'<div class="output" style="margin: 12px 0">{o}</div>' for o in outputs)
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>notebook</title></head><body>{cells}</body></html>"


def test_reopened_trusted_notebook_draws_every_figure_interactive(chromium, saved_outputs):
    assert len(saved_outputs) == 1 + FIGURES  # the first cell's plotly.js, then one output per figure
    page = chromium.new_page(viewport={"width": 1280, "height": 720})
    errors: list[str] = []
    remote: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("data:", "about:")) else None)
    page.set_content(_page(saved_outputs), wait_until="load")
    page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot').length === {FIGURES}", timeout=60_000)
    assert not errors and not remote, (errors, remote)
    # The head heatmap (second figure) answers the mouse: hover names the query and key tokens.
    heat = page.locator(".js-plotly-plot").nth(1)
    heat.scroll_into_view_if_needed()
    box = heat.locator(".nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
    assert "query" in page.locator(".hoverlayer .hovertext").first.text_content()
    assert page.locator(".modebar").count() >= 1  # plotly's toolbar: zoom, PNG download
    page.mouse.move(0, 0)
    full_screenshot(page, ARTIFACTS / "notebook-reopened.png")
    page.close()


def test_figures_wait_for_plotly_js_that_renders_after_them(chromium, saved_outputs):
    """JupyterLab renders outputs as they scroll into view: a figure may come before the cell that loads plotly.js."""
    page = chromium.new_page(viewport={"width": 1280, "height": 720})
    page.set_content(_page(saved_outputs[1:]), wait_until="load")
    page.wait_for_timeout(500)
    assert page.locator(".js-plotly-plot").count() == 0  # nothing to draw with yet
    page.evaluate(
        "(loader) => { const d = document.createElement('div'); d.innerHTML = loader;"
        " for (const old of d.querySelectorAll('script')) { const s = document.createElement('script');"
        " s.textContent = old.textContent; document.body.appendChild(s); } }",
        saved_outputs[0],
    )
    page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot').length === {FIGURES}", timeout=60_000)
    page.close()


def test_untrusted_notebook_says_how_to_get_the_figures_back(chromium, saved_outputs):
    """Untrusted, Jupyter runs no script: each figure's place says why it is empty and what to do."""
    context = chromium.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.set_content(_page(saved_outputs), wait_until="load")
    text = page.inner_text("body")
    assert text.count("trust the notebook") == FIGURES and "lens.init_notebook()" in text
    assert "&amp;" not in text and "File → Trust Notebook" in text  # the note reads as text, escaped once
    full_screenshot(page, ARTIFACTS / "notebook-untrusted.png")
    context.close()
