"""The training tasks: how a batch is drawn, which of its targets the context decides, and the tokenizer it saves.

induction  [BOS] x … x r_1 … r_n r_1 … r_n x … x: every x and r drawn uniformly from the task's symbols (no
           special token among them). One segment of length n at a random offset, repeated at once; n is drawn per
           sequence from the training lengths, and the held-out lengths are never drawn: the probe measures on
           those. With the offset and n varying, no head can find the copy by position; only an induction head
           (attend to the token after the current token's earlier occurrence) predicts r_2 … r_n of the copy.
reverse    [BOS] r_1 … r_n = r_n … r_1: the second half mirrors the first, so a head must look back at the mirror
           position. The first half is drawn fresh: with the causal mask its loss stays at chance (ln V per
           token); without it the model reads each answer one position ahead, and that loss falls below chance.
text       character-level next-token prediction on a text (the project's bundled passage by default); the last tenth
           is held out for the validation loss.

Every batch says which targets its context decides (`determined`: the copy) and which are drawn afresh
(`chance`: no model can beat ln V there, so a loss below it is a leak). Sampling uses a torch.Generator passed in:
never the global RNG, so a training thread in the app does not disturb, or get disturbed by, anything else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from ..errors import InputError
from ..settings import require

BOS = "<bos>"
UNK = "<unk>"
SEP = "="
EOT = "<|endoftext|>"
CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
# The text task's default: the project's own bilingual passage about attention (the shipped tokenizer's corpus).
DEFAULT_TEXT_FILE = Path(__file__).resolve().parents[1] / "data" / "tokenizer_corpus.txt"
VALIDATION_SEED = 1_000_003  # validation and probe sequences: fixed, and never drawn by a training seed's stream
VALIDATION_BATCH = 32  # sequences per held-out length


def symbols(n: int) -> list[str]:
    """Return n short pronounceable symbols (ba, be, … then bab, …): readable on a projector, one token each."""
    cv = [c + v for c in CONSONANTS for v in VOWELS]
    out = cv + [s + c for s in cv for c in CONSONANTS]
    if not 1 <= n <= len(out):
        raise InputError(f"a task has 1 to {len(out)} symbols, got {n}")
    return out[:n]


@dataclass(frozen=True)
class Batch:
    """One batch of sequences and what each target is. Targets: ids[:, t + 1] predicted at position t."""

    ids: torch.Tensor  # (batch, seq) long
    determined: torch.Tensor  # (batch, seq - 1) bool: the target follows from the context (the copy)
    chance: torch.Tensor  # (batch, seq - 1) bool: the target is drawn afresh, independent of all before it
    start: torch.Tensor  # (batch,) long: position of the copied segment's first token r_1 (induction)
    length: torch.Tensor  # (batch,) long: the segment's length n (0: the task has no copied segment)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(*(t.to(device) for t in (self.ids, self.determined, self.chance, self.start, self.length)))

    @property
    def size(self) -> int:
        return int(self.ids.shape[0])


class Task:
    """A task: its vocabulary (id → symbol, specials included), sequence length and how batches are drawn."""

    name: ClassVar[str]
    seq: int  # positions per sequence: the model's max_positions
    vocab: list[str]  # id → token, specials included
    bos_id: int | None  # <bos>'s id (the config's bos/eos); whether sequences start with it is the task's choice
    n_drawn: int  # ids 0 … n_drawn − 1 are the ordinary symbols drawn uniformly (chance loss = ln n_drawn)
    train_on: str = "all"  # "all": loss over every target; "determined": only targets the context decides

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def chance_loss(self) -> float:
        """Return ln V, the loss of the best guess on a target drawn uniformly from V symbols (nats)."""
        return math.log(self.n_drawn)

    def sample(self, gen: torch.Generator, batch: int) -> Batch:
        raise NotImplementedError

    def validation(self) -> dict[str, Batch]:
        """Return the fixed held-out batches by name (the same for every seed and every run)."""
        raise NotImplementedError

    def probe(self) -> Batch:
        """Return the one fixed sequence whose maps the recorder keeps at every record (a batch of 1)."""
        raise NotImplementedError

    def tokens(self, ids: torch.Tensor) -> list[str]:
        """Return the readable tokens of one sequence of ids."""
        return [self.vocab[i] for i in ids.tolist()]

    def text_of(self, ids: torch.Tensor) -> str:
        """Return the text that the saved tokenizer turns back into these ids (its own <bos> left out)."""
        tokens = self.tokens(ids)
        if tokens and tokens[0] == BOS:
            tokens = tokens[1:]
        return " ".join(tokens)

    def tokenizer(self) -> Any:
        """Return the transformers tokenizer the saved folder carries (AutoTokenizer loads it back)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"task": self.name, "seq": self.seq, "vocab_size": self.vocab_size}


def _word_level(vocab: list[str], bos_id: int, prepend: bool = True) -> Any:
    """Return a word-level tokenizer over `vocab` (one symbol per whitespace-separated word), BOS prepended
    unless `prepend` is False (a task trained without it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={s: i for i, s in enumerate(vocab)}, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if prepend:
        tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, bos_id)])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=BOS, unk_token=UNK)


@dataclass
class InductionTask(Task):
    """Repeated random segments of varying length and offset (see the module docstring)."""

    name: ClassVar[str] = "induction"
    n_symbols: int = 64
    seq: int = 32
    # n is drawn from this range, inclusive, minus the held-out lengths. 16 fills the 32 positions twice: the
    # segment then starts at position 0, the case a fresh prompt "r_1 … r_n r_1 … r_n" is.
    lengths: tuple[int, int] = (2, 16)
    held_out: tuple[int, ...] = (6, 10, 14)  # never drawn in training: the probe and validation measure on these
    # Share of training sequences whose segment starts at position 0 (the rest: any offset, 0 included). A model
    # that only saw a filler token at position 0 copies worse from a prompt that starts with the segment
    # (docs/training.md, "How the recipe was chosen").
    at_start: float = 0.3
    # "twice": the segment appears twice; "periodic": from its offset on, it repeats to the end of the sequence
    # (validation and the probe always use "twice", the definition the score is measured on).
    layout: str = "twice"
    # No <bos>: every position holds a symbol. With one, the second layer's heads park their attention on it (a
    # sink, scores std > 5 within 150 steps) and stay there: no induction head in 400 steps, against 300 without.
    bos: bool = False
    train_on: str = "all"
    vocab: list[str] = field(init=False)
    bos_id: int | None = field(init=False)
    n_drawn: int = field(init=False)

    def __post_init__(self) -> None:
        lo, hi = self.lengths
        if self.layout not in ("twice", "periodic"):
            raise InputError(f"layout must be twice or periodic, got {self.layout!r}")
        if not 1 <= lo <= hi or int(self.bos) + 2 * hi > self.seq:
            raise InputError(f"segment lengths {lo}…{hi} do not fit twice after BOS into {self.seq} positions")
        if any(1 + 2 * n > self.seq or n < 2 for n in self.held_out):
            raise InputError(f"held-out lengths {self.held_out} must be ≥ 2 and fit twice into {self.seq} positions")
        if not self.train_lengths:
            raise InputError("no training length is left once the held-out lengths are removed")
        if not 0.0 <= self.at_start <= 1.0:
            raise InputError(f"at_start is a share from 0 to 1, got {self.at_start!r}")
        self.vocab = [*symbols(self.n_symbols), BOS, UNK]
        self.bos_id = self.n_symbols
        self.n_drawn = self.n_symbols

    @property
    def train_lengths(self) -> list[int]:
        lo, hi = self.lengths
        return [n for n in range(lo, hi + 1) if n not in self.held_out]

    def repeated(
        self, gen: torch.Generator, lengths: torch.Tensor, layout: str = "twice", at_start: torch.Tensor | None = None
    ) -> Batch:
        """Return sequences with one segment of lengths[b] repeated at a random offset (module docstring); where
        at_start[b] is True the segment starts at the first position."""
        B, T = len(lengths), self.seq  # batch, positions
        n = lengths.long()
        ids = torch.randint(0, self.n_symbols, (B, T), generator=gen)
        first = 1 if self.bos else 0  # the first position a segment may start at
        room = T - first - 2 * n  # free positions around the two copies
        offset = (torch.rand(B, generator=gen) * (room + 1).to(torch.float32)).long().clamp(max=room)
        if at_start is not None:
            offset = torch.where(at_start, torch.zeros_like(offset), offset)
        start = first + offset  # r_1 of the first copy
        pos = torch.arange(T)[None, :]  # (1, T)
        s, n_ = start[:, None], n[:, None]
        end = s + 2 * n_ if layout == "twice" else torch.full_like(s, T)  # the repeats end here
        copy = (pos >= s + n_) & (pos < end)  # (B, T): every position after the first copy that repeats
        source = torch.where(copy, s + (pos - s) % n_, pos)  # its token: the first copy's, period n
        ids = torch.gather(ids, 1, source)
        if self.bos:
            ids[:, 0] = self.n_symbols
        target = pos[:, 1:]  # target position of each prediction t = 0 … T-2
        determined = (target > s + n_) & (target < end)  # r_2 … of the repeats
        chance = (target < s + n_) | (target >= end)  # fresh draws (a target is never position 0)
        return Batch(ids, determined, chance, start, n)

    def sample(self, gen: torch.Generator, batch: int) -> Batch:
        choices = torch.tensor(self.train_lengths)
        lengths = choices[torch.randint(0, len(choices), (batch,), generator=gen)]
        return self.repeated(gen, lengths, self.layout, torch.rand(batch, generator=gen) < self.at_start)

    def validation(self) -> dict[str, Batch]:
        """Per held-out length, fresh sequences: the first half with the segment at position 0, the rest at any
        offset."""
        gen = torch.Generator().manual_seed(VALIDATION_SEED)
        first = torch.zeros(VALIDATION_BATCH, dtype=torch.bool)
        first[: VALIDATION_BATCH // 2] = True  # these sequences: the segment at position 0
        return {f"n={n}": self.repeated(gen, torch.full((VALIDATION_BATCH,), n), at_start=first) for n in self.held_out}

    def probe(self) -> Batch:
        gen = torch.Generator().manual_seed(VALIDATION_SEED + 1)
        n = max(self.held_out)
        return self.repeated(gen, torch.full((1,), n))

    def tokenizer(self) -> Any:
        assert self.bos_id is not None
        return _word_level(self.vocab, self.bos_id, prepend=self.bos)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "layout": self.layout,
            "bos": self.bos,
            "symbols": self.n_symbols,
            "lengths": list(self.lengths),
            "held_out": list(self.held_out),
            "at_start": self.at_start,
        }


@dataclass
class ReverseTask(Task):
    """[BOS] r_1 … r_n = r_n … r_1 (see the module docstring): the mask task."""

    name: ClassVar[str] = "reverse"
    n_symbols: int = 64
    seq: int = 32
    vocab: list[str] = field(init=False)
    bos_id: int | None = field(init=False)
    n_drawn: int = field(init=False)

    def __post_init__(self) -> None:
        if self.seq < 6 or self.seq % 2:
            raise InputError(f"the reverse task needs an even number of positions ≥ 6, got {self.seq}")
        self.vocab = [*symbols(self.n_symbols), BOS, SEP, UNK]
        self.bos_id = self.n_symbols
        self.n_drawn = self.n_symbols

    @property
    def half(self) -> int:
        return self.seq // 2 - 1  # n: [BOS] + n + [=] + n = seq

    def _draw(self, gen: torch.Generator, batch: int) -> Batch:
        n = self.half
        r = torch.randint(0, self.n_symbols, (batch, n), generator=gen)
        bos = torch.full((batch, 1), self.n_symbols)
        sep = torch.full((batch, 1), self.n_symbols + 1)
        ids = torch.cat([bos, r, sep, r.flip(1)], dim=1)  # (batch, 2n + 2)
        target = torch.arange(1, self.seq)[None, :].expand(batch, -1)  # target positions 1 … seq-1
        determined = target >= n + 2  # the mirrored half
        chance = target <= n  # the first half
        return Batch(ids, determined, chance, torch.ones(batch, dtype=torch.long), torch.full((batch,), n))

    def sample(self, gen: torch.Generator, batch: int) -> Batch:
        return self._draw(gen, batch)

    def validation(self) -> dict[str, Batch]:
        return {"held-out": self._draw(torch.Generator().manual_seed(VALIDATION_SEED), VALIDATION_BATCH)}

    def probe(self) -> Batch:
        return self._draw(torch.Generator().manual_seed(VALIDATION_SEED + 1), 1)

    def tokenizer(self) -> Any:
        assert self.bos_id is not None
        return _word_level(self.vocab, self.bos_id)


def _char_level(vocab: list[str]) -> Any:
    """Return a character-level tokenizer over `vocab` (each character one token, unknown ones <unk>)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={s: i for i, s in enumerate(vocab)}, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"(?m)."), behavior="isolated")
    tok.decoder = decoders.Fuse()  # characters back into one string, nothing between them
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT, unk_token=UNK)


MAX_CHARACTERS = 4096  # distinct characters a text task's vocabulary may hold


@dataclass
class TextTask(Task):
    """Character-level next-token prediction on a text; the last tenth is the validation split."""

    name: ClassVar[str] = "text"
    text: str = ""
    seq: int = 64
    vocab: list[str] = field(init=False)
    bos_id: int | None = field(init=False)
    n_drawn: int = field(init=False)
    train_ids: torch.Tensor = field(init=False, repr=False)
    val_ids: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        text = self.text if self.text.strip() else DEFAULT_TEXT_FILE.read_text(encoding="utf-8")
        require("max_text_chars", len(text), "the training text")
        need = self.seq + 1
        if len(text) < 10 * need:
            raise InputError(
                f"the text has {len(text)} characters: the task needs {need} in the validation part (the last "
                f"tenth) and more in the training part, so at least {10 * need}"
            )
        chars = sorted(set(text))
        if len(chars) > MAX_CHARACTERS:
            raise InputError(f"the text has {len(chars)} distinct characters; a text task takes {MAX_CHARACTERS}")
        self.text = text
        self.vocab = [*chars, EOT, UNK]
        self.bos_id = None
        self.n_drawn = len(chars)
        self._tok = _char_level(self.vocab)
        ids = torch.tensor(self._tok(text, add_special_tokens=False)["input_ids"], dtype=torch.long)
        cut = int(len(ids) * 0.9)
        self.train_ids, self.val_ids = ids[:cut], ids[cut:]

    def _windows(self, ids: torch.Tensor, starts: torch.Tensor) -> Batch:
        idx = starts[:, None] + torch.arange(self.seq)[None, :]
        win = ids[idx]  # (batch, seq)
        B = len(starts)
        none = torch.zeros(B, self.seq - 1, dtype=torch.bool)
        return Batch(win, none, none.clone(), torch.zeros(B, dtype=torch.long), torch.zeros(B, dtype=torch.long))

    def sample(self, gen: torch.Generator, batch: int) -> Batch:
        starts = torch.randint(0, len(self.train_ids) - self.seq + 1, (batch,), generator=gen)
        return self._windows(self.train_ids, starts)

    def validation(self) -> dict[str, Batch]:
        last = len(self.val_ids) - self.seq
        starts = torch.linspace(0, last, min(VALIDATION_BATCH, last + 1)).long()
        return {"held-out": self._windows(self.val_ids, starts)}

    def probe(self) -> Batch:
        return self._windows(self.val_ids, torch.zeros(1, dtype=torch.long))

    def tokenizer(self) -> Any:
        return self._tok

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "characters": len(self.train_ids) + len(self.val_ids)}


TASKS: dict[str, type[Task]] = {"induction": InductionTask, "reverse": ReverseTask, "text": TextTask}


def make_task(name: str, **options: Any) -> Task:
    """Return the task `name` (induction, reverse, text) with its options; InputError names the tasks."""
    cls = TASKS.get(name)
    if cls is None:
        raise InputError(f"unknown task {name!r}: use one of {', '.join(TASKS)}")
    return cls(**options)
