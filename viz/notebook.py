"""Figures for notebooks: a plotly figure that draws in Jupyter, JupyterLab, VS Code and Colab with no CDN.

The figure offers two renderings and the notebook picks: plotly's own JSON mimetype (JupyterLab, Notebook 7 and
VS Code draw it with the plotly.js they ship) and HTML with the vendored plotly.js inlined (Colab and classic
Notebook, which sandbox or lack the mimetype). Nothing is loaded from the network in either case.
"""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from .export import figure_config, plotly_bundle

# plotly.js is a UMD bundle: where require.js is present (classic Notebook) it would define an anonymous AMD
# module and never set window.Plotly. Hiding define/module/exports makes it set the global; it loads once per page.
_LOADER = "<script>if (!window.Plotly) {{(function (define, module, exports) {{\n{bundle}\n}}).call(window);}}</script>"


class NotebookFigure(go.Figure):
    """A plotly Figure whose notebook display works offline everywhere (see the module docstring)."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **kwargs: Any) -> dict[str, Any]:
        fig = json.loads(pio.to_json(self, validate=False, remove_uids=False))
        fig["config"] = figure_config()
        return {"application/vnd.plotly.v1+json": fig, "text/html": self._repr_html_()}

    def _ipython_display_(self) -> None:
        # plotly's own hook shows the figure through its default renderer (one format, chosen by guessing the
        # frontend); ours hands IPython both formats and lets the frontend choose.
        from IPython.display import display  # IPython exists wherever this is called; not a dependency otherwise

        display(self._repr_mimebundle_(), raw=True)

    def _repr_html_(self) -> str:
        return notebook_html(self)


def notebook_html(fig: go.Figure) -> str:
    """Return an HTML fragment that draws fig with plotly.js inlined (loaded once per page), for any notebook."""
    _, bundle = plotly_bundle([fig])
    div = fig.to_html(full_html=False, include_plotlyjs=False, config=figure_config(), default_width="100%")
    return _LOADER.format(bundle=bundle) + div
