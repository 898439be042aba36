"""Generation step by step with our own KV cache: what a decoder keeps, and what each new token looks at.

`generate` runs a model that can generate (capabilities.generation: GPT-2, the Llama family) on a prompt, then
adds one token at a time, greedy or top-k:

    step 0      the prompt (P tokens) in one pass; the cache is filled with P keys and values per layer and head
    step s ≥ 1  only the token chosen at step s − 1 goes in; its query row attends over all P + s cached keys

and records, per step, the newest token's attention row in every layer and head (its query over every cached
key), the cache's shape (batch, kv_heads, seq, d_k) and bytes as it grows (grouped models cache kv_heads, not
heads), the memory page's formula for the same cache, and the measured peak of the step. `check=True` runs the whole sequence once more without a cache and
compares each step's rows with the same rows of that full forward pass (they must agree to 1e-5).

Step s's logits choose generated token s, so N steps give N new tokens; step s's row covers keys 0 … P + s − 1.
Generation ends at the first of: the tokens asked for ("budget"), the model's last position ("positions"), or the
tokenizer's end-of-text token chosen by a step ("end_of_text": that token is the last generated one); the result's
`stop` says which.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import numpy as np
import torch

from ..analysis.cache import BoundedCache, CacheSpec, parse_cache
from ..encoder import Encoder
from ..errors import InputError
from ..network import ForwardResult
from ..settings import require
from ..tokens import display_tokens
from .memory import _peak_rss_bytes, _reset_peak_rss, _rss_bytes, kv_cache_bytes

ROW_TOL = 1e-5  # a cached step's row against the full forward's row
TOP = 5  # candidates shown per step
Stop = Literal["budget", "positions", "end_of_text"]  # why generation ended (see the module docstring)


@dataclass
class GenStep:
    """One forward pass of generation: the newest position's query against every cached key."""

    index: int  # 0 = the prompt's pass
    position: int  # q_pos of the row recorded (the newest token in the cache)
    fed: list[int]  # token ids that went in this pass (the whole prompt at step 0, then one)
    rows: np.ndarray  # [layers, heads, position + 1] float32: the newest token's attention over all cached keys
    chosen: int  # the token id this step's logits chose (generated token `index`)
    top: list[tuple[int, float]]  # the TOP most likely next tokens and their probabilities
    cache_shape: tuple[int, ...]  # (batch, heads, seq, d_k) of one layer's keys after this pass
    cache_bytes: int  # every layer's keys and values, counted from the tensors
    formula_bytes: int  # the Memory page's formula: 2 · layers · batch · seq · heads · d_k · bytes
    peak_bytes: int | None  # measured peak of this pass (None where it cannot be measured)
    seconds: float
    row_error: float | None = None  # max |cached row − full forward's row|, after check


@dataclass
class Generation:
    prompt_ids: list[int]
    generated_ids: list[int]
    tokens: list[str]  # raw, prompt and generated
    display: list[str]  # readable
    text: str  # the generated text alone (without a final end-of-text token)
    steps: list[GenStep]
    top_k: int | None
    seed: int
    notes: list[str] = field(default_factory=list)
    top_tokens: list[list[str]] = field(default_factory=list)  # readable forms of each step's `top` ids
    max_row_error: float | None = None  # over every step, after check
    stop: Stop = "budget"  # why it ended: the tokens asked for, the model's positions, or its end-of-text token
    chat: bool = False  # the prompt went in through the tokenizer's chat template (a user turn, then the reply)
    cache: str = "full"  # which keys the cache kept (models.analysis.cache): full, window:W, sink:S+window:W

    @property
    def max_len(self) -> int:
        return max(s.position + 1 for s in self.steps) if self.steps else 0

    def rows_array(self) -> tuple[np.ndarray, np.ndarray]:
        """Return rows (steps, layers, heads, max_len) float32, zero-padded, and lengths (steps,) int64."""
        if not self.steps:
            return np.zeros((0, 0, 0, 0), np.float32), np.zeros(0, np.int64)
        L, H, _ = self.steps[0].rows.shape
        out = np.zeros((len(self.steps), L, H, self.max_len), dtype=np.float32)
        lengths = np.zeros(len(self.steps), dtype=np.int64)
        for i, s in enumerate(self.steps):
            out[i, :, :, : s.rows.shape[-1]] = s.rows
            lengths[i] = s.rows.shape[-1]
        return out, lengths


def _pick(logits: torch.Tensor, top_k: int | None, gen: torch.Generator) -> int:
    """Return the next token id: argmax (greedy), or a draw from the k most likely, in proportion."""
    if top_k is None:
        return int(torch.argmax(logits))
    values, ids = torch.topk(logits.float().cpu(), min(top_k, logits.numel()))
    probs = torch.softmax(values, dim=-1)
    return int(ids[torch.multinomial(probs, 1, generator=gen)])


def prompt_ids(encoder: Encoder, prompt: str, chat: bool = False) -> list[int]:
    """Return the prompt's token ids: as typed, or inside the tokenizer's chat template (a user turn and the
    assistant's opening, as the instruct model was trained to see them). InputError without a template."""
    text = Encoder._required(prompt, "prompt")
    if not chat:
        return list(encoder.tokenizer(text, add_special_tokens=False)["input_ids"])
    if not getattr(encoder.tokenizer, "chat_template", None):
        raise InputError(f"{encoder.name} has no chat template: generate from the plain prompt instead")
    ids = encoder.tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dtype, "fp32")


def _measured(dev: torch.device, fn: Callable[[], ForwardResult]) -> tuple[ForwardResult, int | None, float]:
    """Run fn and return (its result, peak bytes above the start or None, seconds)."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        before = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        t0 = time.perf_counter()
        res = fn()
        torch.cuda.synchronize(dev)
        return res, torch.cuda.max_memory_allocated(dev) - before, time.perf_counter() - t0
    if sys.platform.startswith("linux") and _reset_peak_rss():
        before = _rss_bytes()
        t0 = time.perf_counter()
        res = fn()
        return res, max(0, _peak_rss_bytes() - before), time.perf_counter() - t0
    t0 = time.perf_counter()
    return fn(), None, time.perf_counter() - t0


@torch.inference_mode()
def generate(
    encoder: Encoder,
    prompt: str,
    n_tokens: int,
    top_k: int | None = None,
    seed: int = 0,
    check: bool = True,
    chat: bool = False,
    cache_spec: str | CacheSpec = "full",
) -> Generation:
    """Return `n_tokens` generated after `prompt`, step by step with our KV cache (see the module docstring).

    Greedy unless top_k (≥ 1) is given; top-k draws with a generator seeded with `seed`. Stops early, with a
    note and `stop` saying why, when the model's positions run out or a step chooses the tokenizer's end-of-text
    token (tokenizer.eos_token_id, when it has one). Only ids the tokenizer can spell are chosen (a random model's
    embedding may have more rows than its tokenizer has tokens; real ones pad their vocabulary too). chat: the
    prompt goes in through the tokenizer's chat template. InputError for a model that cannot generate, an empty
    prompt or a bad count; BudgetError above ATTENTION_LENS_MAX_GENERATE tokens. cache_spec: a bounded cache
    (window:W, sink:S+window:W) evicts keys, so its bytes stay flat; each step's row is laid over every position
    (0 on the evicted keys) and the check runs the full forward under the cache's mask.
    """
    spec = parse_cache(cache_spec)
    if not encoder.capabilities.generation:
        raise InputError(
            "generation needs a decoder (smollm2, a GPT-2 such as random:gpt2-tiny, or another causal LM), "
            f"not {encoder.name}"
        )
    if not isinstance(n_tokens, int) or isinstance(n_tokens, bool) or n_tokens < 1:
        raise InputError(f"the number of tokens to generate must be a whole number ≥ 1, got {n_tokens!r}")
    require("max_generate", n_tokens, "this generation")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
        raise InputError(f"top-k must be a whole number ≥ 1, got {top_k!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise InputError(f"the seed must be a whole number from 0 to 2^63 − 1, got {str(seed)[:40]}")
    ids = prompt_ids(encoder, prompt, chat)
    if not ids:
        raise InputError("the prompt has no tokens")
    limit = encoder.config.max_positions
    if len(ids) >= limit:
        raise InputError(f"the prompt has {len(ids)} tokens; this model has {limit} positions, none left to generate")
    n = min(n_tokens, limit - len(ids))
    stop: Stop = "budget" if n == n_tokens else "positions"
    eos = getattr(encoder.tokenizer, "eos_token_id", None)

    model, dev = encoder.model, encoder.device
    cfg = encoder.config
    spellable = min(len(encoder.tokenizer), cfg.vocab_size)  # ids past the tokenizer's last are never chosen
    gen = torch.Generator().manual_seed(seed)
    cache = spec.make()
    dtype = _dtype_name(encoder.dtype)
    steps: list[GenStep] = []
    fed = list(ids)
    generated: list[int] = []
    for s in range(n):
        x = torch.tensor([fed], dtype=torch.long, device=dev)  # (1, new positions)
        res, peak, seconds = _measured(dev, partial(model, x, cache=cache))
        hidden = res.hidden[0, -1]  # (d_model,) of the newest position
        logits = model.logits(hidden).float()[:spellable]  # (vocab,)
        chosen = _pick(logits, top_k, gen)
        probs = torch.softmax(logits, dim=-1)
        top_p, top_i = torch.topk(probs, min(TOP, probs.numel()))
        S = cache.seq  # keys held (every position seen, unless the cache evicts)
        row = res.attentions[0, :, :, -1, :].float().cpu().numpy()  # (layers, heads, S)
        if isinstance(cache, BoundedCache):  # lay the held keys' weights over every position; evicted ones get 0
            full = np.zeros((*row.shape[:2], cache.position), np.float32)
            full[:, :, cache.positions.cpu().numpy()] = row
            row = full
        steps.append(
            GenStep(
                index=s,
                position=cache.position - 1,
                fed=list(fed),
                rows=row.copy(),  # (layers, heads, position + 1)
                chosen=chosen,
                top=[(int(i), float(p)) for i, p in zip(top_i.tolist(), top_p.tolist(), strict=True)],
                cache_shape=cache.shape(),
                cache_bytes=cache.nbytes,
                formula_bytes=kv_cache_bytes(cfg.n_layers, 1, S, cfg.n_kv_heads, cfg.d_k, dtype),
                peak_bytes=peak,
                seconds=seconds,
            )
        )
        generated.append(chosen)
        if chosen == eos:
            stop = "end_of_text"
            break
        fed = [chosen]
    notes: list[str] = []
    if stop == "positions":
        notes.append(f"stopped after {n} of {n_tokens} tokens: the model has {limit} positions")
    elif stop == "end_of_text":
        notes.append(
            f"stopped after {len(generated)} of {n_tokens} tokens: the model chose its end-of-text token "
            f"{encoder.tokenizer.convert_ids_to_tokens(eos)!r}"
        )

    result = Generation(
        prompt_ids=list(ids),
        generated_ids=generated,
        tokens=encoder.tokenizer.convert_ids_to_tokens([*ids, *generated]),
        display=[],
        text=encoder.tokenizer.decode(generated[:-1] if stop == "end_of_text" else generated),
        steps=steps,
        top_k=top_k,
        seed=seed,
        notes=notes,
        stop=stop,
        chat=chat,
        cache=spec.name,
    )
    shown = encoder.capabilities.token_display
    result.display = display_tokens(result.tokens, shown)
    result.top_tokens = [
        display_tokens(encoder.tokenizer.convert_ids_to_tokens([i for i, _ in s.top]), shown) for s in steps
    ]
    if check:
        check_rows(encoder, result)
    return result


@torch.inference_mode()
def check_rows(encoder: Encoder, result: Generation) -> float:
    """Compare every step's cached row with the same row of one full forward pass (no cache); return the max error.

    Sets each step's row_error and result.max_row_error.
    """
    seq = [*result.prompt_ids, *result.generated_ids[:-1]]  # every token that went in
    spec = parse_cache(result.cache)
    keep = None if not spec.bounded else spec.keep(len(seq), encoder.device)  # the cache's mask, in one pass
    x = torch.tensor([seq], dtype=torch.long, device=encoder.device)
    full = encoder.model(x, keep=keep).attentions[0].float().cpu()
    worst = 0.0
    for step in result.steps:
        p = step.position
        ref = full[:, :, p, : p + 1].numpy()  # (layers, heads, p + 1)
        step.row_error = float(np.abs(step.rows - ref).max())
        worst = max(worst, step.row_error)
    result.max_row_error = worst
    return worst
