"""Issue 25, a newcomer's first hour, in headless Chromium at a projector's 1280 × 720, in English and 中文.

One test per item: the example corpus analyses with the default budgets; every heatmap has token labels that do
not collide, full tokens on hover and a colour bar with its unit; Mean and rollout opens at the last layer; a
causal model's rollout opens on its last token and the sidebar's mask follows the model at once; the Heads page's
sections are tabs that fit one row; the lecture pages name the tutorial. (The notebook: test_notebook_browser.py.)
Screenshots: artifacts/newcomer/<item>_<lang>.png, the first screen as a projector shows it.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from lens_testing.browser import ARTIFACTS, have_browser, watch_errors
from ui.i18n import translate
from ui.tutorial import HEADINGS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 240_000
SHOTS = ARTIFACTS / "newcomer"
LANGS = ("en", "zh")
# 42 tokens with the bundled model: the length at which key labels used to run into each other.
LONG = (
    "The keys to the cabinet that the old man built are on the table, and the animal didn't cross the street "
    "because it was too tired to walk any further that night, so it slept."
)
DECODER = "random:gpt2-tiny"


def _open(chromium, url: str):
    page = chromium.new_page(viewport={"width": 1280, "height": 720})
    errors = watch_errors(page)
    page.goto(url)
    return page, errors


def _plots(page, n: int = 1) -> None:
    page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot').length >= {n}", timeout=LOAD_MS)
    page.wait_for_timeout(1200)


def _shot(page, name: str, lang: str, locator=None) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    if locator is not None:
        locator.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
    page.screenshot(path=str(SHOTS / f"{name}_{lang}.png"))


def _no_errors(errors: list[str]) -> None:
    assert not [e for e in errors if "WebSocket" not in e and "favicon" not in e], errors


def _tick_gaps(plot, axis: str) -> list[float]:
    """Return the distances in px between neighbouring tick labels of one axis of a plotly chart (its first).

    Measured at the labels' anchors (plotly places each label by a translate() in its transform, plus its x / y
    attribute), so a long turned label does not look closer to its neighbour than it stands.
    """
    first = plot.locator(f".{axis}axislayer-above").first
    anchors = first.locator(f".{axis}tick text").evaluate_all(
        """(ts, axis) => ts.map(t => {
            const m = /translate\\(([-\\d.e]+)[ ,]+([-\\d.e]+)\\)/.exec(t.getAttribute('transform') || '');
            const own = parseFloat(t.getAttribute(axis) || '0');
            return (m ? parseFloat(axis === 'x' ? m[1] : m[2]) : 0) + own;
        })""",
        axis,
    )
    anchors = sorted(anchors)
    return [b - a for a, b in zip(anchors, anchors[1:], strict=False)]


@pytest.mark.parametrize("lang", LANGS)
def test_the_example_corpus_analyses_with_default_budgets(app_url, chromium, lang):
    page, errors = _open(chromium, f"{app_url}/corpus?lang={lang}")
    page.get_by_text(translate(lang, "corpus.empty")).wait_for(timeout=LOAD_MS)
    assert page.locator("button", has_text=translate(lang, "corpus.run", n=60)).count() == 0
    page.locator("button", has_text=translate(lang, "corpus.example")).click()
    run = page.locator("button", has_text=translate(lang, "corpus.run", n=60))
    run.click(timeout=60_000)
    success = page.locator("[data-testid=stAlertContentSuccess]").first
    success.wait_for(timeout=LOAD_MS)
    assert "60" in success.inner_text()
    _plots(page, 2)
    assert page.get_by_text("ATTENTION_LENS_MAX_BATCH").count() == 0  # no refusal
    _shot(page, "corpus", lang, success)
    _no_errors(errors)
    page.close()


@pytest.mark.parametrize("lang", LANGS)
def test_head_view_labels_42_tokens_without_collisions(app_url, chromium, lang):
    page, errors = _open(chromium, f"{app_url}/?view=head&layer=1&head=3&lang={lang}&text={quote(LONG)}")
    _plots(page, 2)
    heat = page.locator(".js-plotly-plot").first
    n_keys = heat.locator(".xtick text").count()
    assert 8 <= n_keys < 42  # thinned
    gaps = _tick_gaps(heat, "x")
    assert min(gaps) >= 11, gaps  # labels stand apart: at least an 11 px font's line each
    assert heat.locator(".colorbar .cbtitle").text_content() == translate(lang, "explore.colorbar")
    drag = heat.locator(".nsewdrag").first
    drag.scroll_into_view_if_needed()
    box = drag.bounding_box()
    y = max(box["y"], 80) + 100  # below Streamlit's top bar, inside the viewport
    page.mouse.move(box["x"] + box["width"] * 0.5, y)
    page.mouse.move(box["x"] + box["width"] * 0.985, y)  # the last key, [SEP]: thinned out of the labels
    # The label may still be the first move's for a moment (a busy machine): read it once it follows the mouse.
    page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
    try:
        page.wait_for_function(
            "() => [...document.querySelectorAll('.hoverlayer .hovertext')].some(h => h.textContent.includes('[SEP]'))",
            timeout=10_000,
        )
    except Exception:  # noqa: BLE001 - the assertion below says what the label shows instead
        pass
    hover = page.locator(".hoverlayer .hovertext").first.text_content()
    assert "[SEP]" in hover and "[SEP]" not in heat.locator(".xtick text").all_text_contents(), hover
    _shot(page, "head_view", lang, heat)
    _no_errors(errors)
    page.close()


@pytest.mark.parametrize("lang", LANGS)
def test_one_layer_has_token_labels_and_a_colour_bar(app_url, chromium, lang):
    page, errors = _open(chromium, f"{app_url}/?view=layer&layer=1&lang={lang}&text={quote(LONG)}")
    _plots(page)
    fig = page.locator(".js-plotly-plot").first
    ys = fig.locator("g[class^='y'][class$='tick'] text").count()  # every subplot's axis: ytick, y6tick, …
    xs = fig.locator("g[class^='x'][class$='tick'] text").count()
    assert ys >= 3 * 6 and xs >= 3 * 6, (ys, xs)  # queries on every row of maps, keys under each of 3+ columns
    assert min(_tick_gaps(fig, "y") or [99]) >= 11
    assert fig.locator(".colorbar .cbtitle").text_content() == translate(lang, "explore.colorbar")
    _shot(page, "one_layer", lang, fig)
    _no_errors(errors)
    page.close()


@pytest.mark.parametrize("lang", LANGS)
def test_mean_and_rollout_reaches_the_last_layer_in_one_click(app_url, chromium, lang):
    page, errors = _open(chromium, f"{app_url}/?lang={lang}")
    _plots(page)
    page.get_by_role("radio", name=translate(lang, "explore.view_aggregate")).click()  # the view picker
    # The view keeps the visitor's layer (issue 40); rollout through every layer is one click away.
    page.get_by_text(translate(lang, "explore.rollout_title", layer=0)).first.wait_for(timeout=LOAD_MS)
    page.get_by_role("button", name=translate(lang, "explore.rollout_to_last", last=5)).click()
    page.get_by_text(translate(lang, "explore.rollout_title", layer=5)).first.wait_for(timeout=LOAD_MS)
    _plots(page, 3)
    assert "layer=5" in page.url and "view=aggregate" in page.url
    _shot(page, "mean_rollout", lang)
    _no_errors(errors)
    page.close()


@pytest.mark.parametrize("lang", LANGS)
def test_a_decoder_gets_its_own_mask_label_and_its_last_tokens_rollout(app_url, chromium, lang):
    page, errors = _open(chromium, f"{app_url}/?view=aggregate&lang={lang}")
    _plots(page, 3)
    mask = page.get_by_role("combobox", name=translate(lang, "sidebar.mask"))
    assert mask.input_value() == translate(lang, "sidebar.mask_kind.bidirectional")
    page.get_by_role("combobox", name=translate(lang, "sidebar.model")).click()
    # The list shows its first options only (virtualised): typing filters it down to the one wanted.
    page.keyboard.type(translate(lang, "sidebar.model_choice.random_gpt2_tiny"))
    page.get_by_role("option", name=translate(lang, "sidebar.model_choice.random_gpt2_tiny")).click()
    decoder = translate(lang, "sidebar.mask_kind.bidirectional_decoder")
    page.wait_for_function(
        "([name, want]) => [...document.querySelectorAll('input[role=combobox]')]"
        ".some(i => i.getAttribute('aria-label') === name && i.value === want)",
        arg=[translate(lang, "sidebar.mask"), decoder],
        timeout=LOAD_MS,
    )
    page.get_by_text(translate(lang, "explore.decoder_note")[:20], exact=False).first.wait_for(timeout=LOAD_MS)
    _plots(page, 3)
    row = page.get_by_role("combobox", name=translate(lang, "explore.rollout_row"))
    row.wait_for(timeout=LOAD_MS)
    from models import load_model
    from ui.state import DEFAULTS

    n = load_model(DECODER, device="cpu").encode(DEFAULTS["text"]).seq
    assert row.input_value().endswith(f" · {n - 1}"), (row.input_value(), n)  # the last token, not the first
    _shot(page, "decoder_rollout", lang)
    mask.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"decoder_mask_{lang}.png"))
    _no_errors(errors)
    page.close()


@pytest.mark.parametrize("lang", LANGS)
def test_heads_page_sections_are_tabs_in_one_row(app_url, chromium, lang):
    page, errors = _open(chromium, f"{app_url}/heads?lang={lang}&text={quote(LONG)}")
    page.get_by_role("tab", name=translate(lang, "heads.tab.labels")).wait_for(timeout=LOAD_MS)
    _plots(page)
    tabs = page.locator("[role=tablist]").first
    fits = tabs.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
    assert fits, "the tab names overflow their row at 1280 px"
    assert page.get_by_role("tab").count() == 6
    _shot(page, "heads_labels", lang)
    page.get_by_role("tab", name=translate(lang, "heads.tab.redundancy")).click()
    page.wait_for_timeout(1500)
    _shot(page, "heads_redundancy", lang)
    page.get_by_role("tab", name=translate(lang, "heads.tab.dupes")).click()
    page.wait_for_timeout(1500)
    pairs = page.locator("[role=tabpanel] .js-plotly-plot:visible").last  # the pairs of heads, side by side
    _shot(page, "heads_pairs", lang, pairs)
    _no_errors(errors)
    page.close()


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    ("path", "sections"), [("inside_head", ("3", "4")), ("memory", ("6",)), ("troubleshooting", ("7",))]
)
def test_lecture_pages_name_the_tutorial(app_url, chromium, lang, path, sections):
    page, errors = _open(chromium, f"{app_url}/{path}?lang={lang}")
    about = translate(lang, "tutorial.about_title")
    page.get_by_text(about).first.wait_for(timeout=LOAD_MS)
    _plots(page)  # the page has finished its run: nothing moves under the click
    body = page.inner_text("body")
    assert all(HEADINGS[s] in body for s in sections)
    assert ("Chinese" if lang == "en" else "中文") in body
    page.locator("[data-testid=stExpander] summary", has_text=about).first.click()
    link = page.locator("[data-testid=stPageLink]").filter(has_text=translate(lang, "nav.memory")).first
    link.wait_for(timeout=10_000)
    _shot(page, f"tutorial_{path}", lang)
    _no_errors(errors)
    page.close()
