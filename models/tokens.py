"""Readable tokens: byte-level BPE symbols (`Ġthe`, `æ³¨`) turned back into the text they stand for."""

from __future__ import annotations


def _bytes_to_unicode() -> dict[int, str]:
    """Return GPT-2's byte → printable character table (each of the 256 bytes has a visible stand-in)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return table


_CHAR_TO_BYTE = {c: b for b, c in _bytes_to_unicode().items()}


def byte_level_to_text(token: str) -> str:
    """Return the text one byte-level BPE token stands for: `Ġthe` → ` the`, `æ³¨æĦıåĬĽ` → `注意力`.

    A token that holds only part of a UTF-8 character (a Chinese character or an emoji split over tokens) shows
    its bytes as `\\xf0\\x9f`; a symbol outside the byte table (a special token like <|endoftext|>) stays as it is.
    """
    if any(c not in _CHAR_TO_BYTE for c in token):
        return token
    return bytes(_CHAR_TO_BYTE[c] for c in token).decode("utf-8", errors="backslashreplace")


def display_tokens(tokens: list[str], byte_level: bool) -> list[str]:
    """Return the tokens as people should read them (byte-level BPE decoded; WordPiece unchanged)."""
    return [byte_level_to_text(t) for t in tokens] if byte_level else list(tokens)
