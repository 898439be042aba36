"""docs/benchmarks.md, its plots and README's headline table, from bench/results/*.json: `python tools/bench_docs.py`.

Every bench writes its figures with bench.results (tables, headline figures, series, notes, with the machine,
date, command and commit); this renders them, so no figure is typed by hand. One section per result file (its
name is the section's anchor: benchmarks.md#encoder), a table per table, an SVG line plot per series
(docs/img/bench-NAME-K.svg, drawn here from the numbers: no plotting library), then bench/NOTES.md. README gets the
first headline figure of each file between its `<!-- headline:begin -->` and `<!-- headline:end -->` lines.
`--check` exits 1 when any of these differs from what this would write (tests/docs/test_generated.py runs it).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from html import escape
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
NOTES = ROOT / "bench" / "NOTES.md"
PAGE = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"
README = ROOT / "README.md"
BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"
# Every bench's section, in this order, with the command that makes its file: a bench not run yet still has its
# section (and anchor), saying so. Any other result file follows, by name.
PLANNED = {
    "encoder": "python bench/encoder.py",
    "encoder-minilm": "python bench/encoder.py --model minilm",
    "decoder": "python bench/decoder.py",
    "long_context": "python bench/long_context.py",
    "compare": "python bench/compare.py",
    "train": "python bench/train.py",
    "memory": "python bench/memory.py",
    "heads": "python bench/heads.py",
    "masks": "python bench/masks.py",
    "attention_file": "python bench/attention_file.py",
    "render": "python bench/render.py",
    "serve": "python bench/serve.py",
    "many": "python bench/many.py",
    "corpus_scale": "python bench/corpus_scale.py",
    "long_lab": "python bench/long_lab.py",
    "hostile": "python bench/hostile.py",
    "profile_server": "python bench/profile_server.py",
    "profile_app": "python bench/profile_app.py",
}
ORDER = list(PLANNED)
# The code each bench measures: a result whose commit is older than the last change to any of these paths was
# measured on code that no longer runs, so its figures are not shown (the section says so and names the rerun).
FORWARD = ["models/attention.py", "models/network.py", "models/bert.py", "models/gpt2.py", "models/llama.py"]
MEASURES: dict[str, list[str]] = {
    "encoder": [*FORWARD, "models/encoder.py"],
    "encoder-minilm": [*FORWARD, "models/encoder.py"],
    "decoder": [*FORWARD, "models/encoder.py", "models/lecture/generate.py"],
    "long_context": [*FORWARD, "models/maps.py"],
    "compare": [*FORWARD, "models/analysis/compare.py", "models/cli/compare.py"],
    "train": ["models/training"],
    "memory": ["models/lecture/memory.py"],
    "heads": [*FORWARD, "models/analysis/heads.py"],
    "masks": ["models/masks", "models/analysis/mask_checker.py"],
    "attention_file": ["models/attention_file.py"],
    "render": ["viz"],
    "serve": [*FORWARD, "ui", "app_pages"],
    "many": [*FORWARD, "models/encoder.py", "models/analysis", "models/cli", "ui", "app_pages"],
    "corpus_scale": [
        *FORWARD,
        "models/encoder.py",
        "models/analysis/corpus.py",
        "models/analysis/corpus_ray.py",
        "models/cli/stats.py",
    ],
    "long_lab": [*FORWARD, "models/analysis/cache.py", "models/analysis/needle.py", "models/masks/predicates.py"],
    "hostile": ["models/attention_file.py", "models/files.py", "models/settings.py"],
    "profile_server": [*FORWARD, "ui", "app_pages"],
    "profile_app": ["ui", "app_pages"],
}
QUIET_LOAD = 1.5  # bench.results refuses to write above it without --allow-load
COLOURS = ["#1f4e9c", "#d1495b", "#2a9d8f", "#e9a23b", "#6a4c93"]


def load() -> list[dict[str, Any]]:
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(RESULTS.glob("*.json"))]
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(docs, key=lambda d: (rank.get(d["bench"], len(ORDER)), d["bench"]))


def fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if isinstance(v, float):
        if v == 0:
            return "0"
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.0f}"
        if a >= 10:
            return f"{v:.1f}"
        if a >= 0.01:
            return f"{v:.2f}"
        return f"{v:.2g}"
    return str(v).replace("|", "\\|")


def under_load(doc: dict[str, Any]) -> bool:
    """True when the run says it was measured under load, or its load from other work (older files: its 1-minute
    load average at the end) exceeded 1.5."""
    if doc.get("measured_under_load"):
        return True
    if "load_from_other_work" in doc:  # written by bench.results: the start's load, or other processes' CPU rate
        return float(doc["load_from_other_work"]) > QUIET_LOAD
    m = doc.get("machine", {})
    try:
        return float(str(m.get("load_average", "0")).split()[0]) > QUIET_LOAD
    except ValueError:
        return False


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)


def stale(doc: dict[str, Any]) -> str | None:
    """Return why a result no longer describes the code (its commit predates the last change to what it measures).

    None when it is current, or when git cannot tell (no repository, no history): the check needs both commits.
    """
    paths = MEASURES.get(doc["bench"])
    commit = str(doc.get("commit", "")).split("+")[0]
    if not paths or not commit:
        return None
    try:
        last = _git("log", "-1", "--format=%h", "--", *paths)
        if last.returncode != 0 or not last.stdout.strip():
            return None
        known = _git("cat-file", "-e", f"{commit}^{{commit}}")
        if known.returncode != 0:
            return f"its commit {commit} is not in this repository's history"
        if _git("merge-base", "--is-ancestor", last.stdout.strip(), commit).returncode != 0:
            return f"measured at {commit}, before the last change to the code it measures ({last.stdout.strip()})"
    except (OSError, subprocess.SubprocessError):
        return None
    return None


def machine_line(doc: dict[str, Any]) -> str:
    m = doc.get("machine", {})
    parts = [m.get("cpu", "?"), f"{m.get('cores', '?')} cores"]
    if m.get("gpu"):
        parts.append(m["gpu"])
    if m.get("torch"):
        parts.append(f"torch {m['torch']} with {m.get('threads', '?')} threads")
    parts.append(f"load average {m.get('load_average', '?')} at the end")
    if "load_from_other_work" in doc:
        parts.append(f"load from other work {doc['load_from_other_work']}")
    return ", ".join(str(p) for p in parts)


def table_md(t: dict[str, Any]) -> list[str]:
    out = [f"**{t['title']}**", "", "| " + " | ".join(fmt(c) for c in t["columns"]) + " |"]
    numeric = [
        all(isinstance(row[i], int | float) or row[i] is None for row in t["rows"]) for i in range(len(t["columns"]))
    ]
    out.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
    out += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in t["rows"]]
    return out + [""]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Return round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    ticks = [math.floor(lo / step) * step]
    while ticks[-1] < hi - 1e-9 * step:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def svg_plot(series: dict[str, Any]) -> str:
    """A line plot of one series as SVG text: x against each line, axes with round ticks, a legend."""
    W, H, L, R, T, B = 640, 360, 64, 16, 36, 48
    xs = [float(x) for x in series["x"]]
    lines = {k: [None if y is None else float(y) for y in ys] for k, ys in series["lines"].items()}
    ys_all = [y for ys in lines.values() for y in ys if y is not None]
    xt = _ticks(min(xs), max(xs))
    yt = _ticks(0.0, max(ys_all) if ys_all else 1.0)
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]

    def px(x: float) -> float:
        return L + (x - x0) / ((x1 - x0) or 1) * (W - L - R)

    def py(y: float) -> float:
        return H - B - (y - y0) / ((y1 - y0) or 1) * (H - T - B)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{escape(series["title"])}</text>',
    ]
    for v in yt:
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{L - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
    for v in xt:
        out.append(f'<line x1="{px(v):.1f}" x2="{px(v):.1f}" y1="{H - B}" y2="{H - B + 4}" stroke="#333"/>')
        out.append(f'<text x="{px(v):.1f}" y="{H - B + 18}" text-anchor="middle">{fmt(v)}</text>')
    out.append(f'<line x1="{L}" x2="{W - R}" y1="{H - B}" y2="{H - B}" stroke="#333"/>')
    out.append(f'<line x1="{L}" x2="{L}" y1="{T}" y2="{H - B}" stroke="#333"/>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">{escape(series["x_label"])}</text>')
    out.append(
        f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 16 {(T + H - B) / 2})">'
        f"{escape(series['y_label'])}</text>"
    )
    for i, (name, ys) in enumerate(lines.items()):
        colour = COLOURS[i % len(COLOURS)]
        pts = [(px(x), py(y)) for x, y in zip(xs, ys, strict=True) if y is not None]
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
            + " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            + '"/>'
        )
        out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{colour}"/>' for a, b in pts]
        ly = T + 6 + 16 * i
        out.append(f'<line x1="{L + 12}" x2="{L + 32}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{L + 38}" y="{ly + 4}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def headline_rows(docs: list[dict[str, Any]], first_only: bool) -> list[str]:
    """One row per headline figure of the current results; a figure measured under load says so beside its value."""
    rows = []
    for d in docs:
        if d.get("stale"):
            continue
        heads = d["figures"].get("headline", [])
        mark = " (measured under load)" if under_load(d) else ""
        for h in heads[:1] if first_only else heads:
            met = "" if h.get("met") is None else (" ✓" if h["met"] else " ✗")
            target = (h.get("target") or "") + met
            rows.append(
                f"| {fmt(h['label'])} | {fmt(h['value'])} {h.get('unit') or ''}{mark} | {target.strip() or '–'} | "
                f"`{d['command']}` |"
            )
    return rows


def stale_rows(docs: list[dict[str, Any]]) -> list[str]:
    return [f"| {d['bench']}: not shown, {d['stale']} | – | – | `{d['command']}` |" for d in docs if d.get("stale")]


def render(docs: list[dict[str, Any]]) -> tuple[str, dict[Path, str], str]:
    """Return (the page, {svg path: svg text}, README's headline block)."""
    docs = [{**d, "stale": stale(d)} for d in docs]
    loaded = [d["bench"] for d in docs if under_load(d) and not d["stale"]]
    page = [
        "# Benchmarks",
        "",
        "<!-- Generated by tools/bench_docs.py from bench/results/*.json and bench/NOTES.md: rerun a bench, then",
        "     the tool; do not edit this file by hand. -->",
        "",
        "Each section is one bench run: the command that made it, when, on what, and every figure it printed. Ratios",
        "come from runs interleaved in one process (both sides see the same machine); targets are printed with them",
        "(✓ met, ✗ not met). Rerun any of them with its command; `python tools/bench_docs.py` then rewrites this page",
        "and README's headline table.",
        "",
    ]
    if loaded:
        page += [
            '!!! note "Measured under load"',
            f"    These runs shared their machine with other work (1-minute load average above {QUIET_LOAD} in: "
            f"{', '.join(loaded)}). Their times are slower and noisier than a quiet machine's; the ratios, from",
            "    interleaved runs, hold better. A rerun on a quiet machine replaces them.",
            "",
        ]
    page += ["## Headline figures", "", "| figure | measured | target | command |", "|---|---:|---|---|"]
    page += headline_rows(docs, first_only=False) + stale_rows(docs) + [""]
    svgs: dict[Path, str] = {}
    have = {d["bench"] for d in docs}
    missing = [{"bench": name, "missing": True, "command": cmd} for name, cmd in PLANNED.items() if name not in have]
    rank = {name: i for i, name in enumerate(ORDER)}
    for d in sorted(docs + missing, key=lambda d: (rank.get(d["bench"], len(ORDER)), d["bench"])):
        if d.get("missing"):
            page += [
                f"## {d['bench']}",
                "",
                f"Not run yet: `{d['command']}` writes `bench/results/{d['bench']}.json`.",
                "",
            ]
            continue
        f = d["figures"]
        page += [f"## {d['bench']}", "", f"{f.get('title', '')}.", ""]
        if d["stale"]:
            page += [f"Not shown: {d['stale']}. Rerun `{d['command']}` on a quiet machine.", ""]
            continue
        if under_load(d):
            page += ["**Measured under load**: every figure below is slower and noisier than a quiet machine's.", ""]
        page += [f"`{d['command']}` — {d['date']}, commit `{d['commit']}`; {machine_line(d)}.", ""]
        for t in f.get("tables", []):
            page += table_md(t)
        for i, s in enumerate(f.get("series", [])):
            path = IMG / f"bench-{d['bench']}-{i}.svg"
            svgs[path] = svg_plot(s)
            page += [f"![{s['title']}](img/{path.name})", ""]
        for n in f.get("notes", []):
            page += [f"- {n}"]
        if f.get("notes"):
            page.append("")
    page += ["", NOTES.read_text(encoding="utf-8").strip(), ""] if NOTES.is_file() else []
    block = [
        BEGIN,
        "| figure | measured | target | command |",
        "|---|---:|---|---|",
        *headline_rows(docs, first_only=True),
        *stale_rows(docs),
        END,
    ]
    return "\n".join(page).rstrip() + "\n", svgs, "\n".join(block)


def readme_with(block: str) -> str:
    text = README.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md has no {BEGIN} … {END} lines for the headline table")
    head, rest = text.split(BEGIN, 1)
    return head + block + rest.split(END, 1)[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if any generated file is not what this would write")
    args = ap.parse_args()
    page, svgs, block = render(load())
    wanted = {PAGE: page, README: readme_with(block), **svgs}
    stale_svgs = [p for p in IMG.glob("bench-*.svg") if p not in svgs]
    if args.check:
        stale = [p for p, text in wanted.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
        stale += stale_svgs
        if stale:
            names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
            print(f"stale: {names}: run python tools/bench_docs.py", file=sys.stderr)
            return 1
        return 0
    IMG.mkdir(parents=True, exist_ok=True)
    for p in stale_svgs:
        p.unlink()
    for p, text in wanted.items():
        p.write_text(text, encoding="utf-8")
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
