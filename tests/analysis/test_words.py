"""Words instead of sub-tokens: the groups against the tokenizers' own word ids, the merge against a plain loop."""

from __future__ import annotations

import numpy as np
import pytest

from models.analysis.words import JOIN, guess_display, word_groups

ENGLISH = "The tokenization of unbelievable sentences, and it works."


def _groups_of_word_ids(word_ids: list[int | None]) -> list[list[int]]:
    """Return token positions per word from a fast tokenizer's word_ids (None = a special token: alone)."""
    groups: list[list[int]] = []
    last: int | None = None
    for i, w in enumerate(word_ids):
        if w is None or w != last:
            groups.append([i])
        else:
            groups[-1].append(i)
        last = w
    return groups


def test_wordpiece_words_are_the_tokenizers_words(minilm):
    tok = minilm.tokenizer
    enc = tok(ENGLISH + " Attention isn't everything, it's a start.")
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert any(t.startswith("##") for t in tokens)  # the text does split words
    words = word_groups(tokens, "wordpiece", specials=tok.all_special_tokens)
    assert words.groups() == _groups_of_word_ids(enc.word_ids())
    assert words.words[0] == "[CLS]" and words.special[0] and words.special[-1]
    assert "tokenization" in words.words
    i = words.words.index("tokenization")
    assert words.pieces[i] == JOIN.join(["token", "##ization"])


def test_byte_level_words_are_the_pre_tokenizers_words_in_english():
    from models.loading import shipped_tokenizer

    tok = shipped_tokenizer()
    enc = tok(ENGLISH)
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert len(tokens) > len(ENGLISH.split())  # words are split into several tokens
    words = word_groups(tokens, "byte_level", specials=tok.all_special_tokens)
    assert words.groups() == _groups_of_word_ids(enc.word_ids())
    assert " ".join(w for w in words.words if w not in ",.") == ENGLISH.replace(",", "").replace(".", "")


def test_byte_level_joins_the_bytes_of_one_character_first():
    from models.loading import shipped_tokenizer

    tok = shipped_tokenizer()
    text = "注意力机制很重要。🙂"
    tokens = tok.convert_ids_to_tokens(tok(text)["input_ids"])
    words = word_groups(tokens, "byte_level")
    # Every word is whole characters: the words spell the text, and a Han character is never merged with another
    # one unless a single token already holds both.
    assert "".join(words.words) == text
    for word, size in zip(words.words, words.sizes, strict=True):
        assert len(word) == 1 or size == 1, (word, size)
    assert "制" in words.words and words.pieces[words.words.index("制")].count(JOIN) == 1  # 'åĪ' + '¶'
    assert words.words[-1] == "🙂"


def test_sentencepiece_spaces_byte_fallback_and_specials():
    tokens = ["<s>", "▁The", "▁token", "ization", "<0xE6>", "<0xB3>", "<0xA8>", "▁is", ",", "▁ok", "</s>"]
    words = word_groups(tokens, "sentencepiece")
    assert words.words == ("<s>", "The", "tokenization", "注", "is", ",", "ok", "</s>")
    assert words.groups()[3] == [4, 5, 6]
    assert words.special == (True, False, False, False, False, False, False, True)


def test_specials_are_never_merged_and_plain_tokens_are_guessed():
    assert guess_display(["[CLS]", "play", "##ing"]) == "wordpiece"
    assert guess_display(["The", "Ġcat"]) == "byte_level"
    assert guess_display(["▁The"]) == "sentencepiece"
    w = word_groups(["[CLS]", "##x", "a", "##b", "[SEP]", "##c"], "plain")
    assert w.groups() == [[0], [1], [2, 3], [4], [5]]
    plain = word_groups(["a", "b", "c"], "plain")
    assert not plain.merged and plain.words == ("a", "b", "c")


def _loop_merge(a: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    n = len(groups)
    out = np.zeros(a.shape[:-2] + (n, n))
    for x, qa in enumerate(groups):
        for y, kb in enumerate(groups):
            out[..., x, y] = np.mean([a[..., i, kb].sum(-1) for i in qa], axis=0)
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_merge_sums_keys_averages_queries_and_rows_still_sum_to_one(seed):
    rng = np.random.default_rng(seed)
    tokens = ["[CLS]", "the", "token", "##ization", "##s", "are", "un", "##bel", "##ie", "##vable", ".", "[SEP]"]
    words = word_groups(tokens, "wordpiece")
    T = len(tokens)
    a = rng.random((3, 2, T, T)).astype(np.float32) ** 4
    a = np.tril(a)  # a causal map stays causal at word level
    a /= a.sum(-1, keepdims=True)
    merged = words.merge(a)
    np.testing.assert_allclose(merged, _loop_merge(a, words.groups()), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(merged.sum(-1), 1.0, atol=1e-5)
    assert np.allclose(np.triu(merged, 1), 0)
    keep = np.tril(np.ones((T, T), dtype=bool))
    wk = words.merge_keep(keep)
    assert wk.shape == (words.n_words,) * 2 and wk[2, 2] and not wk[1, 2]
    assert list(words.word_of()) == [0, 1, 2, 2, 2, 3, 4, 4, 4, 4, 5, 6]


def test_merge_refuses_maps_of_another_length():
    words = word_groups(["a", "##b"], "wordpiece")
    with pytest.raises(ValueError, match="2 tokens"):
        words.merge(np.ones((3, 3)))
