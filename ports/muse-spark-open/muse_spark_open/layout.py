"""The checkpoint layout: tensor names and Quark MXFP4 metadata, in one place.

Names follow the Muse family's HF export (the text decoder under ``model.language_model.``, the
towers under other ``model.*`` prefixes, ``lm_head`` at the top):

    model.language_model.embed_tokens.weight                              [V, H]
    model.language_model.layers.N.input_layernorm.weight                  [H]  (x * (1 + w))
    model.language_model.layers.N.post_attention_layernorm.weight         [H]
    model.language_model.layers.N.pre_feedforward_layernorm.weight        [H]
    model.language_model.layers.N.post_feedforward_layernorm.weight       [H]
    model.language_model.layers.N.self_attn.{q,k,v,o}_proj.weight
    model.language_model.layers.N.self_attn.gate_proj.weight              [heads*D, H] output gate
    model.language_model.layers.N.mlp.router.weight                       [E, H]
    model.language_model.layers.N.mlp.pre_expert_proj.weight              [L, H]
    model.language_model.layers.N.mlp.post_expert_proj.weight             [H, L]
    model.language_model.layers.N.mlp.experts.K.{gate,up}_proj.weight     [I, L]  or uint8 [I, L/2]
    model.language_model.layers.N.mlp.experts.K.down_proj.weight          [L, I]  or uint8 [L, I/2]
    model.language_model.layers.N.mlp.experts.K.*_proj.weight_scale       uint8 [out, in/32] (MXFP4)
    model.language_model.layers.N.mlp.experts.K.output_norm.weight        [L]
    model.language_model.norm.weight                                      [H]
    lm_head.weight                                                        [V, H]

A text-only export without the ``language_model`` level (``model.layers.N...``) is accepted too.
Every other tensor belongs to a tower (vision, audio, their projections) and is not served.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

TEXT_PREFIX = "model.language_model."
_FLAT_TEXT = re.compile(r"^model\.(layers\.\d+\.|embed_tokens\.|norm\.)")
_EXPERT = re.compile(r"^layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj|output_norm)\.(weight|weight_scale)$")
_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")

LAYER_TENSORS = (
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "pre_feedforward_layernorm.weight",
    "post_feedforward_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "self_attn.gate_proj.weight",
    "mlp.router.weight",
    "mlp.pre_expert_proj.weight",
    "mlp.post_expert_proj.weight",
)
EXPERT_PROJS = ("gate_proj", "up_proj", "down_proj")


def text_name(name: str) -> str | None:
    """Checkpoint name -> name relative to the text decoder ('layers.3.mlp...', 'lm_head.weight');
    None for a tower tensor."""
    if name.startswith("lm_head."):
        return name
    if name.startswith(TEXT_PREFIX):
        return name[len(TEXT_PREFIX):]
    if _FLAT_TEXT.match(name):
        return name[len("model."):]
    return None


def checkpoint_name(rel: str) -> str:
    """Inverse of :func:`text_name` for the canonical layout."""
    return rel if rel.startswith("lm_head.") else TEXT_PREFIX + rel


def parse_expert(rel: str) -> tuple[int, int, str, str] | None:
    """'layers.3.mlp.experts.7.up_proj.weight_scale' -> (3, 7, 'up_proj', 'weight_scale')."""
    m = _EXPERT.match(rel)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)


def parse_layer(rel: str) -> tuple[int, str] | None:
    m = _LAYER.match(rel)
    return (int(m.group(1)), m.group(2)) if m else None


# -- Quark ---------------------------------------------------------------------------------------


class QuarkLayoutError(ValueError):
    """The checkpoint's quantization_config is not the Quark OCP MXFP4 (W4A16) this port loads."""


def check_quark_mxfp4(quant: Mapping[str, Any] | None) -> None:
    """Accept no quantization, or Quark with OCP MXFP4 weights (fp4, per_group 32, e8m0) and
    unquantized activations; anything else is refused with what was found."""
    if not quant:
        return
    method = quant.get("quant_method")
    if method != "quark":
        raise QuarkLayoutError(f"quant_method {method!r}: this port loads Quark OCP MXFP4 checkpoints")
    glob = quant.get("global_quant_config") or {}
    weight = glob.get("weight") or {}
    if isinstance(weight, list):
        weight = weight[0] if len(weight) == 1 else {}
    want = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}
    got = {k: weight.get(k) for k in want}
    if got != want:
        raise QuarkLayoutError(f"global weight quantization {got}, expected OCP MXFP4 {want}")
    if glob.get("input_tensors"):
        raise QuarkLayoutError("quantized activations (input_tensors) are not W4A16; this port serves W4A16")


def quark_excluded(module: str, exclude: Iterable[str]) -> bool:
    """vLLM's rule (quark/utils.should_ignore_layer): an exact name, or 're:' + a regex matched at
    the start of the module name."""
    for target in exclude:
        if target.startswith("re:"):
            if re.match(target[3:], module):
                return True
        elif target == module:
            return True
    return False


def expert_module(layer: int, expert: int, proj: str) -> str:
    return f"{TEXT_PREFIX}layers.{layer}.mlp.experts.{expert}.{proj}"


def layer_experts_quantized(quant: Mapping[str, Any] | None, layer: int, num_experts: int) -> bool:
    """Whether the Quark config says layer ``layer``'s experts are MXFP4 (not excluded)."""
    if not quant:
        return False
    exclude = list(quant.get("exclude") or [])
    flags = {
        quark_excluded(expert_module(layer, e, p), exclude) for e in range(num_experts) for p in EXPERT_PROJS
    }
    if len(flags) > 1:
        raise QuarkLayoutError(
            f"layer {layer}: some experts are excluded from quantization and some are not; "
            "the port needs all experts of a layer in one format"
        )
    return not flags.pop()
