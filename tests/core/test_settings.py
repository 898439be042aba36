"""models.settings: environment overrides, budgets that name themselves, the operator's model list, config bounds."""

from __future__ import annotations

import json

import pytest

from models import BudgetError, ModelLoadError, ModelNotAllowedError, SettingsError, load_encoder, settings
from models.config import BertConfig


def test_defaults_are_the_issue_s():
    s = settings.current({})
    assert s.models is None
    assert (s.max_text_chars, s.max_corpus_tokens, s.max_batch, s.max_upload_mb) == (100_000, 200_000, 16, 256)
    assert (s.expr_mb, s.expr_seconds, s.max_generate, s.cache_mb, s.heavy_slots) == (512, 2.0, 256, 2048, 2)
    assert s.max_upload_bytes == 256 << 20


def test_environment_overrides_each_value(monkeypatch):
    for b in settings.BUDGETS:
        monkeypatch.setenv(b.env, "3")
    monkeypatch.setenv("ATTENTION_LENS_MODELS", " minilm , random:tiny,minilm ")
    s = settings.current()
    assert s.models == ("minilm", "random:tiny")
    assert all(getattr(s, b.key) == 3 for b in settings.BUDGETS)


@pytest.mark.parametrize("raw", ["lots", "-1", "0", "1e400", "9" * 40])
def test_bad_values_name_the_variable(monkeypatch, raw):
    monkeypatch.setenv("ATTENTION_LENS_MAX_BATCH", raw)
    with pytest.raises(SettingsError, match="ATTENTION_LENS_MAX_BATCH"):
        settings.current()


def test_require_names_the_budget(monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_MAX_TEXT_CHARS", "10")
    settings.require("max_text_chars", 10, "the text")
    with pytest.raises(
        BudgetError, match=r"the text needs 11 characters; the budget ATTENTION_LENS_MAX_TEXT_CHARS allows 10"
    ):
        settings.require("max_text_chars", 11, "the text")


def test_model_list_refuses_with_one_message_whatever_exists(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_LENS_MODELS", "minilm")
    settings.check_model("minilm")
    messages = set()
    for spec in ("/etc", str(tmp_path), "/no/such/folder", "~", "/proc/self", "random:tiny", "bert-base-uncased"):
        with pytest.raises(ModelNotAllowedError) as err:
            load_encoder(spec, device="cpu")
        messages.add(str(err.value))
    assert messages == {"this server offers only the models its operator listed in ATTENTION_LENS_MODELS: minilm"}


def test_shared_server_without_a_list_allows_presets_only(monkeypatch):
    monkeypatch.delenv("ATTENTION_LENS_MODELS", raising=False)
    settings.check_model("/etc", shared=False)  # a local single user keeps today's freedom
    settings.check_model("minilm", presets=("minilm",), shared=True)
    with pytest.raises(ModelNotAllowedError, match="custom models are off on a shared server"):
        settings.check_model("/etc", presets=("minilm",), shared=True)


@pytest.mark.parametrize(
    "address,loopback",
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("127.1.2.3", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        (None, False),
        ("10.0.0.5", False),
        ("lecture.local", False),
    ],
)
def test_loopback(address, loopback):
    assert settings.is_loopback(address) is loopback


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("num_hidden_layers", 10**9, "n_layers is 1000000000"),
        ("num_hidden_layers", -5, "n_layers is -5"),
        ("num_attention_heads", 0, "n_heads is 0"),
        ("hidden_size", 770, "not a multiple"),
        ("vocab_size", 10**12, "vocab_size"),
        ("num_hidden_layers", 1e400, "bad field"),
    ],
)
def test_config_bounds_refuse_before_allocating(tmp_path, field, value, match):
    cfg = dict(
        model_type="bert",
        vocab_size=100,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
    )
    cfg[field] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg).replace("Infinity", "1e400"))
    (tmp_path / "model.safetensors").write_bytes(b"")
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    with pytest.raises(ModelLoadError, match=match):
        load_encoder(str(tmp_path), device="cpu")


def test_config_with_too_many_parameters():
    with pytest.raises(ModelLoadError, match="billion parameters"):
        BertConfig(n_layers=128, d_model=16_384, n_heads=128, d_ff=65_536)


def test_table_lists_every_variable():
    names = [row[0] for row in settings.table()]
    assert names[0] == "ATTENTION_LENS_MODELS"
    assert set(names[1:]) == {b.env for b in settings.BUDGETS}
