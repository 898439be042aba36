"""A small decoder trained live: tasks, the training loop, the §8.3 recorder and the checkpoint it saves.

Our own networks (the families' modules every page runs), plain torch (AdamW, seeded); transformers only to write
the config and tokenizer a saved folder needs. May import models' networks, analyses and loaders; never streamlit.
"""

from .arch import Arch, arch_for, trainable
from .checkpoint import save_checkpoint
from .recorder import FLAGS, Record
from .tasks import TASKS, Batch, InductionTask, ReverseTask, Task, TextTask, make_task
from .trainer import TrainConfig, TrainResult, train

__all__ = [
    "FLAGS",
    "Arch",
    "Batch",
    "InductionTask",
    "Record",
    "ReverseTask",
    "TASKS",
    "Task",
    "TextTask",
    "TrainConfig",
    "TrainResult",
    "arch_for",
    "make_task",
    "trainable",
    "save_checkpoint",
    "train",
]
