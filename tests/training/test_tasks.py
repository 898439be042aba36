"""The tasks: each target's group (the copy, fresh draws) as the definitions say, held-out lengths never drawn,
fixed validation, and the tokenizer each saved folder carries giving back the training ids."""

from __future__ import annotations

import pytest
import torch

from models.errors import BudgetError, InputError
from models.training.tasks import InductionTask, ReverseTask, TextTask, make_task


@pytest.mark.parametrize("bos", [False, True])
def test_induction_batches_copy_one_segment_and_mark_its_targets(bos):
    task = InductionTask(bos=bos, lengths=(2, 15) if bos else (2, 16))  # 16 twice fills every position
    b = task.sample(torch.Generator().manual_seed(0), 256)
    assert (b.ids[:, 0] == task.bos_id).all() == bos
    assert (b.ids[:, int(bos) :] < task.n_symbols).all(), "no special token is drawn"
    seen = set()
    for i in range(b.size):
        s, n = int(b.start[i]), int(b.length[i])
        seen.add(n)
        assert torch.equal(b.ids[i, s + n : s + 2 * n], b.ids[i, s : s + n])
        det = {t + 1 for t in torch.nonzero(b.determined[i]).flatten().tolist()}  # target positions
        assert det == set(range(s + n + 1, s + 2 * n))
        fresh = {t + 1 for t in torch.nonzero(b.chance[i]).flatten().tolist()}
        assert fresh == set(range(1, s + n)) | set(range(s + 2 * n, task.seq))
        assert s >= int(bos)
    assert seen == set(task.train_lengths)
    assert not seen & set(task.held_out)
    starts = {int(s) for s in b.start}
    assert len(starts) > 5, "the offset varies"


def test_periodic_layout_repeats_to_the_end():
    task = InductionTask(layout="periodic", lengths=(2, 15))
    b = task.sample(torch.Generator().manual_seed(2), 64)
    for i in range(b.size):
        s, n = int(b.start[i]), int(b.length[i])
        for t in range(s + n, task.seq):
            assert b.ids[i, t] == b.ids[i, t - n]
        det = {t + 1 for t in torch.nonzero(b.determined[i]).flatten().tolist()}
        assert det == set(range(s + n + 1, task.seq))


def test_validation_and_probe_are_fixed_and_held_out():
    task = InductionTask()
    a, b = task.validation(), task.validation()
    assert list(a) == [f"n={n}" for n in task.held_out]
    for k in a:
        assert torch.equal(a[k].ids, b[k].ids)
        assert set(a[k].length.tolist()) == {int(k[2:])}
    assert torch.equal(task.probe().ids, task.probe().ids)


def test_reverse_mirrors_and_splits_halves():
    task = ReverseTask()
    b = task.sample(torch.Generator().manual_seed(1), 4)
    n = task.half
    assert torch.equal(b.ids[:, n + 2 :], b.ids[:, 1 : n + 1].flip(1))
    assert b.chance[:, :n].all() and not b.chance[:, n:].any()
    assert b.determined[:, n + 1 :].all() and not b.determined[:, : n + 1].any()


@pytest.mark.parametrize(
    ("name", "options"), [("induction", {}), ("induction", {"bos": True, "lengths": (2, 15)}), ("reverse", {})]
)
def test_word_level_tokenizer_gives_the_training_ids(name, options):
    task = make_task(name, **options)
    tok = task.tokenizer()
    ids = task.probe().ids[0]
    assert tok(task.text_of(ids))["input_ids"] == ids.tolist()  # <bos> first only where the task has one
    assert tok("zzz")["input_ids"][-1] == tok.unk_token_id


def test_text_task_splits_and_refuses_too_short_or_too_long(monkeypatch):
    task = TextTask()
    assert len(task.val_ids) >= task.seq + 1 and len(task.train_ids) > len(task.val_ids)
    text = "".join(task.tokens(torch.cat([task.train_ids, task.val_ids])))
    assert text == task.text
    with pytest.raises(InputError, match="at least"):
        TextTask(text="short")
    monkeypatch.setenv("ATTENTION_LENS_MAX_TEXT_CHARS", "100")
    with pytest.raises(BudgetError, match="ATTENTION_LENS_MAX_TEXT_CHARS"):
        TextTask(text="x" * 1000)


def test_unknown_task_and_bad_lengths():
    with pytest.raises(InputError, match="unknown task"):
        make_task("nope")
    with pytest.raises(InputError, match="do not fit"):
        InductionTask(seq=16, lengths=(3, 15))
    with pytest.raises(InputError, match="no training length"):
        InductionTask(lengths=(5, 5), held_out=(5,))
