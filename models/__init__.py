"""Our from-scratch transformers (BERT encoders, GPT-2, the Llama family), their weights, masks and analyses. torch only; transformers only to load weights."""

import warnings

from .bert import BertModel
from .capabilities import Capabilities
from .config import BertConfig, GPT2Config
from .encoder import Encoder, EncoderOutput, TruncationWarning
from .errors import (
    AttnVizError,
    BudgetError,
    DeviceError,
    InputError,
    MaskError,
    ModelLoadError,
    ModelNotAllowedError,
    SettingsError,
    UnsupportedArchitectureError,
)
from .gpt2 import GPT2Model, KVCache
from .masks.harness import AttentionReport, assert_attention, check_attention
from .weights import bundled_model_dir, load_encoder, load_model, spec_capabilities, spec_kind


def __getattr__(name: str) -> object:
    """`models.BertEncoder`, the whole model's old name, still works (transformers calls it BertModel)."""
    if name == "BertEncoder":
        warnings.warn("models.BertEncoder is now models.BertModel", DeprecationWarning, stacklevel=2)
        return BertModel
    raise AttributeError(f"module 'models' has no attribute {name!r}")


__all__ = [
    "AttentionReport",
    "AttnVizError",
    "BudgetError",
    "BertConfig",
    "BertModel",
    "Capabilities",
    "DeviceError",
    "Encoder",
    "EncoderOutput",
    "GPT2Config",
    "GPT2Model",
    "KVCache",
    "InputError",
    "MaskError",
    "ModelLoadError",
    "ModelNotAllowedError",
    "SettingsError",
    "TruncationWarning",
    "UnsupportedArchitectureError",
    "assert_attention",
    "bundled_model_dir",
    "check_attention",
    "load_encoder",
    "load_model",
    "spec_capabilities",
    "spec_kind",
]
