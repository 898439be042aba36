"""Model specs, bad checkpoints, devices and bad text: each gets a clear error, never a random stand-in."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from models import (
    DeviceError,
    InputError,
    MaskError,
    ModelLoadError,
    UnsupportedArchitectureError,
    load_encoder,
)
from models.device import resolve_device


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_bundled_model_is_real_minilm(minilm):
    d = minilm.describe()
    assert (d["layers"], d["heads"], d["d_model"], d["d_k"]) == (6, 12, 384, 32)
    assert "bundled" in d["name"]
    # Pretrained, not random: a trained MiniLM has peaked heads; the seeded random twin is near-uniform.
    text = "The animal didn't cross the street because it was too tired."
    trained = minilm.encode(text).attentions.max(-1).values.mean()
    untrained = load_encoder("random:minilm", device="cpu").encode(text).attentions.max(-1).values.mean()
    assert trained > 2 * untrained


def test_aliases_resolve_to_the_bundled_model():
    enc = load_encoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu")
    assert "bundled" in enc.name


def test_random_is_seeded_and_named():
    a = load_encoder("random:tiny", device="cpu")
    b = load_encoder("random:tiny", device="cpu")
    assert "untrained" in a.name
    assert torch.equal(a.encode("same seed").attentions, b.encode("same seed").attentions)
    c = a.config
    assert (c.n_layers, c.n_heads) == (2, 4)
    with pytest.raises(ModelLoadError, match="random:bert-base"):
        load_encoder("random:huge")


def test_folder_with_pytorch_bin_loads_weights_only(tiny_dir, tmp_path):
    """A .bin checkpoint (torch.load with weights_only=True) gives the same model as the safetensors one."""
    from safetensors.torch import load_file

    folder = _copy(tiny_dir, tmp_path / "bin")
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    a = load_encoder(str(tiny_dir), device="cpu").encode("hello world")
    b = load_encoder(str(folder), device="cpu").encode("hello world")
    assert torch.equal(a.attentions, b.attentions)


@pytest.mark.parametrize(
    "spec, match",
    [
        ("no such model!", "unknown model"),
        ("/definitely/not/here", "does not exist"),
        ("bert-base-uncased", "hf download"),  # offline, not cached: says how to get it
        ("", "no model"),
    ],
)
def test_bad_specs(spec, match):
    with pytest.raises(ModelLoadError, match=match):
        load_encoder(spec, device="cpu")


def test_folder_without_config(tmp_path):
    with pytest.raises(ModelLoadError, match="config.json"):
        load_encoder(str(tmp_path), device="cpu")


def test_file_instead_of_folder(tiny_dir):
    with pytest.raises(ModelLoadError, match="is a file"):
        load_encoder(str(tiny_dir / "config.json"), device="cpu")


def test_gpt2_with_cross_attention_is_unsupported(tmp_path):
    """GPT-2 decoders load (tests/core/test_decoder.py); one with cross-attention is another architecture."""
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100, n_positions=16, add_cross_attention=True)
    GPT2Model(cfg).save_pretrained(tmp_path)
    with pytest.raises(UnsupportedArchitectureError, match="unsupported architecture.*cross-attention"):
        load_encoder(str(tmp_path), device="cpu")


def test_gpt2_folder_without_vocabulary(tmp_path):
    from transformers import GPT2Config, GPT2Model

    GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100, n_positions=16)).save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="no vocabulary"):
        load_encoder(str(tmp_path), device="cpu")


def test_relative_position_bert_is_unsupported(tiny_dir, tmp_path):
    folder = _copy(tiny_dir, tmp_path / "rel")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["position_embedding_type"] = "relative_key"
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedArchitectureError, match="position_embedding_type"):
        load_encoder(str(folder), device="cpu")


def test_corrupted_weights(tiny_dir, tmp_path):
    folder = _copy(tiny_dir, tmp_path / "corrupt")
    (folder / "model.safetensors").write_bytes(b"\x00\x01not a safetensors file" * 10)
    with pytest.raises(ModelLoadError, match="cannot read the weights"):
        load_encoder(str(folder), device="cpu")


def test_missing_weights_are_refused_not_randomised(tiny_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = _copy(tiny_dir, tmp_path / "partial")
    state = load_file(folder / "model.safetensors")
    dropped = [k for k in state if "layer.1.attention.self.query" in k]
    assert dropped
    save_file(
        {k: v for k, v in state.items() if k not in dropped}, folder / "model.safetensors", metadata={"format": "pt"}
    )
    with pytest.raises(ModelLoadError, match="lacks"):
        load_encoder(str(folder), device="cpu")


def test_folder_without_vocabulary(tiny_dir, tmp_path):
    folder = _copy(tiny_dir, tmp_path / "novocab")
    for name in ("vocab.txt", "tokenizer.json"):
        (folder / name).unlink(missing_ok=True)
    with pytest.raises(ModelLoadError, match="vocabulary"):
        load_encoder(str(folder), device="cpu")


def test_devices():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="no CUDA GPU"):
            load_encoder("random:tiny", device="cuda")
    with pytest.raises(DeviceError, match="GPU only"):
        load_encoder("random:tiny", device="cpu", dtype="bf16")


def test_empty_text(minilm):
    for text in ("", "   \n\t", None):
        with pytest.raises(InputError, match="empty"):
            minilm.encode(text)


def test_empty_second_sentence_means_single(minilm):
    assert minilm.encode("One sentence.", "  ").tokens == minilm.encode("One sentence.").tokens


def test_truncation_says_how_many_tokens_were_cut(minilm):
    text = " ".join(["word"] * 600)  # 600 word pieces + [CLS] + [SEP]
    with pytest.warns(UserWarning, match="90 token"):
        out = minilm.encode(text)
    assert out.seq == 512 and out.truncated == 90
    assert out.tokens[-1] == "[SEP]"
    assert any("90 token" in n for n in out.notes)


def test_truncated_pair_keeps_both_sentences(minilm):
    a, b = " ".join(["alpha"] * 400), " ".join(["beta"] * 400)
    with pytest.warns(UserWarning):
        out = minilm.encode(a, b)
    assert out.seq == 512 and out.truncated == 803 - 512
    assert out.tokens.count("[SEP]") == 2 and set(out.segments) == {0, 1}


def test_unknown_tokens_are_counted_and_explained(minilm):
    out = minilm.encode("我们今天学习多头注意力机制")
    assert out.n_unknown >= 3
    assert any("bert-base-chinese" in n for n in out.notes)
    assert not minilm.encode("Plain English text.").notes


def test_named_masks_reach_the_encoder(minilm):
    out = minilm.encode("One two three four five.", mask="causal")
    assert out.mask == "causal"
    upper = torch.triu(torch.ones(out.seq, out.seq, dtype=torch.bool), diagonal=1)
    assert out.attentions[..., upper].abs().max() == 0
    assert torch.equal(out.keep, ~upper)
    with pytest.raises(MaskError, match="unknown mask"):
        minilm.encode("x", mask="diagonal")


def test_wrong_mask_shape_names_both_sizes(minilm):
    with pytest.raises(MaskError, match=r"\(3, 3\).*8"):
        minilm.encode("one two three four five six", mask=torch.ones(3, 3, dtype=torch.bool))


# The direct read (models.loading.read_direct): a plain model.safetensors is read without building transformers'
# class; it must hand over exactly what that class would, and step aside for anything else.


def _both_reads(folder):
    from models import families
    from models.loading import _transformers_class, read_direct

    hf = json.loads((folder / "config.json").read_text())
    fam = families.family(hf["model_type"])
    cfg = fam.config.from_hf(hf)
    direct = read_direct(str(folder), fam, cfg)
    theirs = _transformers_class(fam.hf_model).from_pretrained(str(folder), dtype=torch.float32)
    return fam, cfg, direct, fam.port(theirs.state_dict(), cfg)


@pytest.mark.parametrize("which", ["bundled", "tiny", "gpt2", "llama"])
def test_direct_read_equals_what_transformers_hands_over(which, minilm, tiny_dir, gpt2_tiny_dir, tmp_path):
    from models import bundled_model_dir
    from tests.conftest import save_llama_folder

    folder = {
        "bundled": lambda: bundled_model_dir(),
        "tiny": lambda: tiny_dir,
        "gpt2": lambda: gpt2_tiny_dir,
        "llama": lambda: save_llama_folder(
            tmp_path / "llama",
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            tie_word_embeddings=False,
        ),  # fmt: skip
    }[which]()
    fam, cfg, direct, theirs = _both_reads(folder)
    assert direct is not None, "a plain save_pretrained folder is read directly"
    ours = fam.port(direct[0], cfg)
    assert sorted(ours) == sorted(theirs)
    for k, v in theirs.items():
        assert ours[k].dtype == torch.float32 and torch.equal(ours[k], v), k


def test_direct_read_finds_the_weights_under_a_prefix_and_reports_the_rest(tmp_path):
    """A BertForMaskedLM folder stores `bert.*` and the head `cls.*`: the encoder comes from under `bert.`, and
    `cls.*` is reported unused, as transformers reports it (that is how the masked-LM head is found)."""
    from transformers import BertConfig, BertForMaskedLM

    from models import families
    from models.loading import read_direct

    cfg_hf = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    BertForMaskedLM(cfg_hf).save_pretrained(tmp_path)
    fam = families.family("bert")
    cfg = fam.config.from_hf(json.loads((tmp_path / "config.json").read_text()))
    direct = read_direct(str(tmp_path), fam, cfg)
    assert direct is not None
    state, info = direct
    assert "embeddings.word_embeddings.weight" in state and not any(k.startswith("bert.") for k in state)
    assert info["unexpected_keys"] and all(k.startswith("cls.") for k in info["unexpected_keys"])


def test_direct_read_steps_aside_for_a_missing_weight(tiny_dir, tmp_path):
    """One weight gone: None here, and the load goes on to transformers' reader, which refuses it by name."""
    from safetensors.torch import load_file, save_file

    from models import families
    from models.loading import read_direct

    folder = _copy(tiny_dir, tmp_path / "gap")
    state = load_file(folder / "model.safetensors")
    state.pop("encoder.layer.1.attention.self.query.weight")
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    fam = families.family("bert")
    cfg = fam.config.from_hf(json.loads((folder / "config.json").read_text()))
    assert read_direct(str(folder), fam, cfg) is None
    with pytest.raises(ModelLoadError, match="refusing to fill them with random values"):
        load_encoder(str(folder), device="cpu")


def test_loading_builds_no_transformers_model_and_no_compiler(tmp_path):
    """The bundled encoder and decoder load without importing transformers' modeling code or torch._dynamo (the
    seconds a CLI command used to spend before its first line of output)."""
    code = (
        "import sys; from models import load_model; load_model('minilm'); load_model('smollm2'); "
        "print(sorted(m for m in sys.modules if m.endswith(('modeling_bert', 'modeling_llama')) "
        "or m == 'torch._dynamo'))"
    )
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-1000:]
    assert r.stdout.strip() == "[]", r.stdout


def test_meta_building_leaves_other_threads_alone():
    """on_meta skips random fills on meta tensors in this thread only: a model another thread builds meanwhile
    (the training lab's) is initialised as usual."""
    import threading

    from models.porting import on_meta

    seen = {}

    def build():
        layer = torch.nn.Linear(8, 8)
        seen["device"], seen["std"] = layer.weight.device.type, float(layer.weight.detach().std())

    with on_meta():
        here = torch.nn.Linear(8, 8)
        t = threading.Thread(target=build)
        t.start()
        t.join()
    assert here.weight.is_meta
    assert seen["device"] == "cpu" and seen["std"] > 0.05
