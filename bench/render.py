"""Time until painted, and browser memory, of our all-heads overview against bertviz's model_view, in one browser.

    python bench/render.py                       # bundled model: 128 tokens (ours and bertviz), 512 tokens (ours)
    python bench/render.py --skip-bertviz        # ours only (bertviz at 128 tokens takes ~40 s and ~3.5 GB)
    python bench/render.py --no-app              # skip the end-to-end measurements in the running Streamlit app

Both views get the SAME attentions (the bundled all-MiniLM-L6-v2, 6 layers × 12 heads, on a text of exactly
128 tokens), as HTML files opened from disk in Debian's headless chromium, with every request that is not file://
refused and counted. bertviz's require.js, d3 and jQuery are inlined from bench/vendor/ (instead of cdnjs), ours
inlines plotly.js. Each page runs in a fresh browser context (its own renderer process). Two timings:

- cold: from navigation start (performance.now()) to painted, for a standalone page as the app exports it: this
  includes parsing the page's libraries, 1.5 MB of plotly.js (cartesian bundle) for us, 0.4 MB of d3 + jQuery +
  require.js for bertviz.
- warm: the libraries are already loaded (as in the app's browser tab, or a notebook that drew once before);
  from handing the view its data (our figure JSON; bertviz's model_view.js with its params) to painted.

"Painted" = the view is in the DOM (ours: the mosaic image decoded; bertviz: its SVG, which model_view.js draws
synchronously in one task), then two animation frames. Ours is the median of --repeats runs; bertviz runs once.
Memory, from the cold run: the page's JS heap (CDP Performance.getMetrics JSHeapUsedSize), the peak resident
memory of the page's renderer process (VmHWM in /proc), and the peak, sampled every 50 ms, of the PSS summed over
every chromium process of this run (browser, GPU, renderers). Targets: ours ≤ 1/20 of bertviz's time at 128
tokens; ours at 512 tokens painted in ≤ 3 s with ≤ 1 GB of browser memory.

End to end, in the running app (unless --no-app): typed → idle, from the key press that commits a new text of
--tokens tokens in the open Explore page until its overview is drawn and Streamlit has stopped (encoder, figure, websocket and
painting included), divided by bertviz's cold paint of the same length: target ≤ 0.03. And the time from opening
a new tab with a text in its URL until the overview is painted.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

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


def ours_figure_json(attn: np.ndarray) -> tuple[str, dict]:
    """Return our overview figure as JSON (what the app sends to the browser), and facts about it."""
    from viz.overview import overview_figure, render_mosaic

    t0 = time.perf_counter()
    mosaic = render_mosaic(attn)
    fig_json = overview_figure(mosaic, selected=(0, 0), title="Every layer and head").to_json()
    return fig_json, {
        "python_ms": (time.perf_counter() - t0) * 1000,
        "png_bytes": len(mosaic.png),
        "bytes_per_value": mosaic.bytes_per_value,
        "json_bytes": len(fig_json),
    }


def ours_cold_html(fig_json: str) -> str:
    """Return our overview as the app exports it: one standalone HTML file with plotly.js inline."""
    import plotly.io as pio

    from viz.export import standalone_html

    return standalone_html("Attention overview", [("", pio.from_json(fig_json))])


def ours_warm_html(fig_json: str) -> str:
    """Return a page with plotly.js loaded and the figure JSON waiting in the page, not drawn yet."""
    from plotly.offline import get_plotlyjs

    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><script>{get_plotlyjs()}</script></head><body>'
        f'<div id="plot" style="width:1000px"></div><script type="application/json" id="data">{fig_json}</script>'
        "</body></html>"
    )


def plotly_only_html() -> str:
    """Return a standalone page with plotly.js and a 1-pixel image: what loading plotly.js alone costs."""
    import plotly.graph_objects as go

    from viz.export import standalone_html

    fig = go.Figure(
        go.Image(
            source="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="
        )
    )
    return standalone_html("plotly.js alone", [("", fig)])


def _script(path: Path) -> str:
    return f"<script>\n{path.read_text(encoding='utf-8')}\n</script>"


def _bertviz_libraries() -> str:
    # d3 and jQuery first, while no AMD loader exists, so they become window.d3 / window.jQuery; then require.js,
    # and named modules for them, so bertviz's requirejs(['jquery', 'd3'], …) never looks at its CDN paths.
    return "\n".join(
        [
            _script(VENDOR / "d3-5.7.0.min.js"),
            _script(VENDOR / "jquery-2.1.4.min.js"),
            _script(VENDOR / "require-2.3.6.js"),
            "<script>define('d3', [], function () { return window.d3; });"
            "define('jquery', [], function () { return window.jQuery; });</script>",
        ]
    )


def bertviz_parts(attn: np.ndarray, tokens: list[str]) -> tuple[str, str]:
    """Return bertviz's model_view for the same attentions as (its div, its script), CDN references removed."""
    import torch
    from bertviz import model_view

    layers = [torch.from_numpy(a)[None] for a in attn]  # bertviz wants one (1, heads, q, k) tensor per layer
    body = model_view(layers, tokens, html_action="return").data
    opening = '\n<script type="text/javascript">\n'
    if BERTVIZ_CDN not in body or opening not in body:
        raise RuntimeError("bertviz's HTML no longer has the expected shape; update bench/render.py")
    body = body.replace(BERTVIZ_CDN, "")
    div, script = body.split(opening, 1)
    script = script.rsplit("</script>", 1)[0]
    for cdn in (
        "https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min",
        "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min",
    ):
        script = script.replace(
            cdn, "inline-" + cdn.rsplit("/", 1)[-1]
        )  # never fetched; a request would be refused and counted
    return div, script


def bertviz_cold_html(div: str, script: str) -> str:
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>bertviz model_view</title></head><body>'
        f"{_bertviz_libraries()}{div}<script>{script}</script></body></html>"
    )


def bertviz_warm_html(div: str, script: str) -> str:
    """Return a page with bertviz's libraries loaded and its view script waiting in the page, not run yet."""
    held = script.replace("</", "<\\/")  # only inside the JSON params' strings
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>bertviz model_view</title></head><body>'
        f'{_bertviz_libraries()}{div}<script type="text/plain" id="data">{held}</script></body></html>'
    )


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


FRAMES = "const frame = () => new Promise(r => requestAnimationFrame(() => r()));"
DECODED = (
    "const img = document.querySelector('.js-plotly-plot image');"
    "const probe = new Image(); probe.src = img.getAttribute('href'); await probe.decode();"
)
READY = {
    "ours": "() => !!document.querySelector('.js-plotly-plot image')",
    "bertviz": "() => !!document.querySelector('#vis svg')",  # model_view.js appends it, then every line, in one task
}
COLD_JS = {  # → ms since navigation start, once the view is ready
    "ours": f"async () => {{ {FRAMES} {DECODED} await frame(); await frame(); return performance.now(); }}",
    "bertviz": f"async () => {{ {FRAMES} await frame(); await frame(); return performance.now(); }}",
}
WARM_JS = {  # → ms from handing the view its data to painted
    "ours": f"""async () => {{ {FRAMES}
        const t0 = performance.now();
        const fig = JSON.parse(document.getElementById('data').textContent);
        await Plotly.newPlot('plot', fig.data, fig.layout, {{displaylogo: false}});
        {DECODED} await frame(); await frame();
        return performance.now() - t0; }}""",
    "bertviz": f"""async () => {{ {FRAMES}
        const t0 = performance.now();
        const s = document.createElement('script');
        s.text = document.getElementById('data').textContent.split('<\\\\/').join('</');
        document.body.appendChild(s);
        await new Promise(r => {{ const poll = () => document.querySelector('#vis svg') ? r() : setTimeout(poll, 10); poll(); }});
        await frame(); await frame();
        return performance.now() - t0; }}""",
}


def measure(browser, path: Path, name: str, kind: str, mode: str, timeout_s: float) -> Result:
    """Open one page in a fresh context, offline; return its time to paint and memory."""
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
    page.set_default_timeout(timeout_s * 1000)
    page.on("pageerror", lambda e: res.errors.append(str(e)))
    page.on("console", lambda m: res.errors.append(m.text) if m.type == "error" else None)
    try:
        with PeakSampler() as sampler:
            if mode == "cold":
                page.goto(path.as_uri(), wait_until="commit", timeout=timeout_s * 1000)
                page.wait_for_function(READY[kind], timeout=timeout_s * 1000, polling=100)
                res.painted_ms = page.evaluate(COLD_JS[kind])
            else:
                page.goto(path.as_uri(), wait_until="load", timeout=timeout_s * 1000)
                res.painted_ms = page.evaluate(WARM_JS[kind])
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


def median_of(runs: list[Result]) -> Result:
    """Return the run with the median time (its memory figures come with it), noting the spread."""
    ordered = sorted(runs, key=lambda r: r.painted_ms)
    mid = ordered[len(ordered) // 2]
    if len(runs) > 1:
        mid.note = "; ".join(
            x
            for x in [mid.note, f"median of {len(runs)}: {ordered[0].painted_ms:.0f}–{ordered[-1].painted_ms:.0f} ms"]
            if x
        )
    mid.refused = [u for r in runs for u in r.refused]
    mid.errors = [e for r in runs for e in r.errors]
    return mid


def app_overview_ms(browser, texts: dict[str, str], timeout_s: float) -> dict[str, float]:
    """Return, per text, ms from opening the running app with it in the URL until its overview image is painted.

    Includes Streamlit's own start-up in the new tab, the encoder run on this machine and the figure (the model
    is loaded once before timing; each text is new to the app's cache).
    """
    from urllib.parse import quote

    from lens_testing.browser import app_server

    out = {}
    with app_server(timeout=120) as url:
        warm = browser.new_page()
        warm.goto(url)  # load the model once
        warm.wait_for_selector(".js-plotly-plot image", timeout=timeout_s * 1000)
        warm.close()
        for name, text in texts.items():
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}/?text={quote(text)}", wait_until="commit")
            page.wait_for_function(
                f"() => document.body.innerText.includes('{name}') && !!document.querySelector('.js-plotly-plot image')",
                timeout=timeout_s * 1000,
                polling=100,
            )
            out[name] = page.evaluate(COLD_JS["ours"])
            page.close()
    return out


def app_typed_s(browser, texts: list[str], timeout_s: float) -> float:
    """Return the median seconds from typing a new text into the running app's sidebar until the page is idle.

    Like a person: Explore is open and warm (model loaded, plotly.js loaded in the tab); the text is filled in,
    the clock starts at the Ctrl+Enter that commits it and stops when the new overview is drawn and Streamlit
    stopped running (bench/serve.py's wait). Encoder, figure, websocket and the browser's painting are all inside.
    """
    import statistics

    from bench.serve import type_text, wait_idle
    from lens_testing.browser import app_server

    with app_server(timeout=120) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url)
        wait_idle(page, "", timeout_s)
        times = []
        for text in texts:
            old, pressed = type_text(page, text)
            times.append(wait_idle(page, old, timeout_s) - pressed)
        page.close()
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=128, help="length for the comparison with bertviz")
    ap.add_argument("--long", type=int, default=512, help="length for ours alone")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each of our pages (median reported)")
    ap.add_argument("--bertviz-timeout", type=float, default=1200.0, help="seconds to wait for bertviz to paint")
    ap.add_argument("--skip-bertviz", action="store_true")
    ap.add_argument("--no-app", action="store_true", help="skip the end-to-end run in the Streamlit app")
    args = ap.parse_args()

    from lens_testing.browser import browser
    from models import load_encoder

    enc = load_encoder("minilm", device="cpu")
    short = enc.encode(text_of(enc.tokenizer, args.tokens))
    long_text = text_of(enc.tokenizer, args.long)
    attn_short, attn_long = short.attentions.numpy(), enc.encode(long_text).attentions.numpy()
    L, H = attn_short.shape[:2]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        json_short, facts_short = ours_figure_json(attn_short)
        json_long, facts_long = ours_figure_json(attn_long)
        pages = {
            "plotly": plotly_only_html(),
            "ours-short-cold": ours_cold_html(json_short),
            "ours-short-warm": ours_warm_html(json_short),
            "ours-long-cold": ours_cold_html(json_long),
            "ours-long-warm": ours_warm_html(json_long),
        }
        if not args.skip_bertviz:
            div, script = bertviz_parts(attn_short, short.tokens)
            pages["bertviz-cold"], pages["bertviz-warm"] = (
                bertviz_cold_html(div, script),
                bertviz_warm_html(div, script),
            )
        files = {}
        for name, text in pages.items():
            files[name] = tmp / f"{name}.html"
            files[name].write_text(text, encoding="utf-8")

        with browser() as b:
            idle = pss_total_mb()
            baseline = measure(b, files["plotly"], "plotly.js alone", "ours", "cold", 120)  # also warms the browser up
            rows: list[tuple[str, Result, Result]] = []
            for label, key in (
                (f"ours, {args.tokens} tokens", "ours-short"),
                (f"ours, {args.long} tokens", "ours-long"),
            ):
                cold = median_of(
                    [measure(b, files[f"{key}-cold"], label, "ours", "cold", 120) for _ in range(args.repeats)]
                )
                warm = median_of(
                    [measure(b, files[f"{key}-warm"], label, "ours", "warm", 120) for _ in range(args.repeats)]
                )
                rows.append((label, cold, warm))
            if not args.skip_bertviz:
                label = f"bertviz model_view, {args.tokens} tokens"
                cold = measure(b, files["bertviz-cold"], label, "bertviz", "cold", args.bertviz_timeout)
                warm = measure(b, files["bertviz-warm"], label, "bertviz", "warm", args.bertviz_timeout)
                rows.append((label, cold, warm))
            typed_s = None
            if not args.no_app:
                from bench.serve import texts_of

                typed_s = app_typed_s(b, texts_of(enc.tokenizer, args.tokens, 3, seed=11), 300)
            app_ms = (
                None
                if args.no_app
                else app_overview_ms(
                    b,
                    {"12 tokens": "The quick brown fox jumps over the lazy dog.", f"{args.long} tokens": long_text},
                    300,
                )
            )

    print(
        f"model: {enc.name}, {L} layers × {H} heads; Debian chromium {os.environ.get('CHROMIUM', '/usr/bin/chromium')}, "
        f"headless; idle browser PSS {idle:.0f} MB; {os.cpu_count()} CPU cores"
    )
    print(
        f"ours in Python (mosaic + figure): {facts_short['python_ms']:.0f} ms at {args.tokens} tokens, "
        f"{facts_long['python_ms']:.0f} ms at {args.long}; PNG {facts_short['png_bytes'] / 1024:.0f} KB / "
        f"{facts_long['png_bytes'] / 1024:.0f} KB = {facts_short['bytes_per_value']:.2f} / "
        f"{facts_long['bytes_per_value']:.3f} bytes per attention value (base64, as sent)"
    )
    print(
        f"{'view':32} {'page MB':>8} {'cold ms':>8} {'warm ms':>8} {'JS heap MB':>11} {'renderer peak MB':>17} "
        f"{'browser peak MB':>16}  notes"
    )
    for label, cold, warm in rows:
        notes = "; ".join(
            x
            for x in [
                cold.note,
                f"warm: {warm.note}" if warm.note and "SVG" not in warm.note else "",
                f"{len(cold.refused) + len(warm.refused)} requests refused" if cold.refused or warm.refused else "",
                f"{len(cold.errors) + len(warm.errors)} console errors" if cold.errors or warm.errors else "",
            ]
            if x
        )
        print(
            f"{label:32} {cold.html_mb:8.1f} {cold.painted_ms:8.0f} {warm.painted_ms:8.0f} {cold.heap_mb:11.1f} "
            f"{cold.renderer_peak_mb:17.0f} {cold.browser_peak_mb:16.0f}  {notes}"
        )
    import plotly.io as pio

    from viz.export import plotly_bundle

    name, js = plotly_bundle([pio.from_json(json_short)])
    print(
        f"{name} alone ({len(js) / 2**20:.1f} MB, inline) paints a 1-pixel image {baseline.painted_ms:.0f} ms after "
        "navigation: most of our cold time; the app's browser tab loads plotly.js once per session"
    )
    ours_s, ours_l = rows[0][1:], rows[1][1:]
    if not args.skip_bertviz:
        theirs = rows[2][1:]
        for i, mode in enumerate(("cold", "warm")):
            ratio = ours_s[i].painted_ms / theirs[i].painted_ms
            print(
                f"ours/bertviz time at {args.tokens} tokens, {mode}: {ratio:.4f} (1/{1 / ratio:.0f}); "
                f"target ≤ 0.05 (1/20): {'met' if ratio <= 0.05 else 'NOT met'}"
            )
        print(
            f"ours/bertviz renderer peak memory at {args.tokens} tokens: {ours_s[0].renderer_peak_mb / theirs[0].renderer_peak_mb:.3f}"
        )
    slowest = max(ours_l[0].painted_ms, ours_l[1].painted_ms)
    ok_long = slowest <= 3000 and ours_l[0].browser_peak_mb <= 1024
    print(
        f"ours at {args.long} tokens: painted in {ours_l[0].painted_ms / 1000:.2f} s cold, {ours_l[1].painted_ms / 1000:.2f} s warm, "
        f"browser peak {ours_l[0].browser_peak_mb:.0f} MB; target ≤ 3 s and ≤ 1024 MB: {'met' if ok_long else 'NOT met'}"
    )
    if typed_s is not None:
        line = f"in the app, typed → idle at {args.tokens} tokens (Explore open, a new text): {typed_s:.2f} s"
        if not args.skip_bertviz:
            ratio = typed_s * 1000 / rows[2][1].painted_ms
            line += (
                f"; ÷ bertviz model_view painted (cold) = {ratio:.3f} (1/{1 / ratio:.0f}); "
                f"target ≤ 0.03: {'met' if ratio <= 0.03 else 'NOT met'}"
            )
        print(line)
    if app_ms is not None:
        print(
            "in the app (streamlit run app.py, a new tab with the text in the URL; Streamlit's start-up and the encoder "
            "run included): overview painted " + ", ".join(f"{ms / 1000:.2f} s at {n}" for n, ms in app_ms.items())
        )
    save_record(args, enc.name, rows, baseline, typed_s, app_ms)
    for label, cold, warm in rows:
        for u in (cold.refused + warm.refused)[:3]:
            print(f"refused request from {label}: {u}")
        for e in (cold.errors + warm.errors)[:3]:
            print(f"console error in {label}: {e[:200]}")


def save_record(args, model: str, rows, baseline: Result, typed_s: float | None, app_ms: dict | None) -> None:
    """Keep what main() printed as bench/results/render.json."""
    from bench.results import Record, load_average, variant

    rec = Record(
        variant("render", "no-bertviz" if args.skip_bertviz else None, "no-app" if args.no_app else None),
        "Rendering: our all-heads overview against bertviz's model view, in headless Chromium",
    )
    table = rec.table(
        f"{model}; cold = from navigation, warm = libraries loaded; ours: medians of {args.repeats}",
        ["view", "page MB", "cold ms", "warm ms", "JS heap MB", "renderer peak MB", "browser peak MB"],
    )
    for label, cold, warm in rows:
        table.add(label, cold.html_mb, cold.painted_ms, warm.painted_ms, cold.heap_mb, cold.renderer_peak_mb,
                  cold.browser_peak_mb)  # fmt: skip
    table.add("plotly.js alone, a 1-pixel image", baseline.html_mb, baseline.painted_ms, None, baseline.heap_mb,
              baseline.renderer_peak_mb, baseline.browser_peak_mb)  # fmt: skip
    ours_s, ours_l = rows[0][1:], rows[1][1:]
    if not args.skip_bertviz:
        cold_ratio = ours_s[0].painted_ms / rows[2][1].painted_ms
        rec.headline(f"overview ÷ bertviz model_view paint time, {args.tokens} tokens, cold", cold_ratio, "×",
                     "≤ 0.05", cold_ratio <= 0.05)  # fmt: skip
    slowest = max(ours_l[0].painted_ms, ours_l[1].painted_ms)
    rec.headline(f"overview painted at {args.long} tokens, cold", ours_l[0].painted_ms / 1000, "s", "≤ 3 s, ≤ 1 GB",
                 slowest <= 3000 and ours_l[0].browser_peak_mb <= 1024)  # fmt: skip
    if typed_s is not None:
        app = rec.table("In the app (Explore open, a new text typed)", ["", "s"])
        app.add(f"typed → idle, {args.tokens} tokens", typed_s)
        if not args.skip_bertviz:
            ratio = typed_s * 1000 / rows[2][1].painted_ms
            rec.headline(f"app typed → idle ÷ bertviz model_view painted (cold), {args.tokens} tokens", ratio, "×",
                         "≤ 0.03", ratio <= 0.03)  # fmt: skip
        for n, ms in (app_ms or {}).items():
            app.add(f"a new tab, overview painted at {n} (start-up and encode included)", ms / 1000)
    rec.note(f"{os.cpu_count()} CPU cores; load average {load_average()} at the end")
    rec.save()


if __name__ == "__main__":
    main()
