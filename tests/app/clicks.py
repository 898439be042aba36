"""A click on a plotly chart in AppTest: the selection event the browser would send for one point.

AppTest has no plotly widget to click, so the event goes in as the chart's widget state (a JSON string, as
Streamlit's frontend sends it), beside every other widget's current value; the page's `on_select` callback then
runs as it does in the browser.
"""

from __future__ import annotations

import base64
import json

import numpy as np
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest


def chart(at: AppTest, key: str):
    """Return the plotly chart element whose widget key is `key` (a chart with on_select is a widget)."""
    found = [el for el in at.get("plotly_chart") if el.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, f"{len(found)} charts with key {key!r}: {[el.proto.id for el in at.get('plotly_chart')]}"
    return found[0]


def spec(at: AppTest, key: str) -> dict:
    """Return the plotly figure (JSON) of the chart with widget key `key`."""
    return json.loads(chart(at, key).proto.spec)


def decode(arr) -> np.ndarray:
    """Return a figure's array as numpy: plotly may send one as {'dtype', 'bdata', 'shape'} (base64)."""
    if isinstance(arr, dict) and "bdata" in arr:
        shape = tuple(int(s) for s in str(arr.get("shape", "")).split(",") if s.strip()) or None
        a = np.frombuffer(base64.b64decode(arr["bdata"]), dtype=np.dtype(arr["dtype"]))
        return a.reshape(shape) if shape else a
    return np.asarray(arr)


def click(at: AppTest, key: str, trace: int, index: int) -> AppTest:
    """Click point `index` of trace `trace` of chart `key` (its customdata, x and y as the browser reports them)."""
    data = spec(at, key)["data"][trace]
    point = {"curve_number": trace, "point_number": index, "point_index": index}
    for field in ("x", "y", "customdata"):
        values = data.get(field)
        if isinstance(values, dict):  # a numeric array plotly sent as base64 (bdata): the browser reports numbers
            values = decode(values).tolist()
        if isinstance(values, list):
            point[field] = values[index]
    event = {"selection": {"points": [point], "point_indices": [index], "box": [], "lasso": []}}
    states = at._tree.get_widget_states()
    ws = WidgetState(id=chart(at, key).proto.id, string_value=json.dumps(event))
    kept = [w for w in states.widgets if w.id != ws.id]
    del states.widgets[:]
    states.widgets.extend([*kept, ws])
    return at._run(states)
