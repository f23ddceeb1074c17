"""CPU reference of the Muse Spark text path: pure PyTorch, one sequence at a time, no vLLM.

It loads a checkpoint in the Quark MXFP4 layout (``layout.py``) as published and computes the
logits of every position of one sequence. It is the yardstick of the perplexity gate: the served
prompt logprobs are compared with :meth:`MuseSparkReference.logprobs`.

The decoder (the Muse family's text stack, with the dense MLP replaced by the latent MoE):

    x = rms_norm(embed(ids))                                        weightless embedding norm
    per layer:
        a = attention(rms_norm(x) * (1 + w_in))                     sandwich norms, +1 offset
        x = x + rms_norm(a) * (1 + w_post_attn)                     (post norms: post_norm_eps)
        m = latent_moe(rms_norm(x) * (1 + w_pre_ff))
        x = x + rms_norm(m) * (1 + w_post_ff)
    logits = softcap(lm_head(rms_norm(x) * w_final) * output_multiplier)

    attention: q, k, v projections; weightless fp32 QK norm over head_dim; q *= query_prescale;
    RoPE (NEOX half-split, default rope) on sliding layers only, none on global layers; causal
    softmax with scale head_dim ** -0.5, restricted on sliding layers to the last
    ``sliding_window`` positions (the query's own included); a sigmoid output gate computed from
    the layer input; o_proj.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from . import env, gates, layout
from .config import MuseSparkConfig, MuseSparkTextConfig, text_config_of
from .moe import ExpertWeights, combine_experts, rms_norm, route

logger = logging.getLogger(__name__)


class CheckpointError(ValueError):
    """The checkpoint does not have the tensors, shapes or formats the text path needs."""


def _open_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    index = path / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = sorted(p.name for p in path.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{path}: no *.safetensors files")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors.update(load_file(str(path / f)))
    return tensors


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """NEOX-style rotary embedding over the last dim of x [T, heads, D]."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    cos = ang.cos().to(x.dtype)[:, None, :]
    sin = ang.sin().to(x.dtype)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def attention_mask(t: int, window: int | None) -> torch.Tensor:
    """[T, T] bool, True where query i may see key j: j <= i, and i - j < window when windowed."""
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    mask = j <= i
    if window is not None:
        mask &= (i - j) < window
    return mask


class MuseSparkReference:
    def __init__(
        self,
        config: MuseSparkTextConfig,
        tensors: dict[str, torch.Tensor],
        quant: dict[str, Any] | None = None,
        dtype: torch.dtype | None = None,
        strict: bool | None = None,
    ) -> None:
        self.config = config
        if dtype is None:
            dtype = getattr(torch, env.read("MUSE_SPARK_REFERENCE_DTYPE"))
        if strict is None:
            strict = env.read("MUSE_SPARK_STRICT_LOAD") == "1"
        self.dtype = dtype
        layout.check_quark_mxfp4(quant)
        self.quant = quant
        self.skipped_tower_tensors = 0
        self.w: dict[str, torch.Tensor] = {}
        self.experts: dict[tuple[int, int], dict[str, torch.Tensor]] = {}
        unknown: list[str] = []
        for name, t in tensors.items():
            rel = layout.text_name(name)
            if rel is None:
                self.skipped_tower_tensors += 1
                continue
            exp = layout.parse_expert(rel)
            if exp is not None:
                li, ei, proj, kind = exp
                key = proj if kind == "weight" else proj + "_scale"
                self.experts.setdefault((li, ei), {})[key] = t
            elif self._known(rel):
                self.w[rel] = t
            else:
                unknown.append(name)
        missing = self._missing()
        if unknown or missing:
            msg = f"checkpoint does not match the text path: unknown {sorted(unknown)[:8]}, missing {missing[:8]}"
            if strict:
                raise CheckpointError(msg + " (MUSE_SPARK_STRICT_LOAD=1)")
            logger.warning("%s", msg)
        self._check_expert_formats()

    # -- loading -----------------------------------------------------------------------------

    @classmethod
    def from_checkpoint(cls, path: str | Path, **kwargs: Any) -> MuseSparkReference:
        path = Path(path)
        raw = json.loads((path / "config.json").read_text())
        config = MuseSparkConfig(**{k: v for k, v in raw.items() if k != "model_type"})
        return cls(text_config_of(config), _open_tensors(path), raw.get("quantization_config"), **kwargs)

    def _known(self, rel: str) -> bool:
        if rel in ("embed_tokens.weight", "norm.weight", "lm_head.weight"):
            return True
        parsed = layout.parse_layer(rel)
        return parsed is not None and parsed[0] < self.config.num_hidden_layers and parsed[1] in layout.LAYER_TENSORS

    def _missing(self) -> list[str]:
        c = self.config
        need = ["embed_tokens.weight", "norm.weight"]
        if not c.tie_word_embeddings:
            need.append("lm_head.weight")
        for i in range(c.num_hidden_layers):
            for t in layout.LAYER_TENSORS:
                if t == "self_attn.gate_proj.weight" and not c.use_attn_output_gate:
                    continue
                need.append(f"layers.{i}.{t}")
        missing = [n for n in need if n not in self.w]
        for i in range(c.num_hidden_layers):
            for e in range(c.num_experts):
                have = self.experts.get((i, e), {})
                for p in layout.EXPERT_PROJS + (("output_norm",) if c.expert_output_norm else ()):
                    if p not in have:
                        missing.append(f"layers.{i}.mlp.experts.{e}.{p}.weight")
        return missing

    def _check_expert_formats(self) -> None:
        c = self.config
        for i in range(c.num_hidden_layers):
            want_q = layout.layer_experts_quantized(self.quant, i, c.num_experts)
            for e in range(c.num_experts):
                have = self.experts.get((i, e))
                if not have or "gate_proj" not in have:
                    continue
                is_q = have["gate_proj"].dtype == torch.uint8
                if is_q != want_q:
                    raise CheckpointError(
                        f"layer {i} expert {e}: weights are {'MXFP4' if is_q else 'dense'} but the "
                        f"quantization_config says {'MXFP4' if want_q else 'unquantized (excluded)'}"
                    )
                if is_q:
                    for p in layout.EXPERT_PROJS:
                        if p + "_scale" not in have:
                            raise CheckpointError(f"layer {i} expert {e}: {p}.weight_scale missing")
                        w, s = have[p], have[p + "_scale"]
                        if s.dtype != torch.uint8 or s.shape[-1] * 32 != w.shape[-1] * 2:
                            raise CheckpointError(
                                f"layer {i} expert {e} {p}: scale {tuple(s.shape)} {s.dtype} does not fit "
                                f"elements {tuple(w.shape)} (one uint8 E8M0 scale per 32 elements)"
                            )

    def expert(self, layer: int, e: int) -> ExpertWeights:
        t = self.experts[(layer, e)]
        return ExpertWeights(
            gate=t["gate_proj"],
            up=t["up_proj"],
            down=t["down_proj"],
            output_norm=t.get("output_norm"),
            gate_scale=t.get("gate_proj_scale"),
            up_scale=t.get("up_proj_scale"),
            down_scale=t.get("down_proj_scale"),
        )

    def layer_is_mxfp4(self, layer: int) -> bool:
        return self.expert(layer, 0).is_mxfp4

    # -- compute -----------------------------------------------------------------------------

    def _p(self, rel: str) -> torch.Tensor:
        return self.w[rel].to(self.dtype)

    def attention(self, i: int, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        c = self.config
        t = x.shape[0]
        nh, nkv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        pre = f"layers.{i}.self_attn."
        q = F.linear(x, self._p(pre + "q_proj.weight")).view(t, nh, d)
        k = F.linear(x, self._p(pre + "k_proj.weight")).view(t, nkv, d)
        v = F.linear(x, self._p(pre + "v_proj.weight")).view(t, nkv, d)
        if c.use_qk_norm:
            q = rms_norm(q.float(), None, c.rms_norm_eps).to(self.dtype) * c.query_prescale()
            k = rms_norm(k.float(), None, c.rms_norm_eps).to(self.dtype)
        sliding = not c.is_global(i)
        if sliding:
            rope_type = c.rope_parameters.get("rope_type", "default")
            if rope_type != "default":
                raise NotImplementedError(f"reference: rope_type {rope_type!r} (only 'default')")
            q = rope(q, positions, c.rope_theta)
            k = rope(k, positions, c.rope_theta)
        rep = nh // nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * d**-0.5
        mask = attention_mask(t, c.sliding_window if sliding else None)
        scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v.float()).to(self.dtype)
        out = out.reshape(t, nh * d)
        if c.use_attn_output_gate:
            out = torch.sigmoid(F.linear(x, self._p(pre + "gate_proj.weight"))) * out
        return F.linear(out, self._p(pre + "o_proj.weight"))

    def moe(self, i: int, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        pre = f"layers.{i}.mlp."
        weights, ids = route(F.linear(x, self._p(pre + "router.weight")), c.num_experts_per_tok, c.router_scoring, c.norm_topk_prob)
        h = F.linear(x, self._p(pre + "pre_expert_proj.weight"))
        mixed = combine_experts(
            h, weights, ids, lambda e: self.expert(i, e), c.rms_norm_eps, c.expert_output_norm
        )
        return F.linear(mixed.to(self.dtype), self._p(pre + "post_expert_proj.weight"))

    def layer(self, i: int, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        c = self.config
        pre = f"layers.{i}."
        a = self.attention(i, rms_norm(x, self._p(pre + "input_layernorm.weight"), c.rms_norm_eps, 1.0), positions)
        x = x + rms_norm(a, self._p(pre + "post_attention_layernorm.weight"), c.post_norm_eps, 1.0)
        m = self.moe(i, rms_norm(x, self._p(pre + "pre_feedforward_layernorm.weight"), c.rms_norm_eps, 1.0))
        return x + rms_norm(m, self._p(pre + "post_feedforward_layernorm.weight"), c.post_norm_eps, 1.0)

    @torch.no_grad()
    def forward(self, token_ids: list[int] | torch.Tensor) -> torch.Tensor:
        """Logits [T, V] (float32) of every position of one sequence."""
        c = self.config
        ids = torch.as_tensor(token_ids, dtype=torch.long)
        x = F.embedding(ids, self._p("embed_tokens.weight"))
        if c.normalize_tok_embeddings:
            x = rms_norm(x, None, c.rms_norm_eps)
        positions = torch.arange(ids.shape[0])
        for i in range(c.num_hidden_layers):
            x = self.layer(i, x, positions)
        x = rms_norm(x, self._p("norm.weight"), c.rms_norm_eps)
        head = self._p("embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight")
        logits = F.linear(x, head).float() * c.output_multiplier
        if c.final_logit_softcapping:
            cap = c.final_logit_softcapping
            logits = cap * torch.tanh(logits / cap)
        return logits

    def logprobs(self, token_ids: list[int]) -> list[float]:
        """log p(token_i | tokens before i) for i >= 1: what a server returns as prompt logprobs."""
        logits = self.forward(token_ids)
        lp = torch.log_softmax(logits[:-1], dim=-1)
        target = torch.as_tensor(token_ids[1:], dtype=torch.long)
        return lp.gather(1, target[:, None]).squeeze(1).tolist()

    perplexity = staticmethod(gates.perplexity)


def main(argv: list[str] | None = None) -> int:
    """python -m muse_spark_open.reference --checkpoint DIR --token-ids ids.json --out ref.json"""
    import argparse

    p = argparse.ArgumentParser(description="Reference prompt logprobs for the perplexity gate.")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--token-ids", required=True, help="JSON list of token ids")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    ids = [int(i) for i in json.loads(Path(a.token_ids).read_text())]
    result = gates.reference_from_checkpoint(a.checkpoint, ids)
    result["perplexity"] = gates.perplexity(result["logprobs"])
    Path(a.out).write_text(json.dumps(result))
    print(f"reference perplexity {result['perplexity']:.4f} over {len(result['logprobs'])} tokens -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
