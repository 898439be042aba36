"""What if: a head (or a key/value group) removed, the next-token KL against transformers' eager model with the same
heads' output-projection input zeroed; the bootstrap interval over prompts; the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models.analysis.ablate import ablate, ablate_over, bootstrap, heads_of, kl_rows
from models.cli import main
from tests.analysis.test_explain import _attention, ours, twin

REL = 1e-4
TEXT = "The cat sat on the mat, and the dog slept by the"


def _output_projection(model, layer: int):
    """Return transformers' W_o of `layer` (o_proj, c_proj or attention.output.dense)."""
    attn = _attention(model, layer)
    for name in ("o_proj", "c_proj"):
        if hasattr(attn, name):
            return getattr(attn, name)
    raise AssertionError("no output projection")


def their_logits(spec: str, ids: torch.Tensor, heads: list[tuple[int, int]]) -> torch.Tensor:
    """Return transformers' (T, vocab) logits with each head's slice of the output projection's input zeroed."""
    model = twin(spec)
    d_k = ours(spec).config.d_k
    handles = []
    for layer in sorted({la for la, _ in heads}):
        cut = [h for la, h in heads if la == layer]

        def zero(_m, args, cut=cut):
            x = args[0].clone()
            for h in cut:
                x[..., h * d_k : (h + 1) * d_k] = 0
            return (x,)

        handles.append(_output_projection(model, layer).register_forward_pre_hook(zero))
    try:
        with torch.no_grad():
            out = model(input_ids=ids)
            if hasattr(out, "logits"):
                return out.logits[0]
            return out.last_hidden_state[0] @ model.wte.weight.T  # GPT2Model: the LM head is tied to wte
    finally:
        for h in handles:
            h.remove()


CASES = [
    ("random:llama-tiny", [(0, 1)], []),
    ("random:llama-tiny", [], [(1, 0)]),  # a key/value group: query heads 0 and 1
    ("random:gpt2-tiny", [(0, 2), (1, 0)], []),
    pytest.param("smollm2", [(0, 4)], [(3, 1)], marks=pytest.mark.long),
]


@pytest.mark.parametrize("spec,heads,groups", CASES)
def test_kl_equals_transformers_with_the_heads_output_zeroed(spec, heads, groups):
    enc = ours(spec)
    removed = heads_of(enc, heads, groups)
    a = ablate(enc, TEXT, removed)
    ids = enc.tokenize([TEXT]).input_ids
    base, cut = their_logits(spec, ids, []), their_logits(spec, ids, removed)
    theirs = kl_rows(base, cut)
    assert a.kl > 1e-6  # something measurable was removed
    assert a.kl == pytest.approx(float(theirs[-1]), rel=REL)
    assert np.allclose(a.per_position_kl, theirs.numpy(), rtol=REL, atol=1e-9)
    top = int(base[-1].argmax())
    assert a.logit_diff == pytest.approx(float(cut[-1, top] - base[-1, top]), rel=REL, abs=1e-6)
    if spec == "random:llama-tiny" and groups:  # 4 query heads over 2 key/value heads: group 0 is heads 0 and 1
        assert removed == [(1, 0), (1, 1)]


def test_removing_nothing_changes_nothing_and_a_wrong_head_is_seen():
    """A planted bug: the gate put on the wrong head. The KL then differs from transformers' for the named head."""
    spec = "random:gpt2-tiny"
    enc = ours(spec)
    ids = enc.tokenize([TEXT]).input_ids
    theirs = float(kl_rows(their_logits(spec, ids, []), their_logits(spec, ids, [(0, 2)]))[-1])
    wrong = ablate(enc, TEXT, [(0, 3)]).kl
    assert abs(wrong - theirs) > 100 * REL * theirs


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    values = np.array([0.1, 0.4, 0.2, 0.9, 0.3])
    lo, hi = bootstrap(values)
    assert (lo, hi) == bootstrap(values)  # seeded
    assert lo < values.mean() < hi and lo >= values.min() and hi <= values.max()
    assert bootstrap(np.array([0.5, 0.5])) == (0.5, 0.5)


def test_over_prompts_and_cli(tmp_path, capsys):
    enc = ours("random:llama-tiny")
    prompts = ["The cat sat on the", "Once upon a time there", TEXT]
    over = ablate_over(enc, prompts, [(0, 1)])
    single = [ablate(enc, p, [(0, 1)]).kl for p in prompts]
    assert np.allclose(over.kls, single) and over.mean_kl == pytest.approx(np.mean(single))
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(prompts) + "\n\n", encoding="utf-8")
    code = main(["ablate", "--model", "random:llama-tiny", "--text", TEXT, "--heads", "0.1", "--texts-file", str(f)])
    assert code == 0 and "95 % interval" in capsys.readouterr().out
    code = main(
        ["ablate", "--model", "random:llama-tiny", "--text", TEXT, "--heads", "0.1", "--texts-file", str(f), "--json"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["heads"] == ["0.1"] and doc["mean_kl"] == pytest.approx(over.mean_kl)
    assert doc["ci95"] == pytest.approx(list(over.ci95)) and len(doc["per_position_kl"]) == len(doc["tokens"])
    assert doc["kl"] == pytest.approx(single[-1])


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--model", "random:llama-tiny", "--text", "Hi there"], "say what to remove"),
        (["--model", "random:llama-tiny", "--text", "Hi there", "--heads", "0-1"], "is not LAYER.INDEX"),
        (["--model", "random:llama-tiny", "--text", "Hi there", "--heads", "5.0"], "outside"),
        (["--model", "random:llama-tiny", "--text", "Hi there", "--kv-groups", "0.2"], "outside"),
        (["--model", "random:tiny", "--text", "Hi there", "--heads", "0.0"], "no next-token head"),
        (["--model", "random:llama-tiny", "--heads", "0.0", "--texts-file", "/no/such/file"], "cannot read"),
        (["--model", "random:llama-tiny", "--heads", "0.0", "--texts-file", "/dev/zero"], "not a regular file"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    code = main(["ablate", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_sweep_removes_each_head_and_group_alone_as_ablate_does():
    """Batched per-item gates give each unit's KL as a forward of its own: heads, then key/value groups."""
    from models.analysis.ablate import sweep

    enc = ours("random:llama-tiny")
    s = sweep(enc, TEXT)
    c = enc.config
    assert len(s.names) == c.n_layers * c.n_heads + c.n_layers * enc.capabilities.kv_heads
    assert s.names[1] == "0.1" and s.names[c.n_layers * c.n_heads] == "KV 0.0"
    for i in (1, 5, c.n_layers * c.n_heads + 3):
        one = ablate(enc, TEXT, s.units[i])
        assert s.last_kl[i] == pytest.approx(one.kl, rel=1e-6, abs=1e-12)
        assert s.mean_kl[i] == pytest.approx(one.per_position_kl.mean(), rel=1e-6, abs=1e-12)
        assert s.ci95[i][0] <= s.mean_kl[i] <= s.ci95[i][1]
    assert s.units[c.n_layers * c.n_heads + 3] == [(1, 2), (1, 3)]  # KV 1.1: query heads 2 and 3
