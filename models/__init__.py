"""Our from-scratch transformers (BERT encoders, GPT-2, the Llama family), their weights, masks and analyses. torch only; transformers only to load weights."""

import importlib
import warnings
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from .bert import BertModel
    from .capabilities import Capabilities
    from .config import BertConfig, GPT2Config
    from .encoder import Encoder, EncoderOutput, TruncationWarning
    from .gpt2 import GPT2Model, KVCache
    from .masks.harness import AttentionReport, assert_attention, check_attention
    from .weights import bundled_model_dir, load_encoder, load_model, spec_capabilities, spec_kind

# Imported on first use (PEP 562), so that `attention-lens --help` answers without loading torch.
_LAZY = {
    "BertModel": ".bert",
    "Capabilities": ".capabilities",
    "BertConfig": ".config",
    "GPT2Config": ".config",
    "Encoder": ".encoder",
    "EncoderOutput": ".encoder",
    "TruncationWarning": ".encoder",
    "GPT2Model": ".gpt2",
    "KVCache": ".gpt2",
    "AttentionReport": ".masks.harness",
    "assert_attention": ".masks.harness",
    "check_attention": ".masks.harness",
    "bundled_model_dir": ".weights",
    "load_encoder": ".weights",
    "load_model": ".weights",
    "spec_capabilities": ".weights",
    "spec_kind": ".weights",
}


def __getattr__(name: str) -> object:
    """Load a public name on first use; `models.BertEncoder`, the whole model's old name, still works."""
    if name == "BertEncoder":
        warnings.warn("models.BertEncoder is now models.BertModel", DeprecationWarning, stacklevel=2)
        return __getattr__("BertModel")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'models' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


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
