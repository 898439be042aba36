"""The encoder's configuration, read from a checkpoint's `config.json`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import ModelLoadError, UnsupportedArchitectureError
from .settings import check_model_shape

# Activations BERT-family checkpoints name in `hidden_act`, mapped to torch's functional forms.
CONFIG_MAX_BYTES = 1 << 20
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")


@dataclass(frozen=True)
class BertConfig:
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
                "only BERT encoders (model_type 'bert') are supported"
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
