"""Figures for notebooks: a plotly figure that draws in Jupyter, JupyterLab, VS Code and Colab with no CDN,
carrying plotly.js once per notebook rather than once per figure.

The figure offers two renderings and the notebook picks: plotly's own JSON mimetype (JupyterLab, Notebook 7 and
VS Code draw it with the plotly.js they ship) and HTML (classic Notebook, nbconvert's HTML, and JupyterLab where
plotly's extension is missing). The HTML needs plotly.js on the page; it comes once:

- `init_notebook()` (the example notebook's first cell) shows the vendored plotly.js as one output, every time
  it runs, so a saved notebook keeps its one copy however its cells were rerun;
- without it, the first figure a kernel shows carries plotly.js itself, and later ones draw with that copy;
- Colab puts every output in its own frame, so there each figure carries its own copy.

A figure's HTML draws as soon as plotly.js is on the page (it waits for the copy above it), so a saved notebook
that is reopened and trusted draws every figure again, interactive; untrusted, Jupyter runs no script at all and
shows the text the HTML says instead. Nothing is loaded from the network in any case.
"""

from __future__ import annotations

import html
import json
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from .export import CARTESIAN_TRACES, figure_config, plotly_js

# plotly.js is a UMD bundle: where require.js is present (classic Notebook) it would define an anonymous AMD
# module and never set window.Plotly. Hiding define/module/exports makes it set the global. A page keeps the first
# copy, unless a figure needs the full bundle and only the cartesian one is there.
_LOADER = (
    "<script>if (!window.Plotly || ({full} && window.attentionLensPlotly !== 'full')) {{"
    "(function (define, module, exports) {{\n{bundle}\n}}).call(window);"
    " window.attentionLensPlotly = {kind};}}</script>"
)
# Draws the figure once window.Plotly exists: at once, or when the output that loads it has run (JupyterLab
# renders outputs as they scroll into view). After WAIT_MS without it, the figure says how to get it back.
WAIT_MS = 30_000
_DRAW = """<div id="{id}" class="plotly-graph-div" style="height:{height}px; width:100%;">{missing}</div>
<script>(function () {{
  var fig = {fig};
  var waited = 0;
  function draw() {{
    var el = document.getElementById("{id}");
    if (!el) return;
    if (window.Plotly) {{ el.textContent = ""; window.Plotly.newPlot(el, fig.data, fig.layout, fig.config); return; }}
    if ((waited += 100) < {wait}) setTimeout(draw, 100);
  }}
  draw();
}})();</script>"""
MISSING = (
    "This figure is drawn by plotly.js, which the notebook's first cell (lens.init_notebook()) puts on the page: "
    "run that cell, or trust the notebook (File → Trust Notebook) and reopen it."
)


@dataclass
class _Page:
    """What this kernel has put on the notebook's page: which plotly.js bundle, if any."""

    plotly: str | None = None  # "cartesian" or "full" once a copy was shown


PAGE = _Page()


def _in_colab() -> bool:
    return "google.colab" in sys.modules


def _loader(full: bool) -> str:
    """Return the HTML that puts the vendored plotly.js on the page (the cartesian bundle, or the full one)."""
    name, bundle = plotly_js(full)
    kind = "full" if full else "cartesian"
    return f"<!-- {name}, MIT license, Plotly Inc. -->" + _LOADER.format(
        bundle=bundle, full="true" if full else "false", kind=json.dumps(kind)
    )


class PlotlyLoader:
    """The output of `init_notebook()`: plotly.js for every figure after it, and one visible line saying so."""

    def __init__(self, full: bool = False):
        self.full = full

    def _repr_html_(self) -> str:
        PAGE.plotly = "full" if self.full else (PAGE.plotly or "cartesian")
        name, _ = plotly_js(self.full)
        note = f"{name} is on this page, for the figures below (offline, once per notebook)."
        return _loader(self.full) + f'<p style="color:#6b6b7b; font-size:12px">{html.escape(note)}</p>'

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # a terminal IPython has no page: say so, briefly
        p.text("plotly.js is put on the page by notebooks only (HTML output)")


class NotebookFigure(go.Figure):
    """A plotly Figure whose notebook display works offline everywhere (see the module docstring)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **kwargs: Any) -> dict[str, Any]:
        fig = _figure_json(self)
        return {"application/vnd.plotly.v1+json": fig, "text/html": notebook_html(self, fig)}

    def _ipython_display_(self) -> None:
        # plotly's own hook shows the figure through its default renderer (one format, chosen by guessing the
        # frontend); ours hands IPython both formats and lets the frontend choose.
        from IPython.display import display  # IPython exists wherever this is called; not a dependency otherwise

        display(self._repr_mimebundle_(), raw=True)

    def _repr_html_(self) -> str:
        return notebook_html(self)


def _figure_json(fig: go.Figure) -> dict[str, Any]:
    out = json.loads(pio.to_json(fig, validate=False, remove_uids=False))
    out["config"] = figure_config()
    return out


def notebook_html(fig: go.Figure, spec: dict[str, Any] | None = None) -> str:
    """Return an HTML fragment that draws fig, with plotly.js first where this page has none yet (see module).

    spec: the figure's JSON (data, layout, config) when the caller has it already.
    """
    spec = spec if spec is not None else _figure_json(fig)
    full = not {trace.type for trace in fig.data} <= CARTESIAN_TRACES
    have = PAGE.plotly
    loader = ""
    if _in_colab() or have is None or (full and have != "full"):
        loader = _loader(full)
        if not _in_colab():
            PAGE.plotly = "full" if full else "cartesian"
    height = spec.get("layout", {}).get("height") or 500
    div = _DRAW.format(
        id=f"al-{uuid.uuid4().hex[:12]}",
        height=int(height),
        fig=json.dumps(spec, separators=(",", ":")).replace("</", "<\\/"),
        wait=WAIT_MS,
        missing=html.escape(MISSING),
    )
    return loader + div
