"""The plain reference of the long loop: `attend_rows` itself on opts.rows query rows at a time (K and V repeated),
what `models.attention.attend_in_blocks` computes arranged for speed. A test helper, not production code."""

from __future__ import annotations

import torch

from models.attention import Options, attend_rows, block_keep, key_range, repeat_kv


def attend_in_blocks_plain(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor | None,
    keep: torch.Tensor | None,
    scale: float,
    opts: Options,
) -> tuple[torch.Tensor | None, None]:
    """Return (context, None): `attend_rows` itself on opts.rows query rows at a time (K and V repeated).

    What `attend_in_blocks` computes, the plain way: the reference its tests compare it with. (Its time against
    this one is not yet a bench figure.)
    """
    B, nh, T, _ = q.shape
    S = k.size(2)
    assert opts.rows is not None
    n_rep = nh // k.size(1)
    k = repeat_kv(k, n_rep)
    v = None if v is None else repeat_kv(v, n_rep)
    context = None if v is None else q.new_empty(B, nh, T, v.size(-1))
    if opts.lse_out is not None:
        opts.lse_out.fill_(0.0)
    for r0 in range(0, T, opts.rows):
        r1 = min(T, r0 + opts.rows)
        k0, k1 = key_range(opts, r0, r1, S)
        block = Options(fill=opts.fill, lse_out=None if opts.lse_out is None else opts.lse_out[:, :, r0:r1])
        ctx, _ = attend_rows(
            q[:, :, r0:r1],
            k[:, :, k0:k1],
            None if v is None else v[:, :, k0:k1],
            block_keep(keep, opts, r0, r1, k0, k1, q.device, B, nh),
            scale,
            block,
        )
        if context is not None and ctx is not None:
            context[:, :, r0:r1] = ctx
    return context, None
