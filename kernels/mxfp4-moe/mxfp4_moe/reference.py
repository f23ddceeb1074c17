"""The reference path: the latent MoE block of Muse Spark Open with MXFP4 experts, in plain PyTorch.

For one batch of decode tokens x [T, hidden]:

1. router: logits = x @ router^T [T, experts]; softmax in fp32; top-k; the k weights renormalized to sum 1.
2. latent: x_lat = x @ pre_expert_proj^T [T, latent] (BF16 activations: W4A16).
3. per routed expert e (one of this card's local experts under EP):
   h = x_lat @ W13[e]^T [2I] (rows 0..I-1 gate, I..2I-1 up, vLLM's w13 order); a = silu(gate) * up;
   y = a @ W2[e]^T [latent]; y = rmsnorm(y) * norm_weight[e]  (the norm on each expert's output).
4. out_lat[t] = sum over the token's local experts of weight * y; out = out_lat @ post_expert_proj^T.

Under EP each card returns the partial sum over its local experts; the sum over cards (the all-reduce)
is the whole block. ``moe_experts_reference`` is step 3-4's expert part, the function the Triton kernel
replaces; with ``dtype=torch.bfloat16`` it is the stock path (dequantize to BF16, then matmul).

ASSUMPTIONS (the seed's facts do not say): softmax-then-top-k routing with renormalization, an RMSNorm
with a learned per-expert weight as "the norm on each expert's output", SiLU-gated experts, router on the
hidden state. They are single functions here (``route``, ``expert_norm``, ``silu_and_mul``) to change in
one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

from .format import (dequantize_mxfp4, from_mma_layout, from_tiled_layout, random_mxfp4, to_mma_layout,
                     to_tiled_layout)

DEFAULT_EPS = 1e-6


LAYOUTS = ("quark", "mma", "tiled")


def _check_tiles(tiles) -> tuple:
    """((tile_n, tile_k) of w13, (tile_n, tile_k) of w2) as a tuple of int pairs, or ValueError."""
    try:
        out = tuple((int(n), int(k)) for n, k in tiles)
        ok = len(out) == 2 and all(n > 0 and k > 0 and (n, k) == tuple(t) for (n, k), t in zip(out, tiles))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"tiles must be ((tile_n, tile_k) of w13, (tile_n, tile_k) of w2), positive integers; "
                         f"got {tiles!r}")
    return out


@dataclass
class ExpertWeights:
    """One layer's local experts in the checkpoint layout (vLLM QuarkOCP_MX_MoEMethod's tensors)."""

    w13: torch.Tensor  # uint8 [E, 2I, L // 2]
    w13_scale: torch.Tensor  # uint8 [E, 2I, L // 32]
    w2: torch.Tensor  # uint8 [E, L, I // 2]
    w2_scale: torch.Tensor  # uint8 [E, L, I // 32]
    norm_weight: torch.Tensor  # float [E, L]
    expert_base: int = 0  # global id of local expert 0 (EP: rank * local_experts)
    layout: str = "quark"  # of w13 / w2: "quark" (the checkpoint's), "mma" (format.to_mma_layout) or
    #                        "tiled" (format.to_tiled_layout of the mma layout; w13 with gate_up rows)
    tiles: tuple = ()  # "tiled": ((tile_n, tile_k) of w13, (tile_n, tile_k) of w2)

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"ExpertWeights.layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.layout == "tiled":
            self.tiles = _check_tiles(self.tiles)

    @property
    def num_local(self) -> int:
        return self.w13.shape[0]

    @property
    def latent_size(self) -> int:
        return self.w13.shape[2] * 2

    @property
    def expert_size(self) -> int:
        return self.w13.shape[1] // 2

    def validate(self) -> None:
        e, two_i, half_l = self.w13.shape
        i, lat = two_i // 2, half_l * 2
        want = {"w13": (e, 2 * i, lat // 2), "w13_scale": (e, 2 * i, lat // 32),
                "w2": (e, lat, i // 2), "w2_scale": (e, lat, i // 32), "norm_weight": (e, lat)}
        for name, shape in want.items():
            t = getattr(self, name)
            if tuple(t.shape) != shape:
                raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {shape}")
            if name != "norm_weight" and t.dtype != torch.uint8:
                raise ValueError(f"{name} must be uint8, got {t.dtype}")

    def to_mma_layout(self) -> ExpertWeights:
        """The load-time re-layout for the kernels' `mma` decode (same bytes, scales untouched)."""
        if self.layout == "mma":
            return self
        if self.layout == "tiled":
            (n13, k13), (n2, k2) = self.tiles
            w13, s13 = from_tiled_layout(self.w13, self.w13_scale, n13, k13, gate_up=True)
            w2, s2 = from_tiled_layout(self.w2, self.w2_scale, n2, k2)
            return replace(self, w13=w13, w13_scale=s13, w2=w2, w2_scale=s2, layout="mma", tiles=())
        return replace(self, w13=to_mma_layout(self.w13), w2=to_mma_layout(self.w2), layout="mma")

    def default_tiles(self) -> tuple:
        """(tile_n, tile_k) of w13 and w2 for the gluon kernels: 32 rows x 256 elements where 256 divides
        the GEMM's K, else 32 x 128 (the kernels need tile_k a multiple of 128; latent and expert sizes
        that are multiples of 128 always tile)."""
        return default_tiles(self.latent_size, self.expert_size)

    def to_tiled_layout(self, tiles: tuple | None = None) -> ExpertWeights:
        """The load-time re-layout for the gluon kernels: the mma layout, regrouped in (tile_n, tile_k)
        tiles, w13's gate and up rows interleaved by half tiles (format.to_tiled_layout); same shapes."""
        tiles = _check_tiles(tiles or self.default_tiles())
        if self.layout == "tiled" and self.tiles == tiles:
            return self
        m = self.to_mma_layout()
        (n13, k13), (n2, k2) = tiles
        w13, s13 = to_tiled_layout(m.w13, m.w13_scale, n13, k13, gate_up=True)
        w2, s2 = to_tiled_layout(m.w2, m.w2_scale, n2, k2)
        return replace(m, w13=w13, w13_scale=s13, w2=w2, w2_scale=s2, layout="tiled", tiles=tiles)

    def to_layout(self, layout: str, tiles: tuple | None = None) -> ExpertWeights:
        """This layer's experts in ``layout`` ("quark", "mma" or "tiled"; tiles: ``to_tiled_layout``'s, an
        expert set already tiled keeps its own when None). Raises ValueError for another layout."""
        if layout == "tiled":
            return self if self.layout == "tiled" and tiles is None else self.to_tiled_layout(tiles)
        if layout == "mma":
            return self.to_mma_layout()
        if layout == "quark":
            return self.to_quark_layout()
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")

    def to_quark_layout(self) -> ExpertWeights:
        if self.layout == "quark":
            return self
        m = self.to_mma_layout()
        return replace(m, w13=from_mma_layout(m.w13), w2=from_mma_layout(m.w2), layout="quark")

    def to(self, device: torch.device | str) -> ExpertWeights:
        return replace(self, **{n: getattr(self, n).to(device)
                                for n in ("w13", "w13_scale", "w2", "w2_scale", "norm_weight")})

    def tp_slice(self, rank: int, split: int) -> ExpertWeights:
        """Slice ``rank`` of ``split`` of every expert's intermediate size (the MoE TP split: EP x TP, e.g.
        EP2 x TP4): w13's gate rows and up rows [rank*I/split, (rank+1)*I/split) and w2's matching input
        columns (packed bytes and scales), in the checkpoint's layout (a re-laid-out set is converted back
        first; re-lay the slice out again for the kernels). silu(gate) * up is per intermediate column, so
        the slices' down projections are partial sums: the sum over the ``split`` slices of
        ``moe_expert_partials_reference`` is the unsplit expert's output before its norm (the norm on each
        expert's output is not linear, so the TP group adds the partials before ``combine_partials``).
        Raises ValueError where I/split is not a multiple of 32 (one E8M0 scale per 32)."""
        if split < 1 or not 0 <= rank < split:
            raise ValueError(f"tp_slice needs 0 <= rank < split, got rank {rank} of {split}")
        i = self.expert_size
        if i % (32 * split):
            raise ValueError(f"expert size {i} does not split into {split} slices of whole 32-element blocks")
        if split == 1:
            return self
        q = self.to_quark_layout()
        n = i // split
        rows = torch.cat([torch.arange(rank * n, (rank + 1) * n), torch.arange(i + rank * n, i + (rank + 1) * n)])
        rows = rows.to(q.w13.device)
        return replace(q, w13=q.w13.index_select(1, rows).contiguous(),
                       w13_scale=q.w13_scale.index_select(1, rows).contiguous(),
                       w2=q.w2[:, :, rank * n // 2:(rank + 1) * n // 2].contiguous(),
                       w2_scale=q.w2_scale[:, :, rank * n // 32:(rank + 1) * n // 32].contiguous())

    def nbytes_of(self, local_ids: list[int]) -> int:
        """Bytes of packed weights plus scales of the given local experts."""
        per = sum(getattr(self, n)[0].numel() for n in ("w13", "w13_scale", "w2", "w2_scale"))
        return per * len(set(local_ids))


def default_tiles(latent: int, expert_size: int) -> tuple:
    """ExpertWeights.default_tiles for these sizes (see there)."""
    return ((32, 256 if latent % 256 == 0 else 128), (32, 256 if expert_size % 256 == 0 else 128))


def random_expert_weights(num_local: int, latent: int, expert_size: int, *, expert_base: int = 0,
                          generator: torch.Generator | None = None, device: torch.device | str | None = None,
                          scale_range: tuple[int, int] = (118, 124)) -> ExpertWeights:
    w13, w13_s = random_mxfp4((num_local, 2 * expert_size), latent, generator=generator,
                              scale_range=scale_range, device=device)
    w2, w2_s = random_mxfp4((num_local, latent), expert_size, generator=generator,
                            scale_range=scale_range, device=device)
    where = generator.device if generator is not None else device
    norm = (1.0 + 0.1 * torch.randn(num_local, latent, generator=generator, device=where)).to(device)
    return ExpertWeights(w13, w13_s, w2, w2_s, norm, expert_base)


# ----------------------------------------------------------------------------------------------------------
# The pieces (the assumptions live here)

def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax (fp32) -> top-k -> renormalize. Returns (ids int64 [T, k], weights fp32 [T, k])."""
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    return ids, weights / weights.sum(dim=-1, keepdim=True)


def silu_and_mul(h: torch.Tensor) -> torch.Tensor:
    i = h.shape[-1] // 2
    return F.silu(h[..., :i]) * h[..., i:]


def expert_norm(y: torch.Tensor, weight: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """RMSNorm of each expert's output (fp32), times the expert's norm weight."""
    y = y.float()
    return y * torch.rsqrt(y.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()


# ----------------------------------------------------------------------------------------------------------
# The expert computation

@dataclass
class RoutingPlan:
    """For each local expert with tokens: (local id, token indices, slot indices, router weights)."""

    groups: list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor]] = field(default_factory=list)
    num_tokens: int = 0

    @property
    def local_ids(self) -> list[int]:
        return [g[0] for g in self.groups]


def plan_routing(topk_ids: torch.Tensor, topk_weights: torch.Tensor, expert_base: int, num_local: int
                 ) -> RoutingPlan:
    local = topk_ids.long() - expert_base
    mine = (local >= 0) & (local < num_local)
    plan = RoutingPlan(num_tokens=topk_ids.shape[0])
    for e in torch.unique(local[mine]).tolist():
        t_idx, j_idx = torch.nonzero(local == e, as_tuple=True)
        plan.groups.append((int(e), t_idx, j_idx, topk_weights[t_idx, j_idx].float()))
    return plan


def run_plan(x_lat: torch.Tensor, plan: RoutingPlan, w13_of: Callable[[int], torch.Tensor],
             w2_of: Callable[[int], torch.Tensor], norm_weight: torch.Tensor, *, eps: float = DEFAULT_EPS,
             dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The experts of a plan, given functions that return each local expert's dense [N, K] weights."""
    out = torch.zeros(x_lat.shape[0], norm_weight.shape[1], dtype=torch.float32, device=x_lat.device)
    for e, t_idx, _j_idx, w in plan.groups:
        xs = x_lat.index_select(0, t_idx).to(dtype)
        a = silu_and_mul(xs @ w13_of(e).t())
        y = a.to(dtype) @ w2_of(e).t()
        out.index_add_(0, t_idx, expert_norm(y, norm_weight[e], eps) * w[:, None])
    return out


def run_plan_partials(x_lat: torch.Tensor, plan: RoutingPlan, top_k: int, w13_of: Callable[[int], torch.Tensor],
                      w2_of: Callable[[int], torch.Tensor], latent: int, *,
                      dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Each (token, slot) pair's expert output before its norm and router weight, fp32 [T * top_k, latent]
    (row t * top_k + j); rows of pairs whose expert is not in the plan are zero."""
    y = torch.zeros(x_lat.shape[0] * top_k, latent, dtype=torch.float32, device=x_lat.device)
    for e, t_idx, j_idx, _w in plan.groups:
        xs = x_lat.index_select(0, t_idx).to(dtype)
        a = silu_and_mul(xs @ w13_of(e).t())
        y[t_idx * top_k + j_idx] = (a.to(dtype) @ w2_of(e).t()).float()
    return y


def _dense_of(experts: ExpertWeights, dtype: torch.dtype):
    if experts.layout == "tiled":
        experts = experts.to_mma_layout()
    quark = from_mma_layout if experts.layout == "mma" else (lambda t: t)
    return (lambda e: dequantize_mxfp4(quark(experts.w13[e]), experts.w13_scale[e], dtype),
            lambda e: dequantize_mxfp4(quark(experts.w2[e]), experts.w2_scale[e], dtype))


def moe_expert_partials_reference(x_lat: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                                  experts: ExpertWeights, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The TP-split card's share: y fp32 [T * k, latent], pair (t, j)'s output of this card's slice of its
    expert before the norm (zero where the expert is not on this card). The TP group's sum of these is the
    unsplit experts' pre-norm outputs; ``combine_partials`` finishes the block."""
    plan = plan_routing(topk_ids, topk_weights, experts.expert_base, experts.num_local)
    w13_of, w2_of = _dense_of(experts, dtype)
    return run_plan_partials(x_lat, plan, topk_ids.shape[1], w13_of, w2_of, experts.latent_size, dtype=dtype)


def combine_partials(y: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                     norm_weight: torch.Tensor, *, expert_base: int = 0, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """out_lat fp32 [T, latent] = sum over the pairs whose expert is in norm_weight's rows (global ids
    expert_base ..) of weight * rmsnorm(y[pair]) * norm_weight[expert]: the norm and the weighted sum, once
    the partials y [T * k, latent] are added up over the TP group."""
    T, k = topk_ids.shape
    local = topk_ids.long().reshape(-1) - expert_base
    mine = (local >= 0) & (local < norm_weight.shape[0])
    out = torch.zeros(T, y.shape[1], dtype=torch.float32, device=y.device)
    rows = torch.nonzero(mine, as_tuple=True)[0]
    z = expert_norm(y[rows], norm_weight[local[rows]], eps) * topk_weights.reshape(-1)[rows].float()[:, None]
    out.index_add_(0, torch.div(rows, k, rounding_mode="floor"), z)
    return out


def moe_experts_reference(x_lat: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                          experts: ExpertWeights, *, eps: float = DEFAULT_EPS,
                          dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """out_lat [T, latent] fp32: this card's share of the routed experts' weighted sum.

    dtype=float32: the reference (dequantized weights are exact in fp32); dtype=bfloat16: the stock path
    (dequantize each routed expert to BF16, then BF16 matmuls), what MUSE_SPARK_MXFP4_KERNELS=0 runs.
    """
    plan = plan_routing(topk_ids, topk_weights, experts.expert_base, experts.num_local)
    if experts.layout == "tiled":
        experts = experts.to_mma_layout()
    quark = from_mma_layout if experts.layout == "mma" else (lambda t: t)
    return run_plan(x_lat, plan,
                    lambda e: dequantize_mxfp4(quark(experts.w13[e]), experts.w13_scale[e], dtype),
                    lambda e: dequantize_mxfp4(quark(experts.w2[e]), experts.w2_scale[e], dtype),
                    experts.norm_weight, eps=eps, dtype=dtype)


@dataclass
class LatentMoEWeights:
    router: torch.Tensor  # [experts, hidden]
    pre_expert_proj: torch.Tensor  # [latent, hidden]
    post_expert_proj: torch.Tensor  # [hidden, latent]
    experts: ExpertWeights
    top_k: int


def random_latent_moe(variant, *, rank: int = 0, num_local: int | None = None,
                      generator: torch.Generator | None = None, device: torch.device | str | None = None
                      ) -> LatentMoEWeights:
    """Random weights of one layer for a Variant, this card holding experts [rank*n, (rank+1)*n)."""
    n = variant.local_experts if num_local is None else num_local
    h, lat = variant.hidden_size, variant.latent_size
    g = generator

    where = g.device if g is not None else device

    def dense(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=g, device=where) / cols ** 0.5).to(torch.bfloat16).to(device)

    experts = random_expert_weights(n, lat, variant.expert_size, expert_base=rank * n, generator=g,
                                    device=device)
    return LatentMoEWeights(dense(variant.experts, h), dense(lat, h), dense(h, lat), experts, variant.top_k)


def latent_moe_reference(x: torch.Tensor, weights: LatentMoEWeights, *, eps: float = DEFAULT_EPS,
                         experts_fn: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
    """The whole block, fp32 except that x_lat is rounded to BF16 (the experts' activation dtype).

    ``experts_fn(x_lat, topk_ids, topk_weights, experts, eps=...)`` replaces the expert part (the glue
    passes the kernel here); by default it is ``moe_experts_reference`` in fp32.
    """
    experts_fn = experts_fn or moe_experts_reference
    ids, w = route(x.float() @ weights.router.float().t(), weights.top_k)
    x_lat = (x.float() @ weights.pre_expert_proj.float().t()).to(torch.bfloat16)
    out_lat = experts_fn(x_lat, ids, w, weights.experts, eps=eps)
    return out_lat.float() @ weights.post_expert_proj.float().t()
