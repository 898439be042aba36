"""The decoder families the trainer can build: our network of that family, its initialisation, and where its W_q,
W_k, norms and MLP live, so that the trainer and the recorder never ask which family they hold.

One `Arch` per family in `ARCHS` (GPT-2: learned positions, LayerNorm; Llama: rotary positions, RMSNorm). The
network is the family's own module from the registry (`models.families`), the one every page runs, so what is
trained here is what Explore shows. Attention-only models keep the standard architecture: the MLP is one unit
wide, its weights and biases zero and frozen (gelu(0)·… and silu(0)·0 are 0, and a zero projection adds
nothing), so transformers still loads the folder as the family's ordinary model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from .. import families
from ..capabilities import Capabilities
from ..errors import InputError
from ..network import ForwardOptions, ForwardResult, Network

INIT_STD = 0.02  # GPT-2's and Llama's initialiser range: normal(0, 0.02) for every weight and embedding


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
    bos_id: int = 0  # config's bos/eos (one token for both)


class Arch:
    """One family's recipe: its config, how its weights start, and the tensors the recorder reads."""

    family: str = ""  # the registry's model_type
    residual: tuple[str, ...] = ()  # names of the projections back into the residual stream (init / √(2·layers))
    # Whether the family can train without 1/√d_k and still save a checkpoint transformers reads the same way.
    saves_unscaled: bool = False

    def config(self, shape: Shape) -> Any:
        raise NotImplementedError

    def hf_config(self, shape: Shape) -> dict[str, Any]:
        """Return the keyword arguments of transformers' config that describes this model."""
        raise NotImplementedError

    def capabilities(self, shape: Shape) -> Capabilities:
        fam = families.family(self.family)
        return fam.capabilities(self.config(shape), fam.token_display)

    def build(self, shape: Shape, gen: torch.Generator) -> Network:
        """Return the family's network with the family's initialisation, drawn from gen."""
        fam = families.family(self.family)
        model = fam.network(self.config(shape))
        residual_std = INIT_STD / math.sqrt(2 * shape.layers)
        with torch.no_grad():
            for name, module in model.named_modules():
                if isinstance(module, nn.Linear):
                    std = residual_std if name.endswith(self.residual) else INIT_STD
                    module.weight.normal_(0.0, std, generator=gen)
                    if module.bias is not None:
                        module.bias.zero_()
                elif isinstance(module, nn.Embedding):
                    module.weight.normal_(0.0, INIT_STD, generator=gen)
                elif hasattr(module, "weight") and module.weight is not None and module.weight.dim() == 1:
                    module.weight.fill_(1.0)  # LayerNorm / RMSNorm gains
                    if getattr(module, "bias", None) is not None:
                        module.bias.zero_()
            if not shape.mlp:
                for layer in _layers(model):
                    for p in layer.mlp.parameters():
                        p.zero_()
                        p.requires_grad_(False)
        if not shape.scale:
            self.unscale(model)
        return model

    def unscale(self, model: Network) -> None:
        """Drop the 1/√d_k from every layer's scores (the "break it" switch)."""
        for layer in _layers(model):
            layer.attn.scale = 1.0

    def forward(self, model: nn.Module, ids: torch.Tensor, causal: bool = True, record: bool = False) -> ForwardResult:
        T = ids.shape[1]  # seq
        # No causal mask: the troubleshooting page's what-if argument, a mask that lets every query see every key.
        everything = None if causal else torch.ones(T, T, dtype=torch.bool, device=ids.device)
        how, net = ForwardOptions(causal=everything), cast(Network, model)
        return net.run_with_cache(ids, options=how)[0] if record else net(ids, options=how)

    def logits(self, model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        return model.logits(hidden)  # type: ignore[operator]  # Network.logits: the (tied) LM head

    def qk_weights(self, model: Network) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Return per layer (grad of W_q, grad of W_k) as tensors, or raise when no backward has run."""
        raise NotImplementedError

    def norms(self, model: Network, mlp: bool) -> list[tuple[str, nn.Module]]:
        """Return (name, module) of every normalisation layer whose output the network uses, in order."""
        raise NotImplementedError

    def hf_state_dict(self, model: nn.Module, shape: Shape) -> dict[str, torch.Tensor]:
        """Return the model's tensors under the checkpoint's names and layouts (what transformers reads).

        The family's own port (models.families) maps the checkpoint's layout to ours; every change it makes is
        its own inverse (GPT-2's Conv1D transpose; leaving out what transformers rebuilds), so the same
        function maps ours back: the one place that knows a family's layout stays the one place.
        """
        state = {k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()}
        ported = families.family(self.family).port(state, self.config(shape))
        return {k: v.contiguous() for k, v in ported.items()}

    def write_config(self, shape: Shape, folder: Path) -> None:
        """Write the folder's config.json with transformers' own config class for this family."""
        import transformers

        hf_class = getattr(transformers, families.family(self.family).hf_config)
        hf_class(**self.hf_config(shape)).save_pretrained(folder)


class GPT2Arch(Arch):
    family = "gpt2"
    residual = ("attn.c_proj", "mlp.c_proj")
    saves_unscaled = True  # transformers' GPT-2 has scale_attn_weights

    def config(self, shape: Shape) -> Any:
        return families.family(self.family).config(
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

    def unscale(self, model: Network) -> None:
        pass  # the config's scale_attn_weights already made every layer's scale 1

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

    def qk_weights(self, model: Network) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for layer in _layers(model):
            g = layer.attn.c_attn.weight.grad  # (3·d_model, d_model): rows W_q, W_k, W_v
            if g is None:
                raise RuntimeError("no gradient yet: call after a backward pass")
            d = layer.attn.d_model
            out.append((g[:d], g[d : 2 * d]))
        return out

    def norms(self, model: Network, mlp: bool) -> list[tuple[str, nn.Module]]:
        out: list[tuple[str, nn.Module]] = []
        for i, layer in enumerate(_layers(model)):
            out.append((f"L{i}.ln_1", layer.ln_1))
            if mlp:  # attention-only: ln_2 feeds the zero MLP, its output is unused
                out.append((f"L{i}.ln_2", layer.ln_2))
        net: Any = model  # GPT2Model
        out.append(("ln_f", net.ln_f))
        return out


class LlamaArch(Arch):
    family = "llama"
    residual = ("self_attn.o_proj", "mlp.down_proj")
    rope_theta = 10_000.0

    def config(self, shape: Shape) -> Any:
        return families.family(self.family).config(
            vocab_size=shape.vocab_size,
            d_model=shape.d_model,
            n_layers=shape.layers,
            n_heads=shape.heads,
            kv_heads=shape.heads,
            head_dim=shape.d_model // shape.heads,
            d_ff=4 * shape.d_model if shape.mlp else 1,
            max_positions=shape.positions,
            rms_norm_eps=1e-5,
            rope_theta=self.rope_theta,
            tie_word_embeddings=True,
            bos_token_id=shape.bos_id,
            eos_token_id=shape.bos_id,
            pad_token_id=None,
        )

    def hf_config(self, shape: Shape) -> dict[str, Any]:
        cfg = self.config(shape)
        return dict(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            intermediate_size=cfg.d_ff,
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            num_key_value_heads=cfg.kv_heads,
            head_dim=cfg.head_dim,
            max_position_embeddings=cfg.max_positions,
            rms_norm_eps=cfg.rms_norm_eps,
            rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
            hidden_act=cfg.hidden_act,
            attention_bias=False,
            mlp_bias=False,
            tie_word_embeddings=True,
            bos_token_id=cfg.bos_token_id,
            eos_token_id=cfg.eos_token_id,
            architectures=["LlamaForCausalLM"],
        )

    def qk_weights(self, model: Network) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for layer in _layers(model):
            gq, gk = layer.self_attn.q_proj.weight.grad, layer.self_attn.k_proj.weight.grad
            if gq is None or gk is None:
                raise RuntimeError("no gradient yet: call after a backward pass")
            out.append((gq, gk))
        return out

    def norms(self, model: Network, mlp: bool) -> list[tuple[str, nn.Module]]:
        out: list[tuple[str, nn.Module]] = []
        for i, layer in enumerate(_layers(model)):
            out.append((f"L{i}.input_layernorm", layer.input_layernorm))
            if mlp:
                out.append((f"L{i}.post_attention_layernorm", layer.post_attention_layernorm))
        net: Any = model  # LlamaForCausalLM
        out.append(("norm", net.model.norm))
        return out


def _layers(model: nn.Module) -> list[Any]:
    """Return the network's layers (each a family's block: its attributes are the family's own)."""
    net: Any = model
    return list(net.layers)


ARCHS: dict[str, Arch] = {"gpt2": GPT2Arch(), "llama": LlamaArch()}


def arch_for(family: str) -> Arch:
    """Return the family's Arch; InputError names the families offered."""
    arch = ARCHS.get(family)
    if arch is None:
        raise InputError(f"unknown family {family!r} for training: use one of {', '.join(ARCHS)}")
    return arch
