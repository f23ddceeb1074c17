"""Tiny random checkpoints in the published layout (Quark MXFP4 experts, BF16 elsewhere).

Used by the tests, the build gates and the gate harness's CPU tests: no weights are downloaded
anywhere. The layout is the one ``layout.py`` describes; experts of the first and the last layer
are BF16 and excluded from quantization, as in the published checkpoint (layers 0 and 61).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from . import mxfp4
from .guard import ARCH


def tiny_text_config(**overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = dict(
        vocab_size=96,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        sliding_window=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        qk_scale_factor=8.0,
        output_multiplier=0.5,
        final_logit_softcapping=20.0,
        num_experts=8,
        num_experts_per_tok=2,
        moe_latent_size=32,
        moe_intermediate_size=64,
        bos_token_id=1,
        eos_token_id=2,
    )
    cfg.update(overrides)
    return cfg


def quark_config(bf16_expert_layers: tuple[int, ...]) -> dict[str, Any]:
    t = r"model\.language_model\.layers\.\d+\."
    exclude = [
        "lm_head",
        "re:" + t + r"self_attn\.",
        "re:" + t + r"mlp\.(router|pre_expert_proj|post_expert_proj)$",
        "re:model\\.(vision|audio)_",
    ]
    exclude += [f"re:model\\.language_model\\.layers\\.{i}\\.mlp\\.experts\\." for i in bf16_expert_layers]
    return {
        "quant_method": "quark",
        "export": {"kv_cache_group": [], "pack_method": "reorder", "weight_format": "real_quantized"},
        "global_quant_config": {
            "weight": {
                "dtype": "fp4",
                "qscheme": "per_group",
                "group_size": 32,
                "ch_axis": -1,
                "scale_format": "e8m0",
                "is_dynamic": False,
                "round_method": "half_even",
            },
            "input_tensors": None,
            "output_tensors": None,
            "bias": None,
        },
        "layer_quant_config": {},
        "layer_type_quant_config": {},
        "exclude": exclude,
    }


def random_tensors(text: dict[str, Any], seed: int, bf16_expert_layers: tuple[int, ...]) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    H, V, L, I = text["hidden_size"], text["vocab_size"], text["moe_latent_size"], text["moe_intermediate_size"]
    nh, nkv, d, E = text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"], text["num_experts"]

    def lin(out: int, inp: int) -> torch.Tensor:
        return (torch.randn(out, inp, generator=g) / inp**0.5).to(torch.bfloat16)

    def norm(n: int, around: float = 0.0) -> torch.Tensor:
        return (around + 0.1 * torch.randn(n, generator=g)).to(torch.bfloat16)

    t: dict[str, torch.Tensor] = {
        "model.language_model.embed_tokens.weight": torch.randn(V, H, generator=g).to(torch.bfloat16),
        "model.language_model.norm.weight": norm(H, 1.0),
        "lm_head.weight": lin(V, H),
    }
    for i in range(text["num_hidden_layers"]):
        p = f"model.language_model.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            t[p + n + ".weight"] = norm(H)
        t[p + "self_attn.q_proj.weight"] = lin(nh * d, H)
        t[p + "self_attn.k_proj.weight"] = lin(nkv * d, H)
        t[p + "self_attn.v_proj.weight"] = lin(nkv * d, H)
        t[p + "self_attn.o_proj.weight"] = lin(H, nh * d)
        t[p + "self_attn.gate_proj.weight"] = lin(nh * d, H)
        t[p + "mlp.router.weight"] = lin(E, H)
        t[p + "mlp.pre_expert_proj.weight"] = lin(L, H)
        t[p + "mlp.post_expert_proj.weight"] = lin(H, L)
        for e in range(E):
            q = f"{p}mlp.experts.{e}."
            shapes = {"gate_proj": (I, L), "up_proj": (I, L), "down_proj": (L, I)}
            for proj, (o, k) in shapes.items():
                w = lin(o, k).float()
                if i in bf16_expert_layers:
                    t[q + proj + ".weight"] = w.to(torch.bfloat16)
                else:
                    packed, scale = mxfp4.quantize(w)
                    t[q + proj + ".weight"] = packed
                    t[q + proj + ".weight_scale"] = scale
            t[q + "output_norm.weight"] = norm(L, 1.0)
    # towers the port does not serve: present in the checkpoint, skipped by the loaders
    t["model.vision_tower.patch_embed.weight"] = torch.randn(8, 12, generator=g).to(torch.bfloat16)
    t["model.vision_projection.weight"] = torch.randn(H, 8, generator=g).to(torch.bfloat16)
    t["model.audio_tower.conv.weight"] = torch.randn(4, 4, generator=g).to(torch.bfloat16)
    return t


def write_tiny_checkpoint(
    path: str | Path,
    seed: int = 0,
    text_overrides: dict[str, Any] | None = None,
    bf16_expert_layers: tuple[int, ...] | None = None,
    shards: int = 2,
) -> Path:
    """Write config.json, model-0000K-of-0000N.safetensors and the index into ``path``."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    text = tiny_text_config(**(text_overrides or {}))
    n = text["num_hidden_layers"]
    if bf16_expert_layers is None:
        bf16_expert_layers = (0, n - 1)
    config = {
        "architectures": [ARCH],
        "model_type": "muse_spark",
        "text_config": text,
        "vision_config": {"hidden_size": 8, "num_hidden_layers": 1},
        "audio_config": {"hidden_size": 4, "num_hidden_layers": 1},
        "torch_dtype": "bfloat16",
        "quantization_config": quark_config(bf16_expert_layers),
    }
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tensors = random_tensors(text, seed, bf16_expert_layers)
    names = sorted(tensors)
    weight_map: dict[str, str] = {}
    for k in range(shards):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {nm: tensors[nm].contiguous() for nm in names[k::shards]}
        save_file(part, str(path / fname), metadata={"format": "pt"})
        weight_map.update({nm: fname for nm in part})
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    return path
