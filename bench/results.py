"""Every bench's result as data: `save(name, figures)` writes bench/results/NAME.json beside what it prints.

The file holds the figures, the machine (CPU model, cores, memory, accelerator), the date, the command that made
it and the git commit, so that README's headline table and docs/benchmarks.md are generated from it, never typed.

    from bench.results import save
    save("encoder", {"rows": [...], "targets": {...}})
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(os.environ.get("ATTENTION_LENS_BENCH_RESULTS", ROOT / "bench" / "results"))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> dict[str, Any]:
    """Return what the figures depend on: CPU model, cores, memory, torch and its threads, the GPU if any."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def save(name: str, figures: dict[str, Any], command: str | None = None) -> Path:
    """Write bench/results/NAME.json (figures, machine, date, command, commit) and return its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {
        "bench": name,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command
        or "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
        "commit": _commit(),
        "machine": machine(),
        "figures": figures,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {os.path.relpath(path, ROOT)}")
    return path
