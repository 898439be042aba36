"""The Corpus page opens a statistics file that `stats --out` wrote (issue 36) and shows it as a corpus analysed
there; any other file is refused in one line. AppTest cannot upload: the bytes go where the uploader's callback
puts them (session_state["corpus_stats"])."""

from __future__ import annotations

import json

import pytest

from models.cli import main
from tests.app.test_heads_page import page, specs

ROWS = "The cat sat on the mat.\nA first half.\tA second half.\nDogs bark at night.\n"


@pytest.fixture(scope="module")
def stats_file(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("stats")
    (folder / "c.txt").write_text(ROWS)
    out = folder / "stats.json"
    assert (
        main(["stats", "--model", "minilm", "--file", str(folder / "c.txt"), "--no-importance", "--out", str(out)]) == 0
    )
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
