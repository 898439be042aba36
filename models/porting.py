"""The one strict copy of a checkpoint's tensors into our modules: every key and shape checked, nothing filled in."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode

from .errors import ModelLoadError

# The initialisers torch's modules run when built, as nn.init's functions and as the tensor methods they call.
_RANDOM_FILLS = {
    torch.Tensor.uniform_,
    torch.Tensor.normal_,
    *(
        getattr(torch.nn.init, name)
        for name in ("uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_")
        + ("xavier_uniform_", "xavier_normal_", "orthogonal_")
    ),
}


class _NoRandomFillOnMeta(TorchFunctionMode):
    """Skip random fills of meta tensors: they hold no values, and on meta torch runs them through its Python
    references, which import torch._dynamo (~2.5 s of CPU, the biggest part of a CLI command's start)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _RANDOM_FILLS:
            target = args[0] if args else kwargs.get("tensor")  # nn.init passes its tensor by keyword
            if isinstance(target, torch.Tensor) and target.is_meta:
                return target
        return func(*args, **kwargs)


@contextlib.contextmanager
def on_meta() -> Iterator[None]:
    """Build modules on the meta device (shapes only, for a strict copy to fill). Like torch.device("meta"), it
    holds for this thread only: a model another thread builds meanwhile (the training lab) is initialised."""
    with torch.device("meta"), _NoRandomFillOnMeta():
        yield


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
