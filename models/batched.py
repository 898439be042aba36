"""Many texts in padded batches, each returned as if encoded alone: what the server's dynamic batching runs.

`encode_many(enc, texts)` returns, per text, what `enc.encode(text, hidden=False)` returns, computed through
`Encoder.encode_batch` (the one public entry point to the forward that the pages use) in padded batches: the
padding hides the shorter texts' padded keys (a key-padding mask, models.masks), so a text's rows are its own up to
float32 rounding (the GEMMs block another shape differently: on the bundled minilm even a batch of one text twice
differs from it alone by ~1e-6; tests/app/test_batching.py holds them to the parity bar, 1e-5).

Only short texts are padded together. A text of more than `ALONE_TOKENS` tokens fills the GEMMs by itself, and in a
padded batch it costs more CPU than alone: the padding mask's fill over every score, score tensors that no longer
fit the caches, and the copy of its maps out of the batch. Measured on the bundled minilm, eight texts in one batch
against the same eight one by one (CPU, the 2-core machine): ×0.35 at 14 tokens, ×0.69 at 66, ×0.89 at 128,
×1.22 at 260; four texts of 410 tokens ×1.5. So such a text is encoded alone, in turn, by whoever called (the
server's batching worker: one forward at a time, not sixteen threads fighting for two cores).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from . import settings
from .encoder import Encoder, EncoderOutput
from .errors import InputError

ALONE_TOKENS = 192  # a text longer than this runs alone: padded with others it costs more than it saves (above)


def encode_many(
    enc: Encoder,
    texts: Sequence[str],
    texts_b: Sequence[str | None] | None = None,
    mask: str | None = None,
    forwards: list[int] | None = None,
) -> list[EncoderOutput]:
    """Return, per text (in the order given), what `enc.encode(text, text_b, mask=mask, hidden=False)` returns.

    Texts are sorted by length and run in batches whose maps fit ATTENTION_LENS_DENSE_MAPS_MB together; each result
    is trimmed to its tokens, owns its tensors (copies of its rows, not views that would keep the whole batch
    alive) and has its own notes. A text whose maps alone exceed the budget (a long text: maps on demand) is
    encoded alone, and so is one longer than ALONE_TOKENS (see the module's docstring). mask: None or a named mask
    that depends on positions only (bidirectional, causal): every text of a batch gets it. forwards: if given, the
    number of texts each forward ran is appended to it (the server's debug log says how its requests went).
    """
    if isinstance(texts, str):
        raise InputError("encode_many takes a list of texts; use encode() for one")
    seconds: list[str | None] = [None] * len(texts) if texts_b is None else list(texts_b)
    if len(seconds) != len(texts):
        raise InputError(f"{len(texts)} first sentences but {len(seconds)} second sentences")
    out: list[EncoderOutput | None] = [None] * len(texts)
    c = enc.config
    budget = settings.limit("dense_maps_mb") * (1 << 20)
    per_token2 = 4 * c.n_layers * c.n_heads  # bytes of one text's maps per token²
    lengths = [
        int(enc.tokenize([t], None if b is None else [b]).input_ids.shape[1])
        for t, b in zip(texts, seconds, strict=True)
    ]
    group: list[int] = []

    def run(ids: list[int]) -> None:
        pairs = any(seconds[i] is not None for i in ids)
        res = enc.encode_batch(
            [texts[i] for i in ids], [seconds[i] for i in ids] if pairs else None, mask=mask, hidden=False
        )
        for j, i in enumerate(ids):
            out[i] = _alone(enc, res, j)
        if forwards is not None:
            forwards.append(len(ids))

    for i in sorted(range(len(texts)), key=lambda i: lengths[i]):
        # long for a batch (see ALONE_TOKENS), or long for dense maps (maps on demand): alone
        if lengths[i] > ALONE_TOKENS or per_token2 * lengths[i] ** 2 > budget:
            out[i] = enc.encode(texts[i], seconds[i], mask=mask, hidden=False)
            if forwards is not None:
                forwards.append(1)
            continue
        # Sorted by length: this text is the longest so far, so the padded batch would be (len(group) + 1) × it.
        if group and per_token2 * lengths[i] ** 2 * (len(group) + 1) > budget:
            run(group)
            group = []
        group.append(i)
    if group:
        run(group)
    return [o for o in out if o is not None]


def _alone(enc: Encoder, res: EncoderOutput, j: int) -> EncoderOutput:
    """Return item j of a batch as `encode` returns a text alone: trimmed, its own tensors, its own notes."""
    one = res.item(j, trim=True)
    own = {
        name: getattr(one, name).clone(memory_format=torch.contiguous_format)
        for name in ("input_ids", "token_type_ids", "attentions", "keep", "padding")
    }
    cut = one.truncated if isinstance(one.truncated, int) else 0
    notes = [f"input truncated to {enc.max_tokens} tokens, the model's limit: {cut} token(s) cut"] if cut else []
    single = replace(one, notes=notes, **own)
    if single.many_unknown:  # the note Encoder.encode adds
        single.notes.append(
            f"{single.n_unknown} of {single.seq - 2} tokens are [UNK]: this model's vocabulary does not cover "
            "this text (for Chinese, use bert-base-chinese)"
        )
    return single
