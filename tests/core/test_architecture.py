"""The import contracts in pyproject.toml name every module of models/, so a new one cannot slip past them."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _models_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers" and contract["layers"][0].startswith("models"):
            return [name.strip() for layer in contract["layers"] for name in layer.split("|")]
    raise AssertionError("no layers contract for models in pyproject.toml")


def test_every_models_module_sits_in_a_layer():
    named = _models_layers()
    unplaced = []
    for path in sorted((ROOT / "models").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        if rel.name == "__init__" or "data" in rel.parts:  # packages' front doors; the tokenizer training script
            continue
        module = ".".join(rel.parts)
        if not any(module == n or module.startswith(n + ".") for n in named):
            unplaced.append(module)
    assert not unplaced, f"add these to the models layers contract in pyproject.toml: {unplaced}"
