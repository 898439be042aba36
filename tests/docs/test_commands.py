"""Every command block of README and docs/ works where it stands: each page's `bash` blocks run on the bundled
models, as a reader would paste them, in a fresh folder that holds `examples/` (rules: docs/development.md).

A block that names what the reader brings (`# needs: my_file.py`) runs when that file exists, e.g. written from a
block titled with its name on the same page; one that needs network or a folder nobody ships is skipped and says
so. A broken example, a wrong exit code or a shell syntax error fails here, not in a newcomer's first hour.

The commands run in bash as pasted; `python -m models …` and `attention-lens …` in them go to a warm interpreter
(tests/warm.py) that imported torch and transformers once and forks a fresh process per command, so some seventy
commands do not each pay the imports. That a real `python -m models` starts from any folder is tested in
tests/docs/test_install.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, Block, blocks, commands, pages
from tests.warm import Warm

RUNNABLE_LANGS = ("bash", "sh", "shell")
# A documented command that fails today because of a known bug elsewhere: the issue that fixes it, and the
# substring that names the command. When the command starts to pass, the test fails until the entry goes.
KNOWN_FAILING: dict[str, str] = {}  # command text → the open issue it waits for


def _shell_blocks(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in RUNNABLE_LANGS]


def _once(b: Block, text: str) -> bool:
    """A command that needs nothing the page made and writes no --out folder: the same on every page it is on."""
    return not b.needs and "--out" not in text


PAGES = [p for p in pages() if _shell_blocks(p)]
# Such a command runs on the first page that shows it, whichever worker runs which page (pytest-xdist).
FIRST_PAGE: dict[str, Path] = {}
for _page in PAGES:
    for _b in _shell_blocks(_page):
        for _cmd in commands(_b):
            if _once(_b, _cmd.text) and not _b.skip:  # a block never run does not count
                FIRST_PAGE.setdefault(_cmd.text, _page)


def _env(tmp: Path, warm: Warm | None = None) -> dict[str, str]:
    """The reader's shell after `pip install -e .`: the project importable, `attention-lens` on PATH, offline."""
    shim = tmp / ".bin"
    shim.mkdir()
    if not shutil.which("attention-lens"):
        script = shim / "attention-lens"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m models "$@"\n')
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_LENS_")}
    first = f"{warm.bin}:" if warm else ""
    return {
        **env,
        "PATH": f"{first}{Path(sys.executable).parent}:{shim}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


@pytest.fixture(scope="session")
def warm(tmp_path_factory):
    """One warm interpreter per pytest worker, started under the readers' environment."""
    folder = tmp_path_factory.mktemp("warm")
    server = Warm(folder, _env(folder))
    try:
        yield server
    finally:
        server.close()


def test_every_shell_block_is_valid_shell():
    """`bash -n` on every block, run or not: an unquoted `Attn()` is a syntax error a reader hits at once."""
    bad = []
    for page in pages():
        for b in _shell_blocks(page):
            r = subprocess.run(["bash", "-n", "-c", b.body], capture_output=True, text=True)
            if r.returncode:
                bad.append(f"{b.where()}: {r.stderr.strip()}")
    assert not bad, "\n".join(bad)


def test_no_shell_block_shows_output_or_prompts():
    """Output goes in `text` blocks: a `$ ` prompt in a bash block is not copy-paste runnable."""
    bad = [
        b.where()
        for page in pages()
        for b in _shell_blocks(page)
        if any(line.startswith("$ ") for line in b.body.splitlines())
    ]
    assert not bad, f"bash blocks with prompts (use a text block for output): {bad}"


@pytest.mark.long
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_commands_run(page: Path, tmp_path: Path, warm: Warm):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for b in blocks(page):
        if b.title and not b.body.lstrip().startswith("--8<--"):  # a file the reader makes (snippets are ours)
            target = tmp_path / b.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.body + "\n", encoding="utf-8")
    env = _env(tmp_path, warm)
    failures, known, ran, skipped = [], [], 0, []
    for b in _shell_blocks(page):
        if b.skip:
            skipped.append(f"{b.where()}: {b.skip}")
            continue
        missing = [n for n in b.needs if not (tmp_path / n).exists()]
        if missing:
            skipped.append(f"{b.where()}: needs {', '.join(missing)}")
            continue
        for cmd in commands(b):
            if _once(b, cmd.text) and FIRST_PAGE[cmd.text] != page:
                continue  # run on an earlier page
            r = subprocess.run(
                ["bash", "-c", cmd.text], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
            )
            ran += 1
            issue = next((why for key, why in KNOWN_FAILING.items() if key in cmd.text), None)
            if issue:
                known.append((cmd.text, r.returncode == cmd.exit, issue))
                continue
            if r.returncode != cmd.exit:
                tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
                failures.append(
                    f"{b.where()}: exit {r.returncode}, meant {cmd.exit}: {cmd.text}\n    " + "\n    ".join(tail)
                )
    print(f"{page.relative_to(ROOT)}: {ran} commands run; skipped: {skipped or 'none'}")
    assert not failures, "\n".join(failures)
    fixed = [f"{text}  ({issue})" for text, ok, issue in known if ok]
    assert not fixed, f"now passing: remove from KNOWN_FAILING: {fixed}"
