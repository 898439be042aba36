"""`python -m models compare` and `export --norms / --words` from the command line, in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from models.analysis.heads import SMOOTH
from models.cli import main
from tests.conftest import save_llama_folder

PAIR = ("The keys to the cabinet is", "The keys to the cabinet was")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return (
        str(save_llama_folder(tmp_path_factory.mktemp("llama-a"))),
        str(save_llama_folder(tmp_path_factory.mktemp("llama-b"), seed=5)),
    )


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _exported(capsys, model: str, text: str, *extra: str) -> dict:
    return _json(capsys, "export", "--model", model, "--text", text, "--json", *extra)


def test_two_checkpoints_ranked_by_the_distance_of_their_exported_maps(folders, capsys):
    a, b = folders
    doc = _json(capsys, "compare", "--model", a, "--against-model", b, "--text", PAIR[0], "--json")
    assert doc["mode"] == "maps" and doc["differs"] == [] and doc["lens"] == "raw"
    A = np.asarray(_exported(capsys, a, PAIR[0])["attentions"], dtype=np.float64)
    B = np.asarray(_exported(capsys, b, PAIR[0])["attentions"], dtype=np.float64)
    L, H, T, _ = A.shape
    assert len(doc["heads"]) == L * H and doc["rows"] == T
    P, Q = A * (1 - SMOOTH) + SMOOTH / T, B * (1 - SMOOTH) + SMOOTH / T
    for row in doc["heads"]:
        la, h = row["layer"], row["head"]
        ref = np.sqrt(np.mean([jensenshannon(P[la, h, i], Q[la, h, i]) ** 2 for i in range(T)]))
        assert row["distance"] == pytest.approx(ref, rel=1e-4, abs=1e-6)
        assert row["max_delta"] == pytest.approx(np.abs(B[la, h] - A[la, h]).max(), abs=1e-5)
    distances = [r["distance"] for r in doc["heads"]]
    assert distances == sorted(distances, reverse=True)


def test_minimal_pair_names_the_changed_position(folders, capsys):
    doc = _json(capsys, "compare", "--model", folders[0], "--text", PAIR[0], "--against-text", PAIR[1], "--json")
    assert doc["mode"] == "maps"
    assert [d["position"] for d in doc["differs"]] == [len(doc["tokens_a"]) - 1]
    assert doc["a"]["text"] == PAIR[0] and doc["b"]["text"] == PAIR[1]


def test_mask_against_mask_and_the_table_for_people(capsys):
    assert main(["compare", "--model", "minilm", "--text", "The cat sat.", "--against-mask", "causal"]) == 0
    out = capsys.readouterr().out
    assert "positions line up" in out and "bidirectional" in out and "causal" in out
    doc = _json(capsys, "compare", "--model", "minilm", "--text", "The cat sat.", "--against-mask", "causal", "--json")
    assert doc["mode"] == "maps" and doc["heads"][0]["distance"] > 0.1


def test_weighted_and_different_lengths(folders, capsys):
    doc = _json(
        capsys,
        "compare",
        "--model",
        folders[0],
        "--text",
        PAIR[0],
        "--against-text",
        "A longer text about the cabinet",
        "--weighted",
        "--json",
    )
    assert doc["mode"] == "statistics" and doc["lens"] == "value-weighted"
    assert all(r["moved"] in doc["columns"] for r in doc["heads"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "--model", "random:tiny", "--text", "hi"], "say what run B changes"),
        (["compare", "--model", "random:tiny", "--text", "hi", "--against-text", "ho", "--top", "0"], "--top"),
        (["compare", "--model", "random:tiny", "--text", "hi", "--against-model", "no/such/model"], "no/such/model"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_budget_is_checked_before_comparing(capsys, monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_MAX_DERIVED_VALUES", "100")
    assert main(["compare", "--model", "random:tiny", "--text", "hi there", "--against-mask", "causal"]) == 2
    assert "ATTENTION_LENS_MAX_DERIVED_VALUES" in capsys.readouterr().err


def test_export_norms_are_attention_times_each_keys_value_norm(folders, capsys):
    doc = _exported(capsys, folders[0], PAIR[0], "--norms")
    attn, norms = np.asarray(doc["attentions"]), np.asarray(doc["norms"])
    assert norms.shape == attn.shape and np.asarray(doc["output_norm"]).shape == attn.shape[:2]
    # N[l, h, i, j] / α[l, h, i, j] is key j's ‖W_O^h v_j‖: the same for every query row that sees j.
    T = attn.shape[-1]
    ratio = norms[..., T - 1, :] / attn[..., T - 1, :]  # the last row sees every key
    np.testing.assert_allclose(norms, attn * ratio[..., None, :], rtol=1e-4, atol=1e-7)
    assert (ratio > 0).all()


def test_export_words_json_and_npz(tmp_path, capsys):
    text = "Tokenization isn't unbelievable."
    doc = _exported(capsys, "minilm", text, "--words", "--norms")
    words, groups = doc["words"], doc["word_tokens"]
    assert words[0] == "[CLS]" and words[-1] == "[SEP]" and "tokenization" in words
    assert [t for g in groups for t in g] == doc["tokens"]
    merged = np.asarray(doc["word_attentions"])
    assert merged.shape == (6, 12, len(words), len(words))
    np.testing.assert_allclose(merged.sum(-1), 1.0, atol=1e-5)
    assert np.asarray(doc["word_norms"]).shape == merged.shape
    out = tmp_path / "w.npz"
    assert main(["export", "--model", "minilm", "--text", text, "--words", "--out", str(out)]) == 0
    data = np.load(out, allow_pickle=False)
    assert list(data["words"]) == words
    assert data["word_of_token"].shape == (len(doc["tokens"]),)
    np.testing.assert_allclose(data["word_attentions"], merged, atol=1e-6)
