"""Both languages have every key, with the same {placeholders}."""

from __future__ import annotations

import re
import string

from ui.i18n import LANGUAGES, strings, translate


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_language_has_every_key():
    keys = {lang: set(strings(lang)) for lang in LANGUAGES}
    reference = keys["en"]
    for lang, have in keys.items():
        assert have == reference, (
            f"{lang}: missing {sorted(reference - have)[:5]}, extra {sorted(have - reference)[:5]}"
        )


def test_placeholders_match():
    en = strings("en")
    for lang in LANGUAGES:
        for key, text in strings(lang).items():
            assert _fields(text) == _fields(en[key]), f"{lang}:{key}"


def test_no_empty_strings():
    for lang in LANGUAGES:
        assert all(v.strip() for v in strings(lang).values())


def test_missing_key_is_visible_not_a_crash():
    assert translate("zh", "no.such.key") == "⟦no.such.key⟧"
    assert translate("zh", "common.layer") == "层"


# ---- the lecture pages' strings (issue 6): real Chinese, and markdown that renders ---------------------

LECTURE_AREAS = ("present.", "inside.", "memory.", "trouble.", "nav.inside_head", "nav.memory", "nav.troubleshooting")
CJK = re.compile(r"[\u4e00-\u9fff]")
# Code spans, placeholders, fenced code and hover templates are code, not prose.
CODE = re.compile(r"`[^`]*`|\{[^}]*\}|%\{[^}]*\}|<[^>]+>")


def _lecture_keys() -> list[str]:
    return [k for k in strings("en") if k.startswith(LECTURE_AREAS)]


def _is_code(text: str) -> bool:
    """Return whether a string is code or a formula (no English prose to translate)."""
    return bool(re.fullmatch(r"[\s\w.=()\[\]/·+\-−*:#,\"'<>^{}%@|√ᵀ²]*", text)) and not re.search(
        r"[a-z]{3,} [a-z]{3,}", text
    )


def test_lecture_strings_are_translated():
    en, zh = strings("en"), strings("zh")
    assert len(_lecture_keys()) > 150
    for key in _lecture_keys():
        if _is_code(en[key]):
            continue
        assert CJK.search(zh[key]), f"zh:{key} has no Chinese: {zh[key]!r}"
        assert zh[key] != en[key], key


def test_no_english_prose_left_in_chinese_lecture_strings():
    """Identifiers and terms of art (softmax, LayerNorm, KV Cache, learning rate) may stay; sentences may not."""
    for key in _lecture_keys():
        text = strings("zh")[key]
        if "```" in text or key.endswith(("nan_code", "mask_code", "map_hover")):
            continue  # code blocks: their comments are translated, the code is code
        prose = CODE.sub(" ", text)
        run = re.search(r"\b[A-Za-z]{2,}(?:[ ,]+[A-Za-z]{2,}){3,}\b", prose)
        assert run is None, f"zh:{key} has untranslated English: {run.group(0)!r}"


def test_chinese_bold_renders():
    """CommonMark: '**原因：**文字' does not close the bold (punctuation before, a letter after); '**原因**：' does."""
    bad = re.compile(r"\*\*[^*\s][^*]*?[\u3000-\u303f\uff00-\uffef]\*\*(?=[\w\u4e00-\u9fff])")
    for key, text in strings("zh").items():
        assert not bad.search(text), f"zh:{key}: bold that will not render: {text[:60]!r}"
