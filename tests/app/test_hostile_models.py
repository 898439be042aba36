"""Issue 41's model folders as a visitor's custom model (a link's `model=` on this computer, where custom models
are allowed): each is refused with our one-line message — the model could not be loaded, and why — and never
Streamlit's error box. The same folders are refused by the command line in tests/cli/test_hostile.py."""

from __future__ import annotations

import os
from pathlib import Path

from streamlit.testing.v1 import AppTest

from lens_testing import crafted

ROOT = Path(__file__).resolve().parents[2]


def test_crafted_model_folders_are_refused_with_our_message(tmp_path):
    fifo = crafted.model_folder(tmp_path / "config-fifo", {"model_type": "bert"})
    (fifo / "config.json").unlink()
    os.mkfifo(fifo / "config.json")  # read, it would block forever: refused from stat, before any open
    folders = {
        crafted.model_folder(tmp_path / "bert-huge-in-bounds", crafted.BERT_HUGE_IN_BOUNDS): "ATTENTION_LENS_MODEL_MB",
        crafted.model_folder(
            tmp_path / "llama-heads0",
            dict(
                model_type="llama",
                vocab_size=100,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=0,
                intermediate_size=128,
            ),
        ): "n_heads is 0",  # fmt: skip
        crafted.model_folder(
            tmp_path / "llama-nan-theta",
            '{"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2, '
            '"num_attention_heads": 4, "intermediate_size": 128, "rope_theta": NaN}',
        ): "rope_theta is nan",
        fifo: "not a regular file",
    }
    for folder, reason in folders.items():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params["model"] = str(folder)
        at.run()
        assert not at.exception, (folder.name, [e.value for e in at.exception])
        errors = [e.value.replace("\\", "") for e in at.error]  # markdown-escaped: ATTENTION\_LENS\_… as text
        assert len(errors) == 1 and errors[0].startswith("The model "), (folder.name, errors)
        assert reason in errors[0] and "Traceback" not in errors[0], (folder.name, errors[0])
        assert "\n" not in errors[0].strip(), errors[0]
