"""Where one script run of the app spends its time: cProfile around the run that a typed text triggers.

    python bench/profile_app.py                              # Explore, bundled model, a new 128-token text
    python bench/profile_app.py --page heads --tokens 512    # another page, a longer text
    python bench/profile_app.py --model random:bert-base --top 30 --out /tmp/run.prof
    python bench/profile_app.py --spans 30 --tokens 120      # no profiler: CPU per span over 30 new texts

Runs app.py in-process with Streamlit's AppTest (the script thread is this process's, so cProfile sees all of
it): one warm-up run (the model loads), one run on a different text of the same length (warms plotly and the
caches' code paths), then the measured run on a third text the app has not seen, as after a person types it.
Prints the run's wall time and the cumulative time of the pieces of the request path (they nest: the encode runs
inside a cache miss, the PNG inside the overview), then the top functions by own time. What AppTest leaves out:
the websocket, the browser, and reruns the browser itself triggers (bench/serve.py counts those).

--spans N: no profiler (cProfile doubles the cost of Python-heavy pieces and not of C ones, so its shares
mislead): the script thread's own CPU (time.thread_time) of each of N runs, each after a new text, and of the
SPANS below (a wrapped function's thread time at its outermost call; spans nest), as means and medians. The
script cache is kept between runs, as a server keeps it (AppTest recompiles the page on every run otherwise).
The encode runs in the model's batching worker: the script thread only waits for it, which costs it no CPU.
Prints only (bench/NOTES.md keeps what it found).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGES = {
    "explore": "app_pages/explore.py",
    "heads": "app_pages/heads.py",
    "inside_head": "app_pages/inside_head.py",
    "masks": "app_pages/masks.py",
    "troubleshooting": "app_pages/troubleshooting.py",
}
# (label, a piece of the file's path, the function's name): cumulative time of each, as pstats counts it.
PIECES = [
    ("encode (Encoder.encode_batch)", "models/encoder.py", "encode_batch"),
    ("cache: hashing arguments", "streamlit/runtime/caching/hashing.py", "update_hash"),
    ("cache_data: storing a result (pickle)", "streamlit/runtime/caching/cache_data_api.py", "write_result"),
    ("cache_data: reading a result (unpickled copy)", "streamlit/runtime/caching/cache_data_api.py", "read_result"),
    ("overview PNG (render_mosaic)", "viz/overview.py", "render_mosaic"),
    ("  of which PNG encoding (PIL save)", "PIL/Image.py", "save"),
    ("figures built (viz: overview)", "viz/overview.py", "overview_figure"),
    ("figures built (viz: heatmap)", "viz/heatmap.py", "head_heatmap"),
    ("figures built (viz: layer)", "viz/layer.py", "layer_figure"),
    ("figures built (viz: lines)", "viz/lines.py", "lines_figure"),
    ("figure serialisation (plotly to_json)", "plotly/io/_json.py", "to_json_plotly"),
    ("st.plotly_chart, serialisation included", "streamlit/elements/plotly_chart.py", "plotly_chart"),
    ("rollout (every view: exports)", "models/analysis/rollout.py", "attention_rollout"),
    ("export panel (Explore)", "app_pages/explore.py", "_export"),
    ("head report (Heads)", "models/analysis/heads.py", "analyse"),
    ("importance (Heads)", "models/analysis/importance.py", "head_importance"),
    ("URL sync (ui.state.sync_url)", "ui/state.py", "sync_url"),
    ("sidebar (ui.sidebar.render)", "ui/sidebar.py", "render"),
    ("script compile (AppTest only: a server keeps it)", "scriptrunner/script_cache.py", "get_bytecode"),
]


# (label, module, attribute path): the spans --spans measures. `streamlit.plotly_chart` is the bound st.* command.
SPANS = [
    ("sidebar (ui.sidebar.render)", "ui.sidebar", "render"),
    ("maps for the text (current_maps; the encode is waited for)", "ui.sidebar", "current_maps"),
    ("result cache weighing new results (nbytes)", "ui.results", "nbytes"),
    ("overview mosaic (render_mosaic)", "viz.overview", "render_mosaic"),
    ("  of which the PNG (palette_png)", "viz.overview", "palette_png"),
    ("overview figure (overview_figure)", "viz.overview", "overview_figure"),
    ("st.plotly_chart", "streamlit", "plotly_chart"),
    ("  figure to dict (BaseFigure.to_dict)", "plotly.basedatatypes", "BaseFigure.to_dict"),
    ("  figure to JSON (to_json_plotly)", "plotly.io._json", "to_json_plotly"),
    ("the page (StreamlitPage.run)", "streamlit.navigation.page", "StreamlitPage.run"),
    ("every element's proto enqueued (_enqueue)", "streamlit.delta_generator", "DeltaGenerator._enqueue"),
    ("st.columns", "streamlit", "columns"),
    ("URL sync (ui.state.sync_url)", "ui.state", "sync_url"),
]


def spans(args: argparse.Namespace) -> None:
    """--spans: the script thread's CPU per run after a new text, split by SPANS (see the module's docstring)."""
    import collections
    import functools
    import importlib
    import statistics
    import threading

    from streamlit.runtime.scriptrunner import script_cache
    from streamlit.runtime.scriptrunner.script_runner import ScriptRunner
    from streamlit.testing.v1 import AppTest

    from bench.serve import texts_of
    from models import bundled_model_dir
    from models.loading import load_tokenizer

    now: collections.Counter[str] = collections.Counter()
    per_span: dict[str, list[float]] = collections.defaultdict(list)
    totals: list[float] = []
    depth = threading.local()
    on = [False]

    def wrap(label: str, fn):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def timed(*a, **k):  # type: ignore[no-untyped-def]
            level = getattr(depth, label, 0)
            setattr(depth, label, level + 1)
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                setattr(depth, label, level)
                if level == 0 and on[0]:
                    now[label] += time.thread_time() - t0

        return timed

    for label, module, path in SPANS:
        owner = importlib.import_module(module)
        *parents, name = path.split(".")
        for p in parents:
            owner = getattr(owner, p)
        original = getattr(owner, name)
        setattr(owner, name, wrap(label, original))
        if not parents:  # modules that imported the function by name call it through their own global
            for m in list(sys.modules.values()):
                if getattr(m, "__dict__", {}).get(name) is original:
                    m.__dict__[name] = getattr(owner, name)

    shared: dict = {}
    script_init = script_cache.ScriptCache.__init__

    def keep_compiled(self) -> None:  # type: ignore[no-untyped-def]
        script_init(self)
        self._cache = shared

    script_cache.ScriptCache.__init__ = keep_compiled  # type: ignore[method-assign]
    run_script = ScriptRunner._run_script

    def measured(self, rerun_data) -> None:  # type: ignore[no-untyped-def]
        now.clear()
        t0 = time.thread_time()
        try:
            run_script(self, rerun_data)
        finally:
            if on[0]:
                totals.append(time.thread_time() - t0)
                for label, *_ in SPANS:
                    per_span[label].append(now[label])

    ScriptRunner._run_script = measured  # type: ignore[method-assign]
    all_texts = texts_of(load_tokenizer(bundled_model_dir()), args.tokens, args.spans + 3, seed=args.tokens)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params["model"] = args.model
    at.query_params["text"] = all_texts[0]
    at.run()
    if args.page != "explore":
        at.switch_page(PAGES[args.page]).run()
    for text in all_texts[1:3]:  # warm: plotly, the caches' code paths
        at.sidebar.text_area(key="text").set_value(text).run()
    on[0] = True
    for text in all_texts[3:]:
        at.sidebar.text_area(key="text").set_value(text).run()
        assert not at.exception, at.exception
    mean, median = statistics.mean, statistics.median
    print(
        f"{args.page}, {args.model}: {len(totals)} new {args.tokens}-token texts, script thread CPU per run "
        f"{mean(totals) * 1e3:.1f} ms (median {median(totals) * 1e3:.1f}); load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'span (nested)':<60} {'mean ms':>8} {'share':>6} {'median':>7}")
    for label, *_ in SPANS:
        xs = per_span[label]
        if any(xs):
            print(f"{label:<60} {mean(xs) * 1e3:>8.2f} {100 * mean(xs) / mean(totals):>5.0f}% {median(xs) * 1e3:>7.2f}")


def texts(tokenizer, n_tokens: int) -> list[str]:
    from bench.serve import texts_of

    return texts_of(tokenizer, n_tokens, 3, seed=7 * n_tokens)


def cumulative(stats: pstats.Stats, path_part: str, name: str) -> tuple[float, int]:
    """Return (cumulative seconds, calls) of the functions called `name` in files whose path has path_part."""
    total, calls = 0.0, 0
    for (file, _line, func), (_cc, nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if func == name and path_part in file.replace(os.sep, "/"):
            total += ct
            calls += nc
    return total, calls


def profile_script_runs(profiles: list[cProfile.Profile]) -> None:
    """Make every script run (Streamlit runs scripts in their own thread) record into a new profile in `profiles`."""
    from streamlit.runtime.scriptrunner.script_runner import ScriptRunner

    original = ScriptRunner._run_script

    def run_script(self, rerun_data) -> None:  # type: ignore[no-untyped-def]
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()
        try:
            original(self, rerun_data)
        finally:
            profile.disable()

    ScriptRunner._run_script = run_script  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--page", default="explore", choices=sorted(PAGES))
    ap.add_argument(
        "--action",
        choices=("type", "layer"),
        default="type",
        help="type: the run after a new text is typed; layer: the run after the layer slider moves (same text)",
    )
    ap.add_argument("--top", type=int, default=15, help="functions by own time to list")
    ap.add_argument("--out", help="also write the raw profile here (for snakeviz, pstats)")
    ap.add_argument("--spans", type=int, default=0, help="no profiler: CPU per span over this many new texts")
    args = ap.parse_args()
    if args.spans > 0:
        spans(args)
        return

    from streamlit.testing.v1 import AppTest

    from models import bundled_model_dir
    from models.loading import load_tokenizer

    warm, second, measured = texts(load_tokenizer(bundled_model_dir()), args.tokens)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params["model"] = args.model
    at.query_params["text"] = warm
    at.run()
    if args.page != "explore":
        at.switch_page(PAGES[args.page]).run()
    at.sidebar.text_area(key="text").set_value(second).run()
    assert not at.exception, at.exception

    if args.action == "type":
        at.sidebar.text_area(key="text").set_value(measured)
    else:
        at.slider(key="layer").set_value(1 - int(at.slider(key="layer").value))
    profiles: list[cProfile.Profile] = []
    profile_script_runs(profiles)
    t0 = time.perf_counter()
    at.run()
    wall = time.perf_counter() - t0
    assert not at.exception, at.exception
    assert len(profiles) == 1, f"{len(profiles)} script runs"

    stats = pstats.Stats(profiles[0])
    wall = stats.total_tt  # type: ignore[attr-defined]  # the script thread's own time, not AppTest's polling
    if args.out:
        stats.dump_stats(args.out)
    print(
        (
            f"one script run of {args.page} after typing a new {args.tokens}-token text, model {args.model}: "
            if args.action == "type"
            else f"one script run of {args.page} after moving the layer slider ({args.tokens} tokens, {args.model}): "
        )
        + f"{wall * 1e3:.0f} ms in the script thread; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'piece of the request path (cumulative, nested)':<44} {'ms':>8} {'share':>6} {'calls':>6}")
    from bench.results import Record, load_average, variant

    rec = Record(
        variant("profile_app", args.page if args.page != "explore" else None, None if args.action == "type" else
                args.action, None if args.model == "minilm" else args.model),
        "One script run of a page under cProfile (Streamlit's AppTest, in-process)",
    )  # fmt: skip
    table = rec.table(
        f"{args.page}, {args.model}, {args.tokens} tokens, after "
        + ("typing a new text" if args.action == "type" else "moving the layer slider")
        + f": {wall * 1e3:.0f} ms in the script thread",
        ["piece of the request path (cumulative, nested)", "ms", "share %", "calls"],
    )
    for label, path_part, name in PIECES:
        seconds, calls = cumulative(stats, path_part, name)
        if calls:
            print(f"{label:<44} {seconds * 1e3:>8.1f} {100 * seconds / wall:>5.0f}% {calls:>6}")
            table.add(label, seconds * 1e3, 100 * seconds / wall, calls)
    rec.note(f"AppTest recompiles the page on every run; load average {load_average()} at the end")
    rec.save()
    print(f"\ntop {args.top} functions by own time:")
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
