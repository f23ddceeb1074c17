"""The latent MoE of Muse Spark, in plain PyTorch: shared by the CPU reference and the serving model.

For a token x (hidden size H):

    p      = route(router(x))                    top-k experts and their weights
    h      = pre_expert_proj(x)                  H -> L (the latent size)
    y_e    = down_e(silu(gate_e(h)) * up_e(h))   L -> I -> L, for each chosen expert e
    y_e    = rms_norm(y_e) * output_norm_e       the norm on each expert's output
    out    = post_expert_proj(sum_e p_e * y_e)   L -> H

The experts of the MXFP4 layers are W4A16: the packed weights stay packed and only the chosen
experts are dequantized, in the compute dtype, when they are used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import mxfp4


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float, offset: float = 0.0) -> torch.Tensor:
    """RMSNorm computed in float32 and cast back; ``weight`` None is the weightless norm."""
    xf = x.float()
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        out = out * (weight.float() + offset)
    return out.to(x.dtype)


def route(
    logits: torch.Tensor, top_k: int, scoring: str = "softmax", norm_topk_prob: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Router logits [T, E] -> (weights [T, k] float32, expert ids [T, k] int64)."""
    logits = logits.float()
    if scoring == "softmax":
        scores = torch.softmax(logits, dim=-1)
    elif scoring == "sigmoid":
        scores = torch.sigmoid(logits)
    else:
        raise ValueError(f"unknown router scoring {scoring!r}")
    weights, ids = torch.topk(scores, top_k, dim=-1)
    if norm_topk_prob:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


@dataclass
class ExpertWeights:
    """One expert: dense tensors, or MXFP4 packed elements with their E8M0 scales."""

    gate: torch.Tensor  # [I, L] dense, or uint8 [I, L/2]
    up: torch.Tensor  # [I, L] dense, or uint8 [I, L/2]
    down: torch.Tensor  # [L, I] dense, or uint8 [L, I/2]
    output_norm: torch.Tensor | None  # [L]
    gate_scale: torch.Tensor | None = None
    up_scale: torch.Tensor | None = None
    down_scale: torch.Tensor | None = None

    @property
    def is_mxfp4(self) -> bool:
        return self.gate_scale is not None

    def dense(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not self.is_mxfp4:
            return self.gate.to(dtype), self.up.to(dtype), self.down.to(dtype)
        assert self.up_scale is not None and self.down_scale is not None
        return (
            mxfp4.dequantize(self.gate, self.gate_scale, dtype),
            mxfp4.dequantize(self.up, self.up_scale, dtype),
            mxfp4.dequantize(self.down, self.down_scale, dtype),
        )


def expert_forward(h: torch.Tensor, expert: ExpertWeights, eps: float, norm: bool = True) -> torch.Tensor:
    """[n, L] latent rows through one expert -> [n, L], including the norm on its output."""
    gate, up, down = expert.dense(h.dtype)
    y = F.linear(F.silu(F.linear(h, gate)) * F.linear(h, up), down)
    if norm:
        y = rms_norm(y, expert.output_norm, eps)
    return y


def combine_experts(
    h: torch.Tensor,
    weights: torch.Tensor,
    ids: torch.Tensor,
    get_expert: Callable[[int], ExpertWeights],
    eps: float,
    norm: bool = True,
    owned: range | None = None,
) -> torch.Tensor:
    """sum_k weights[t, k] * expert_{ids[t, k]}(h[t]) in float32, over the experts in ``owned``.

    ``owned`` is the slice of experts this rank holds under expert parallelism (all when None);
    the caller sums the partial results of the ranks.
    """
    out = torch.zeros(h.shape[0], h.shape[1], dtype=torch.float32, device=h.device)
    for e in torch.unique(ids).tolist():
        if owned is not None and e not in owned:
            continue
        rows, slot = torch.nonzero(ids == e, as_tuple=True)
        y = expert_forward(h[rows], get_expert(e), eps, norm)
        out.index_add_(0, rows, y.float() * weights[rows, slot].unsqueeze(-1))
    return out
