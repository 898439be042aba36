"""The one strict copy of a checkpoint's tensors into our modules: every key and shape checked, nothing filled in."""

from __future__ import annotations

import torch

from .errors import ModelLoadError


def strict_copy(ours: torch.nn.Module, theirs: dict[str, torch.Tensor], what: str) -> None:
    """Load `theirs` into `ours` (built on the meta device) after a strict check of every key and shape."""
    expected = {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    missing = sorted(set(expected) - set(theirs))
    unexpected = sorted(set(theirs) - set(expected))
    wrong = sorted(k for k in set(expected) & set(theirs) if tuple(theirs[k].shape) != expected[k])
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} ({', '.join(missing[:4])}{' …' if len(missing) > 4 else ''})")
        if unexpected:
            parts.append(
                f"unexpected {len(unexpected)} ({', '.join(unexpected[:4])}{' …' if len(unexpected) > 4 else ''})"
            )
        if wrong:
            k = wrong[0]
            parts.append(f"{len(wrong)} of wrong shape (e.g. {k}: {tuple(theirs[k].shape)} vs {expected[k]})")
        raise ModelLoadError(f"checkpoint does not match {what}: " + "; ".join(parts))
    # assign=True takes the loaded tensors as they are: no second copy of the weights in memory.
    ours.load_state_dict({k: v.detach() for k, v in theirs.items()}, strict=True, assign=True)
