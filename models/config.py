"""The encoder's configuration, read from a checkpoint's `config.json`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from .errors import ModelLoadError, UnsupportedArchitectureError
from .settings import check_model_shape

# Activations BERT-family checkpoints name in `hidden_act`, mapped to torch's functional forms.
CONFIG_MAX_BYTES = 1 << 20
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")


@dataclass(frozen=True)
class BertConfig:
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
        # Sizes first, before anything is allocated: a config claiming 10⁹ layers or 0 heads stops here.
        check_model_shape(
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_model=self.d_model,
            d_ff=self.d_ff,
            vocab_size=self.vocab_size,
            max_positions=self.max_positions,
            type_vocab_size=self.type_vocab_size,
        )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise UnsupportedArchitectureError(
                f"activation {self.hidden_act!r} is not supported (supported: {', '.join(SUPPORTED_ACTIVATIONS)})"
            )

    @property
    def d_k(self) -> int:
        """Width of one head's query, key and value vectors."""
        return self.d_model // self.n_heads

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> BertConfig:
        """Build from a Hugging Face BERT config dict; raise UnsupportedArchitectureError for anything else."""
        model_type = hf.get("model_type")
        if model_type != "bert":
            archs = ", ".join(hf.get("architectures") or []) or "unknown"
            raise UnsupportedArchitectureError(
                f"unsupported architecture: model_type {model_type!r} ({archs}); "
                "supported: BERT encoders (model_type 'bert') and GPT-2 decoders (model_type 'gpt2')"
            )
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
            raise ModelLoadError(f"config.json is missing or has a bad field: {str(err)[:200]}") from err

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        """Read a `config.json` file as written by `save_pretrained`."""
        try:
            with open(path, "rb") as f:  # a config is a few kB: never read more than 1 MB of whatever is there
                raw = f.read(CONFIG_MAX_BYTES + 1)
            if len(raw) > CONFIG_MAX_BYTES:
                raise ModelLoadError(f"{path} is over {CONFIG_MAX_BYTES >> 20} MB: not a model's config.json")
            hf = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ModelLoadError(f"cannot read {path}: {err}") from err
        if not isinstance(hf, dict):
            raise ModelLoadError(f"{path} is not a JSON object")
        return cls.from_hf(hf)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MAX_DECODER_POSITIONS = 16_384  # the tril buffer, shared by all blocks, is then at most 256 MB


@dataclass(frozen=True)
class GPT2Config:
    """A GPT-2 decoder's shape, with the field names BertConfig uses so that pages and analyses read either."""

    model_type: ClassVar[str] = "gpt2"

    vocab_size: int = 50257  # byte-level BPE of the released GPT-2 checkpoints
    d_model: int = 768  # n_embd
    n_layers: int = 12  # n_layer
    n_heads: int = 12  # n_head; d_k = d_model // n_heads
    d_ff: int = 3072  # n_inner, or 4·d_model when the checkpoint leaves it null
    max_positions: int = 1024  # n_positions: the learned position table, and the causal mask's size
    layer_norm_eps: float = 1e-5  # layer_norm_epsilon
    hidden_act: str = "gelu_new"  # activation_function: GPT-2 was trained with the tanh approximation
    scale_attn_weights: bool = True  # divide scores by √d_k (every released GPT-2 does)
    scale_attn_by_inverse_layer_idx: bool = False  # also divide layer i's scores by i + 1 (Mistral's GPT-2s)
    bos_token_id: int = 50256
    eos_token_id: int = 50256
    type_vocab_size: int = 0  # no segment embeddings: a decoder reads one text
    pad_token_id: int = 50256  # GPT-2 has no pad token; batches pad with <|endoftext|>, masked out

    def __post_init__(self) -> None:
        # Sizes first, before anything is allocated (the tril buffers alone are layers · max_positions² bytes).
        check_model_shape(
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_model=self.d_model,
            d_ff=self.d_ff,
            vocab_size=self.vocab_size,
            max_positions=self.max_positions,
        )
        if self.max_positions > MAX_DECODER_POSITIONS:
            raise ModelLoadError(
                f"config.json: n_positions is {self.max_positions}; the causal mask is n_positions² bytes, so a "
                f"decoder here has at most {MAX_DECODER_POSITIONS}"
            )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise UnsupportedArchitectureError(
                f"activation {self.hidden_act!r} is not supported (supported: {', '.join(SUPPORTED_ACTIVATIONS)})"
            )

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> GPT2Config:
        """Build from a Hugging Face GPT-2 config dict; raise UnsupportedArchitectureError for anything else."""
        if hf.get("model_type") != "gpt2":
            archs = ", ".join(hf.get("architectures") or []) or "unknown"
            raise UnsupportedArchitectureError(
                f"unsupported architecture: model_type {hf.get('model_type')!r} ({archs}); expected 'gpt2'"
            )
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
        except (KeyError, TypeError, ValueError) as err:
            raise ModelLoadError(f"config.json is missing or has a bad field: {err}") from err

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_config_json(path: str | Path) -> dict[str, Any]:
    """Return a `config.json` as a dict (ModelLoadError when it cannot be read)."""
    try:
        hf = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ModelLoadError(f"cannot read {path}: {err}") from err
    if not isinstance(hf, dict):
        raise ModelLoadError(f"{path} is not a JSON object")
    return hf


def config_from_hf(hf: dict[str, Any]) -> BertConfig | GPT2Config:
    """Return the config of either family a checkpoint's config dict names (model_type 'bert' or 'gpt2')."""
    return GPT2Config.from_hf(hf) if hf.get("model_type") == "gpt2" else BertConfig.from_hf(hf)


ModelConfig = BertConfig | GPT2Config
