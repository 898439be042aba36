"""The family registry: `model_type` → our config, network, weight port, tokenizer needs, random shapes and the
capabilities a loaded model of it has.

With each family's own file (`bert.py`, `gpt2.py`, `llama.py`), the only place that names a family. Pages,
analyses, the lecture and the CLI ask `Capabilities` (models.capabilities). Adding a family is one module plus
one entry here (docs/ARCHITECTURE.md, "Where to add a model family").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from . import gpt2, llama
from .bert import BertModel
from .capabilities import Capabilities, TokenDisplay
from .config import BertConfig, GPT2Config, LlamaConfig, TrainingRecipe
from .errors import UnsupportedArchitectureError
from .gpt2 import GPT2Model, port_gpt2
from .llama import LlamaForCausalLM
from .mlm import load_mlm_head
from .network import Network

State = dict[str, torch.Tensor]


def _port_bert(state: State, cfg: BertConfig) -> State:
    """transformers' BertModel keys are ours; its pooler (unused by attention) is left out."""
    return {k: v for k, v in state.items() if not k.startswith("pooler.")}


def _port_llama(state: State, cfg: LlamaConfig) -> State:
    """transformers' LlamaForCausalLM keys are ours; a tied head is the embedding (not stored twice)."""
    skip = ("rotary_emb.inv_freq", "rotary_emb.original_inv_freq")
    out = {k: v for k, v in state.items() if not k.endswith(skip)}
    if cfg.tie_word_embeddings:
        out.pop("lm_head.weight", None)
    return out


def _bert(cfg: BertConfig, display: TokenDisplay) -> Capabilities:
    return Capabilities(
        causal=False,
        pairs=cfg.type_vocab_size > 1,
        token_display=display,
        special_roles="cls_sep",
        lm_head="masked",
        generation=False,
        heads=cfg.n_heads,
        kv_heads=cfg.n_heads,
        norm="layernorm",
        position_table=True,
        family="BERT encoder",
    )


def _gpt2(cfg: GPT2Config, display: TokenDisplay) -> Capabilities:
    return Capabilities(
        causal=True,
        token_display=display,
        special_roles="first_token",
        lm_head="next_token",
        generation=True,
        heads=cfg.n_heads,
        kv_heads=cfg.n_heads,
        norm="layernorm",
        pre_norm=True,
        position_table=True,
        family="GPT-2 decoder",
    )


_LLAMA_NAMES = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3"}


def _llama(cfg: LlamaConfig, display: TokenDisplay) -> Capabilities:
    return Capabilities(
        causal=True,
        token_display=display,
        special_roles="first_token",
        lm_head="next_token",
        generation=True,
        heads=cfg.n_heads,
        kv_heads=cfg.kv_heads,
        rotary=True,
        norm="rmsnorm",
        pre_norm=True,
        windows=cfg.windows if any(w is not None for w in cfg.windows) else (),
        family=f"{_LLAMA_NAMES.get(cfg.model_type, cfg.model_type)} decoder (Llama family)",
    )


@dataclass(frozen=True)
class Family:
    """One family: how its checkpoints become our network, and what a model of it can do."""

    model_type: str  # config.json's model_type
    config: Any  # our config class, with from_hf(dict)
    network: type[Network]  # our module tree; names = the checkpoint's keys
    hf_model: str  # the transformers class that reads its checkpoints (weights only: its forward never runs)
    hf_config: str  # the transformers config class random models are built from
    port: Callable[[State, Any], State]  # transformers' state dict → ours (renames, transposes, left-outs)
    capabilities: Callable[[Any, TokenDisplay], Capabilities]
    token_display: TokenDisplay  # the family's usual tokens (the tokenizer can say otherwise)
    pad_with_eos: bool = False  # no pad token of its own: batches pad with end-of-text, masked out
    # random:<name> → the transformers config fields of that shape (the model's own init, seed 0).
    randoms: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Heads a checkpoint may carry besides the network: (folder, our config, transformers' loading info) → a
    # module or None. BERT's masked-LM head (head importance's loss).
    extra_head: Callable[[str, Any, dict[str, Any]], Any] | None = None
    # What the training lab asks of it (models.training.arch): how a Shape becomes its config, its init's
    # residual projections, its norms and W_q/W_k gradients; None = the lab does not train it.
    training: TrainingRecipe | None = None


def _llama_family(
    model_type: str, hf_model: str, hf_config: str, training: TrainingRecipe | None = None, **randoms: dict[str, Any]
) -> Family:
    """One entry of the Llama family: the same network, port and capabilities, its own transformers classes."""
    return Family(
        model_type,
        LlamaConfig,
        LlamaForCausalLM,
        hf_model,
        hf_config,
        _port_llama,
        _llama,
        "byte_level",
        pad_with_eos=True,
        randoms=randoms,
        training=training,
    )


REGISTRY: dict[str, Family] = {
    "bert": Family(
        "bert",
        BertConfig,
        BertModel,
        "BertModel",
        "BertConfig",
        _port_bert,
        _bert,
        "wordpiece",
        randoms={
            # BertConfig() defaults: the shape of bert-base-uncased.
            "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
            # The bundled model's shape, to set untrained and trained heads side by side.
            "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
            # Small enough for fast tests.
            "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512),
        },
        extra_head=load_mlm_head,
    ),
    "gpt2": Family(
        "gpt2",
        GPT2Config,
        GPT2Model,
        "GPT2Model",
        "GPT2Config",
        port_gpt2,
        _gpt2,
        "byte_level",
        pad_with_eos=True,
        randoms={
            # GPT-2 small's shape, and one small enough for fast tests and a lecture laptop.
            "gpt2": dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257),
            "gpt2-tiny": dict(n_embd=64, n_layer=2, n_head=4, n_positions=1024),
        },
        training=gpt2.TRAINING,
    ),
    "llama": _llama_family(
        "llama",
        "LlamaForCausalLM",
        "LlamaConfig",
        llama.TRAINING,
        # 2 layers, 4 query heads sharing 2 key/value heads: GQA at a size tests and laptops run at once.
        **{
            "llama-tiny": dict(
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                intermediate_size=128,
                max_position_embeddings=2048,
                tie_word_embeddings=True,
            )
        },
    ),
    "mistral": _llama_family("mistral", "MistralForCausalLM", "MistralConfig"),
    "qwen2": _llama_family("qwen2", "Qwen2ForCausalLM", "Qwen2Config"),
    "qwen3": _llama_family("qwen3", "Qwen3ForCausalLM", "Qwen3Config"),
}


# The family the training lab starts with. Llama's rotary positions: a previous-token head is one rotation for
# every position, and the induction head forms in a few hundred steps; GPT-2's learned positions must learn "one
# back" position by position, and were still at chance after 3,500 (docs/training.md).
TRAINING_DEFAULT = "llama"


def trainable() -> tuple[str, ...]:
    """Return the model_types the training lab can build (those whose entry has a training recipe)."""
    return tuple(name for name, fam in REGISTRY.items() if fam.training is not None)


def family(model_type: object) -> Family:
    """Return the registry entry for a model_type; UnsupportedArchitectureError names the supported ones."""
    fam = REGISTRY.get(model_type) if isinstance(model_type, str) else None
    if fam is None:
        raise UnsupportedArchitectureError(
            f"unsupported architecture: model_type {model_type!r}; supported: {', '.join(REGISTRY)}"
        )
    return fam


def config_from_hf(hf: dict[str, Any]) -> Any:
    """Return our config for a checkpoint's config dict, refusing any model_type outside the registry."""
    return family(hf.get("model_type")).config.from_hf(hf)


def random_family(name: str) -> tuple[Family, dict[str, Any]] | None:
    """Return (family, transformers config fields) for a random:<name> shape, or None when no family has it."""
    for fam in REGISTRY.values():
        if name in fam.randoms:
            return fam, fam.randoms[name]
    return None


def random_names() -> list[str]:
    return [f"random:{name}" for fam in REGISTRY.values() for name in fam.randoms]


def token_display_of(tokenizer: Any, default: TokenDisplay) -> TokenDisplay:
    """Return how this tokenizer's tokens read: byte-level (Ġ), SentencePiece (▁) or WordPiece (##), by its vocab."""
    try:
        vocab = tokenizer.get_vocab()
    except (AttributeError, TypeError):
        return default
    marks: dict[TokenDisplay, str] = {"byte_level": "Ġ", "sentencepiece": "▁", "wordpiece": "##"}
    counts = {kind: sum(1 for t in vocab if t.startswith(mark)) for kind, mark in marks.items()}
    best = max(counts, key=lambda kind: counts[kind])
    return best if counts[best] >= 16 else default


def capabilities(cfg: Any, tokenizer: Any = None) -> Capabilities:
    """Return the capabilities of a model with our config `cfg` (and its tokenizer, which says how tokens read)."""
    fam = family(cfg.model_type)
    display = fam.token_display if tokenizer is None else token_display_of(tokenizer, fam.token_display)
    return fam.capabilities(cfg, display)
