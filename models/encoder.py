"""`Encoder`: tokenizer + our BertModel on a device, and `EncoderOutput`, the one result type every page uses."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

import torch
from torch import nn

from . import families, settings
from .attention import RECORDED
from .capabilities import Capabilities
from .errors import InputError, MaskError
from .maps import KeepOnDemand, OnDemandMaps
from .masks import conventions as masks
from .masks import predicates
from .masks.expressions import is_predicate_expression, predicate_expression
from .network import ForwardOptions, Network
from .tokens import display_tokens

# Our attention matches transformers' eager model on the same weights to this (max abs difference, float32):
# the project's parity bar, which the tests hold and the lecture's self-check shows.
PARITY_TOLERANCE = 1e-5


class TruncationWarning(UserWarning):
    """The input had more tokens than the model's positions; the tail was cut."""


@dataclass
class Tokens:
    """A tokenized, padded batch as the encoder feeds it to the model (CPU tensors)."""

    input_ids: torch.Tensor  # [batch, seq] long
    token_type_ids: torch.Tensor  # [batch, seq] long: 0 for sentence A, 1 for sentence B
    attention_mask: torch.Tensor  # [batch, seq] long, 1 = real token, 0 = [PAD]
    tokens: list[list[str]]  # per sentence, raw as the tokenizer gives them, padding included
    cut: list[int]  # per sentence, tokens cut from the end to fit max_tokens


@dataclass
class EncoderOutput:
    """Everything one forward pass gives the pages. Tensors are on the CPU; attention is float32.

    Single-text results (from `encode`) have the shapes in the comments; results of `encode_batch` carry a
    leading `batch` axis on every tensor, and `tokens` is a list per sentence (padded with [PAD]).
    """

    # Raw, as the tokenizer gives them (BERT: with [CLS] and [SEP]; GPT-2: `Ġthe`); len == seq. A batch: one list
    # of str per sentence (Any: the element type differs between a single result and a batch).
    tokens: list[Any]
    input_ids: torch.Tensor  # [seq] long
    token_type_ids: torch.Tensor  # [seq] long: 0 for sentence A, 1 for sentence B
    # [layers, heads, q_pos, k_pos] float32, rows sum to 1; a long text: OnDemandMaps, read the same way by
    # layer, head and rows (`on_demand` says which; pages need not ask)
    attentions: Any
    hidden_states: torch.Tensor | None  # [seq, d_model] float32, output of the last layer; None: encode(hidden=False)
    # [q_pos, k_pos] bool, True = may attend: the mask the encoder applied (padding included); a long text's
    # predicate mask: models.maps.KeepOnDemand, read the same way (a window is made when it is read)
    keep: Any
    padding: torch.Tensor  # [seq] bool, True = real token, False = [PAD]
    mask: str = "bidirectional"  # the mask's name, or "custom" for a user tensor
    model: str = ""  # display name of the model
    truncated: int | list[int] = 0  # tokens cut from the end to fit max positions (a batch: per sentence)
    n_unknown: int | list[int] = 0  # tokens that became [UNK] (a batch: per sentence)
    notes: list[str] = field(default_factory=list)  # warnings to show a person
    # Only when encode(..., internals=True):
    queries: torch.Tensor | None = None  # [layers, heads, seq, d_k]
    keys: torch.Tensor | None = None  # [layers, heads, seq, d_k]
    values: torch.Tensor | None = None  # [layers, heads, seq, d_k]
    scores: torch.Tensor | None = None  # [layers, heads, q_pos, k_pos], Q·Kᵀ/√d_k before the mask
    context: torch.Tensor | None = None  # [layers, heads, seq, d_k], probs·V per head (before W_o)
    layer_inputs: torch.Tensor | None = None  # [layers + 1, seq, d_model]: embeddings, each layer's output
    # Readable tokens (byte-level BPE decoded: `Ġthe` → ` the`); the same as tokens for WordPiece. Pages label
    # with these and show the raw token on hover.
    display_tokens: list[Any] = field(default_factory=list)
    kind: str = "encoder"  # "encoder" (bidirectional, BERT) or "decoder" (causal, GPT-2)
    capabilities: Capabilities = field(default_factory=Capabilities)  # what the model can do: ask these

    @property
    def is_decoder(self) -> bool:
        """Deprecated: ask `capabilities.causal` (or the capability the question is really about)."""
        return self.capabilities.causal

    def layer_keep(self, layer: int) -> torch.Tensor:
        """Return (q_pos, k_pos) bool: the mask `layer` applied (keep, narrowed by that layer's sliding window)."""
        w = self.capabilities.window(layer)
        if w is None:
            return self.keep
        if isinstance(self.keep, KeepOnDemand):  # a long text's predicate mask: narrowed, still made when read
            return self.keep & predicates.sliding_window(w)
        T = self.keep.shape[-1]
        return self.keep & masks.causal_keep(T, window=w)

    @property
    def is_batch(self) -> bool:
        return bool(self.tokens) and isinstance(self.tokens[0], list)

    @property
    def on_demand(self) -> bool:
        """Return whether the maps are made on demand (a long text: models.maps.OnDemandMaps), not kept whole."""
        return isinstance(self.attentions, OnDemandMaps)

    @property
    def seq(self) -> int:
        return int(self.attentions.shape[-1])

    @property
    def n_layers(self) -> int:
        return int(self.attentions.shape[-4])

    @property
    def n_heads(self) -> int:
        return int(self.attentions.shape[-3])

    @property
    def maps(self) -> OnDemandMaps | torch.Tensor:
        """Return the maps (layers, heads, q_pos, k_pos) to read by layer, head and rows: dense or on demand."""
        return self.attentions

    @property
    def many_unknown(self) -> bool:
        """True when so many tokens are [UNK] that the model's vocabulary does not cover the text."""
        if not self.capabilities.may_have_unknown:
            return False  # byte-level vocabularies have no unknown token: every byte is in them
        specials = 2 + int(bool(self.token_type_ids.any()))  # [CLS] a [SEP], plus b [SEP] for a pair
        n_words = max(1, int(self.padding.sum()) - specials)
        if isinstance(self.n_unknown, list):
            raise ValueError("many_unknown is for single-text results: use item(i) of a batch")
        return self.n_unknown >= 2 and self.n_unknown >= 0.3 * n_words

    @property
    def segments(self) -> list[int]:
        """Return, per token, 0 for sentence A and 1 for sentence B (token type ids as ints)."""
        return [int(t) for t in self.token_type_ids.tolist()]

    def item(self, i: int, trim: bool = True) -> EncoderOutput:
        """Return sentence i of a batched result as a single-text result; trim drops its [PAD] positions."""
        if not self.is_batch:
            raise ValueError("item() is for batched results")
        n = int(self.padding[i].sum()) if trim else self.padding.shape[1]
        cut: dict[str, Any] = {  # Any: replace() would otherwise read a tensor as one of the str fields
            "input_ids": self.input_ids[i, :n],
            "token_type_ids": self.token_type_ids[i, :n],
            # A long text's maps on demand are one text's already (and have no padding).
            "attentions": self.attentions
            if isinstance(self.attentions, OnDemandMaps)
            else self.attentions[i, ..., :n, :n],
            "hidden_states": None if self.hidden_states is None else self.hidden_states[i, :n],
            "keep": self.keep[i, :n, :n],
            "padding": self.padding[i, :n],
        }
        for name in (*RECORDED, "layer_inputs"):
            t = getattr(self, name)
            if t is None:
                continue
            if name == "scores":
                cut[name] = t[i, ..., :n, :n]
            else:
                cut[name] = t[i, ..., :n, :]
        return replace(
            self,
            tokens=list(self.tokens[i][:n]),
            display_tokens=list(self.display_tokens[i][:n]) if self.display_tokens else [],
            truncated=self.truncated[i] if isinstance(self.truncated, list) else self.truncated,
            n_unknown=self.n_unknown[i] if isinstance(self.n_unknown, list) else self.n_unknown,
            notes=list(self.notes),
            **cut,
        )

    def numpy(self) -> dict[str, Any]:
        """Return the arrays as numpy (float32 / bool / int64) and the rest as plain Python values."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.numpy() if isinstance(v, torch.Tensor) else v
        return out


# Where tensors the GEMMs read must start: torch's CPU allocator gives 64 bytes (a cache line, an AVX-512 vector).
_ALIGNMENT = 64
_M = TypeVar("_M", bound=nn.Module)


def _aligned(model: _M) -> _M:
    """Give each parameter whose data does not start on a 64-byte boundary memory of its own (a copy); return model.

    Weights loaded from a safetensors file can sit at any 8-byte offset of its mapping. MKL's sgemm takes other
    code paths for such operands, so the same weights, loaded from .safetensors or from .bin, gave maps that
    differed in the last bit (6e-8); aligned, they are identical. Aligned tensors are left as they are, so a
    checkpoint read into fresh memory is not copied again.
    """
    with torch.no_grad():
        for p in model.parameters():
            if p.data_ptr() % _ALIGNMENT:
                p.data = p.data.clone()  # the same Parameter object: a tied head sees the new memory too
    return model


class Encoder:
    """A loaded model: tokenizer, our BertModel or GPT2Model on `device`, and the spec it came from.

    Never mutated after load. `kind` is "encoder" or "decoder"; `encode` gives the same EncoderOutput for both.
    """

    def __init__(
        self,
        model: Network,
        tokenizer: Any,
        device: torch.device,
        dtype: torch.dtype,
        name: str,
        spec: str,
        source: str = "",
        mlm_head: nn.Module | None = None,
        capabilities: Capabilities | None = None,
    ):
        self.model = _aligned(model.eval().requires_grad_(False))
        # The checkpoint's masked-LM head (models.mlm.MlmHead), when it has one; head importance uses it.
        self.mlm_head = _aligned(mlm_head.eval().requires_grad_(False)) if mlm_head is not None else None
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = dtype
        self.name = name  # shown to people, e.g. "all-MiniLM-L6-v2 (bundled)"
        self.spec = spec  # what the user typed: "minilm", an HF id, a folder, "random:tiny"
        self.source = source  # where the weights came from (a folder, the HF cache, "random seed 0")
        # What this model can do and how its tokens read (models.families): pages and analyses ask these.
        caps = capabilities or families.capabilities(model.config, tokenizer)
        if caps.lm_head == "masked" and self.mlm_head is None:
            caps = caps.with_(lm_head="none")  # a BERT checkpoint saved without its masked-LM head
        self.capabilities: Capabilities = caps

    @property
    def config(self) -> Any:
        """Our config of the model's family (models.config): n_layers, n_heads, d_model, d_k, … for every family."""
        return self.model.config

    @property
    def kind(self) -> str:
        """Return "decoder" (causal: predicts the next token) or "encoder" (bidirectional): for display."""
        return "decoder" if self.capabilities.causal else "encoder"

    @property
    def is_decoder(self) -> bool:
        """Deprecated: ask `capabilities.causal` (or the capability the question is really about)."""
        return self.capabilities.causal

    @property
    def max_tokens(self) -> int:
        """Return the most tokens one input may have, [CLS] and [SEP] included."""
        limit = self.config.max_positions
        tok_limit = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_limit, int) and 0 < tok_limit < limit:
            limit = tok_limit
        return limit

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def describe(self) -> dict[str, Any]:
        """Return the facts a page or the CLI shows about this model."""
        c, caps = self.config, self.capabilities
        facts: dict[str, Any] = {
            "name": self.name,
            "family": caps.family,
            "kind": self.kind,
            "spec": self.spec,
            "source": self.source,
            "layers": c.n_layers,
            "heads": c.n_heads,
            "kv_heads": caps.kv_heads,
            "d_model": c.d_model,
            "d_k": c.d_k,
            "d_ff": c.d_ff,
            "max_tokens": self.max_tokens,
            "params": self.n_params,
            "device": str(self.device),
            "dtype": str(self.dtype).replace("torch.", ""),
            "causal": caps.causal,
            "pairs": caps.pairs,
            "tokens": caps.token_display,
            "mlm_head": self.mlm_head is not None,
            "lm_head": caps.lm_head == "next_token",  # a decoder's next-token head (tied or its own)
            "generation": caps.generation,
            "positions": "rotary" if caps.rotary else "learned",
        }
        if caps.rotary:
            facts["rope_theta"] = c.rope_theta
            facts["rope_type"] = c.rope_type
        facts["window"] = list(caps.windows) if caps.windows else None
        return facts

    # ---- tokenization -------------------------------------------------------------------------------

    @staticmethod
    def _optional(text: str | None, what: str) -> str | None:
        """Return text stripped, or None when it is None or blank; InputError when it is not a string."""
        if text is None:
            return None
        if not isinstance(text, str):
            raise InputError(f"{what} must be a string, got {type(text).__name__}")
        if len(text) > settings.limit("max_text_chars"):  # before the tokenizer sees a 5 MB string
            settings.require("max_text_chars", len(text), what)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{what} is not valid Unicode text (it holds lone surrogates): pass UTF-8 text") from None
        return text.strip() or None

    @classmethod
    def _required(cls, text: str | None, what: str) -> str:
        """Return text stripped; InputError when it is missing, blank or not a string."""
        clean = cls._optional(text, what)
        if clean is None:
            raise InputError(f"{what} is empty: type a sentence to see its attention")
        return clean

    def tokenize(self, texts: str | Sequence[str], texts_b: Sequence[str | None] | None = None) -> Tokens:
        """Check and tokenize a batch as `encode_batch` does: padded to the longest, cut to `max_tokens`.

        texts: one text or several; texts_b: a second sentence per text (None or "" = none). Either every item is
        a pair or none is. Raises InputError for empty or non-string input.
        """
        if isinstance(texts, str):
            texts = [texts]
        if len(texts) == 0:
            raise InputError("no texts to encode")
        settings.require("max_batch", len(texts), "a batch of this many sentences")
        clean = [self._required(t, f"text {i + 1}") for i, t in enumerate(texts)]
        clean_b: list[str] | None = None
        if texts_b is not None:
            if len(texts_b) != len(texts):
                raise InputError(f"{len(texts)} first sentences but {len(texts_b)} second sentences")
            seconds = [self._optional(t, f"second sentence {i + 1}") for i, t in enumerate(texts_b)]
            present = [b for b in seconds if b is not None]
            if present and not self.capabilities.pairs:
                raise InputError("this model reads one text, not a sentence pair (join them instead)")
            if present and len(present) != len(seconds):
                raise InputError("in a batch of pairs every item needs a second sentence")
            clean_b = present or None
        args = (clean, clean_b) if clean_b is not None else (clean,)
        kw: dict[str, Any] = dict(
            padding=True, return_tensors="pt", return_token_type_ids=True, return_attention_mask=True, verbose=False
        )
        enc = self.tokenizer(*args, **kw)
        limit = self.max_tokens
        cut = [max(0, int(n) - limit) for n in enc["attention_mask"].sum(1)]
        if any(cut):  # tokenize again, cut to the limit (longest sentence first for pairs); [SEP] stays last
            enc = self.tokenizer(*args, truncation="longest_first", max_length=limit, **kw)
        ids = enc["input_ids"]
        return Tokens(
            input_ids=ids,
            token_type_ids=enc["token_type_ids"],
            attention_mask=enc["attention_mask"],
            tokens=[self.tokenizer.convert_ids_to_tokens(row.tolist()) for row in ids],
            cut=cut,
        )

    # ---- forward ------------------------------------------------------------------------------------

    def keep_for(self, mask: Any, seq: int, batch: int = 1) -> tuple[torch.Tensor | None, str]:
        """Return the user's mask as a keep tensor on the device (None = nothing hidden) and its name.

        mask: None, a named mask, a bool keep tensor, or a predicate (b, h, q_idx, kv_idx) → bool — a function
        (FlexAttention's mask_mod, a transformers mask function, a BlockMask) or an expression over q_idx, kv_idx
        — made whole here, (batch or 1, heads or 1, seq, seq); `user_mask` keeps a predicate as one.
        """
        keep, name = self.user_mask(mask, seq, batch)
        if isinstance(keep, predicates.Predicate):
            return predicates.materialise(keep, seq, batch=batch, heads=self.config.n_heads, device=self.device), name
        return keep, name

    def user_mask(self, mask: Any, seq: int, batch: int = 1) -> tuple[torch.Tensor | predicates.Predicate | None, str]:
        """Return the user's mask as `keep_for` does, but a predicate as a Predicate: the forward makes it only
        where it is needed (whole for a short text, a block of rows in the long loop, a window of a map on
        demand), so a long text's mask never exists as (seq, seq)."""
        if mask is None:
            return None, "bidirectional"
        if isinstance(mask, str) and is_predicate_expression(mask):
            mask = predicate_expression(mask)  # e.g. '(kv_idx <= q_idx) & (q_idx - kv_idx < 4)'
        if not isinstance(mask, str | torch.Tensor) and (callable(mask) or hasattr(mask, "mask_mod")):
            pred = predicates.as_predicate(mask)  # a predicate (b, h, q_idx, kv_idx) → bool
            return pred, pred.name
        if isinstance(mask, str):
            exp = masks.parse_expectation(mask, allow_empty=True, what="mask")
            return masks.named_keep(mask, seq, self.device), exp.name
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise MaskError(
                "a mask tensor must be bool with True = may attend: convert other conventions first with "
                "models.masks.to_keep(mask, 'drop' or 'additive')"
            )
        # Each axis must match (batch, heads, seq, seq) or be 1; a (batch, seq) mask is key padding.
        return masks.fit(mask, batch, self.config.n_heads, seq).to(self.device), "custom"

    @torch.inference_mode()
    def encode_batch(
        self,
        texts: Sequence[str],
        texts_b: Sequence[str | None] | None = None,
        mask: str | torch.Tensor | None = None,
        internals: bool = False,
        hidden: bool = True,
        layers: Collection[int] | None = None,
        progress: Callable[[float], None] | None = None,
    ) -> EncoderOutput:
        """Encode several texts at once (padded to the longest); every tensor gets a leading batch axis.

        mask: None or a name ('causal', 'window:W', 'prefix:P'), or a bool keep tensor broadcastable to
        (batch, heads, q_pos, k_pos); it is combined with the padding mask, and for a decoder with its own causal
        mask (which no user mask can lift).
        hidden: False when only the maps are wanted (the app's pages): the last layer stops at its attention
        (`maps_only` in the model's forward) and hidden_states is None. The maps are the same numbers.

        A long text (one, whose maps would take more than ATTENTION_LENS_DENSE_MAPS_MB) gets its maps on demand:
        `attentions` is then a models.maps.OnDemandMaps read like the tensor (`[layer, head]`, `[layer, head,
        rows]`, `.shape`), within ATTENTION_LENS_MAX_TOKEN_HEADS (tokens × layers × heads) checked before the
        forward. layers: only these layers' maps can be read later (the CLI's export --layers). progress: called
        with the fraction of layers done while a long forward runs.
        """
        if isinstance(texts, str):
            raise InputError("encode_batch takes a list of texts; use encode() for one")
        batch = self.tokenize(texts, texts_b)
        input_ids = batch.input_ids  # (B, T)
        token_type_ids = batch.token_type_ids
        attention_mask = batch.attention_mask  # (B, T), 1 = real token
        cut = batch.cut
        B, T = input_ids.shape
        pad = masks.padding_keep(attention_mask).to(self.device) if not bool(attention_mask.all()) else None
        on_demand = self._needs_on_demand(B, T, internals)
        # A long text's predicate mask stays a predicate: the forward makes it a block of rows at a time and the
        # maps one window at a time, so it never exists as (seq, seq).
        if on_demand and pad is None:
            user_keep, mask_name = self.user_mask(mask, T, B)
        else:
            user_keep, mask_name = self.keep_for(mask, T, B)
        keep: Any = user_keep if isinstance(user_keep, predicates.Predicate) else masks.combine(pad, user_keep)
        how = ForwardOptions(maps_only=not hidden, on_demand=on_demand, layers=layers, progress=progress)
        ids, types = input_ids.to(self.device), token_type_ids.to(self.device)
        if internals:  # Q, K, V, scores and context of every layer, and every layer's input
            res, rec = self.model.run_with_cache(ids, types, keep, names=RECORDED, options=how)
        else:
            res, rec = self.model(ids, types, keep, options=how), None
        # (B, layers, heads, q_pos, k_pos) float32; on demand: OnDemandMaps (layers, heads, q_pos, k_pos) of one text
        attentions = res.attentions.cpu()
        keep_qk: Any
        if isinstance(keep, predicates.Predicate):  # head 0's, made only where it is read
            own = predicates.and_masks(predicates.causal(), keep) if self.capabilities.causal else keep
            keep_qk = KeepOnDemand(own, T, (B,))
        elif keep is None:
            keep_qk = torch.ones(B, T, T, dtype=torch.bool)
        else:
            # The applied mask, per sentence: the same for every head unless the user gave per-head masks.
            k4 = masks.as_4d(keep)
            keep_qk = torch.broadcast_to(k4, (B, k4.shape[1], T, T))[:, 0].cpu().clone()
        if self.capabilities.causal and isinstance(keep_qk, torch.Tensor):
            # A causal model applies its own mask inside every layer, ANDed with `keep` (sliding-window layers
            # narrow it further: EncoderOutput.layer_keep).
            keep_qk &= masks.causal_keep(T)
            if mask_name == "bidirectional":
                mask_name = "causal"

        extra: dict[str, torch.Tensor] = {}
        if rec is not None:
            for name in RECORDED:
                extra[name] = rec.stacked(name).float().cpu()
            extra["layer_inputs"] = torch.stack(rec.hidden_states, dim=1).float().cpu()

        unk_id = getattr(self.tokenizer, "unk_token_id", None) if self.capabilities.may_have_unknown else None
        n_unknown = [int((row == unk_id).sum()) for row in input_ids] if unk_id is not None else [0] * B
        notes = []
        if any(cut):
            worst = max(cut)
            msg = (
                f"input truncated to {self.max_tokens} tokens, the model's limit: {worst} token(s) cut"
                if B == 1
                else f"{sum(1 for c in cut if c)} input(s) truncated to {self.max_tokens} tokens (up to {worst} cut)"
            )
            notes.append(msg)
            warnings.warn(msg, TruncationWarning, stacklevel=3)

        return EncoderOutput(
            tokens=batch.tokens,
            display_tokens=[display_tokens(row, self.capabilities.token_display) for row in batch.tokens],
            kind=self.kind,
            capabilities=self.capabilities,
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            attentions=attentions,
            hidden_states=None if res.last_hidden is None else res.last_hidden.float().cpu(),
            keep=keep_qk,
            padding=attention_mask.bool(),
            mask=mask_name,
            model=self.name,
            truncated=cut,
            n_unknown=n_unknown,
            notes=notes,
            **extra,
        )

    def fits_dense(self, text: str, text_b: str | None = None) -> bool:
        """Return whether one text's maps are kept whole (else they are made on demand: a long text)."""
        batch = self.tokenize([text], None if text_b is None else [text_b])
        c = self.config
        T = batch.input_ids.shape[1]
        return 4 * c.n_layers * c.n_heads * T * T / (1 << 20) <= settings.limit("dense_maps_mb")

    def _needs_on_demand(self, batch: int, seq: int, internals: bool) -> bool:
        """Return whether a (batch, seq) input's maps are made on demand; BudgetError when it cannot be run at all.

        Checked before the forward allocates anything: dense maps are layers · heads · seq² float32 per text.
        """
        c = self.config
        dense_mb = 4 * batch * c.n_layers * c.n_heads * seq * seq / (1 << 20)
        if dense_mb <= settings.limit("dense_maps_mb"):
            return False
        what = f"{seq:,} tokens × {c.n_layers} layers × {c.n_heads} heads"
        if batch > 1:
            settings.require("dense_maps_mb", math.ceil(dense_mb), f"every map of a batch of {batch} ({what})")
        if internals:
            settings.require(
                "dense_maps_mb", math.ceil(dense_mb), f"the step-by-step internals of {what} (every map kept)"
            )
        settings.require("max_token_heads", seq * c.n_layers * c.n_heads, f"this text's maps on demand ({what})")
        return True

    def encode(
        self,
        text: str,
        text_b: str | None = None,
        mask: str | torch.Tensor | None = None,
        internals: bool = False,
        hidden: bool = True,
        layers: Collection[int] | None = None,
        progress: Callable[[float], None] | None = None,
    ) -> EncoderOutput:
        """Encode one text (or a sentence pair through text_b); see EncoderOutput for what comes back.

        hidden=False: only the maps are wanted, hidden_states is None and the last layer's tail is skipped (see
        encode_batch, also for long texts, `layers` and `progress`)."""
        clean = self._required(text, "text")
        out = self.encode_batch(
            [clean],
            None if text_b is None else [text_b],
            mask=mask,
            internals=internals,
            hidden=hidden,
            layers=layers,
            progress=progress,
        )
        single = out.item(0, trim=False)
        if single.many_unknown:
            single.notes.append(
                f"{single.n_unknown} of {single.seq - 2} tokens are [UNK]: this model's vocabulary does not cover "
                "this text (for Chinese, use bert-base-chinese)"
            )
        return single
