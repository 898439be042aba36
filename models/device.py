"""Device and dtype resolution: `auto` takes CUDA when there is one; half precision only on a GPU."""

from __future__ import annotations

import torch

from .errors import DeviceError

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Return the torch.device for 'auto', 'cpu', 'cuda' or 'cuda:N'; DeviceError when it is not here."""
    name = str(device).strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {device!r} asked for, but this PyTorch build sees no CUDA GPU "
                f"(torch {torch.__version__}); use --device cpu or auto, or install a CUDA build of torch"
            )
        try:
            dev = torch.device(name)
        except RuntimeError as err:
            raise DeviceError(f"bad device {device!r}: {err}") from err
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(f"device {device!r} asked for, but only {torch.cuda.device_count()} GPU(s) are visible")
        return dev
    raise DeviceError(f"unknown device {device!r}: use auto, cpu, cuda or cuda:N")


def resolve_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    """Return the torch dtype for 'fp32', 'fp16' or 'bf16'; half precision is refused on the CPU."""
    if isinstance(dtype, torch.dtype):
        name = {v: k for k, v in DTYPES.items()}.get(dtype)
        if name is None:
            raise DeviceError(f"unsupported dtype {dtype}: use fp32, fp16 or bf16")
    else:
        name = str(dtype).strip().lower()
        name = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}.get(name, name)
        if name not in DTYPES:
            raise DeviceError(f"unknown dtype {dtype!r}: use fp32, fp16 or bf16")
    if name != "fp32" and device.type != "cuda":
        raise DeviceError(f"{name} is offered on a CUDA GPU only; on {device.type} use fp32")
    return DTYPES[name]
