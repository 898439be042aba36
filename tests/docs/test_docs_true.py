"""README lists what the app and the CLI have, and the docs name only code that exists (issue 40).

- every page in app.py's navigation has a row in README's page table, and every command of `models.cli.COMMANDS`
  is in README's command-line block;
- every code identifier a docs page names in backticks as a dotted Python name (`models.attention.attend`,
  `Encoder.encode`, `attention.Recorder`) exists: its first part is one of our modules or classes, the rest
  an attribute of it. Names whose first part is neither (`st.session_state`, `torch.load`, a variable like
  `out.truncated`, the reader's own `my_model.MyAttention`) are not ours to check.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from models.cli import COMMANDS
from tests.docs.blocks import ROOT, blocks

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
PACKAGES = ("models", "viz", "ui", "app_pages", "tools", "bench")
# Implicit prefixes the docs use for our modules (`attention.attend` is models.attention.attend).
PREFIXES = ("", "models.", "models.masks.", "models.analysis.", "models.lecture.", "models.training.", "ui.", "viz.")
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
FILE_SUFFIXES = {"py", "md", "toml", "json", "txt", "png", "npz", "npy", "pt", "csv", "html", "yml", "yaml", "svg"}


def nav_pages() -> list[str]:
    """Return the titles' keys of app.py's navigation, as the English sidebar shows them."""
    from ui.i18n import translate

    keys = re.findall(r'title=t\("(nav\.\w+)"\)', (ROOT / "app.py").read_text(encoding="utf-8"))
    return [translate("en", k) for k in keys]


def test_readme_lists_every_page_and_every_command():
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Pages") : text.index("## Models")]
    rows = {m.group(1) for m in re.finditer(r"^\| \[([^\]]+)\]", table, re.M)}
    pages = nav_pages()
    assert len(pages) >= 10
    assert not [p for p in pages if p not in rows], f"pages missing from README's table: {set(pages) - rows}"
    cli = "\n".join(b.body for b in blocks(README) if b.lang == "bash" and "python -m models" in b.body)
    used = set(re.findall(r"python -m models ([\w-]+)", cli))
    assert not set(COMMANDS) - used, f"commands missing from README's command line: {set(COMMANDS) - used}"


@cache
def _index() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Return (module → its top-level names and submodules, class name → its members), read from our sources."""
    modules: dict[str, set[str]] = {}
    classes: dict[str, set[str]] = {}
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")] + [ROOT / "lens.py", ROOT / "app.py"]
    for path in files:
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        for i in range(1, len(parts)):  # a package knows its submodules
            modules.setdefault(".".join(parts[:i]), set()).add(parts[i])
        names = modules.setdefault(name, set())
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [n for node in tree.body for n in (node.body if isinstance(node, ast.If) else [node])]  # TYPE_CHECKING
        for node in top:
            names.update(_defined(node))
            if isinstance(node, ast.ClassDef):
                members = classes.setdefault(node.name, set())
                for item in ast.walk(node):
                    members.update(_defined(item))
                    if isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) and item.value.id == "self":
                        members.add(item.attr)
    return modules, classes


def _defined(node: ast.AST) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.ImportFrom | ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def resolve(dotted: str) -> bool | None:
    """Return True when the name exists in our code, False when it names our module or class but not that
    attribute, None when it is not ours (a library, a variable, the reader's code)."""
    modules, classes = _index()
    parts = dotted.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return None  # a file name
    ours = False
    for prefix in PREFIXES:
        full = (prefix + dotted).split(".")
        given = len(full) - len(parts)  # the prefix's parts: a module must cover at least one of the name's own
        for cut in range(len(full), given, -1):  # the longest module prefix, then attributes
            module = ".".join(full[:cut])
            if module not in modules:
                continue
            ours = True
            rest = full[cut:]
            if not rest:
                return True
            if rest[0] in modules[module] and (len(rest) == 1 or rest[0] not in classes or rest[1] in classes[rest[0]]):
                return True
            break
    if parts[0] in classes:
        return parts[1] in classes[parts[0]]
    return False if ours else None


def _named(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    return set(DOTTED.findall(text))


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_docs_name_only_code_that_exists(page):
    missing = sorted(n for n in _named(page) if resolve(n) is False)
    assert not missing, f"{page.name} names code that does not exist: {missing}"


def test_the_check_can_fail():
    assert resolve("models.attention.attend") and resolve("Encoder.encode") and resolve("attention.Recorder")
    assert resolve("SelfAttention.fuse_qkv") is False and resolve("models.bert.linear_t") is False
    assert resolve("st.session_state") is None and resolve("my_model.MyAttention") is None
