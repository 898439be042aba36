"""Needle in a haystack and retrieval heads (Wu et al. 2024, "Retrieval Head Mechanistically Explains Long-Context
Factuality").

A case hides one needle sentence ("The secret word is: lantern.") at a depth (0 = the start, 1 = the end) of a
filler text of about N tokens, asks for it at the end, and lets the model answer greedily with our KV cache. The
answer is `found` when it contains the secret word.

Retrieval score of a head, as Wu et al. define it: at each answer step the model generates a token w from the
query of the position before it; when w also occurs in the needle, the step counts, and the head copies it when its
top-weight key (argmax over the step's attention row) is a needle position holding that same token w. The score is
copies / counted steps, pooled over every case of the grid (heads with no counted step score 0). Wu et al. found
fewer than 5 % of heads with a score above 0.1 in the models they studied.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..encoder import Encoder
from ..errors import InputError
from ..network import KVCache
from ..settings import require
from .cache import CHUNK, check_long, last_hidden

SECRET = "lantern"
NEEDLE = f"The secret word is: {SECRET}."
QUESTION = "\n\nQuestion: What is the secret word?\nAnswer: The secret word is:"
ANSWER_TOKENS = 8  # greedy tokens of each answer
AROUND = 48  # keys kept on each side of the needle for the answer step's maps
MIN_CONTEXT = 32
# The haystack: plain sentences with no secret in them, repeated as long as the context asks.
FILLER = (
    "The river runs slowly past the old mill, and the water turns the wheel all day. "
    "Farmers bring their grain in the morning and carry flour home before dark. "
    "In spring the fields are green, and in autumn they turn the colour of bread. "
    "Children walk to school along the river and count the boats they see. "
    "The baker opens his shop early, and the smell of warm loaves fills the street. "
    "At noon the bells of the church ring twelve times across the valley. "
    "Travellers stop at the inn to rest their horses and share the news of the road. "
    "When it rains, the roofs shine and the streets are quiet for a while. "
    "The teacher reads a story aloud, and the children listen without a sound. "
    "In the evening the lamps are lit one by one along the main street. "
)


@dataclass
class NeedleCase:
    """One context length × depth: the exact prompt, where the needle sits in its tokens, and the answer."""

    context: int  # the tokens asked for
    depth: float  # 0 … 1: where the needle sits in the filler
    prompt: str  # the exact text given to the model
    prompt_tokens: int
    needle_span: tuple[int, int]  # token positions [start, end) of the needle sentence in the prompt
    answer: str  # the greedy answer (ANSWER_TOKENS tokens, or fewer at an end-of-text token)
    answer_ids: list[int]
    found: bool
    counted: int  # answer tokens that also occur in the needle (the retrieval score's denominator here)
    copies: np.ndarray  # (layers, heads) int: counted steps whose top key is the needle position with that token
    # The first answer step's attention rows, (layers, heads, keys) float32, keys window[0] … window[1] − 1
    # around the needle: the map the page shows for a retrieval head.
    answer_rows: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0, 0), np.float32))
    window: tuple[int, int] = (0, 0)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {
            "context": self.context,
            "depth": self.depth,
            "prompt": self.prompt,
            "needle": NEEDLE,
            "answer": self.answer,
            "found": self.found,
            "prompt_tokens": self.prompt_tokens,
            "needle_tokens": list(self.needle_span),
        }


@dataclass
class NeedleGrid:
    cases: list[NeedleCase]
    n_layers: int
    n_heads: int

    @property
    def counted(self) -> int:
        return sum(c.counted for c in self.cases)

    def scores(self) -> np.ndarray:
        """Return (layers, heads) retrieval scores pooled over the cases (0 where no answer token was counted)."""
        copies = sum((c.copies for c in self.cases), np.zeros((self.n_layers, self.n_heads), np.int64))
        return copies / self.counted if self.counted else np.zeros((self.n_layers, self.n_heads))

    def heads(self) -> list[dict]:
        """Return [{layer, head, retrieval_score}] sorted high to low (then by layer and head)."""
        s = self.scores()
        rows = [
            {"layer": layer, "head": head, "retrieval_score": float(s[layer, head])}
            for layer in range(self.n_layers)
            for head in range(self.n_heads)
        ]
        return sorted(rows, key=lambda r: (-r["retrieval_score"], r["layer"], r["head"]))

    def found_grid(self, contexts: list[int], depths: list[float]) -> np.ndarray:
        """Return (len(contexts), len(depths)) float: 1 found, 0 not, NaN for a case not run."""
        out = np.full((len(contexts), len(depths)), np.nan)
        for c in self.cases:
            if c.context in contexts and c.depth in depths:
                out[contexts.index(c.context), depths.index(c.depth)] = float(c.found)
        return out

    def to_json(self) -> dict:
        return {"cases": [c.to_json() for c in self.cases], "heads": self.heads()}


def _token_count(encoder: Encoder, text: str) -> int:
    return len(encoder.tokenizer(text, verbose=False)["input_ids"])


def build_prompt(encoder: Encoder, context: int, depth: float) -> tuple[str, tuple[int, int], list[int]]:
    """Return (prompt, needle token span, prompt ids): at most `context` tokens (the needle and the question alone
    when they are longer), filler around the needle at `depth`.

    The needle goes between two sentences of the filler, at the sentence boundary nearest the depth. Its token
    span comes from the tokenizer's offsets (the tokens whose characters overlap the needle's).
    """
    per = max(1, _token_count(encoder, FILLER))
    fixed = _token_count(encoder, NEEDLE + QUESTION)
    want = max(context - fixed, 1)
    reps = want // per + 2
    sentences = [s.strip() + "." for s in (FILLER * reps).split(". ") if s.strip()]
    sentences = [s.replace("..", ".") for s in sentences]
    # Take sentences until the filler reaches its share of the tokens (counted as we go, ~per sentence).
    tok_per_sentence = per / max(1, FILLER.count(". "))
    n = max(1, min(len(sentences), round(want / tok_per_sentence)))
    chosen = sentences[:n]
    while n > 0 and _token_count(encoder, " ".join(chosen) + " " + NEEDLE + QUESTION) > context:
        n -= 1
        chosen = sentences[:n]
    at = round(depth * len(chosen))
    before, after = " ".join(chosen[:at]), " ".join(chosen[at:])
    prompt = (before + " " if before else "") + NEEDLE + (" " + after if after else "") + QUESTION
    start_char = len(before) + (1 if before else 0)
    end_char = start_char + len(NEEDLE)
    enc = encoder.tokenizer(prompt, return_offsets_mapping=True, verbose=False)
    ids = [int(i) for i in enc["input_ids"]]
    inside = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if b > a and a < end_char and b > start_char]
    if not inside:
        raise InputError("the tokenizer gives no offsets for the needle: it cannot be placed")
    return prompt, (inside[0], inside[-1] + 1), ids


def check_grid(encoder: Encoder, contexts: list[int], depths: list[float]) -> None:
    """Refuse a grid the model or the budgets cannot take, before anything is allocated."""
    if not encoder.capabilities.generation:
        raise InputError(f"the needle test needs a decoder that generates (such as smollm2), not {encoder.name}")
    if not contexts or not depths:
        raise InputError("give at least one context length and one depth")
    for d in depths:
        if not 0.0 <= d <= 1.0:
            raise InputError(f"a depth is a fraction from 0 (the start) to 1 (the end), got {d:g}")
    limit = encoder.config.max_positions
    for n in contexts:
        if not MIN_CONTEXT <= n <= limit - ANSWER_TOKENS:
            raise InputError(
                f"a context of {n:,} tokens: this model takes {MIN_CONTEXT} … {limit - ANSWER_TOKENS:,} "
                f"(its {limit:,} positions, less {ANSWER_TOKENS} for the answer)"
            )
    cases = len(contexts) * len(depths)
    require("needle_cases", cases, f"a needle grid of {len(contexts)} contexts × {len(depths)} depths")
    require("needle_tokens", sum(contexts) * len(depths), "the needle grid's contexts together")
    cfg = encoder.config
    longest = max(contexts) + ANSWER_TOKENS
    check_long(encoder, longest, f"a needle case of {max(contexts):,} tokens")
    require(
        "max_token_heads",
        longest * cfg.n_layers * cfg.n_heads,
        f"a needle case ({longest:,} tokens × {cfg.n_layers} layers × {cfg.n_heads} heads)",
    )


@torch.inference_mode()
def run_case(encoder: Encoder, context: int, depth: float, answer_tokens: int = ANSWER_TOKENS) -> NeedleCase:
    """Return one case: the prompt read in chunks into our KV cache, then the answer, greedy, one token a step."""
    t0 = time.perf_counter()
    prompt, (n0, n1), ids = build_prompt(encoder, context, depth)
    model, dev = encoder.model, encoder.device
    cfg = encoder.config
    spellable = min(len(encoder.tokenizer), cfg.vocab_size)
    eos = getattr(encoder.tokenizer, "eos_token_id", None)
    if len(ids) + answer_tokens > cfg.max_positions:
        raise InputError(f"the prompt has {len(ids):,} tokens; this model has {cfg.max_positions:,} positions")
    needle_ids = ids[n0:n1]
    cache = KVCache()
    x = torch.tensor([ids], dtype=torch.long, device=dev)
    for a in range(0, len(ids) - 1, CHUNK):  # every prompt token but the last: no map is kept
        last_hidden(encoder, x[:, a : min(a + CHUNK, len(ids) - 1)], cache=cache)
    copies = np.zeros((cfg.n_layers, cfg.n_heads), np.int64)
    counted = 0
    answer: list[int] = []
    fed = ids[-1]
    lo, hi = max(0, n0 - AROUND), min(len(ids), n1 + AROUND)
    rows0 = np.zeros((0, 0, 0), np.float32)
    for step in range(answer_tokens):
        res = model(torch.tensor([[fed]], dtype=torch.long, device=dev), cache=cache)
        logits = model.logits(res.hidden[0, -1]).float()[:spellable]
        w = int(torch.argmax(logits))
        rows = res.attentions[0, :, :, -1, :]  # (layers, heads, keys): the query that generates w
        if step == 0:
            rows0 = rows[:, :, lo:hi].float().cpu().numpy().copy()
        if w in needle_ids:
            counted += 1
            top = rows.argmax(dim=-1).cpu().numpy()  # (layers, heads): each head's top-weight key
            in_needle = (top >= n0) & (top < n1)
            held = np.asarray(ids + answer)[np.clip(top, 0, len(ids) + len(answer) - 1)]
            copies += (in_needle & (held == w)).astype(np.int64)
        answer.append(w)
        if w == eos:
            break
        fed = w
    text = encoder.tokenizer.decode(answer[:-1] if answer and answer[-1] == eos else answer)
    return NeedleCase(
        context=context,
        depth=depth,
        prompt=prompt,
        prompt_tokens=len(ids),
        needle_span=(n0, n1),
        answer=text,
        answer_ids=answer,
        found=SECRET in text.lower(),
        counted=counted,
        copies=copies,
        answer_rows=rows0,
        window=(lo, hi),
        seconds=time.perf_counter() - t0,
    )


def needle_grid(
    encoder: Encoder, contexts: list[int], depths: list[float], answer_tokens: int = ANSWER_TOKENS
) -> NeedleGrid:
    """Return every case of contexts × depths and the heads' retrieval scores (see the module docstring)."""
    contexts = [int(c) for c in contexts]
    depths = [float(d) for d in depths]
    check_grid(encoder, contexts, depths)
    cfg = encoder.config
    cases = [run_case(encoder, n, d, answer_tokens) for n in contexts for d in depths]
    return NeedleGrid(cases=cases, n_layers=cfg.n_layers, n_heads=cfg.n_heads)
