"""Our configs, read from a checkpoint's `config.json`: one flat dataclass per family, the same field names.

Every config has `model_type` (the family registry's key), n_layers, n_heads, d_model, d_k, d_ff, vocab_size,
max_positions and hidden_act, so pages and analyses read any of them; each family adds its own fields with the
reason beside each. Sizes are held to `settings.check_model_shape` before anything is allocated.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from .errors import ModelLoadError, UnsupportedArchitectureError
from .settings import check_model_shape

CONFIG_MAX_BYTES = 1 << 20
# Activations checkpoints name in `hidden_act` / `activation_function` (models.network.ACTIVATIONS has them).
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")
MAX_DECODER_POSITIONS = 131_072  # positions a decoder's config may claim (masks are made per forward, not stored)


def read_config_json(path: str | Path) -> dict[str, Any]:
    """Return a `config.json` as a dict (ModelLoadError when it cannot be read); never more than 1 MB is read."""
    try:
        # A regular file only (a FIFO would block the read, a device never end it); O_NONBLOCK for the open itself.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ModelLoadError(f"cannot read {path}: it is not a regular file")
            raw = f.read(CONFIG_MAX_BYTES + 1)
        if len(raw) > CONFIG_MAX_BYTES:
            raise ModelLoadError(f"{path} is over {CONFIG_MAX_BYTES >> 20} MB: not a model's config.json")
        hf = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ModelLoadError(f"cannot read {path}: {err}") from err
    if not isinstance(hf, dict):
        raise ModelLoadError(f"{path} is not a JSON object")
    return hf


def _unsupported(hf: dict[str, Any], expected: str) -> UnsupportedArchitectureError:
    archs = ", ".join(str(a) for a in hf.get("architectures") or []) or "unknown"
    return UnsupportedArchitectureError(
        f"unsupported architecture: model_type {hf.get('model_type')!r} ({archs}); expected {expected}"
    )


class _Config:
    """What every family's config shares: the size check, d_k, reading config.json, a plain dict."""

    model_type: ClassVar[str] = ""
    n_layers: int
    n_heads: int
    d_model: int
    d_ff: int
    vocab_size: int
    max_positions: int
    hidden_act: str

    def _check(self, **extra: int) -> None:
        # Sizes first, before anything is allocated: a config claiming 10⁹ layers or 0 heads stops here.
        check_model_shape(
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_model=self.d_model,
            d_ff=self.d_ff,
            vocab_size=self.vocab_size,
            max_positions=self.max_positions,
            **extra,
        )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise UnsupportedArchitectureError(
                f"activation {self.hidden_act!r} is not supported (supported: {', '.join(SUPPORTED_ACTIVATIONS)})"
            )

    @property
    def d_k(self) -> int:
        """Width of one head's query, key and value vectors."""
        return self.d_model // self.n_heads

    @property
    def n_kv_heads(self) -> int:
        """Key/value heads per layer (= n_heads unless the family groups them)."""
        return self.n_heads

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> Any:
        raise NotImplementedError

    @classmethod
    def from_json(cls, path: str | Path) -> Any:
        """Read a `config.json` file as written by `save_pretrained`."""
        return cls.from_hf(read_config_json(path))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass


def _check_positive(name: str, value: float, below: float = math.inf) -> None:
    """Refuse a float field that is NaN, infinite, ≤ 0 or ≥ below (rope θ, a norm's ε), as the bounds do sizes."""
    if not (math.isfinite(value) and 0 < value < below):
        upper = "" if below == math.inf else f" and < {below:g}"
        raise ModelLoadError(f"config.json: {name} is {value:g}; it must be finite and > 0{upper}")


def _bad_field(err: Exception) -> ModelLoadError:
    return ModelLoadError(f"config.json is missing or has a bad field: {str(err)[:200]}")


@dataclass(frozen=True)
class BertConfig(_Config):
    model_type: ClassVar[str] = "bert"  # config.json's, the family registry's key
    vocab_size: int = 30522  # WordPiece vocabulary of bert-base-uncased (and of all-MiniLM-L6-v2)
    d_model: int = 768  # hidden_size: width of the residual stream
    n_layers: int = 12  # num_hidden_layers
    n_heads: int = 12  # num_attention_heads; d_k = d_model // n_heads
    d_ff: int = 3072  # intermediate_size: width of the feed-forward block, usually 4·d_model
    max_positions: int = 512  # max_position_embeddings: longer inputs must be truncated
    type_vocab_size: int = 2  # segment embeddings: 0 for sentence A, 1 for sentence B
    layer_norm_eps: float = 1e-12  # BERT's own; LayerNorm's default 1e-5 would break parity
    hidden_act: str = "gelu"  # exact (erf) GELU in BERT; "gelu_new" is the tanh approximation
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        self._check(type_vocab_size=self.type_vocab_size)
        _check_positive("layer_norm_eps", self.layer_norm_eps, below=1.0)

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> BertConfig:
        """Build from a Hugging Face BERT config dict; raise UnsupportedArchitectureError for anything else."""
        if hf.get("model_type") != "bert":
            raise _unsupported(hf, "'bert'")
        pos_type = hf.get("position_embedding_type", "absolute")
        if pos_type != "absolute":
            raise UnsupportedArchitectureError(
                f"unsupported architecture: position_embedding_type {pos_type!r}; only 'absolute' is supported"
            )
        if hf.get("is_decoder") or hf.get("add_cross_attention"):
            raise UnsupportedArchitectureError(
                "unsupported architecture: a BERT decoder or cross-attention model; only encoders are supported"
            )
        try:
            return cls(
                vocab_size=int(hf["vocab_size"]),
                d_model=int(hf["hidden_size"]),
                n_layers=int(hf["num_hidden_layers"]),
                n_heads=int(hf["num_attention_heads"]),
                d_ff=int(hf["intermediate_size"]),
                max_positions=int(hf.get("max_position_embeddings", 512)),
                type_vocab_size=int(hf.get("type_vocab_size", 2)),
                layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
                hidden_act=str(hf.get("hidden_act", "gelu")),
                pad_token_id=int(hf.get("pad_token_id") or 0),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise _bad_field(err) from err


@dataclass(frozen=True)
class GPT2Config(_Config):
    """A GPT-2 decoder's shape, with the field names BertConfig uses so that pages and analyses read either."""

    model_type: ClassVar[str] = "gpt2"
    vocab_size: int = 50257  # byte-level BPE of the released GPT-2 checkpoints
    d_model: int = 768  # n_embd
    n_layers: int = 12  # n_layer
    n_heads: int = 12  # n_head; d_k = d_model // n_heads
    d_ff: int = 3072  # n_inner, or 4·d_model when the checkpoint leaves it null
    max_positions: int = 1024  # n_positions: the learned position table
    layer_norm_eps: float = 1e-5  # layer_norm_epsilon
    hidden_act: str = "gelu_new"  # activation_function: GPT-2 was trained with the tanh approximation
    scale_attn_weights: bool = True  # divide scores by √d_k (every released GPT-2 does)
    scale_attn_by_inverse_layer_idx: bool = False  # also divide layer i's scores by i + 1 (Mistral's GPT-2s)
    bos_token_id: int = 50256
    eos_token_id: int = 50256
    type_vocab_size: int = 0  # no segment embeddings: a decoder reads one text
    pad_token_id: int = 50256  # GPT-2 has no pad token; batches pad with <|endoftext|>, masked out

    def __post_init__(self) -> None:
        self._check()
        _check_positive("layer_norm_epsilon", self.layer_norm_eps, below=1.0)
        if self.max_positions > MAX_DECODER_POSITIONS:
            raise ModelLoadError(
                f"config.json: n_positions is {self.max_positions}; a decoder here has at most {MAX_DECODER_POSITIONS}"
            )

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> GPT2Config:
        """Build from a Hugging Face GPT-2 config dict; raise UnsupportedArchitectureError for anything else."""
        if hf.get("model_type") != "gpt2":
            raise _unsupported(hf, "'gpt2'")
        if hf.get("add_cross_attention"):
            raise UnsupportedArchitectureError("unsupported architecture: a GPT-2 with cross-attention")
        try:
            d_model = int(hf["n_embd"])
            return cls(
                vocab_size=int(hf["vocab_size"]),
                d_model=d_model,
                n_layers=int(hf["n_layer"]),
                n_heads=int(hf["n_head"]),
                d_ff=int(hf.get("n_inner") or 4 * d_model),
                max_positions=int(hf.get("n_positions", 1024)),
                layer_norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
                hidden_act=str(hf.get("activation_function", "gelu_new")),
                scale_attn_weights=bool(hf.get("scale_attn_weights", True)),
                scale_attn_by_inverse_layer_idx=bool(hf.get("scale_attn_by_inverse_layer_idx", False)),
                bos_token_id=int(hf.get("bos_token_id", 50256) or 0),
                eos_token_id=int(hf.get("eos_token_id", 50256) or 0),
                pad_token_id=int(hf.get("eos_token_id", 50256) or 0),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise _bad_field(err) from err


ROPE_TYPES = ("default", "linear", "llama3")  # rotary variants we compute (models.llama.rope_frequencies)
LLAMA_TYPES = ("llama", "mistral", "qwen2", "qwen3")  # model_types of the Llama family's config.json files


@dataclass(frozen=True)
class LlamaConfig(_Config):
    """A Llama-family decoder (Llama, Mistral, Qwen2, Qwen3): rotary positions, grouped-query attention, RMSNorm,
    SwiGLU. The variants differ only in the fields below, never in code copies."""

    model_type: str = "llama"  # type: ignore[misc]  # an instance field here: four model_types share this class
    vocab_size: int = 49152  # SmolLM2's
    d_model: int = 576  # hidden_size
    n_layers: int = 30  # num_hidden_layers
    n_heads: int = 9  # num_attention_heads: query heads
    kv_heads: int = 3  # num_key_value_heads: each serves n_heads / kv_heads query heads (GQA; 1 = MQA)
    head_dim: int = 64  # explicit in Qwen3 (128 with d_model 1024); else d_model // n_heads
    d_ff: int = 1536  # intermediate_size: SwiGLU's width
    max_positions: int = 8192  # max_position_embeddings: what rotary was trained to
    rms_norm_eps: float = 1e-5
    rope_theta: float = 100_000.0  # the base of the rotary frequencies θ_i = base^(−2i/d_k)
    rope_type: str = "default"  # "linear" or "llama3" rescale the frequencies for longer contexts
    rope_factor: float = 1.0  # linear, llama3: how many times longer than the original context
    rope_low_freq_factor: float = 1.0  # llama3 only
    rope_high_freq_factor: float = 4.0  # llama3 only
    rope_original_positions: int = 8192  # llama3 only: the pre-training context
    qkv_bias: bool = False  # Qwen2: q, k, v have biases; Llama's attention_bias puts one on o_proj too
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # Qwen3: an RMSNorm over each head's q and k (d_k wide) before rotation
    windows: tuple[int | None, ...] = ()  # per layer: sliding window W (keys i − W + 1 … i) or None (full causal)
    tie_word_embeddings: bool = True  # the LM head is the token embedding (SmolLM2); else lm_head.weight
    hidden_act: str = "silu"  # SwiGLU's gate
    bos_token_id: int | None = 1
    eos_token_id: int | None = 2
    pad_token_id: int | None = None

    def __post_init__(self) -> None:
        self._check(kv_heads=self.kv_heads, head_dim=self.head_dim)
        if self.max_positions > MAX_DECODER_POSITIONS:
            raise ModelLoadError(
                f"config.json: max_position_embeddings is {self.max_positions}; a decoder here has at most "
                f"{MAX_DECODER_POSITIONS}"
            )
        _check_positive("rope_theta", self.rope_theta)
        _check_positive("rms_norm_eps", self.rms_norm_eps, below=1.0)
        _check_positive("rope_factor", self.rope_factor)
        if self.rope_type not in ROPE_TYPES:
            raise UnsupportedArchitectureError(
                f"unsupported rotary scaling {self.rope_type!r} (supported: {', '.join(ROPE_TYPES)})"
            )
        if len(self.windows) not in (0, self.n_layers):
            raise ModelLoadError(f"config.json: {len(self.windows)} layer types for {self.n_layers} layers")

    @property
    def d_k(self) -> int:
        return self.head_dim

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> LlamaConfig:
        """Build from a Llama / Mistral / Qwen2 / Qwen3 config dict (rope_parameters or rope_theta + rope_scaling)."""
        model_type = hf.get("model_type")
        if model_type not in LLAMA_TYPES:
            raise _unsupported(hf, " or ".join(repr(t) for t in LLAMA_TYPES))
        try:
            d_model = int(hf["hidden_size"])
            n_heads = int(hf["num_attention_heads"])
            n_layers = int(hf["num_hidden_layers"])
            rope = dict(hf.get("rope_parameters") or {})
            scaling = hf.get("rope_scaling") or {}
            if not isinstance(rope, dict) or not isinstance(scaling, dict):
                raise TypeError("rope_parameters / rope_scaling must be objects")
            rope = {**scaling, **rope}
            rope_type = str(rope.get("rope_type", rope.get("type", "default")))
            theta = float(rope.get("rope_theta", hf.get("rope_theta", 10_000.0)))
            return cls(
                model_type=str(model_type),
                vocab_size=int(hf["vocab_size"]),
                d_model=d_model,
                n_layers=n_layers,
                n_heads=n_heads,
                kv_heads=int(hf.get("num_key_value_heads") or n_heads),
                # n_heads 0 is refused by the bounds (n_heads is 0), not by a ZeroDivisionError here
                head_dim=int(hf.get("head_dim") or (d_model // n_heads if n_heads > 0 else 0)),
                d_ff=int(hf["intermediate_size"]),
                max_positions=int(hf.get("max_position_embeddings", 2048)),
                rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
                rope_theta=theta,
                rope_type=rope_type,
                rope_factor=float(rope.get("factor", 1.0)),
                rope_low_freq_factor=float(rope.get("low_freq_factor", 1.0)),
                rope_high_freq_factor=float(rope.get("high_freq_factor", 4.0)),
                rope_original_positions=int(
                    rope.get("original_max_position_embeddings", hf.get("max_position_embeddings", 2048))
                ),
                qkv_bias=model_type == "qwen2" or bool(hf.get("attention_bias", False)),
                o_bias=bool(hf.get("attention_bias", False)),
                mlp_bias=bool(hf.get("mlp_bias", False)),
                qk_norm=model_type == "qwen3",
                windows=_windows(hf, str(model_type), n_layers),
                tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
                hidden_act=str(hf.get("hidden_act", "silu")),
                bos_token_id=_optional_int(hf.get("bos_token_id")),
                eos_token_id=_optional_int(hf.get("eos_token_id")),
                pad_token_id=_optional_int(hf.get("pad_token_id")),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise _bad_field(err) from err


def _optional_int(v: Any) -> int | None:
    if isinstance(v, list):  # some configs list several end tokens: the first is the one generation stops at
        v = v[0] if v else None
    return None if v is None else int(v)


def _windows(hf: dict[str, Any], model_type: str, n_layers: int) -> tuple[int | None, ...]:
    """Return each layer's sliding window as transformers' config classes decide it, or () for none.

    Mistral: every layer, when sliding_window is set. Qwen2/Qwen3: only with use_sliding_window, for layers from
    max_window_layers on. `layer_types` ("sliding_attention" / "full_attention"), where present, says it outright.
    """
    window = hf.get("sliding_window")
    if model_type in ("qwen2", "qwen3") and not hf.get("use_sliding_window", False):
        window = None
    if model_type == "llama":
        window = None
    types = hf.get("layer_types")
    if window is None:
        return ()
    w = int(window)
    if w < 1:
        raise ValueError(f"sliding_window {w} is below 1")
    if isinstance(types, list) and len(types) == n_layers:
        return tuple(w if t == "sliding_attention" else None for t in types)
    if model_type in ("qwen2", "qwen3"):
        first = int(hf.get("max_window_layers", n_layers))
        return tuple(w if i >= first else None for i in range(n_layers))
    return tuple(w for _ in range(n_layers))


ModelConfig = BertConfig | GPT2Config | LlamaConfig


# ---- training recipes: what the training lab asks a family (models.training.arch) ---------------------------


@dataclass(frozen=True)
class Shape:
    """What the trainer asks a family to build."""

    layers: int
    heads: int
    d_model: int
    vocab_size: int
    positions: int  # max positions = the task's sequence length
    mlp: bool  # False: attention-only (the MLP zero and frozen)
    scale: bool = True  # divide scores by √d_k; False is the "break it" switch (§7: loss does not fall)
    bos_id: int = 0  # config's bos/eos (one token for both)


@dataclass(frozen=True)
class TrainingRecipe:
    """One family's training knowledge, kept with the family (its `Family.training` in models.families).

    config: Shape → our config of the family; hf_config: that config → transformers' config keywords;
    residual: names of the projections back into the residual stream (initialised at std / √(2·layers));
    saves_unscaled: the config itself can drop 1/√d_k (scale=False) so that transformers reads the checkpoint the
    same way (GPT-2's scale_attn_weights); otherwise the trainer sets each layer's scale to 1 and cannot save it.
    qk_grads: model → per layer (grad of W_q, grad of W_k); norms: (model, mlp) → (name, module) of every norm
    whose output the network uses, in order.
    """

    config: Any  # Callable[[Shape], config]
    hf_config: Any  # Callable[[config], dict[str, Any]]
    residual: tuple[str, ...]
    qk_grads: Any  # Callable[[network], list[tuple[Tensor, Tensor]]]
    norms: Any  # Callable[[network, bool], list[tuple[str, Module]]]
    saves_unscaled: bool = False
