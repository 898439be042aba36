"""The trained model as a real checkpoint: a folder transformers writes and reads (config.json, model.safetensors,
a tokenizer AutoTokenizer loads) that `models.load_model(folder)` opens on every page.

transformers writes the config and the tokenizer files (its own formats); the weights are written by safetensors
from the family's checkpoint layout (`Arch.hf_state_dict`). `training.json` beside them records how the model was
trained (config, task, final figures): the folder says where it came from.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from .trainer import TrainResult

WEIGHTS = "model.safetensors"
TRAINING = "training.json"


def save_checkpoint(result: TrainResult, folder: str | os.PathLike[str]) -> Path:
    """Write the trained model, its tokenizer and training.json into folder (created if missing); return it."""
    from safetensors.torch import save_file

    if not result.shape.scale and not result.arch.saves_unscaled:
        raise InputError(
            f"a {result.arch.family} model trained without 1/√d_k cannot be saved: transformers' {result.arch.family} "
            "always divides by √d_k, so the folder would not be the model that was trained"
        )
    path = Path(folder).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{path} is a file: give a folder to write the checkpoint into")
    try:
        path.mkdir(parents=True, exist_ok=True)
        result.arch.write_config(result.shape, path)
        save_file(result.arch.hf_state_dict(result.model, result.shape), str(path / WEIGHTS), metadata={"format": "pt"})
        result.task.tokenizer().save_pretrained(path)
        doc = {"trained_with": "attention-lens models.training", **result.summary()}
        (path / TRAINING).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot write the checkpoint to {path}: {err.strerror or err}") from err
    return path


@torch.no_grad()
def transformers_attentions(folder: str | os.PathLike[str], ids: torch.Tensor) -> torch.Tensor:
    """Return transformers' eager model's attentions (batch, layers, heads, q_pos, k_pos) on ids, from the folder."""
    from transformers import AutoModel

    model: Any = AutoModel.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float32)
    model.eval()
    out = model(input_ids=ids, output_attentions=True)
    return torch.stack(out.attentions, dim=1)
