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


@torch.no_grad()
def transformers_copy(
    folder: str | os.PathLike[str],
    lengths: tuple[int, ...],
    symbols: int,
    batch: int = 64,
    seed: int = 12_345,
    bos_id: int | None = None,
) -> dict[str, Any]:
    """Load the folder with transformers (eager) and measure the copy on fresh sequences r_1 … r_n r_1 … r_n that
    start at position 0, r drawn uniformly from the task's `symbols`, for each n in lengths (the held-out lengths).
    With bos_id (a task trained with `<bos>` first, which its saved tokenizer puts first too) the sequences are
    `<bos>` r_1 … r_n r_1 … r_n: the segment starts right after it.

    Returns the loss on r_2 … r_n of the copy (nats, the largest over lengths, and per length), and the head above
    layer 0 whose smallest induction score over the lengths is the largest (attention from the copy's r_k to r_{k+1}
    of the first occurrence, models.analysis.induction).
    """
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM

    from ..analysis.induction import induction_from_maps

    model: Any = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float32)
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    losses, scores = {}, []
    for n in lengths:
        half = torch.randint(0, symbols, (batch, n), generator=gen)
        pre = 0 if bos_id is None else 1  # where r_1 of the first copy stands
        ids = torch.cat([torch.full((batch, pre), bos_id or 0), half, half], dim=1)
        out = model(input_ids=ids, output_attentions=True)
        logits = out.logits[:, pre + n : pre + 2 * n - 1]  # positions of r_1 … r_{n-1} of the copy predict r_2 … r_n
        losses[n] = float(F.cross_entropy(logits.transpose(1, 2), ids[:, pre + n + 1 : pre + 2 * n]))
        attn = torch.stack(out.attentions, dim=1).float()  # (batch, layers, heads, pre + 2n, pre + 2n)
        scores.append(induction_from_maps(attn, torch.full((batch,), pre, dtype=torch.long), n))
    low = torch.stack(scores).amin(dim=0)  # (layers, heads): the smallest over lengths
    above = 1 if low.shape[0] > 1 else 0
    sub = low[above:]
    layer, head = divmod(int(sub.argmax()), sub.shape[1])
    return {
        "copy_loss": max(losses.values()),
        "copy_loss_by_length": losses,
        "head": f"L{layer + above}H{head}",
        "score": float(sub.max()),
    }
