"""Words instead of sub-tokens: which tokens make one word, and maps merged to words (keys summed, queries averaged).

What a "word" is, per token display (docs/METRICS.md, "Words"):

- special tokens ([CLS], [SEP], <|endoftext|>, <s> …) are each a word of their own, never merged;
- WordPiece: a token starting with `##` continues the word before it (BERT's own pre-tokenizer has already cut
  punctuation and every Chinese character into tokens of their own);
- byte-level BPE and SentencePiece: tokens are first joined until their bytes are whole UTF-8 characters (a
  Chinese character or an emoji split over two or three tokens becomes one piece); a piece then continues the
  word before it when it does not start with a space and both sides of the join are letters or digits (a
  token that is only a space belongs to the word after it); punctuation, spaces and line breaks end a word;
- Chinese and Japanese text has no spaces to tell words apart and no segmenter runs here: every Han character
  or kana is a word of its own (a token that already holds two characters stays one word: a token is never split).

A map merged to words: `W[a, b] = (1/|a|) Σ_{i ∈ a} Σ_{j ∈ b} A[i, j]` — keys of a word summed (the share a word
gets), its query rows averaged, so every row still sums to 1. Words are runs of neighbouring tokens, so the merge
is two `np.add.reduceat` passes. numpy only: the app, the CLI and attention files use it alike.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..tokens import token_bytes

# Tokens that are a tokenizer's markers rather than text: BERT's [CLS]/[SEP]/[PAD]/[MASK]/[UNK], GPT-2's and
# chat models' <|endoftext|> / <|im_start|>, SentencePiece's <s>, </s>, <unk>, <pad>. The tokenizer's own list
# (`specials=`) is used when there is one.
SPECIAL = re.compile(r"^(\[[A-Z]+\]|<\|[^|<>]*\|>|</?s>|<(unk|pad|mask)>)$")
JOIN = " + "  # between the tokens of a merged word, on hover and in exports


def is_special(token: str, specials: Iterable[str] | None = None) -> bool:
    """Return whether a token is a marker ([CLS], <|endoftext|>, …) rather than text."""
    if specials is not None and token in set(specials):
        return True
    return bool(SPECIAL.match(token))


def guess_display(tokens: Sequence[str]) -> str:
    """Return the token display that tokens from an unknown source look like (an attention file's): a
    Capabilities.token_display."""
    if any(t.startswith("##") and len(t) > 2 for t in tokens):
        return "wordpiece"
    if any(t.startswith(("Ġ", "Ċ")) for t in tokens):
        return "byte_level"
    if any(t.startswith("▁") for t in tokens):
        return "sentencepiece"
    return "plain"


def is_cjk(ch: str) -> bool:
    """Return whether a character is a Han character or kana: scripts written without spaces between words."""
    o = ord(ch)
    return (
        0x3040 <= o <= 0x30FF  # hiragana, katakana
        or 0x3400 <= o <= 0x4DBF  # CJK extension A
        or 0x4E00 <= o <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= o <= 0xFAFF  # compatibility ideographs
        or 0x20000 <= o <= 0x3FFFF  # extensions B and later
    )


def _wordy(ch: str) -> bool:
    """Return whether a character may sit inside a word: a letter, digit or combining mark (not a Han character)."""
    return (ch.isalnum() or unicodedata.category(ch).startswith("M")) and not is_cjk(ch)


@dataclass(frozen=True)
class Words:
    """Which tokens make each word: words are runs of neighbouring tokens, word a = tokens starts[a] … starts[a+1]−1."""

    starts: tuple[int, ...]  # first token of each word, ascending, starts[0] == 0
    n_tokens: int
    words: tuple[str, ...]  # each word as people read it
    pieces: tuple[str, ...]  # the raw tokens a word merges, JOIN between them (the token itself when alone)
    special: tuple[bool, ...]  # a special token, kept apart

    @property
    def n_words(self) -> int:
        return len(self.starts)

    @property
    def sizes(self) -> np.ndarray:
        """Return tokens per word, (words,) int."""
        return np.diff(np.asarray([*self.starts, self.n_tokens]))

    @property
    def merged(self) -> bool:
        """Return whether any word holds more than one token (False: the word view equals the token view)."""
        return self.n_words < self.n_tokens

    def groups(self) -> list[list[int]]:
        """Return the token positions of each word."""
        ends = [*self.starts[1:], self.n_tokens]
        return [list(range(s, e)) for s, e in zip(self.starts, ends, strict=True)]

    def word_of(self) -> np.ndarray:
        """Return, per token, the index of its word: (n_tokens,) int64."""
        return np.repeat(np.arange(self.n_words), self.sizes)

    def _check(self, shape: tuple[int, ...]) -> None:
        if shape[-2:] != (self.n_tokens, self.n_tokens):
            raise ValueError(f"maps are {shape[-2:]} but there are {self.n_tokens} tokens")

    def merge(self, maps: np.ndarray) -> np.ndarray:
        """Return (..., words, words) from (..., q_pos, k_pos): keys of a word summed, its queries averaged.

        Rows that summed to 1 still do. Works on any leading axes (one head, a layer, every layer).
        """
        a = np.asarray(maps, dtype=np.float32)
        self._check(a.shape)
        if not self.merged:
            return a.copy()
        starts = np.asarray(self.starts)
        keys = np.add.reduceat(a, starts, axis=-1)  # (..., q_pos, words): Σ over each word's keys
        rows = np.add.reduceat(keys, starts, axis=-2)  # (..., words, words): Σ over each word's queries
        rows /= self.sizes.astype(np.float32)[:, None]  # … averaged
        return rows

    def merge_keep(self, keep: np.ndarray) -> np.ndarray:
        """Return (words, words) bool from (q_pos, k_pos): a word pair is shown unless every token pair is hidden."""
        k = np.asarray(keep, dtype=bool)
        self._check(k.shape)
        starts = np.asarray(self.starts)
        return np.logical_or.reduceat(np.logical_or.reduceat(k, starts, axis=-1), starts, axis=-2)

    def first_of_word(self, values: Sequence[int] | np.ndarray) -> np.ndarray:
        """Return a per-token array (a segment id, say) read at each word's first token: (words,)."""
        return np.asarray(values)[np.asarray(self.starts)]


def _pieces(tokens: Sequence[str], display: str, special: list[bool]) -> list[tuple[int, int, str]]:
    """Return (first token, last token, text) of each piece: tokens joined until their bytes are whole characters."""
    out: list[tuple[int, int, str]] = []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")
    start, text = -1, ""
    for i, tok in enumerate(tokens):
        raw = None if special[i] else token_bytes(tok, display)
        if raw is None:  # a special token, or a symbol outside the byte table: a piece of its own
            if start >= 0:
                out.append((start, i - 1, text + decoder.decode(b"", final=True)))
                decoder.reset()
            out.append((i, i, tok))
            start, text = -1, ""
            continue
        if start < 0:
            start, text = i, ""
        text += decoder.decode(raw, final=False)
        if not decoder.getstate()[0]:  # no bytes left waiting for the rest of a character
            out.append((start, i, text))
            start, text = -1, ""
    if start >= 0:  # the text ends inside a character (cut by truncation): what there is
        out.append((start, len(tokens) - 1, text + decoder.decode(b"", final=True)))
    return out


def _visible(text: str) -> str:
    """Return a word's label: its text without surrounding spaces, or its whitespace made visible."""
    shown = text.strip()
    return shown or text.replace("\n", "⏎").replace("\t", "⇥").replace(" ", "␣") or "∅"


def word_groups(tokens: Sequence[str], display: str = "plain", specials: Iterable[str] | None = None) -> Words:
    """Return the words of a token list (raw tokens, as the tokenizer gives them).

    display: a Capabilities.token_display ("wordpiece", "byte_level", "sentencepiece", "plain"); "plain" (an
    attention file's tokens) is guessed from the tokens' markers (`##`, `Ġ`, `▁`), and tokens with none stay one
    word each. specials: the tokenizer's special tokens (default: tokens that look like [CLS], <|endoftext|>, <s>).
    """
    toks = list(tokens)
    if not toks:
        return Words((), 0, (), (), ())
    if display == "plain":
        display = guess_display(toks)
    specials = set(specials) if specials is not None else None
    special = [is_special(t, specials) for t in toks]

    starts: list[int] = []
    texts: list[str] = []
    if display in ("byte_level", "sentencepiece"):
        prev: tuple[int, int, str] | None = None
        for piece in _pieces(toks, display, special):
            first, _, text = piece
            joins = (
                prev is not None
                and not special[first]
                and not special[prev[0]]
                and bool(text)
                and bool(prev[2])
                and (
                    (_wordy(text[0]) and _wordy(prev[2][-1]))
                    # a token that is only a space (`Ġ`, `▁`) is the space before the next word
                    or (prev[2].strip(" ") == "" and not text[0].isspace() and texts[-1] == prev[2])
                )
            )
            if joins:
                texts[-1] += text
            else:
                starts.append(first)
                texts.append(text)
            prev = piece
    else:
        for i, tok in enumerate(toks):
            cont = display == "wordpiece" and tok.startswith("##") and len(tok) > 2
            if cont and i > 0 and not special[i - 1] and not special[i]:
                texts[-1] += tok[2:]
            else:
                starts.append(i)
                texts.append(tok)

    ends = [*starts[1:], len(toks)]
    pieces = tuple(JOIN.join(toks[s:e]) for s, e in zip(starts, ends, strict=True))
    labels = tuple(toks[s] if special[s] else _visible(text) for s, text in zip(starts, texts, strict=True))
    return Words(
        starts=tuple(starts),
        n_tokens=len(toks),
        words=labels,
        pieces=pieces,
        special=tuple(special[s] for s in starts),
    )
