"""Exports: the plotly menu's image options, attentions as NPZ / JSON, and a view as one standalone HTML file.

Nothing here loads from the network: the HTML inlines plotly.js once (1.5 MB for cartesian figures, else 4.8 MB)
and every figure after it, so the file opens offline, on a lecture-hall laptop, years later.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs, get_plotlyjs_version

IMAGE_FORMATS = ("png", "svg")
VENDOR = Path(__file__).resolve().parent / "vendor"
# Trace types inside plotly.js's cartesian partial bundle (its README lists them).
CARTESIAN_TRACES = frozenset(
    {
        "bar",
        "box",
        "contour",
        "heatmap",
        "histogram",
        "histogram2d",
        "histogram2dcontour",
        "image",
        "pie",
        "scatter",
        "scatterternary",
        "violin",
    }
)


def figure_config(image_format: str = "png", filename: str = "attention", scale: int = 2) -> dict[str, Any]:
    """Return the plotly config for st.plotly_chart / to_html: the camera button saves PNG (at scale ×) or SVG."""
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image format {image_format!r}: use one of {', '.join(IMAGE_FORMATS)}")
    return {
        "displaylogo": False,
        "toImageButtonOptions": {
            "format": image_format,
            "filename": filename,
            "scale": scale if image_format == "png" else 1,
        },
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Return a compressed NPZ of the arrays; refuses object arrays so that np.load(allow_pickle=False) reads it."""
    clean: dict[str, Any] = {}  # Any: numpy's stub would read a value as savez's allow_pickle flag
    for name, value in arrays.items():
        a = np.asarray(value)
        if a.dtype == object:
            raise TypeError(f"{name} is an object array: it would need pickle to load; convert it to str or numbers")
        clean[name] = a
    buf = io.BytesIO()
    np.savez_compressed(buf, **clean)
    return buf.getvalue()


def json_text(doc: Mapping[str, Any], decimals: int = 6) -> str:
    """Return JSON of a dict whose values may be numpy arrays (floats rounded to `decimals`)."""

    def plain(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return np.round(v, decimals).tolist() if v.dtype.kind == "f" else v.tolist()
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, Mapping):
            return {k: plain(x) for k, x in v.items()}
        return v

    return json.dumps({k: plain(v) for k, v in doc.items()}, ensure_ascii=False, separators=(",", ":"))


@cache
def _cartesian_bundle() -> str | None:
    path = VENDOR / f"plotly-cartesian-{get_plotlyjs_version()}.min.js"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def plotly_bundle(figures: Sequence[go.Figure]) -> tuple[str, str]:
    """Return (name, JavaScript) of the smallest plotly.js that draws every figure: the cartesian partial bundle
    (vendored, same version as the plotly package's) when all traces are cartesian, else the full bundle."""
    kinds = {trace.type for fig in figures for trace in fig.data}
    return plotly_js(full=not kinds <= CARTESIAN_TRACES)


def plotly_js(full: bool = False) -> tuple[str, str]:
    """Return (name, JavaScript) of the cartesian partial bundle, or of the full one (also where it is missing)."""
    cartesian = None if full else _cartesian_bundle()
    if cartesian is not None:
        return f"plotly.js {get_plotlyjs_version()} (cartesian)", cartesian
    return f"plotly.js {get_plotlyjs_version()}", get_plotlyjs()


_CSS = """
body { font-family: "Source Sans Pro", "Noto Sans CJK SC", "Helvetica Neue", Arial, sans-serif; margin: 24px 32px;
       color: #262730; }
h1 { font-size: 28px; margin: 0 0 8px; }
h2 { font-size: 20px; margin: 28px 0 4px; }
table.facts { border-collapse: collapse; margin: 8px 0 16px; }
table.facts td { padding: 2px 14px 2px 0; vertical-align: top; }
table.facts td:first-child { color: #6b6b7b; white-space: nowrap; }
p.note { color: #6b6b7b; max-width: 70em; }
footer { margin-top: 32px; color: #9a9aa6; font-size: 13px; }
"""


def standalone_html(
    title: str,
    figures: Sequence[tuple[str, go.Figure]],
    facts: Sequence[tuple[str, str]] = (),
    notes: Sequence[str] = (),
    lang: str = "en",
    config: Mapping[str, Any] | None = None,
    footer: str = "Attention Lens",
) -> str:
    """Return one HTML document holding the figures (headings above them), a facts table and notes, offline.

    plotly.js is inlined once in the head (see plotly_bundle), never loaded from a CDN.
    """
    bundle_name, bundle = plotly_bundle([fig for _, fig in figures])
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{html.escape(lang)}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style>",
        f"<!-- {bundle_name}, MIT license, Plotly Inc. -->\n<script>{bundle}</script></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if facts:
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in facts)
        parts.append(f'<table class="facts">{rows}</table>')
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in notes]
    for heading, fig in figures:
        own_title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else ""
        if heading and heading != own_title:  # the figure's own title already names it
            parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.append(
            fig.to_html(
                full_html=False, include_plotlyjs=False, config=dict(config or figure_config()), default_width="100%"
            )
        )
    parts.append(f"<footer>{html.escape(footer)}</footer></body></html>")
    return "\n".join(parts)
