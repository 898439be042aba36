"""The Llama family (Llama, Mistral, Qwen2, Qwen3) against transformers' eager models on the same weights.

Random folders of each variant (save_pretrained, Q/K ×3 so heads are peaked) and the bundled SmolLM2-135M from its
GGUF: attentions ≤ 1e-5, hidden ≤ 1e-4, logits ≤ 1e-4, exact zeros above the diagonal and outside each layer's
window, greedy tokens equal to transformers' generate(do_sample=False). A planted bug in each variant — rotation
pairs swapped, the key/value head off by one, the window off by one, the q/k norm skipped — fails them.
"""

from __future__ import annotations

import functools

import pytest
import torch

import models.attention
import models.masks.predicates
import models.network
import models.rotary
from models import load_model
from models.lecture.generate import generate
from tests.conftest import LLAMA_CLASSES, save_llama_folder

ATTN_TOL = 1e-5
HIDDEN_TOL = 1e-4
LOGIT_TOL = 1e-4
TEXT = "The cat sat on the mat, and the dog slept by the door. The cat sat on the mat, and the dog"

VARIANTS = {
    "llama": ("llama", {}),
    "llama-untied-llama3-rope": (
        "llama",
        dict(
            tie_word_embeddings=False,
            rope_scaling=dict(
                rope_type="llama3",
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=16,
            ),
        ),
    ),
    "llama-linear-rope-bias": (
        "llama",
        dict(rope_scaling=dict(rope_type="linear", factor=2.0), attention_bias=True, rope_theta=500.0),
    ),
    "mistral-window": ("mistral", dict(sliding_window=5)),
    "qwen2-window": ("qwen2", dict(use_sliding_window=True, sliding_window=4, max_window_layers=1)),
    "qwen3-head-dim": ("qwen3", dict(head_dim=32, num_key_value_heads=1)),
}


@functools.cache
def _folder(name: str, root: str) -> str:
    from pathlib import Path

    model_type, config = VARIANTS[name]
    path = Path(root) / name
    if not path.exists():
        save_llama_folder(path, model_type, **config)
    return str(path)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("llama-family"))


@functools.cache
def _theirs(path: str):
    import json

    import transformers

    model_type = json.loads(open(f"{path}/config.json").read())["model_type"]
    cls = getattr(transformers, LLAMA_CLASSES[model_type][1])
    return cls.from_pretrained(path, attn_implementation="eager").eval()


def _reference(model, ids: torch.Tensor):
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
        hidden = model.model(input_ids=ids).last_hidden_state
    return torch.stack(out.attentions, dim=1)[0], hidden[0], out.logits[0]


def _ours(enc, ids: torch.Tensor):
    with torch.no_grad():
        res = enc.model(ids)
        logits = enc.model.logits(res.hidden)
    return res.attentions[0], res.hidden[0], logits[0]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_parity_with_transformers(name, root):
    path = _folder(name, root)
    enc = load_model(path, device="cpu")
    out = enc.encode(TEXT)
    ids = out.input_ids[None].clone()
    attn, hidden, logits = _reference(_theirs(path), ids)
    assert (out.attentions - attn).abs().max() <= ATTN_TOL
    ours_attn, ours_hidden, ours_logits = _ours(enc, ids)
    assert (ours_hidden - hidden).abs().max() <= HIDDEN_TOL
    assert (ours_logits - logits).abs().max() <= LOGIT_TOL
    # Exact zeros above the diagonal and outside each layer's window, and the maps are the heads'.
    assert out.attentions.triu(1).abs().max() == 0
    caps = enc.capabilities
    for layer in range(enc.config.n_layers):
        w = caps.window(layer)
        if w is not None:
            far = torch.ones(out.seq, out.seq, dtype=torch.bool).tril(-w)
            assert out.attentions[layer][:, far].abs().max() == 0
            assert not out.layer_keep(layer)[far].any()
    assert out.attentions.shape[1] == enc.config.n_heads


def test_windows_come_from_the_config(root):
    qwen = load_model(_folder("qwen2-window", root), device="cpu").capabilities
    assert qwen.windows == (None, 4, 4)  # max_window_layers=1: layer 0 full, the rest windowed (transformers)
    mistral = load_model(_folder("mistral-window", root), device="cpu").capabilities
    assert mistral.windows == (5, 5, 5)
    llama = load_model(_folder("llama", root), device="cpu").capabilities
    assert llama.windows == () and llama.grouped and llama.group_size == 2 and llama.rotary


def test_greedy_tokens_equal_transformers_generate(root):
    path = _folder("qwen2-window", root)
    enc = load_model(path, device="cpu")
    g = generate(enc, "The cat sat on", 10, check=True)
    ids = torch.tensor([g.prompt_ids])
    with torch.no_grad():
        theirs = _theirs(path).generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=0)
    assert g.generated_ids == theirs[0, len(g.prompt_ids) :].tolist()[: len(g.generated_ids)]
    assert g.max_row_error is not None and g.max_row_error <= 1e-5
    # A grouped cache holds the key/value heads, not the query heads.
    assert g.steps[-1].cache_shape[1] == enc.config.n_kv_heads == 2


def _swapped_pairs(x: torch.Tensor) -> torch.Tensor:
    """rotate_half with the pairs interleaved (0,1), (2,3), … instead of (i, i + d/2): GPT-J's layout, the bug."""
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def _shifted_repeat(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """repeat_kv that hands query head h the key/value head of h + n_rep: off by one group."""
    B, n_kv, S, d = x.shape
    x = torch.roll(x, shifts=-1, dims=1)
    return x[:, :, None].expand(B, n_kv, n_rep, S, d).reshape(B, n_kv * n_rep, S, d)


def _wider_window(window=None):
    from models.masks import predicates

    if window is None:
        return predicates.causal()
    return predicates.and_masks(predicates.causal(), predicates.sliding_window(window + 1))  # W + 1 keys: off by one


@pytest.mark.parametrize(
    "name,target,attr,bug",
    [
        ("llama", models.rotary, "rotate_half", _swapped_pairs),
        ("llama", models.attention, "repeat_kv", _shifted_repeat),
        ("mistral-window", models.masks.predicates, "causal_window", _wider_window),
        ("qwen2-window", models.masks.predicates, "causal_window", _wider_window),
    ],
)
def test_a_planted_bug_breaks_parity(name, target, attr, bug, root, monkeypatch):
    path = _folder(name, root)
    enc = load_model(path, device="cpu")
    ids = enc.encode(TEXT).input_ids[None].clone()
    attn, _, _ = _reference(_theirs(path), ids)
    assert (_ours(enc, ids)[0] - attn).abs().max() <= ATTN_TOL
    monkeypatch.setattr(target, attr, bug)
    assert (_ours(enc, ids)[0] - attn).abs().max() > 100 * ATTN_TOL


def test_skipping_the_qk_norm_breaks_parity(root):
    path = _folder("qwen3-head-dim", root)
    enc = load_model(path, device="cpu")
    ids = enc.encode(TEXT).input_ids[None].clone()
    attn, _, _ = _reference(_theirs(path), ids)
    assert (_ours(enc, ids)[0] - attn).abs().max() <= ATTN_TOL
    for layer in enc.model.layers:
        layer.self_attn.qk_norm = False  # the planted bug: Qwen3's per-head RMSNorm not applied
    assert (_ours(enc, ids)[0] - attn).abs().max() > 100 * ATTN_TOL


# ---- the bundled SmolLM2-135M-Instruct --------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _smollm2_reference():
    """transformers' LlamaForCausalLM on the GGUF's own tensors (its reader, not our cache): the independent side."""
    import transformers
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from models.gguf import bundled_file

    path = str(bundled_file())
    cfg = {k: v for k, v in load_gguf_checkpoint(path)["config"].items() if not k.startswith("_")}
    hf_cfg = transformers.LlamaConfig(**cfg, attn_implementation="eager")
    with torch.device("meta"):
        meta = transformers.LlamaForCausalLM(hf_cfg)
    state = load_gguf_checkpoint(path, return_tensors=True, model_to_load=meta)["tensors"]
    model = transformers.LlamaForCausalLM(hf_cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}  # tied to the embeddings
    model.tie_weights()
    return model.eval()


@pytest.mark.long
def test_smollm2_matches_transformers_on_the_gguf_weights(smollm2):
    c = smollm2.config
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.d_model, c.d_k, c.rope_theta) == (30, 9, 3, 576, 64, 100_000.0)
    assert smollm2.capabilities.grouped and smollm2.capabilities.generation
    out = smollm2.encode("The capital of France is Paris, and the capital of Italy is Rome.")
    ids = out.input_ids[None].clone()
    attn, hidden, logits = _reference(_smollm2_reference(), ids)
    assert (out.attentions - attn).abs().max() <= ATTN_TOL
    _, ours_hidden, ours_logits = _ours(smollm2, ids)
    assert (ours_hidden - hidden).abs().max() <= HIDDEN_TOL
    assert (ours_logits - logits).abs().max() <= LOGIT_TOL
    # A trained model: most layers park their spare attention on the first token (the sink).
    sink = out.attentions[:, :, 1:, 0].mean(dim=(1, 2))  # (layers,)
    assert float(sink.mean()) > 0.5 and int((sink > 0.4).sum()) >= 20, sink


def test_smollm2_continues_the_capital_of_france_as_transformers_does(smollm2):
    g = generate(smollm2, "The capital of France is", 12, check=True)
    assert g.text.startswith(" Paris")
    ids = torch.tensor([g.prompt_ids])
    with torch.no_grad():
        theirs = _smollm2_reference().generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=2)
    assert g.generated_ids == theirs[0, len(g.prompt_ids) :].tolist()[: len(g.generated_ids)]
    assert g.max_row_error is not None and g.max_row_error <= 1e-5
