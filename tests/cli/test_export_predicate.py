"""A predicate mask given to `export` on SmolLM2 at ~1,100 tokens (maps on demand, the long block loop) gives
transformers' eager attention under the same mask passed as a 4-D float mask (1, 1, q, k)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.cli import main
from models.masks import predicates
from models.masks.expressions import predicate_expression

TEXT = "The cat sat on the mat, and the dog slept by the door; the bird sang a song in the old tree. " * 44
# A sliding window of 300 keys with 4 sinks, as a FlexAttention user writes it; the model ANDs its causal mask.
PREDICATE = "(q_idx - kv_idx < 300) | (kv_idx < 4)"
LAYERS = (0, 14, 29)


@pytest.mark.long
def test_export_with_a_predicate_mask_at_1100_tokens_is_transformers_eager_under_that_mask(
    smollm2, tmp_path, monkeypatch
):
    from tests.core.test_llama import _smollm2_reference

    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "64")
    ids = smollm2.tokenize([TEXT]).input_ids[0]
    T = int(ids.shape[0])
    assert 1000 <= T <= 1200, T
    assert smollm2._needs_on_demand(1, T, False)  # maps on demand: the long loop and OnDemandMaps
    text = tmp_path / "long.txt"
    text.write_text(TEXT)
    out = tmp_path / "maps.npz"
    argv = ["export", "--model", "smollm2", "--text-file", str(text), "--mask", PREDICATE, "--out", str(out)]
    assert main([*argv, "--layers", ",".join(map(str, LAYERS))]) == 0
    ours = np.load(out)["attentions"]  # (layers kept, heads, T, T)
    assert ours.shape == (len(LAYERS), 9, T, T)

    keep = predicates.materialise(predicates.causal() & predicate_expression(PREDICATE), T)  # (1, 1, T, T)
    additive = torch.zeros(keep.shape).masked_fill(~keep, torch.finfo(torch.float32).min)
    theirs = _smollm2_reference()
    caught: dict[int, torch.Tensor] = {}
    hooks = [
        theirs.model.layers[i].self_attn.register_forward_hook(
            lambda m, a, o, i=i: caught.__setitem__(i, o[1][0].detach())
        )
        for i in LAYERS
    ]
    try:
        with torch.no_grad():
            theirs(input_ids=ids[None].clone(), attention_mask=additive)
    finally:
        for h in hooks:
            h.remove()
    for n, layer in enumerate(LAYERS):
        ref = caught[layer]  # (heads, T, T)
        assert float(ref[:, 700, 4:401].abs().max()) == 0  # the mask took: row 700 sees keys 0–3 and 401–700
        assert (torch.from_numpy(ours[n]) - ref).abs().max() <= 1e-5, layer
