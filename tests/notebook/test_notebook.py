"""The notebook entry point: `lens.show` on every layout, figures that render offline, and the example notebook
executed headless (nbclient + ipykernel) with plotly figures in its outputs."""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from nbclient import NotebookClient

import lens
from lens import AttentionNote, show
from models.attention_file import AttentionFileError
from tests.core.test_attention_file import REF, TOKENS, softmax_maps

ROOT = Path(__file__).resolve().parents[2]
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def test_show_takes_numpy_torch_and_transformers_tuple_alike():
    t = torch.from_numpy(REF).requires_grad_(True)
    figs = [
        show(REF, TOKENS, view="head", layer=1, head=2),
        show(t, TOKENS, view="head", layer=1, head=2),
        show(tuple(t[i][None] for i in range(2)), TOKENS, view="head", layer=1, head=2),
    ]
    for fig in figs:
        z = np.asarray(fig.data[0].z, dtype=np.float32)
        np.testing.assert_allclose(z, REF[1, 2], atol=1e-6)


PLOTLY_COPY = re.compile(r"\* plotly\.js (\(cartesian - minified\) )?v\d")  # the banner atop each bundle
EXAMPLE = ROOT / "examples" / "notebook.ipynb"
MAX_SAVED_BYTES = 2_000_000  # issue 25: the executed example notebook, saved


@pytest.fixture
def fresh_page(monkeypatch):
    """A notebook page with no plotly.js yet (a new kernel), outside Colab."""
    from viz import notebook

    monkeypatch.setattr(notebook, "PAGE", notebook._Page())
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    return notebook


@pytest.mark.parametrize("view", lens.VIEWS)
def test_every_view_renders_offline(view, fresh_page):
    fig = show(REF, TOKENS, view=view, layer=1, head=1)
    bundle = fig._repr_mimebundle_()
    assert set(bundle) == {PLOTLY_MIME, "text/html"}
    assert json.loads(json.dumps(bundle[PLOTLY_MIME]))["data"]
    page = bundle["text/html"]
    assert "Plotly.newPlot" in page and "window.Plotly" in page
    assert len(PLOTLY_COPY.findall(page)) == 1  # the kernel's first figure brings plotly.js itself
    assert not re.search(r"<script[^>]+src=", page)  # nothing to fetch: no CDN, no file
    again = show(REF, TOKENS, view=view, layer=1, head=1)._repr_mimebundle_()["text/html"]
    assert not PLOTLY_COPY.search(again) and len(again) < 100_000  # later figures draw with that copy
    assert "Plotly.newPlot" in again and not re.search(r"<script[^>]+src=", again)


def test_plotly_js_travels_once_per_notebook(fresh_page, monkeypatch):
    loader = fresh_page.PlotlyLoader()._repr_html_()
    assert len(PLOTLY_COPY.findall(loader)) == 1 and "cartesian" in loader
    assert len(fresh_page.PlotlyLoader()._repr_html_()) == len(loader)  # a rerun first cell shows it again
    figs = [show(REF, TOKENS, view=v, layer=1, head=1)._repr_html_() for v in lens.VIEWS]
    assert not any(PLOTLY_COPY.search(f) for f in figs)
    # A figure beyond the cartesian bundle brings the full plotly.js once, which replaces the partial one.
    import plotly.graph_objects as go

    from viz.notebook import NotebookFigure

    globe = NotebookFigure(go.Scattergeo(lon=[0], lat=[0]))
    assert len(PLOTLY_COPY.findall(globe._repr_html_())) == 1 and "cartesian" not in globe._repr_html_()[:300]
    assert not PLOTLY_COPY.search(globe._repr_html_())
    # Colab shows every output in a frame of its own: there each figure carries plotly.js.
    monkeypatch.setitem(sys.modules, "google.colab", sys.modules["json"])
    assert all(len(PLOTLY_COPY.findall(show(REF, TOKENS)._repr_html_())) == 1 for _ in range(2))


def test_cross_attention_rows_are_queries_and_columns_keys():
    cross = softmax_maps(2, 3, 7, 11)
    q = [f"q{i}" for i in range(7)]
    k = [f"k{j}" for j in range(11)]
    fig = show(cross, q, view="head", layer=0, head=1, k_tokens=k)
    assert np.asarray(fig.data[0].z).shape == (7, 11)
    assert list(fig.layout.yaxis.ticktext) == q and list(fig.layout.xaxis.ticktext) == k
    assert "cross-attention" in fig.layout.title.text
    lines = show(cross, q, view="lines", k_tokens=k)
    texts = {t for tr in lines.data for t in (tr.text or ()) if t}
    assert set(q) <= texts and set(k) <= texts


def test_notes_come_as_warnings_and_bad_arguments_raise():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        show(np.stack([REF, REF], axis=1), view="overview")  # (layers, batch 2, ...) without tokens
    notes = [str(w.message) for w in caught if issubclass(w.category, AttentionNote)]
    assert any("batch of 2; showing item 0" in n for n in notes)
    assert any("positions are named 0…4" in n for n in notes)
    with pytest.raises(ValueError, match="view 'grid'"):
        show(REF, TOKENS, view="grid")
    with pytest.raises(ValueError, match=r"layer 2: the attention has layers 0…1"):
        show(REF, TOKENS, view="head", layer=2)
    with pytest.raises(AttentionFileError, match="while the tokens number 4"):
        show(REF, TOKENS[:4])


def test_causal_maps_are_named_causal():
    causal = np.tril(np.ones((5, 5), dtype=np.float32))
    causal /= causal.sum(-1, keepdims=True)
    fig = show(np.broadcast_to(causal, (2, 2, 5, 5)), TOKENS, view="head")
    assert "causal" in fig.layout.title.text


def test_lens_imports_without_streamlit():
    import subprocess

    code = "import sys, lens; assert 'streamlit' not in sys.modules, sorted(m for m in sys.modules if 'streamlit' in m)"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def execute_example(tmp_path: Path, monkeypatch) -> nbformat.NotebookNode:
    """Return the example notebook run as JupyterLab runs it: the kernel's working directory is examples/.

    `lens` and `models` come from PYTHONPATH = the repository root, standing in for README's `pip install -e .`
    (this test never installs the project): from examples/ nothing else would find them.
    """
    spec = tmp_path / "kernels" / "attention-lens-test"  # a kernel spec for this interpreter (the tests' venv)
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "attention lens test",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = nbformat.read(EXAMPLE, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs"), "commit the notebook without outputs"
    client = NotebookClient(
        nb, kernel_name="attention-lens-test", timeout=300, resources={"metadata": {"path": str(EXAMPLE.parent)}}
    )
    client.execute()
    return nb


def test_example_notebook_runs_from_its_folder_and_saves_small(tmp_path, monkeypatch):
    nb = execute_example(tmp_path, monkeypatch)
    figures, pages = [], []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", output
            data = output.get("data", {})
            if "text/html" in data:
                assert not re.search(r"<script[^>]+src=", data["text/html"])
                pages.append(data["text/html"])
            if PLOTLY_MIME in data:
                assert "text/html" in data
                figures.append(data[PLOTLY_MIME])
    assert len(figures) == 6
    titles = [f["layout"]["title"]["text"] for f in figures]
    assert "causal" in titles[3]  # GPT-2's own maps, detected as causal
    cross = figures[5]
    assert len(cross["layout"]["yaxis"]["ticktext"]) == 7 and len(cross["layout"]["xaxis"]["ticktext"]) == 11
    # plotly.js once, in the first code cell's output; every figure after it holds only its own data.
    assert [len(PLOTLY_COPY.findall(p)) for p in pages] == [1] + [0] * 6
    saved = tmp_path / "notebook.ipynb"
    nbformat.write(nb, saved)
    text = saved.read_text(encoding="utf-8")
    assert len(PLOTLY_COPY.findall(text)) == 1
    assert saved.stat().st_size <= MAX_SAVED_BYTES, f"{saved.stat().st_size:,} bytes saved"
