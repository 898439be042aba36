"""The decoder families the trainer can build: our network of that family, its initialisation, and where its W_q,
W_k, norms and MLP live, so that the trainer and the recorder never ask which family they hold.

One `Arch` per family in `ARCHS` (GPT-2 today: learned positions, pre-LN; a rotary family adds an entry). The
network is the family's own module, the one every page runs (`models.gpt2.GPT2Model`), so what is trained here is
what Explore shows. Attention-only models keep the standard architecture: the MLP is one unit wide, its weights
and biases zero and frozen (gelu(0) = 0 and a zero projection add nothing), so transformers still loads the folder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .. import families
from ..bert import ForwardResult
from ..capabilities import Capabilities
from ..config import GPT2Config
from ..errors import InputError
from ..gpt2 import CONV1D_WEIGHTS, GPT2Model

INIT_STD = 0.02  # GPT-2's initialiser range (normal(0, 0.02) for every weight and embedding)


@dataclass(frozen=True)
class Shape:
    """What the trainer asks a family to build."""

    layers: int
    heads: int
    d_model: int
    vocab_size: int
    positions: int  # max positions = the task's sequence length
    mlp: bool  # False: attention-only (the MLP zero and frozen)
    scale: bool = True  # divide scores by √d_k; False is the "break it" switch (§7: loss does not fall)
    bos_id: int = 0  # config's bos/eos (GPT-2 uses one token for both)


class Arch:
    """One family's recipe: build, run, and the tensors the recorder reads."""

    family: str = ""
    hf_model: str = ""  # the transformers class whose eager forward the saved folder is checked against

    def config(self, shape: Shape) -> Any:
        raise NotImplementedError

    def capabilities(self, shape: Shape) -> Capabilities:
        return families.capabilities(self.config(shape))

    def build(self, shape: Shape, gen: torch.Generator) -> nn.Module:
        raise NotImplementedError

    def forward(self, model: nn.Module, ids: torch.Tensor, causal: bool = True, record: bool = False) -> ForwardResult:
        raise NotImplementedError

    def logits(self, model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def qk_grads(self, model: nn.Module) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
        """Return per layer the gradients of W_q and W_k (None before a backward pass)."""
        raise NotImplementedError

    def norms(self, model: nn.Module, mlp: bool) -> list[tuple[str, nn.Module]]:
        """Return (name, module) of every normalisation layer whose output the network uses, in order."""
        raise NotImplementedError

    def hf_config(self, shape: Shape) -> dict[str, Any]:
        """Return the keyword arguments of the transformers config that describes this model."""
        raise NotImplementedError

    def hf_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Return the model's tensors under the checkpoint's names and layouts (what transformers reads)."""
        raise NotImplementedError

    def write_config(self, shape: Shape, folder: Path) -> None:
        """Write the folder's config.json with transformers' own config class for this family."""
        raise NotImplementedError


class GPT2Arch(Arch):
    family = "gpt2"
    hf_model = "GPT2Model"

    def config(self, shape: Shape) -> GPT2Config:
        return GPT2Config(
            vocab_size=shape.vocab_size,
            d_model=shape.d_model,
            n_layers=shape.layers,
            n_heads=shape.heads,
            d_ff=4 * shape.d_model if shape.mlp else 1,
            max_positions=shape.positions,
            scale_attn_weights=shape.scale,
            bos_token_id=shape.bos_id,
            eos_token_id=shape.bos_id,
            pad_token_id=shape.bos_id,
        )

    def build(self, shape: Shape, gen: torch.Generator) -> GPT2Model:
        """Return a GPT2Model initialised as GPT-2 is (normal(0, 0.02); residual projections / √(2·layers))."""
        model = GPT2Model(self.config(shape))
        residual_std = INIT_STD / math.sqrt(2 * shape.layers)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif ".ln_" in name or name.startswith("ln_"):
                    p.fill_(1.0)
                elif name.endswith("c_proj.weight"):
                    p.normal_(0.0, residual_std, generator=gen)
                else:
                    p.normal_(0.0, INIT_STD, generator=gen)
            if not shape.mlp:
                for block in model.h:
                    for p in block.mlp.parameters():  # type: ignore[union-attr]  # ModuleList items are Blocks
                        p.zero_()
                        p.requires_grad_(False)
        return model

    def forward(self, model: nn.Module, ids: torch.Tensor, causal: bool = True, record: bool = False) -> ForwardResult:
        T = ids.shape[1]  # seq
        # No causal mask: the troubleshooting page's what-if argument, a mask that lets every query see every key.
        everything = None if causal else torch.ones(T, T, dtype=torch.bool, device=ids.device)
        return model(ids, causal=everything, record=record)

    def logits(self, model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        return model.logits(hidden)  # type: ignore[operator]  # GPT2Model.logits: the tied LM head

    def qk_grads(self, model: nn.Module) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
        out = []
        for block in model.h:  # type: ignore[union-attr]  # GPT2Model.h
            g = block.attn.c_attn.weight.grad  # (3·d_model, d_model): rows W_q, W_k, W_v
            d = block.attn.d_model
            out.append((None, None) if g is None else (g[:d], g[d : 2 * d]))
        return out

    def norms(self, model: nn.Module, mlp: bool) -> list[tuple[str, nn.Module]]:
        out: list[tuple[str, nn.Module]] = []
        for i, block in enumerate(model.h):  # type: ignore[union-attr, arg-type]  # GPT2Model.h
            out.append((f"L{i}.ln_1", block.ln_1))
            if mlp:  # attention-only: ln_2 feeds the zero MLP, its output is unused
                out.append((f"L{i}.ln_2", block.ln_2))
        out.append(("ln_f", model.ln_f))  # type: ignore[arg-type]  # GPT2Model.ln_f
        return out

    def hf_config(self, shape: Shape) -> dict[str, Any]:
        cfg = self.config(shape)
        return dict(
            vocab_size=cfg.vocab_size,
            n_positions=cfg.max_positions,
            n_embd=cfg.d_model,
            n_layer=cfg.n_layers,
            n_head=cfg.n_heads,
            n_inner=cfg.d_ff,
            activation_function=cfg.hidden_act,
            layer_norm_epsilon=cfg.layer_norm_eps,
            scale_attn_weights=cfg.scale_attn_weights,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=cfg.bos_token_id,
            eos_token_id=cfg.eos_token_id,
            tie_word_embeddings=True,
            architectures=["GPT2LMHeadModel"],
        )

    def write_config(self, shape: Shape, folder: Path) -> None:
        from transformers import GPT2Config as HFGPT2Config

        HFGPT2Config(**self.hf_config(shape)).save_pretrained(folder)

    def hf_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        # GPT-2 checkpoints store Conv1D weights (in, out); ours are nn.Linear (out, in): the inverse of
        # models.weights.port_gpt2's transpose, on the same list of keys.
        out = {}
        for k, v in model.state_dict().items():
            v = v.detach().to("cpu", torch.float32)
            out[k] = (v.t() if k.split(".", 2)[-1] in CONV1D_WEIGHTS else v).contiguous()
        return out


ARCHS: dict[str, Arch] = {"gpt2": GPT2Arch()}


def arch_for(family: str) -> Arch:
    """Return the family's Arch; InputError names the families offered."""
    arch = ARCHS.get(family)
    if arch is None:
        raise InputError(f"unknown family {family!r} for training: use one of {', '.join(ARCHS)}")
    return arch
