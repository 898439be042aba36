"""The fenced blocks of README and docs/, read as the docs test runs them (docs/development.md has the rules).

A `bash` block runs from the repository root as written. Its first line may say what it needs (`# needs: a.py,
b.npy (…)`: run only when those files exist, e.g. made by a block titled with the file's name on the same page)
or that it is not for a test (`# runs until Ctrl+C`, `# takes minutes`). A command that is meant to exit 1 or 2
ends with `# exit 1` / `# exit 2`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence) *$", re.M | re.S
)
NOT_RUN = ("# runs until Ctrl+C", "# takes minutes")
EXIT = re.compile(r"#\s*exit (\d+)\b")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None
    body: str
    needs: list[str] = field(default_factory=list)  # first words of the `# needs:` items
    skip: str | None = None  # why the block is never run

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass
class Command:
    text: str  # one command, continuation lines joined
    exit: int  # the exit code it is meant to end with


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        info = m.group("info").strip()
        lang = info.split()[0] if info else ""
        title = re.search(r'title="([^"]+)"', info)
        body = "\n".join(line[len(m.group("indent")) :] for line in m.group("body").splitlines())
        b = Block(page, text.count("\n", 0, m.start()) + 1, lang, title.group(1) if title else None, body)
        first = body.lstrip().splitlines()[0] if body.strip() else ""
        for marker in NOT_RUN:
            if first.startswith(marker):
                b.skip = marker.lstrip("# ")
        need = re.search(r"needs:\s*(.*)", first) if first.startswith("#") else None
        if need:
            items = re.sub(r"\([^)]*\)", "", need.group(1)).split(",")
            b.needs = [item.split()[0] for item in items if item.split()]
        out.append(b)
    return out


def commands(block: Block) -> list[Command]:
    """Split a bash block into commands: comments and blank lines dropped, `\\` continuations joined."""
    out: list[Command] = []
    pending = ""
    for raw in block.body.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        m = EXIT.search(text)
        out.append(Command(text, int(m.group(1)) if m else 0))
    return out
