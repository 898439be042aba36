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


def sentencepiece_to_text(token: str) -> str:
    """Return the text one SentencePiece token stands for: `▁the` → ` the`, `<0x0A>` → a newline."""
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        try:
            return bytes([int(token[3:5], 16)]).decode("utf-8", errors="backslashreplace")
        except ValueError:
            return token
    return token.replace("▁", " ")


def display_tokens(tokens: list[str], kind: str | bool = "plain", byte_level: bool | None = None) -> list[str]:
    """Return the tokens as people should read them: byte-level BPE and SentencePiece decoded, WordPiece as is.

    kind: a Capabilities.token_display ("byte_level", "sentencepiece", "wordpiece", "plain"); True / False (or
    byte_level=) are the older spelling of byte-level or not.
    """
    if byte_level is not None:
        kind = byte_level
    if kind is True or kind == "byte_level":
        return [byte_level_to_text(t) for t in tokens]
    if kind == "sentencepiece":
        return [sentencepiece_to_text(t) for t in tokens]
    return list(tokens)
