"""vLLM model for Muse Spark Open (``MuseSparkForConditionalGeneration``), text path only.

Registered lazily by the plugin (``muse_spark_open.model:MuseSparkForConditionalGeneration``).
The computation is the one ``reference.py`` spells out; this module maps it onto vLLM's layers:

* attention: ``QKVParallelLinear`` / ``RowParallelLinear`` over the tensor-parallel group (8 KV
  heads, one per card at TP8), a column-parallel output gate, ``get_rope`` (NEOX) on sliding
  layers only, and vLLM's ``Attention`` with ``per_layer_sliding_window`` on sliding layers, so the
  KV cache manager keeps window-sized KV for them and full-length KV for the 16 global layers.
* latent MoE: expert parallelism over the tensor-parallel group (256 experts, 32 per card at EP8).
  Router, ``pre_expert_proj`` and ``post_expert_proj`` are replicated; each card computes the
  chosen experts it holds, the partial latent sums are all-reduced, then projected back. The MXFP4
  experts stay packed (uint8 elements and E8M0 scales, as in the checkpoint) and are computed by
  the fused kernels or the stock path (``expert_backend``).

vLLM's Quark config is built from the checkpoint, but it is not handed to any layer: every
non-expert weight of the checkpoint is BF16 (the Quark ``exclude`` list), and the experts are
loaded here in their packed form. The towers are skipped at load; the server runs with
``--language-model-only`` (``guard.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from vllm.config import CacheConfig, VllmConfig
from vllm.distributed import (
    get_tensor_model_parallel_rank,
    get_tensor_model_parallel_world_size,
    tensor_model_parallel_all_reduce,
)
from vllm.model_executor.layers.attention import Attention
from vllm.model_executor.layers.linear import ColumnParallelLinear, QKVParallelLinear, RowParallelLinear
from vllm.model_executor.layers.logits_processor import LogitsProcessor
from vllm.model_executor.layers.rotary_embedding import get_rope
from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding
from vllm.model_executor.model_loader.weight_utils import default_weight_loader
from vllm.model_executor.models.interfaces import SupportsMultiModal
from vllm.model_executor.models.utils import make_layers, maybe_prefix

from . import env, expert_backend, guard, layout
from .config import MuseSparkTextConfig, text_config_of
from .moe import ExpertWeights, combine_experts, expert_forward, rms_norm, route

logger = logging.getLogger(__name__)


class MuseSparkRMSNorm(nn.Module):
    """RMSNorm in float32; ``offset`` 1 is the family's x * (1 + w); no weight: weightless."""

    def __init__(self, dim: int | None, eps: float, offset: float = 0.0) -> None:
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = nn.Parameter(torch.zeros(dim)) if dim is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps, self.offset)


def expert_range(num_experts: int, rank: int, world: int) -> range:
    """The experts card ``rank`` holds: a contiguous slice (256 experts / 8 cards = 32 each)."""
    if num_experts % world:
        raise ValueError(f"{num_experts} experts do not split evenly over {world} cards")
    n = num_experts // world
    return range(rank * n, (rank + 1) * n)


def moe_split(num_experts: int, rank: int, world: int, tp_split: int) -> tuple[range, tuple[int, int]]:
    """(experts held, (slice, slices)) of card ``rank`` when the experts spread as EP (world / tp_split) x TP
    tp_split (MUSE_SPARK_MOE_TP_SPLIT): cards rank // tp_split's EP group of experts, intermediate slice
    rank % tp_split. tp_split 1 is expert parallelism alone (expert_range)."""
    if tp_split < 1 or world % tp_split:
        raise ValueError(f"MUSE_SPARK_MOE_TP_SPLIT={tp_split} must divide the tensor-parallel size {world}")
    return expert_range(num_experts, rank // tp_split, world // tp_split), (rank % tp_split, tp_split)


class MuseSparkLatentMoE(nn.Module):
    """The latent MoE of one layer, holding the experts of ``owned`` (expert parallelism), each whole or, with
    ``tp_slice`` = (slice, slices), slice ``slice`` of its intermediate size (EP x TP: moe_split)."""

    def __init__(
        self,
        config: MuseSparkTextConfig,
        mxfp4: bool,
        owned: range,
        all_reduce: Any = None,
        dtype: torch.dtype | None = None,
        tp_slice: tuple[int, int] = (0, 1),
    ) -> None:
        super().__init__()
        c = config
        dtype = dtype or torch.get_default_dtype()
        self.tp_rank, self.tp_split = tp_slice
        block = 32 if mxfp4 else 1  # MXFP4: whole 32-element scale blocks per slice
        if not 0 <= self.tp_rank < self.tp_split or c.moe_intermediate_size % (block * self.tp_split):
            raise ValueError(f"expert slice {tp_slice}: the intermediate size {c.moe_intermediate_size} must split "
                             f"into {self.tp_split} slices of whole {block}-element blocks")
        H, L, I, n = c.hidden_size, c.moe_latent_size, c.moe_intermediate_size // self.tp_split, len(owned)
        self.config, self.mxfp4, self.owned, self.all_reduce = c, mxfp4, owned, all_reduce
        # with a TP split every card holds every expert's output norm weight: the norm runs after the slices'
        # sum, for all pairs (whichever EP group holds the expert), so no second collective is needed
        self.norm_experts = range(c.num_experts) if self.tp_split > 1 else owned
        self.router = nn.Linear(H, c.num_experts, bias=False, dtype=dtype)
        self.pre_expert_proj = nn.Linear(H, L, bias=False, dtype=dtype)
        self.post_expert_proj = nn.Linear(L, H, bias=False, dtype=dtype)

        def param(*shape: int, dt: torch.dtype) -> nn.Parameter:
            return nn.Parameter(torch.zeros(*shape, dtype=dt), requires_grad=False)

        # vLLM's w13 order: rows 0..I-1 the gate projection, I..2I-1 the up projection
        if mxfp4:
            self.w13 = param(n, 2 * I, L // 2, dt=torch.uint8)
            self.w13_scale = param(n, 2 * I, L // 32, dt=torch.uint8)
            self.w2 = param(n, L, I // 2, dt=torch.uint8)
            self.w2_scale = param(n, L, I // 32, dt=torch.uint8)
        else:
            self.w13 = param(n, 2 * I, L, dt=dtype)
            self.w2 = param(n, L, I, dt=dtype)
            self.w13_scale = self.w2_scale = None
        self.output_norm = param(len(self.norm_experts), L, dt=dtype)
        self._loaded: set[tuple[int, str]] = set()
        # the packed experts' layout: the checkpoint's until prepare_for_kernels re-lays them out in place
        self.kernel_layout: tuple[str, tuple] = ("quark", ())

    # -- loading -----------------------------------------------------------------------------

    def expert_slots(self) -> list[str]:
        projs = ["gate_proj", "up_proj", "down_proj"]
        slots = [p + ".weight" for p in projs] + (["output_norm.weight"] if self.config.expert_output_norm else [])
        if self.mxfp4:
            slots += [p + ".weight_scale" for p in projs]
        return slots

    def load_expert(self, expert: int, proj: str, kind: str, tensor: torch.Tensor) -> bool:
        """Copy one checkpoint tensor into place (this card's slice of it under a TP split); False when this
        card does not hold the expert."""
        if expert not in (self.norm_experts if proj == "output_norm" else self.owned):
            return False
        local = expert - self.owned.start
        I = self.config.moe_intermediate_size // self.tp_split
        scale = kind == "weight_scale"
        if scale and not self.mxfp4:
            raise ValueError(f"expert {expert} {proj}: a weight_scale in a layer whose experts are BF16")
        if proj == "output_norm":
            dst = self.output_norm.data[expert - self.norm_experts.start]
        elif proj == "down_proj":
            dst = (self.w2_scale if scale else self.w2).data[local]
        else:
            rows = slice(0, I) if proj == "gate_proj" else slice(I, 2 * I)
            dst = (self.w13_scale if scale else self.w13).data[local, rows]
        if self.tp_split > 1 and proj != "output_norm":
            tensor = self._slice_of(proj, kind, tensor)
        packed = tensor.dtype == torch.uint8
        if kind == "weight" and proj != "output_norm" and packed != self.mxfp4:
            raise ValueError(f"expert {expert} {proj}: {'packed MXFP4' if packed else f'dense {tensor.dtype}'} weight "
                             f"in a layer whose experts are {'MXFP4' if self.mxfp4 else 'BF16'} (quantization_config)")
        if tuple(dst.shape) != tuple(tensor.shape):
            raise ValueError(f"expert {expert} {proj}.{kind}: shape {tuple(tensor.shape)}, expected {tuple(dst.shape)}")
        dst.copy_(tensor)
        self._loaded.add((expert, f"{proj}.{kind}"))
        return True

    def _slice_of(self, proj: str, kind: str, tensor: torch.Tensor) -> torch.Tensor:
        """This card's slice of a whole expert's checkpoint tensor: gate/up rows, down columns (packed bytes,
        scale bytes or BF16 elements) of intermediate slice tp_rank."""
        full, r, t = self.config.moe_intermediate_size, self.tp_rank, self.tp_split
        if proj != "down_proj":
            if tensor.shape[0] != full:
                raise ValueError(f"{proj}.{kind}: {tensor.shape[0]} rows, expected {full}")
            n = full // t
            return tensor[r * n:(r + 1) * n]
        per = {"weight_scale": 32, "weight": 2 if tensor.dtype == torch.uint8 else 1}[kind]
        if tensor.shape[1] * per != full:
            raise ValueError(f"down_proj.{kind}: {tensor.shape[1]} columns, expected {full // per}")
        n = full // t // per
        return tensor[:, r * n:(r + 1) * n]

    def missing(self) -> list[str]:
        return [f"experts.{e}.{s}" for s in self.expert_slots()
                for e in (self.norm_experts if s.startswith("output_norm") else self.owned) if (e, s) not in self._loaded]

    def _owned_norm(self) -> torch.Tensor:
        o, s = self.owned, self.norm_experts.start
        return self.output_norm.data[o.start - s:o.stop - s]

    # -- compute -----------------------------------------------------------------------------

    def _kernel(self) -> expert_backend.Kernel | None:
        """The fused expert kernel where this layer's experts are MXFP4 and the kernel path runs; else None."""
        if not self.mxfp4:
            return None
        path, kernel = expert_backend.current()
        return kernel if path == expert_backend.KERNEL else None

    def prepare_for_kernels(self) -> None:
        """After loading: where the kernel path runs, re-lay the packed experts out for it, in place and once
        (glue.prepare_experts through the kernel's ``prepare``); the stock path keeps the checkpoint's."""
        prepare = getattr(self._kernel(), "prepare", None)
        if prepare is None or self.kernel_layout[0] != "quark":
            return
        self.kernel_layout = prepare(self.w13.data, self.w13_scale.data, self.w2.data, self.w2_scale.data,
                                     self._owned_norm(), self.owned.start)

    def expert(self, e: int) -> ExpertWeights:
        if self.kernel_layout[0] != "quark":
            raise RuntimeError(f"the experts were re-laid out for the kernels ({self.kernel_layout[0]}); the stock "
                               "path reads the checkpoint's layout")
        i, I = e - self.owned.start, self.config.moe_intermediate_size // self.tp_split
        s13, s2 = self.w13_scale, self.w2_scale
        return ExpertWeights(
            gate=self.w13[i, :I],
            up=self.w13[i, I:],
            down=self.w2[i],
            output_norm=self.output_norm[e - self.norm_experts.start] if self.config.expert_output_norm else None,
            gate_scale=s13[i, :I] if s13 is not None else None,
            up_scale=s13[i, I:] if s13 is not None else None,
            down_scale=s2[i] if s2 is not None else None,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        weights, ids = route(self.router(x), c.num_experts_per_tok, c.router_scoring, c.norm_topk_prob)
        h = self.pre_expert_proj(x)
        kernel = self._kernel()
        if self.tp_split > 1:
            return self.post_expert_proj(self._forward_tp(h, weights, ids, kernel).to(x.dtype))
        if kernel is not None:
            partial = kernel(h, ids, weights, self.w13, self.w13_scale, self.w2, self.w2_scale,
                             self.output_norm, c.rms_norm_eps, self.owned.start, self.kernel_layout)
        else:
            partial = combine_experts(h, weights, ids, self.expert, c.rms_norm_eps, c.expert_output_norm, self.owned)
        if self.all_reduce is not None:
            partial = self.all_reduce(partial)
        return self.post_expert_proj(partial.to(x.dtype))


    def _forward_tp(self, h: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor,
                    kernel: expert_backend.Kernel | None) -> torch.Tensor:
        """EP x TP: this card's slices give each (token, slot) pair's partial output [T * k, L] (zero for pairs
        whose expert another EP group holds); the all-reduce over the group adds every pair's slices (and
        the other group's pairs), then every card applies the norm and the router weights to all pairs."""
        c = self.config
        T, k = ids.shape
        if kernel is not None and hasattr(kernel, "partials"):
            y = kernel.partials(h, ids, weights, self.w13, self.w13_scale, self.w2, self.w2_scale,
                                self._owned_norm(), c.rms_norm_eps, self.owned.start, self.kernel_layout)
        else:
            y = torch.zeros(T * k, h.shape[1], dtype=torch.float32, device=h.device)
            for e in torch.unique(ids).tolist():
                if e in self.owned:
                    rows, slot = torch.nonzero(ids == e, as_tuple=True)
                    y[rows * k + slot] = expert_forward(h[rows], self.expert(e), c.rms_norm_eps, norm=False).float()
        if self.all_reduce is not None:
            y = self.all_reduce(y)
        if c.expert_output_norm and kernel is not None and hasattr(kernel, "combine"):
            return kernel.combine(y, ids, weights, self.output_norm, c.rms_norm_eps)
        y = y.view(T, k, -1).float()
        if c.expert_output_norm:
            y = rms_norm(y, None, c.rms_norm_eps) * self.output_norm[ids].float()
        return (y * weights.float().unsqueeze(-1)).sum(1)


class MuseSparkAttention(nn.Module):
    def __init__(self, config: MuseSparkTextConfig, layer: int, cache_config: CacheConfig | None, prefix: str) -> None:
        super().__init__()
        c = config
        tp = get_tensor_model_parallel_world_size()
        self.config, self.layer = c, layer
        self.head_dim = c.head_dim
        if c.num_attention_heads % tp:
            raise ValueError(f"{c.num_attention_heads} attention heads do not split over {tp} cards")
        self.num_heads = c.num_attention_heads // tp
        self.num_kv_heads = max(1, c.num_key_value_heads // tp)
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.qkv_proj = QKVParallelLinear(
            c.hidden_size, c.head_dim, c.num_attention_heads, c.num_key_value_heads,
            bias=False, quant_config=None, prefix=f"{prefix}.qkv_proj",
        )
        self.o_proj = RowParallelLinear(
            c.num_attention_heads * c.head_dim, c.hidden_size, bias=False, quant_config=None, prefix=f"{prefix}.o_proj"
        )
        self.output_gate_proj = (
            ColumnParallelLinear(
                c.hidden_size, c.num_attention_heads * c.head_dim, bias=False, gather_output=False,
                quant_config=None, prefix=f"{prefix}.output_gate_proj",
            )
            if c.use_attn_output_gate
            else None
        )
        self.qk_norm = MuseSparkRMSNorm(None, c.rms_norm_eps) if c.use_qk_norm else None
        self.scale_query_by = c.query_prescale()
        sliding = not c.is_global(layer)
        self.rotary_emb = (
            get_rope(c.head_dim, max_position=c.max_position_embeddings, is_neox_style=True, rope_parameters=c.rope_parameters)
            if sliding
            else None
        )
        self.attn = Attention(
            self.num_heads,
            c.head_dim,
            c.head_dim**-0.5,
            num_kv_heads=self.num_kv_heads,
            cache_config=cache_config,
            quant_config=None,
            per_layer_sliding_window=c.sliding_window if sliding else None,
            prefix=f"{prefix}.attn",
        )

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        if self.qk_norm is not None:
            q = (self.qk_norm(q.reshape(-1, self.head_dim).float()) * self.scale_query_by).reshape(-1, self.q_size)
            k = self.qk_norm(k.reshape(-1, self.head_dim).float()).reshape(-1, self.kv_size)
            q, k = q.to(v.dtype), k.to(v.dtype)
        if self.rotary_emb is not None:
            q, k = self.rotary_emb(positions, q, k)
        out = self.attn(q, k, v)
        if self.output_gate_proj is not None:
            gate, _ = self.output_gate_proj(hidden_states)
            out = torch.sigmoid(gate) * out
        out, _ = self.o_proj(out)
        return out


class MuseSparkDecoderLayer(nn.Module):
    def __init__(self, config: MuseSparkTextConfig, layer: int, quant: dict[str, Any] | None,
                 cache_config: CacheConfig | None, prefix: str) -> None:
        super().__init__()
        c = config
        tp, rank = get_tensor_model_parallel_world_size(), get_tensor_model_parallel_rank()
        self.self_attn = MuseSparkAttention(c, layer, cache_config, f"{prefix}.self_attn")
        owned, tp_slice = moe_split(c.num_experts, rank, tp, int(env.read("MUSE_SPARK_MOE_TP_SPLIT")))
        self.mlp = MuseSparkLatentMoE(
            c,
            mxfp4=layout.layer_experts_quantized(quant, layer, c.num_experts),
            owned=owned,
            all_reduce=tensor_model_parallel_all_reduce if tp > 1 else None,
            tp_slice=tp_slice,
        )
        self.input_layernorm = MuseSparkRMSNorm(c.hidden_size, c.rms_norm_eps, 1.0)
        self.post_attention_layernorm = MuseSparkRMSNorm(c.hidden_size, c.post_norm_eps, 1.0)
        self.pre_feedforward_layernorm = MuseSparkRMSNorm(c.hidden_size, c.rms_norm_eps, 1.0)
        self.post_feedforward_layernorm = MuseSparkRMSNorm(c.hidden_size, c.post_norm_eps, 1.0)

    def forward(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        a = self.self_attn(positions, self.input_layernorm(x))
        x = x + self.post_attention_layernorm(a)
        m = self.mlp(self.pre_feedforward_layernorm(x))
        return x + self.post_feedforward_layernorm(m)


class MuseSparkTextModel(nn.Module):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__()
        hf = vllm_config.model_config.hf_config
        c = text_config_of(hf)
        quant = getattr(hf, "quantization_config", None)
        layout.check_quark_mxfp4(quant)
        self.config = c
        self.embed_tokens = VocabParallelEmbedding(c.vocab_size, c.hidden_size)
        self.embed_norm = MuseSparkRMSNorm(None, c.rms_norm_eps) if c.normalize_tok_embeddings else None
        self.start_layer, self.end_layer, self.layers = make_layers(
            c.num_hidden_layers,
            lambda prefix: MuseSparkDecoderLayer(
                c, int(prefix.rsplit(".", 1)[-1]), quant, vllm_config.cache_config, prefix
            ),
            prefix=f"{prefix}.layers",
        )
        self.norm = MuseSparkRMSNorm(c.hidden_size, c.rms_norm_eps)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        return self.embed_norm(x) if self.embed_norm is not None else x

    def forward(self, input_ids: torch.Tensor | None, positions: torch.Tensor,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        x = inputs_embeds if inputs_embeds is not None else self.embed_input_ids(input_ids)
        for layer in self.layers[self.start_layer : self.end_layer]:
            x = layer(positions, x)
        return self.norm(x)


def map_checkpoint_name(name: str) -> tuple[str, str | None] | None:
    """Checkpoint name -> (vLLM parameter name, shard id) for non-expert tensors; None for towers.

    'model.language_model.layers.3.self_attn.k_proj.weight' -> ('model.layers.3.self_attn.qkv_proj.weight', 'k')
    'model.language_model.layers.3.self_attn.gate_proj.weight' -> ('...self_attn.output_gate_proj.weight', None)
    """
    rel = layout.text_name(name)
    return None if rel is None else _map_text_name(rel)


def _map_text_name(rel: str) -> tuple[str, str | None]:
    """:func:`map_checkpoint_name` for a name already relative to the text decoder (``layout.text_name``)."""
    if rel.startswith("lm_head."):
        return rel, None
    for proj, shard in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")):
        if f".self_attn.{proj}." in rel:
            return "model." + rel.replace(f".self_attn.{proj}.", ".self_attn.qkv_proj."), shard
    if ".self_attn.gate_proj." in rel:
        return "model." + rel.replace(".self_attn.gate_proj.", ".self_attn.output_gate_proj."), None
    return "model." + rel, None


class MuseSparkForConditionalGeneration(nn.Module, SupportsMultiModal):
    """Muse Spark Open; multimodal in vLLM's registry (so ``--language-model-only`` applies),
    served text-only: there is no multimodal processor and the towers are never built."""

    supports_multimodal = True

    @classmethod
    def get_placeholder_str(cls, modality: str, i: int) -> str | None:
        return None

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__()
        env.read_all()
        guard.require_language_model_only(vllm_config.model_config)
        hf = vllm_config.model_config.hf_config
        c = text_config_of(hf)
        self.config = hf
        self.text_config = c
        self.model = MuseSparkTextModel(vllm_config=vllm_config, prefix=maybe_prefix(prefix, "model"))
        self.lm_head = ParallelLMHead(c.vocab_size, c.hidden_size, quant_config=None, prefix=maybe_prefix(prefix, "lm_head"))
        if c.tie_word_embeddings:
            self.lm_head = self.lm_head.tie_weights(self.model.embed_tokens)
        self.logits_processor = LogitsProcessor(c.vocab_size)
        self.skipped_tower_tensors = 0

    def embed_multimodal(self, **kwargs: object) -> list[torch.Tensor]:
        return []

    def embed_input_ids(self, input_ids: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.model.embed_input_ids(input_ids)

    def forward(self, input_ids: torch.Tensor | None, positions: torch.Tensor,
                intermediate_tensors: Any = None, inputs_embeds: torch.Tensor | None = None, **kwargs: object) -> torch.Tensor:
        return self.model(input_ids, positions, inputs_embeds)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        logits = self.logits_processor(self.lm_head, hidden_states)
        if logits is None:
            return None
        c = self.text_config
        logits = logits * c.output_multiplier
        if c.final_logit_softcapping:
            cap = c.final_logit_softcapping
            logits = cap * torch.tanh(logits / cap)
        return logits

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        unknown: list[str] = []
        layers = self.model.layers
        for name, tensor in weights:
            rel = layout.text_name(name)
            if rel is None:
                self.skipped_tower_tensors += 1
                continue
            exp = layout.parse_expert(rel)
            if exp is not None:
                li, ei, proj, kind = exp
                if not self.model.start_layer <= li < self.model.end_layer:
                    continue
                layers[li].mlp.load_expert(ei, proj, kind, tensor)  # False: another card holds it
                continue
            pname, shard = _map_text_name(rel)
            if pname not in params:
                parsed = layout.parse_layer(rel)
                if parsed is not None and not self.model.start_layer <= parsed[0] < self.model.end_layer:
                    continue
                unknown.append(name)
                continue
            param = params[pname]
            loader = getattr(param, "weight_loader", default_weight_loader)
            if shard is not None:
                loader(param, tensor, shard)
            else:
                loader(param, tensor)
            loaded.add(pname)
        missing = [f"model.layers.{i}.mlp.{m}" for i in range(self.model.start_layer, self.model.end_layer)
                   for m in layers[i].mlp.missing()]
        if not missing:
            for i in range(self.model.start_layer, self.model.end_layer):
                layers[i].mlp.prepare_for_kernels()
        if unknown or missing:
            msg = f"Muse Spark checkpoint: unknown tensors {unknown[:8]}, missing expert tensors {missing[:8]}"
            if env.read("MUSE_SPARK_STRICT_LOAD") == "1":
                raise ValueError(msg + " (MUSE_SPARK_STRICT_LOAD=1)")
            logger.warning("%s", msg)
        # vLLM checks that every parameter was loaded; expert parameters are loaded piecewise
        # above and checked by `missing`, so they are reported whole here.
        for pname in params:
            if ".mlp." in pname and pname.rsplit(".", 1)[-1] in ("w13", "w13_scale", "w2", "w2_scale", "output_norm"):
                loaded.add(pname)
        logger.info("Muse Spark: skipped %d tower tensors (served text-only)", self.skipped_tower_tensors)
        return loaded
