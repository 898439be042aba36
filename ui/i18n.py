"""Strings shown to people, by key, in English and Chinese.

Each language is a folder of TOML files under ui/locales/<lang>/, one per part of the app; a file's tables
become dotted keys ("explore.title"). tests/app/test_i18n.py holds both languages to the same keys and the same
{placeholders}, so neither can fall behind.

English that the command line prints too lives once, in models (which has no streamlit): the mask checker's
messages (and check-attention's causes) are `models.masks.phrases.MESSAGES`, merged here as `masks.msg.<code>`, a corpus's refusals
`models.analysis.corpus.MESSAGES`, merged as `corpus.msg.<code>`, and the training flags
`models.training.recorder.FLAGS`, merged as `train.flag.<name>`; ui/locales/zh holds their Chinese.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from models.analysis.corpus import MESSAGES as CORPUS_MESSAGES
from models.masks.phrases import MESSAGES as MASK_MESSAGES
from models.training.recorder import FLAGS as TRAINING_FLAGS

LOCALES = Path(__file__).resolve().parent / "locales"
LANGUAGES = {"en": "English", "zh": "中文"}
DEFAULT_LANGUAGE = "en"


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = str(value)
    return out


@cache
def strings(lang: str) -> dict[str, str]:
    """Return every key → string of one language (all TOML files of its folder, merged)."""
    if lang not in LANGUAGES:
        raise KeyError(f"unknown language {lang!r}: use one of {', '.join(LANGUAGES)}")
    out: dict[str, str] = {}
    for path in sorted((LOCALES / lang).glob("*.toml")):
        with path.open("rb") as f:
            flat = _flatten(tomllib.load(f))
        clash = set(out) & set(flat)
        if clash:
            raise KeyError(f"{path.name} redefines {sorted(clash)[:3]}")
        out.update(flat)
    if lang == "en":
        out.update({f"masks.msg.{code}": text for code, text in MASK_MESSAGES.items()})
        out.update({f"corpus.msg.{code}": text for code, text in CORPUS_MESSAGES.items()})
        out.update({f"train.flag.{name}": text for name, text in TRAINING_FLAGS.items()})
    return out


def translate(lang: str, key: str, **values: Any) -> str:
    """Return the string for key in lang, formatted with values; a missing key shows as ⟦key⟧, never crashes."""
    text = strings(lang).get(key)
    if text is None:
        text = strings(DEFAULT_LANGUAGE).get(key, f"⟦{key}⟧")
    return text.format(**values) if values else text
