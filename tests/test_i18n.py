"""Both languages have every key, with the same {placeholders}."""

from __future__ import annotations

import string

from ui.i18n import LANGUAGES, strings, translate


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_language_has_every_key():
    keys = {lang: set(strings(lang)) for lang in LANGUAGES}
    reference = keys["en"]
    for lang, have in keys.items():
        assert have == reference, f"{lang}: missing {sorted(reference - have)[:5]}, extra {sorted(have - reference)[:5]}"


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
