"""`check-mask --mask` takes masks as people write them: FILE.py:NAME (a FlexAttention mask_mod, a transformers mask
function, a BlockMask) and predicate expressions over q_idx and kv_idx, with no --convention; the verdict of a
wrong predicate names the classic bug."""

from __future__ import annotations

import json

import pytest

from models.cli import main

SENTENCE = "The cat sat on the mat and looked at the dog."
BASE = ["check-mask", "--model", "minilm", "--text", SENTENCE, "--json"]

USER_MASKS = """
import torch

def sliding(b, h, q_idx, kv_idx):  # FlexAttention's sliding window of 4 (the query and 3 before it)
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 4)

def sliding_off_by_one(b, h, q_idx, kv_idx):  # "4 tokens back": one key too many
    return (q_idx >= kv_idx) & (q_idx - kv_idx <= 4)

def documents_only(b, h, q_idx, kv_idx):  # packed documents of 6 and the rest, causality forgotten
    return (q_idx < 6) == (kv_idx < 6)

def documents(b, h, q_idx, kv_idx):
    return documents_only(b, h, q_idx, kv_idx) & (kv_idx <= q_idx)

try:
    from transformers.masking_utils import sliding_window_causal_mask_function
    SW = sliding_window_causal_mask_function(4)
except ImportError:
    SW = sliding

from torch.nn.attention.flex_attention import create_block_mask
BLOCK = create_block_mask(sliding, None, None, 16, 16, device="cpu")
NOT_A_MASK = 3
"""


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("masks") / "my_masks.py"
    path.write_text(USER_MASKS)
    return str(path)


def _check(capsys, mask, expect, *extra):
    code = main([*BASE, "--mask", mask, "--expect", expect, *extra])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else None), captured.err


@pytest.mark.parametrize("name", ["sliding", "SW", "BLOCK"])
def test_a_right_predicate_from_a_file_passes_without_a_convention(capsys, user_file, name):
    code, doc, _ = _check(capsys, f"{user_file}:{name}", "causal+window:3")
    assert code == 0 and doc["verdict"] == "pass", doc


def test_the_predicate_expression_passes_and_its_off_by_one_names_the_bug(capsys):
    code, doc, _ = _check(capsys, "(kv_idx <= q_idx) & (q_idx - kv_idx < 4)", "causal+window:3")
    assert code == 0, doc
    code, doc, _ = _check(capsys, "(kv_idx <= q_idx) & (q_idx - kv_idx <= 4)", "causal+window:3")
    assert code == 1 and [d["code"] for d in doc["diagnosis"]] == ["diag.off_by_one"]
    assert "causal+window:4" in doc["diagnosis"][0]["message"]


def test_wrong_predicates_from_a_file_get_the_classic_diagnosis(capsys, user_file):
    code, doc, _ = _check(capsys, f"{user_file}:sliding_off_by_one", "causal+window:3")
    assert code == 1 and [d["code"] for d in doc["diagnosis"]] == ["diag.off_by_one"], doc["diagnosis"]
    n = len(doc["tokens"][0])
    code, doc, _ = _check(capsys, f"{user_file}:documents", f"causal+docs:6,{n - 6}")
    assert code == 0, doc
    code, doc, _ = _check(capsys, f"{user_file}:documents_only", f"causal+docs:6,{n - 6}")
    assert code == 1 and {"leaks", "behaviour"} <= set(doc["failed"])
    assert [d["code"] for d in doc["diagnosis"]] == ["diag.causal_missing"]
    assert f"docs:6,{n - 6} without causal" in doc["diagnosis"][0]["message"]


@pytest.mark.parametrize(
    ("mask", "extra", "message"),
    [
        ("{F}:NOT_A_MASK", [], "a predicate mask is a function"),
        ("{F}:nope", [], "has no 'nope'"),
        ("missing.py:SW", [], "does not exist"),
        ("{F}:sliding", ["--convention", "drop"], "leave --convention out"),
        ("torch.tril(torch.ones(seq, seq))", [], "--convention is needed"),
        ("(kv_idx <= q_idx) & (seq > 2)", [], "q_idx, kv_idx, b and h only"),
        ("kv_idx.__class__", [], "not allowed"),
    ],
)
def test_bad_predicates_exit_2_with_one_line(capsys, user_file, mask, extra, message):
    code, _, err = _check(capsys, mask.replace("{F}", user_file), "causal", *extra)
    assert code == 2 and message in err and err.count("\n") == 1, err
