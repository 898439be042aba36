"""The Masks page in headless Chromium: the verdict, the overlay and both languages, as a person sees them."""

from __future__ import annotations

import pytest

from lens_testing.browser import ARTIFACTS, full_screenshot, have_browser, watch_errors

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 120_000


def _leak_markers(page) -> int:
    """Count the red ✕ markers plotly drew (the overlay's 'leak' trace) in the attention chart."""
    return page.evaluate(
        """() => {
            const plot = document.querySelectorAll('.js-plotly-plot')[0];
            const tr = (plot._fullData || []).find(t => t.name === 'leak');
            return tr ? tr._length : 0;
        }"""
    )


def test_masks_page_verdict_overlay_and_languages(app_url, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors = watch_errors(page)
    page.goto(app_url)
    page.wait_for_selector(".js-plotly-plot", timeout=LOAD_MS)
    page.get_by_role("link", name="Masks").click()
    page.get_by_text("PASS: this is a correct causal mask").wait_for(timeout=LOAD_MS)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length == 2", timeout=LOAD_MS)
    assert _leak_markers(page) == 0
    full_screenshot(page, ARTIFACTS / "masks_en_pass.png")

    # Plant a bug from the examples: the next token visible.
    box = page.get_by_role("combobox", name="Example (✓ correct, ✗ a classic bug)")
    box.click()
    box.fill("next token")
    page.get_by_role("option").filter(has_text="next token visible").first.click()
    page.get_by_text("FAIL: this is not a correct causal mask").wait_for(timeout=LOAD_MS)
    page.get_by_text("off by one: every token also sees the next one").wait_for(timeout=LOAD_MS)
    page.wait_for_function(
        "() => { const p = document.querySelectorAll('.js-plotly-plot')[0];"
        " return p && (p.data || []).some(t => t.name === 'leak'); }",
        timeout=LOAD_MS,
    )
    assert _leak_markers(page) > 0
    full_screenshot(page, ARTIFACTS / "masks_en_bug.png")

    page.get_by_text("中文").click()
    page.get_by_text("检查注意力掩码").wait_for(timeout=LOAD_MS)
    page.get_by_text("差一：每个 token 还能看到下一个").wait_for(timeout=LOAD_MS)
    page.wait_for_timeout(1000)
    full_screenshot(page, ARTIFACTS / "masks_zh_bug.png")
    assert not errors, errors
    page.close()


def test_upload_a_mask_file(tmp_path, app_url, chromium):
    """Upload an nn.MultiheadAttention-style .npy, declare drop: PASS. A pickled .npy is refused, never loaded."""
    import numpy as np

    T = 16  # [CLS] + 14 tokens + [SEP] for the sidebar's default sentence
    np.save(tmp_path / "mha.npy", np.triu(np.ones((T, T), bool), 1))
    np.save(tmp_path / "evil.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors = watch_errors(page)
    page.goto(app_url)
    page.wait_for_selector(".js-plotly-plot", timeout=LOAD_MS)
    page.get_by_role("link", name="Masks").click()
    page.get_by_text("PASS: this is a correct causal mask").wait_for(timeout=LOAD_MS)
    page.get_by_text("Upload a file").click()
    page.get_by_text("Pick an example, type an expression or upload a mask file").wait_for(timeout=LOAD_MS)
    page.locator("[data-testid=stMain] input[type=file]").set_input_files(
        str(tmp_path / "mha.npy")
    )  # not the sidebar's .txt
    page.get_by_text("FAIL: this is not a correct causal mask in the keep convention").wait_for(timeout=LOAD_MS)
    box = page.get_by_role("combobox", name="Convention (declared)")
    box.click()
    page.get_by_role("option").filter(has_text="drop").first.click()
    page.get_by_text("PASS: this is a correct causal mask in the drop convention").wait_for(timeout=LOAD_MS)
    page.locator("[data-testid=stMain] input[type=file]").set_input_files(str(tmp_path / "evil.npy"))
    page.get_by_text("never unpickled").wait_for(timeout=LOAD_MS)
    full_screenshot(page, ARTIFACTS / "masks_upload_refused.png")
    assert not errors, errors
    page.close()
