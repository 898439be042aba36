"""tools/ has no import cycle: the screenshot scripts share tools/shots.py instead of importing each other."""

from __future__ import annotations

import ast
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "tools":
                out |= {a.name for a in node.names}
            elif node.module.startswith("tools."):
                out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("tools.")}
    return out


def test_tools_modules_import_each_other_without_a_cycle():
    graph = {p.stem: _imports(p) for p in TOOLS.glob("*.py")}
    seen: dict[str, int] = {}  # 1 = on the path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        if seen.get(name) == 1:
            raise AssertionError("import cycle in tools/: " + " → ".join([*path, name]))
        if seen.get(name) == 2:
            return
        seen[name] = 1
        for dep in graph.get(name, ()):
            visit(dep, [*path, name])
        seen[name] = 2

    for name in graph:
        visit(name, [])
