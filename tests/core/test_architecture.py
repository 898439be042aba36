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


# ---- the family seam --------------------------------------------------------------------------------------

# The only files that may name a model family: the registry and each family's own files (its network, its
# config, BERT's masked-LM head). Everything else asks models.capabilities.Capabilities.
FAMILY_FILES = {
    "models/__init__.py",  # the package's front door re-exports the networks and configs for the Python API
    "models/families.py",
    "models/bert.py",
    "models/gpt2.py",
    "models/llama.py",
    "models/mlm.py",
    "models/config.py",
}
FAMILY_MODULES = {"models.bert", "models.gpt2", "models.llama", "models.mlm"}
FAMILY_NAMES = {"bert", "gpt2", "llama", "mistral", "qwen2", "qwen3", "encoder", "decoder"}
MODEL_TYPES = FAMILY_NAMES - {"encoder", "decoder"}  # the registry's keys (encoder/decoder are also kinds)
FAMILY_CLASSES = {"BertModel", "GPT2Model", "LlamaForCausalLM", "BertConfig", "GPT2Config", "LlamaConfig", "MlmHead"}
SOURCES = ("models", "ui", "app_pages", "viz", "app.py", "lens.py")


def _sources() -> list[Path]:
    out: list[Path] = []
    for name in SOURCES:
        p = ROOT / name
        out += [p] if p.is_file() else sorted(q for q in p.rglob("*.py") if "data" not in q.relative_to(ROOT).parts)
    return out


def family_checks(path: Path) -> list[str]:
    """Return the places in one file that decide by family instead of asking a capability."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    rel = path.relative_to(ROOT).as_posix()

    def where(node: ast.AST) -> str:
        return f"{rel}:{getattr(node, 'lineno', 0)}"

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "is_decoder":
            found.append(f"{where(node)} reads .is_decoder")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            resolved = module if node.level == 0 else "models." + module.lstrip(".")  # models/* use relative imports
            if resolved in FAMILY_MODULES or module in {m.split(".")[-1] for m in FAMILY_MODULES} and node.level:
                found.append(f"{where(node)} imports a family module ({module})")
            for alias in node.names:
                if alias.name in FAMILY_CLASSES:
                    found.append(f"{where(node)} imports {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in FAMILY_MODULES:
                    found.append(f"{where(node)} imports {alias.name}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = [s for s in sides if isinstance(s, ast.Constant) and s.value in FAMILY_NAMES]
            if named:
                found.append(f"{where(node)} compares with {named[0].value!r}")
        elif isinstance(node, ast.Dict):  # a second registry: {"gpt2": …}
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value in MODEL_TYPES:
                    found.append(f"{where(node)} keys a dict by {key.value!r}")
        elif isinstance(node, ast.ClassDef):  # class GPT2Thing: family = "gpt2"
            for stmt in node.body:
                value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
                if isinstance(value, ast.Constant) and value.value in MODEL_TYPES:
                    found.append(f"{where(stmt)} class attribute {value.value!r}")
        if isinstance(node, ast.Call) and not (getattr(node.func, "id", None) == "isinstance"):
            given = [*node.args, *(k.value for k in node.keywords)]  # f("llama"), f(family="gpt2")
            passed = [a for a in given if isinstance(a, ast.Constant) and a.value in MODEL_TYPES]
            if passed:
                found.append(f"{where(node)} passes {passed[0].value!r}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            target = node.args[1] if len(node.args) > 1 else None
            names = [getattr(e, "id", getattr(e, "attr", "")) for e in getattr(target, "elts", [target])]
            if set(names) & FAMILY_CLASSES:
                found.append(f"{where(node)} isinstance against a family class")
    return found


def test_only_the_registry_and_the_family_files_name_a_family():
    """No page, analysis, lecture or command decides by family: they ask capabilities (models.capabilities)."""
    found = [f for p in _sources() if p.relative_to(ROOT).as_posix() not in FAMILY_FILES for f in family_checks(p)]
    assert not found, "ask a capability instead:\n" + "\n".join(found)


def test_the_family_check_finds_a_planted_family_test(tmp_path, monkeypatch):
    """The check above can fail: each way of deciding by family, planted in a file, is found."""
    planted = ROOT / "ui" / "_planted_family_check.py"
    planted.write_text(
        "from models.gpt2 import GPT2Model\n"
        "def f(enc, out):\n"
        "    if enc.is_decoder: pass\n"
        "    if out.kind == 'decoder': pass\n"
        "    if enc.config.model_type == 'llama': pass\n"
        "    return isinstance(enc.model, GPT2Model)\n"
        "RECIPES = {'gpt2': 1}\n"  # a second per-family registry
        "class LlamaRecipe:\n"
        "    family = 'llama'\n"
        "def g(families):\n"
        "    return families.family('qwen2')\n",
        encoding="utf-8",
    )
    try:
        found = family_checks(planted)
    finally:
        planted.unlink()
    assert len(found) == 9, found
