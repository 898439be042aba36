"""Our from-scratch BERT encoder, its weights, masks and analyses. torch only; transformers only to load weights."""

from .bert import BertEncoder
from .config import BertConfig
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
from .weights import bundled_model_dir, load_encoder

__all__ = [
    "AttnVizError",
    "BudgetError",
    "BertConfig",
    "BertEncoder",
    "DeviceError",
    "Encoder",
    "EncoderOutput",
    "InputError",
    "MaskError",
    "ModelLoadError",
    "ModelNotAllowedError",
    "SettingsError",
    "TruncationWarning",
    "UnsupportedArchitectureError",
    "bundled_model_dir",
    "load_encoder",
]
