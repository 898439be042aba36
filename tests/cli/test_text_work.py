"""One text's work (issue 41): every command that takes --text or --text-file asks ATTENTION_LENS_TEXT_WORK before
its forward. `settings.text_work` is a pure function of sizes; over the budget a single text is cut where the budget
ends (stats, export, explain: one warning line) and a pair, a batch or a command whose result a cut would change is
refused in one line. Each case here plants an over-budget text with the model's forward made to fail if it runs."""

from __future__ import annotations

import json

import pytest
import torch

from models import settings
from models.cli import main
from models.cli.common import CELL_OPS, fit_text, fit_to_positions, token_count
from models.config import BertConfig, LlamaConfig

WORDS = " ".join(["the cat sat on a mat by the river under mountains while people walk"] * 60)  # ~700 tokens


def test_text_work_is_the_forward_and_the_cells():
    c = LlamaConfig()  # SmolLM2-135M: 30 layers, 9 query heads (3 key/value), d 576, MLP 1536, head 64
    per_token = 30 * (576 * 64 * (2 * 9 + 2 * 3) + 3 * 576 * 1536)
    for n in (1, 512, 8192):
        cells = 30 * 9 * n * n
        assert settings.text_work(c, n) == pytest.approx((n * per_token + cells * 2 * 64) / 1e9)
        assert settings.text_work(c, n, 750) == pytest.approx((n * per_token + cells * (2 * 64 + 750)) / 1e9)
    works = [settings.text_work(c, n, CELL_OPS["stats"]) for n in range(0, 9000, 500)]
    assert works == sorted(works) and len(set(works)) == len(works)
    # At 8,192 tokens SmolLM2's stats is ~20× the default budget; BERT-base's 512 tokens fit it
    assert settings.text_work(c, 8192, CELL_OPS["stats"]) > 20 * settings.limit("text_work")
    assert settings.text_work(BertConfig(), 512, CELL_OPS["stats"]) < settings.limit("text_work")


@pytest.mark.parametrize("cap", [1, 800, 20_000])
def test_tokens_within_work_is_the_last_count_inside(monkeypatch, cap):
    monkeypatch.setenv("ATTENTION_LENS_TEXT_WORK", str(cap))
    c = LlamaConfig()
    for ops, runs in ((0.0, 1), (750.0, 1), (0.0, 2)):
        n = settings.tokens_within_work(c, 8192, ops, runs)
        assert 0 <= n <= 8192
        assert n == 8192 or runs * settings.text_work(c, n + 1, ops) > cap
        assert n == 0 or runs * settings.text_work(c, n, ops) <= cap


@pytest.fixture
def no_forward(monkeypatch):
    """Every model here starts its forward with an embedding lookup: make it fail, so a test sees whether one ran."""

    def boom(self, *a, **kw):
        raise AssertionError("a forward ran before the budget was asked")

    monkeypatch.setattr(torch.nn.Embedding, "forward", boom)


@pytest.fixture
def bundled(monkeypatch, minilm, smollm2):
    """The commands load the session's models (no second load per test)."""
    from models.cli import ablate, check_mask, compare, explain, export, perplexity, stats

    def pick(spec, **kw):
        return {"minilm": minilm, "smollm2": smollm2}[spec]

    for module in (stats, export, explain, compare, check_mask):
        monkeypatch.setattr(module, "load_encoder", pick)
    for module in (ablate, perplexity):
        monkeypatch.setattr(module, "load_model", pick)


REFUSED = {
    "stats, a pair": ["stats", "--model", "minilm", "--text", WORDS, "--text-b", WORDS, "--json"],
    "compare": ["compare", "--model", "minilm", "--text", WORDS, "--against-mask", "causal"],
    "check-mask, a batch": [
        "check-mask",
        "--model",
        "minilm",
        "--text",
        WORDS,
        "--text",
        "Hi.",
        "--mask",
        "causal",
        "--expect",
        "causal",
    ],  # fmt: skip
    "explain, a pair": [
        "explain",
        "--model",
        "minilm",
        "--text",
        WORDS,
        "--text-b",
        WORDS,
        "--layer",
        "0",
        "--head",
        "0",
        "--query",
        "-1",
        "--key",
        "0",
    ],  # fmt: skip
    "perplexity": ["perplexity", "--model", "smollm2", "--text", WORDS],
    "ablate": ["ablate", "--model", "smollm2", "--text", WORDS, "--heads", "0.0"],
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_over_the_budget_is_refused_in_one_line_before_any_forward(monkeypatch, capsys, bundled, no_forward, name):
    monkeypatch.setenv("ATTENTION_LENS_TEXT_WORK", "1")
    assert main(REFUSED[name]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert "the budget ATTENTION_LENS_TEXT_WORK allows 1 billion operations" in err[0]
    assert "tokens fit" in err[0] and "raise the budget" in err[0]


@pytest.mark.parametrize("command", ["stats", "export", "explain"])
def test_a_long_text_file_is_cut_where_the_budget_ends(monkeypatch, capsys, tmp_path, bundled, minilm, command):
    path = tmp_path / "long.txt"
    path.write_text(WORDS, encoding="utf-8")
    monkeypatch.setenv("ATTENTION_LENS_TEXT_WORK", "2")
    seen: list[int] = []
    forward = torch.nn.Embedding.forward

    def counting(self, ids):  # the first lookup of each forward: the tokens it reads
        seen.append(ids.shape[-1])
        return forward(self, ids)

    monkeypatch.setattr(torch.nn.Embedding, "forward", counting)
    out = tmp_path / "o.json"
    argv = {
        "stats": ["stats", "--no-importance", "--json", "--out", str(out)],
        "export": ["export", "--json", "--out", str(out), "--layers", "0", "--heads", "0"],
        "explain": ["explain", "--layer", "0", "--head", "0", "--query", "-1", "--key", "0", "--no-components"],
    }[command]
    assert main([*argv, "--model", "minilm", "--text-file", str(path)]) == 0
    keep = settings.tokens_within_work(minilm.config, 512, CELL_OPS.get(command, 0.0))
    assert 16 < keep < 512 and seen and max(seen) <= keep  # no forward read more than the budget allows
    warning = [line for line in capsys.readouterr().err.splitlines() if "TEXT_WORK" in line]
    assert len(warning) == 1 and warning[0].startswith(f"warning: {command} reads the first ")
    assert " of 512 tokens: all of them would need about " in warning[0]
    assert "billion operations; the budget ATTENTION_LENS_TEXT_WORK allows 2 (raise it to read more)" in warning[0]
    if command != "explain":
        doc = json.loads(out.read_text(encoding="utf-8"))
        assert keep - 2 <= len(doc["tokens"]) <= keep  # cut at a token's start: at most the budget's count


def test_within_the_budget_only_the_positions_cut(capsys, minilm, smollm2):
    # minilm's 512 positions are well inside the default budget; SmolLM2's 8,192 are not: cut, but not to nothing
    assert fit_text(minilm, WORDS, command="stats") == fit_to_positions(minilm, WORDS)
    assert "TEXT_WORK" not in capsys.readouterr().err
    long = WORDS * 20  # ~14,000 tokens
    cut = fit_text(smollm2, long, command="stats")
    keep = settings.tokens_within_work(smollm2.config, 8192, CELL_OPS["stats"])
    assert long.startswith(cut) and 1000 < keep - 2 <= token_count(smollm2, cut) <= keep
    assert "warning: stats reads the first" in capsys.readouterr().err
