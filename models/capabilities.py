"""What a loaded model can do and how its tokens read: the facts pages, analyses, lecture and CLI ask for.

Nothing outside the family registry (`models.families`) and each family's own file decides by family; they ask
a `Capabilities`. Torch-free: attention files carry one too (what can be told from the maps alone).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

TokenDisplay = Literal["wordpiece", "byte_level", "sentencepiece", "plain"]
SpecialRoles = Literal["cls_sep", "first_token", "none"]
LmHead = Literal["masked", "next_token", "none"]
NormKind = Literal["layernorm", "rmsnorm", ""]


@dataclass(frozen=True)
class Capabilities:
    """One model's (or one attention file's) facts, each a separate question: never "is it GPT-2"."""

    causal: bool = False  # the model applies its own causal mask: query i sees keys 0…i, no mask lifts that
    pairs: bool = False  # reads a sentence pair (segment ids, [SEP] between); False: one text
    # How raw tokens become readable ones: "wordpiece" (##ing, [UNK] possible), "byte_level" (Ġthe, every byte in
    # the vocabulary), "sentencepiece" (▁the, <0x0A> byte fallback), "plain" (shown as they are).
    token_display: TokenDisplay = "plain"
    # Which positions have a role of their own: "cls_sep" ([CLS] first, [SEP] closing each sentence),
    # "first_token" (position 0, a BOS or just the first token: where decoders park spare attention, the sink).
    special_roles: SpecialRoles = "none"
    lm_head: LmHead = "none"  # "masked": predicts [MASK]ed tokens (head importance); "next_token": a decoder's
    generation: bool = False  # continues a prompt token by token with a KV cache
    heads: int = 0  # query heads per layer (0: unknown, as for a file without a model)
    kv_heads: int = 0  # key/value heads per layer: == heads for multi-head attention, fewer (GQA), 1 (MQA)
    rotary: bool = False  # positions enter by rotating q and k (RoPE), not through a learned table
    # Per layer, the sliding window W (a query sees itself and the W − 1 keys before it) or None (every key it
    # may see); () when no layer has one.
    windows: tuple[int | None, ...] = ()
    # How the family's forward is built (the lecture's step texts read these, never the family's name):
    norm: NormKind = ""  # "layernorm" (x − mean, / std, · weight + bias), "rmsnorm" (x / rms · weight), "": unknown
    pre_norm: bool = False  # the norm sits before attention (x + attn(norm(x))); False: after the residual (post-LN)
    position_table: bool = False  # learned absolute position embeddings added to the token embeddings
    family: str = ""  # display only ("info", the model card); never compared against

    @property
    def grouped(self) -> bool:
        """Return whether several query heads share one key/value head (GQA or MQA)."""
        return 0 < self.kv_heads < self.heads

    @property
    def group_size(self) -> int:
        """Return how many query heads read each key/value head (1 for multi-head attention)."""
        return self.heads // self.kv_heads if self.grouped else 1

    def kv_head(self, head: int) -> int:
        """Return the key/value head query head `head` reads: head // (heads / kv_heads)."""
        return head // self.group_size

    @property
    def segments(self) -> bool:
        """Return whether the embeddings add a segment (token type) vector: a sentence-pair model's."""
        return self.pairs

    @property
    def sink(self) -> bool:
        """Return whether position 0 is where spare attention parks (a causal model's first token, the sink)."""
        return self.special_roles == "first_token"

    @property
    def may_have_unknown(self) -> bool:
        """Return whether text can become [UNK] tokens (WordPiece); byte-level vocabularies spell every byte."""
        return self.token_display == "wordpiece"

    @property
    def byte_level(self) -> bool:
        return self.token_display == "byte_level"

    def window(self, layer: int) -> int | None:
        """Return layer's sliding window, or None when that layer sees every key its mask allows."""
        return self.windows[layer] if 0 <= layer < len(self.windows) else None

    def with_(self, **changes: object) -> Capabilities:
        return replace(self, **changes)  # type: ignore[arg-type]  # dataclasses.replace takes the fields by name


ENCODER_LIKE = Capabilities()  # what a file without causal structure is read as
