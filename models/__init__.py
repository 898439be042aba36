"""Our from-scratch BERT encoder, its weights, masks and analyses. torch only; transformers only to load weights."""

from .bert import BertEncoder
from .config import BertConfig
from .encoder import Encoder, EncoderOutput, TruncationWarning
from .errors import (
    AttnVizError,
    DeviceError,
    InputError,
    MaskError,
    ModelLoadError,
    UnsupportedArchitectureError,
)
from .weights import bundled_model_dir, load_encoder

__all__ = [
    "AttnVizError",
    "BertConfig",
    "BertEncoder",
    "DeviceError",
    "Encoder",
    "EncoderOutput",
    "InputError",
    "MaskError",
    "ModelLoadError",
    "TruncationWarning",
    "UnsupportedArchitectureError",
    "bundled_model_dir",
    "load_encoder",
]
