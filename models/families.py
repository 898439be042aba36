"""The family registry: `model_type` → our config, network and the capabilities a loaded model has.

With each family's own file (`bert.py`, `gpt2.py`), the only place that names a family. Pages, analyses, the
lecture and the CLI ask `Capabilities` (models.capabilities); adding a family is one module plus an entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .capabilities import Capabilities, TokenDisplay
from .config import BertConfig, GPT2Config
from .errors import UnsupportedArchitectureError


def _bert(cfg: Any, token_display: TokenDisplay = "wordpiece") -> Capabilities:
    return Capabilities(
        causal=False,
        pairs=cfg.type_vocab_size > 1,
        token_display=token_display,
        special_roles="cls_sep",
        lm_head="masked",
        generation=False,
        heads=cfg.n_heads,
        kv_heads=cfg.n_heads,
        family="BERT encoder",
    )


def _gpt2(cfg: Any, token_display: TokenDisplay = "byte_level") -> Capabilities:
    return Capabilities(
        causal=True,
        pairs=False,
        token_display=token_display,
        special_roles="first_token",
        lm_head="next_token",
        generation=True,
        heads=cfg.n_heads,
        kv_heads=cfg.n_heads,
        family="GPT-2 decoder",
    )


@dataclass(frozen=True)
class Family:
    """One family: the config class that reads its `config.json` and the capabilities a model of it has."""

    model_type: str  # config.json's model_type
    config: type  # ours, with from_hf(dict)
    capabilities: Callable[..., Capabilities]  # (our config, token_display) → Capabilities
    token_display: TokenDisplay  # the family's usual tokens (the tokenizer can say otherwise)


REGISTRY: dict[str, Family] = {
    "bert": Family("bert", BertConfig, _bert, "wordpiece"),
    "gpt2": Family("gpt2", GPT2Config, _gpt2, "byte_level"),
}


def family(model_type: object) -> Family:
    """Return the registry entry for a model_type; UnsupportedArchitectureError names the supported ones."""
    fam = REGISTRY.get(model_type) if isinstance(model_type, str) else None
    if fam is None:
        raise UnsupportedArchitectureError(
            f"unsupported architecture: model_type {model_type!r}; supported: {', '.join(REGISTRY)}"
        )
    return fam


def token_display_of(tokenizer: Any, default: TokenDisplay) -> TokenDisplay:
    """Return how this tokenizer's tokens read: byte-level (Ġ), SentencePiece (▁) or WordPiece (##), by its vocab."""
    try:
        vocab = tokenizer.get_vocab()
    except (AttributeError, TypeError):
        return default
    marks = {"byte_level": "Ġ", "sentencepiece": "▁", "wordpiece": "##"}
    counts = {kind: sum(1 for t in vocab if t.startswith(mark)) for kind, mark in marks.items()}
    best = max(counts, key=lambda kind: counts[kind])
    return best if counts[best] >= 16 else default  # type: ignore[return-value]  # a key of marks


def capabilities(cfg: Any, tokenizer: Any = None) -> Capabilities:
    """Return the capabilities of a model with our config `cfg` (and its tokenizer, which says how tokens read)."""
    fam = family(cfg.model_type)
    display = fam.token_display if tokenizer is None else token_display_of(tokenizer, fam.token_display)
    return fam.capabilities(cfg, display)
