"""Time until painted, and browser memory, of our all-heads overview against bertviz's model_view, in one browser.

    python bench/render.py                       # bundled model: 128 tokens (ours and bertviz), 512 tokens (ours)
    python bench/render.py --skip-bertviz        # ours only (bertviz at 128 tokens takes minutes and GBs)
    python bench/render.py --no-app              # skip the end-to-end measurement in the running Streamlit app

Both views get the SAME attentions (the bundled all-MiniLM-L6-v2, 6 layers × 12 heads, on a text of exactly
128 tokens) as standalone HTML files opened from disk in Debian's headless chromium, with every request that is
not file:// refused and counted. bertviz's require.js, d3 and jQuery are inlined from bench/vendor/ (instead of
cdnjs), ours inlines plotly.js; each page runs in a fresh browser context (its own renderer process).

"Painted" = the view's content is in the DOM (ours: the mosaic image decoded; bertviz: its SVG, which its
model_view.js draws synchronously in one task), then two animation frames; time is counted from navigation
start (performance.now()). Memory: the page's JS heap (CDP Performance.getMetrics JSHeapUsedSize), the peak
resident memory of the page's renderer process (VmHWM in /proc), and the peak, sampled every 50 ms, of the PSS
summed over every chromium process of this run (browser, GPU, renderers). Targets: ours ≤ 1/20 of bertviz's time
at 128 tokens; ours at 512 tokens painted in ≤ 3 s with ≤ 1 GB of browser memory.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

VENDOR = ROOT / "bench" / "vendor"
BERTVIZ_CDN = '<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>'
WORDS = "the model looks at every token and weighs how much each other token matters here . " * 80

# ---- building the two pages ---------------------------------------------------------------------------


def text_of(tokenizer, n_tokens: int) -> str:
    """Return a text that tokenizes to exactly n_tokens, [CLS] and [SEP] included."""
    ids = tokenizer(WORDS, add_special_tokens=False)["input_ids"][: n_tokens - 2]
    text = tokenizer.decode(ids)
    assert len(tokenizer(text)["input_ids"]) == n_tokens
    return text


def ours_html(attn: np.ndarray) -> tuple[str, dict]:
    """Return our overview as one standalone HTML file, and facts about it."""
    from viz.export import standalone_html
    from viz.overview import overview_figure, render_mosaic

    t0 = time.perf_counter()
    mosaic = render_mosaic(attn)
    fig = overview_figure(mosaic, selected=(0, 0), title="Every layer and head")
    page = standalone_html("Attention overview", [("", fig)])
    return page, {"python_ms": (time.perf_counter() - t0) * 1000, "png_bytes": len(mosaic.png),
                  "bytes_per_value": mosaic.bytes_per_value}


def plotly_only_html() -> str:
    """Return a standalone page with plotly.js and an empty figure: what loading plotly.js alone costs."""
    import plotly.graph_objects as go

    from viz.export import standalone_html

    fig = go.Figure(go.Image(source="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="))
    return standalone_html("plotly.js alone", [("", fig)])


def _script(path: Path) -> str:
    return f"<script>\n{path.read_text(encoding='utf-8')}\n</script>"


def bertviz_html(attn: np.ndarray, tokens: list[str]) -> str:
    """Return bertviz's model_view for the same attentions, its JavaScript inlined (no CDN)."""
    import torch
    from bertviz import model_view

    layers = [torch.from_numpy(a)[None] for a in attn]  # bertviz wants one (1, heads, q, k) tensor per layer
    body = model_view(layers, tokens, html_action="return").data
    if BERTVIZ_CDN not in body:
        raise RuntimeError("bertviz's HTML no longer loads require.js from the expected CDN URL; update bench/render.py")
    # d3 and jQuery first, while no AMD loader exists, so they become window.d3 / window.jQuery; then require.js,
    # and named modules for them, so bertviz's requirejs(['jquery', 'd3'], …) never looks at its CDN paths.
    inline = "\n".join([
        _script(VENDOR / "d3-5.7.0.min.js"),
        _script(VENDOR / "jquery-2.1.4.min.js"),
        _script(VENDOR / "require-2.3.6.js"),
        "<script>define('d3', [], function () { return window.d3; });"
        "define('jquery', [], function () { return window.jQuery; });</script>",
    ])
    body = body.replace(BERTVIZ_CDN, inline)
    for cdn in ("https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min", "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min"):
        body = body.replace(cdn, "inline-" + cdn.rsplit("/", 1)[-1])  # never fetched; a request would be refused and counted
    return f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>bertviz model_view</title></head><body>{body}</body></html>'


# ---- measuring in chromium ----------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def browser_pids() -> list[int]:
    """Return every chromium process started by this run (descendants of this Python process)."""
    kids = _children()
    out, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop()
        for child in kids.get(pid, []):
            todo.append(child)
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    if b"chrom" in f.read().split(b"\0")[0]:
                        out.append(child)
            except OSError:
                pass
    return out


def renderer_pids() -> set[int]:
    found = set()
    for pid in browser_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"--type=renderer" in f.read():
                    found.add(pid)
        except OSError:
            pass
    return found


def _status_kb(pid: int, field_name: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_total_mb() -> float:
    """Return the PSS of all this run's chromium processes, in MB (PSS splits shared pages fairly)."""
    total = 0
    for pid in browser_pids():
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total / 1024


class PeakSampler:
    """Sample the browser's total PSS every `every` seconds in a thread; keep the peak."""

    def __init__(self, every: float = 0.05):
        self.every, self.peak, self._stop = every, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, pss_total_mb())
            self._stop.wait(self.every)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, pss_total_mb())


@dataclass
class Result:
    name: str
    painted_ms: float = float("nan")
    heap_mb: float = float("nan")
    renderer_peak_mb: float = float("nan")
    browser_peak_mb: float = float("nan")
    html_mb: float = float("nan")
    refused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    note: str = ""


PAINTED_JS = """async (kind) => {
  const frame = () => new Promise(r => requestAnimationFrame(() => r()));
  if (kind === 'ours') {
    const img = document.querySelector('.js-plotly-plot image');
    const probe = new Image(); probe.src = img.getAttribute('href'); await probe.decode();
  }
  await frame(); await frame();
  return performance.now();
}"""
READY_JS = {
    "ours": "() => !!document.querySelector('.js-plotly-plot image')",
    "bertviz": "() => !!document.querySelector('#vis svg')",  # model_view.js appends it, then every line, in one task
}


def measure(browser, path: Path, name: str, kind: str, timeout_s: float) -> Result:
    res = Result(name, html_mb=path.stat().st_size / 2**20)
    before = renderer_pids()  # the page's renderer is the one that appears after this
    context = browser.new_context(viewport={"width": 1400, "height": 900})

    def offline(route) -> None:
        if route.request.url.startswith(("file:", "data:")):
            route.continue_()
        else:
            res.refused.append(route.request.url)
            route.abort()

    context.route("**/*", offline)
    page = context.new_page()
    page.on("pageerror", lambda e: res.errors.append(str(e)))
    page.on("console", lambda m: res.errors.append(m.text) if m.type == "error" else None)
    try:
        with PeakSampler() as sampler:
            page.goto(path.as_uri(), wait_until="commit", timeout=timeout_s * 1000)
            page.wait_for_function(READY_JS[kind], timeout=timeout_s * 1000, polling=100)
            res.painted_ms = page.evaluate(PAINTED_JS, kind)
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable")
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            res.heap_mb = metrics.get("JSHeapUsedSize", float("nan")) / 2**20
            mine = renderer_pids() - before
            res.renderer_peak_mb = max((_status_kb(p, "VmHWM") for p in mine), default=0) / 1024
        res.browser_peak_mb = sampler.peak
        if kind == "bertviz":
            lines = page.evaluate("document.querySelectorAll('line').length")
            res.note = f"{lines:,} SVG lines"
    except Exception as err:  # noqa: BLE001 - a timeout is a result to report, not a crash
        res.note = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    finally:
        context.close()
    return res


def app_overview_ms(browser, text: str, timeout_s: float) -> float:
    """Return ms from opening the running app with this text in the URL until its overview image is painted.

    Includes Streamlit's start-up in the page, the model run on this machine and the figure (the model itself is
    loaded once before timing; the text is new to the app's cache).
    """
    from urllib.parse import quote

    from tests.browser import app_server

    with app_server(timeout=120) as url:
        warm = browser.new_page()
        warm.goto(url)  # load the model once
        warm.wait_for_selector(".js-plotly-plot image", timeout=timeout_s * 1000)
        warm.close()
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{url}/?text={quote(text)}", wait_until="commit")
        page.wait_for_function(
            "() => document.body.innerText.includes('512 tokens') && !!document.querySelector('.js-plotly-plot image')",
            timeout=timeout_s * 1000, polling=100,
        )
        ms = page.evaluate(PAINTED_JS, "ours")
        page.close()
    return ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=128, help="length for the comparison with bertviz")
    ap.add_argument("--long", type=int, default=512, help="length for ours alone")
    ap.add_argument("--bertviz-timeout", type=float, default=1200.0, help="seconds to wait for bertviz to paint")
    ap.add_argument("--skip-bertviz", action="store_true")
    ap.add_argument("--no-app", action="store_true", help="skip the end-to-end run in the Streamlit app")
    args = ap.parse_args()

    from models import load_encoder
    from tests.browser import browser

    enc = load_encoder("minilm", device="cpu")
    short = enc.encode(text_of(enc.tokenizer, args.tokens))
    long_text = text_of(enc.tokenizer, args.long)
    long = enc.encode(long_text)
    attn_short, attn_long = short.attentions.numpy(), long.attentions.numpy()
    L, H = attn_short.shape[:2]

    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = {}
        page, facts_short = ours_html(attn_short)
        (tmp / "ours-short.html").write_text(page, encoding="utf-8")
        page, facts_long = ours_html(attn_long)
        (tmp / "ours-long.html").write_text(page, encoding="utf-8")
        files["ours-short"], files["ours-long"] = tmp / "ours-short.html", tmp / "ours-long.html"
        files["plotly"] = tmp / "plotly-only.html"
        files["plotly"].write_text(plotly_only_html(), encoding="utf-8")
        if not args.skip_bertviz:
            (tmp / "bertviz.html").write_text(bertviz_html(attn_short, short.tokens), encoding="utf-8")
            files["bertviz"] = tmp / "bertviz.html"

        with browser() as b:
            idle = pss_total_mb()
            baseline = measure(b, files["plotly"], "plotly.js alone (1-pixel image)", "ours", 120)
            results.append(measure(b, files["ours-short"], f"ours, {args.tokens} tokens", "ours", 120))
            results.append(measure(b, files["ours-long"], f"ours, {args.long} tokens", "ours", 120))
            if not args.skip_bertviz:
                results.append(measure(b, files["bertviz"], f"bertviz model_view, {args.tokens} tokens", "bertviz",
                                       args.bertviz_timeout))
            app_ms = None if args.no_app else app_overview_ms(b, long_text, 300)

    print(f"model: {enc.name}, {L} layers × {H} heads; one chromium ({os.environ.get('CHROMIUM', '/usr/bin/chromium')}), "
          f"idle browser PSS {idle:.0f} MB")
    print(f"ours: mosaic + figure built in Python in {facts_short['python_ms']:.0f} ms ({args.tokens} tokens), "
          f"{facts_long['python_ms']:.0f} ms ({args.long} tokens); "
          f"{facts_short['bytes_per_value']:.2f} / {facts_long['bytes_per_value']:.3f} bytes per attention value")
    print(f"{'view':34} {'HTML MB':>8} {'painted ms':>11} {'JS heap MB':>11} {'renderer peak MB':>17} "
          f"{'browser peak MB':>16}  notes")
    for r in results:
        notes = "; ".join(x for x in [r.note, f"{len(r.refused)} requests refused" if r.refused else "",
                                      f"{len(r.errors)} console errors" if r.errors else ""] if x)
        print(f"{r.name:34} {r.html_mb:8.1f} {r.painted_ms:11.0f} {r.heap_mb:11.1f} {r.renderer_peak_mb:17.0f} "
              f"{r.browser_peak_mb:16.0f}  {notes}")
    print(f"(of which loading plotly.js itself, 4.6 MB inline: {baseline.painted_ms:.0f} ms to paint a 1-pixel image; "
          "the app's browser tab loads it once per session)")
    ours_s, ours_l = results[0], results[1]
    if not args.skip_bertviz:
        theirs = results[2]
        ratio = ours_s.painted_ms / theirs.painted_ms
        print(f"ours/bertviz time at {args.tokens} tokens: {ratio:.4f} (1/{1 / ratio:.0f}); target ≤ 0.05 (1/20): "
              f"{'met' if ratio <= 0.05 else 'NOT met'}")
        print(f"ours/bertviz renderer peak memory at {args.tokens} tokens: "
              f"{ours_s.renderer_peak_mb / theirs.renderer_peak_mb:.3f}")
    ok_long = ours_l.painted_ms <= 3000 and ours_l.browser_peak_mb <= 1024
    print(f"ours at {args.long} tokens: painted in {ours_l.painted_ms / 1000:.2f} s, browser peak {ours_l.browser_peak_mb:.0f} MB; "
          f"target ≤ 3 s and ≤ 1024 MB: {'met' if ok_long else 'NOT met'}")
    if app_ms is not None:
        print(f"in the app (streamlit run app.py, {args.long}-token text in the URL, encoder run included): "
              f"overview painted {app_ms / 1000:.2f} s after navigation")
    for r in results:
        for u in r.refused[:3]:
            print(f"refused request from {r.name}: {u}")
        for e in r.errors[:3]:
            print(f"console error in {r.name}: {e[:200]}")


if __name__ == "__main__":
    main()
