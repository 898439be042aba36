"""Generated documentation is up to date with what it is generated from: the CLI's parsers and the benches' JSON.

A parser option added without rerunning tools/cli_docs.py, or a bench rerun without tools/bench_docs.py, fails
here; so does a hand edit of a generated file.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.docs.blocks import ROOT


def _check(tool: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, f"tools/{tool}", "--check"], cwd=ROOT, capture_output=True, text=True)


def test_cli_reference_is_generated_from_the_parsers():
    r = _check("cli_docs.py")
    assert r.returncode == 0, r.stderr


def test_every_command_has_a_documented_example():
    from models.cli import COMMANDS
    from tools.cli_docs import EXAMPLES, render

    assert set(EXAMPLES) == set(COMMANDS)
    text = render()
    for name in COMMANDS:
        assert f"## {name}" in text and EXAMPLES[name] in text


def test_cli_reference_lists_every_option():
    from tools.cli_docs import commands, render

    text = render()
    for name, parser in commands().items():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert f"`{flag}" in text, f"{name} {flag} missing from docs/cli.md"


def test_benchmark_page_and_readme_table_are_generated_from_the_results():
    r = _check("bench_docs.py")
    assert r.returncode == 0, r.stderr


def test_every_result_file_says_what_made_it():
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert doc["bench"] == path.stem
        words = [w for w in doc["command"].split() if "=" not in w or w.startswith("--")]  # settings first
        assert words[0] == "python" and words[1].startswith("bench/"), path.name
        script = ROOT / words[1]
        assert script.is_file(), f"{path.name}: {script} does not exist"
        assert {"cpu", "cores"} <= set(doc["machine"]) and doc["date"] and doc["commit"]
        figures = doc["figures"]
        assert figures.get("tables"), f"{path.name} holds no table"
        for t in figures["tables"]:
            assert all(len(row) == len(t["columns"]) for row in t["rows"]), f"{path.name}: {t['title']}"


def test_every_bench_saves_its_figures():
    """Each bench/*.py that measures (not the shared helpers) writes bench/results/NAME.json through bench.results."""
    helpers = {"results.py", "timing.py", "__init__.py"}
    silent = [
        p.name
        for p in sorted((ROOT / "bench").glob("*.py"))
        if p.name not in helpers and "Record(" not in p.read_text(encoding="utf-8")
    ]
    assert not silent, f"benches that print but save nothing: {silent}"


def test_readme_figures_come_from_the_results():
    """README's headline rows are exactly those the JSON files give (not typed): the tool's block is in README."""
    from tools.bench_docs import BEGIN, END, load, render

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    _, _, block = render(load())
    assert block in readme
    assert readme.count(BEGIN) == readme.count(END) == 1
