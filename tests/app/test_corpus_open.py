"""The Corpus page opens a statistics file that `stats --out` wrote (issue 36) and shows it as a corpus analysed
there; any other file is refused in one line. AppTest cannot upload: the bytes go where the uploader's callback
puts them (session_state["corpus_stats"])."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.cli import main
from tests.app.test_explore import decode
from tests.app.test_heads_page import page, specs
from ui.i18n import translate

ROWS = "The cat sat on the mat.\nA first half.\tA second half.\nDogs bark at night.\n"


@pytest.fixture(scope="module")
def stats_file(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("stats")
    (folder / "c.txt").write_text(ROWS)
    out = folder / "stats.json"
    assert main(["stats", "--model", "minilm", "--file", str(folder / "c.txt"), "--out", str(out)]) == 0
    return out.read_bytes()


def test_an_opened_statistics_file_shows_like_a_corpus_analysed_here(stats_file):
    at = page("app_pages/corpus.py")
    at.session_state["corpus_stats"] = {"name": "stats.json", "data": stats_file}
    at.run()
    assert not at.exception and not at.error
    assert at.success and "3 sentences" in at.success[0].value and "stats.json" in at.success[0].value
    doc = json.loads(stats_file)
    labels = [h["label"] for h in doc["heads"]]
    table = at.dataframe[0].value
    assert len(table) == len(labels) == 72
    assert any(any(a.get("text") == "to [SEP]" for a in s["layout"].get("annotations", [])) for s in specs(at))
    assert any("need the model" in i.value for i in at.info)
    # …head importance too: the table's column, the bars and the removal curve are the file's own numbers
    imp = table[translate("en", "heads.col.importance")].to_numpy()
    np.testing.assert_allclose(imp, doc["importance"], atol=1e-12)
    titled = {((s["layout"].get("title") or {}).get("text")): s for s in specs(at)}
    bars = titled[translate("en", "heads.importance.bars_title")]
    np.testing.assert_allclose(decode(bars["data"][0]["y"]), doc["importance"], atol=1e-12)
    curve = titled[translate("en", "heads.importance.removal_title")]
    assert decode(curve["data"][0]["y"]).tolist() == pytest.approx(doc["removal"]["least_first"])
    assert not any(translate("en", "corpus.opened_no_importance") == i.value for i in at.info)


def test_a_file_without_importance_says_so(stats_file):
    doc = json.loads(stats_file)
    for k in ("importance", "importance_measure", "importance_sentences", "removal"):
        doc.pop(k)
    at = page("app_pages/corpus.py")
    at.session_state["corpus_stats"] = {"name": "stats.json", "data": json.dumps(doc).encode()}
    at.run()
    assert not at.exception and not at.error
    assert translate("en", "heads.col.importance") not in at.dataframe[0].value.columns
    assert any("holds no head importance" in i.value for i in at.info)


@pytest.mark.parametrize(
    "change",
    [
        {"importance": [2.0] * 72},
        {"importance": [0.5] * 71},
        {"importance_measure": "trust me"},
        {"removal": {"k": [0, 1], "least_first": [1.0], "most_first": [1.0, 2.0], "unit": "x"}},
    ],
)
def test_a_file_with_bad_importance_is_refused_in_one_line(stats_file, change):
    doc = json.loads(stats_file) | change
    at = page("app_pages/corpus.py")
    at.session_state["corpus_stats"] = {"name": "evil.json", "data": json.dumps(doc).encode()}
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "evil.json cannot be opened" in at.error[0].value


@pytest.mark.parametrize(
    "data",
    [b"not json at all", b'{"heads": []}', b"[" * 100 + b"]" * 100, b'{"heads": [{"layer": 0, "head": 0}]}'],
)
def test_a_bad_or_hostile_statistics_file_is_refused_in_one_line(data):
    at = page("app_pages/corpus.py")
    at.session_state["corpus_stats"] = {"name": "evil.json", "data": data}
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "evil.json cannot be opened" in at.error[0].value
    assert "\n" not in at.error[0].value.strip()


def test_a_file_whose_redundancy_is_over_a_sample_says_so(stats_file):
    """A large corpus's redundancy is summed over a sample of its lines (`--redundancy-lines`): the page says over
    how many, and shows JS per row of the sample's rows."""
    doc = json.loads(stats_file)
    assert doc["redundancy"]["sentences"] == 3 and not any(
        translate("en", "heads.redundancy.sample")[:20] in c.value for c in page_captions(doc)
    )
    doc["redundancy"]["sentences"], doc["redundancy"]["rows"] = 2, doc["rows"] - 5
    captions = page_captions(doc)
    want = translate("en", "heads.redundancy.sample", lines=2, of=3, rows=doc["rows"] - 5)
    assert want in [c.value for c in captions]


def page_captions(doc: dict) -> list:
    at = page("app_pages/corpus.py")
    at.session_state["corpus_stats"] = {"name": "stats.json", "data": json.dumps(doc).encode()}
    at.run()
    assert not at.exception and not at.error
    return list(at.caption)
