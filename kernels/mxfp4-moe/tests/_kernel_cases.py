"""Kernel-vs-reference cases, shared by the GPU tests and the CPU (Triton interpreter) tests."""

from __future__ import annotations

import torch

from mxfp4_moe import reference as R

# BF16 activations between the two GEMMs (and BF16 x) against an all-fp32 reference: about 2e-3.
TOL_REL = 1e-2
TOL_TOKEN = 2e-2


def make_routing(kind: str, tokens: int, experts: int, top_k: int, g: torch.Generator, local: range):
    """ids [T, k] and weights [T, k].

    random: softmax-top-k of random logits over all experts (some not on this card under EP);
    one-expert: every token's top-k is the same k local experts (all tokens to one expert per slot);
    top1-one-expert: k = 1 and every token to the same local expert.
    """
    if kind == "random":
        return R.route(torch.randn(tokens, experts, generator=g), top_k)
    if kind == "one-expert":
        pick = torch.tensor(list(local))[torch.randperm(len(local), generator=g)[:top_k]]
        ids = pick.repeat(tokens, 1)
        w = torch.rand(tokens, top_k, generator=g) + 0.1
        return ids, w / w.sum(1, keepdim=True)
    if kind == "top1-one-expert":
        return torch.full((tokens, 1), local[len(local) // 2]), torch.ones(tokens, 1)
    raise ValueError(kind)


def check_case(ex_ref: R.ExpertWeights, ex_dev: R.ExpertWeights, tokens: int, kind: str, experts: int,
               top_k: int, seed: int, device: str, decode: str, config=None) -> dict:
    """Run the kernel once on fresh inputs; returns the errors (asserts nothing, callers do).

    The fp32 reference runs where ``ex_ref`` lives (the CPU, or the GPU with TF32 off for large shapes).
    ``ex_dev`` is re-laid out for the decode (kernel.DECODE_LAYOUT: `gluon` the tiled layout, unless it is
    tiled already, with its own tiles; the `mma` decodes the mma layout; the others the Quark layout)."""
    from mxfp4_moe.kernel import DECODE_LAYOUT, mxfp4_moe_experts

    if decode in DECODE_LAYOUT:
        ex_dev = ex_dev.to_layout(DECODE_LAYOUT[decode])  # the load-time re-layout (a no-op when done)
    g = torch.Generator().manual_seed(seed)
    local = range(ex_ref.expert_base, ex_ref.expert_base + ex_ref.num_local)
    ids, w = make_routing(kind, tokens, experts, top_k, g, local)
    x = (torch.randn(tokens, ex_ref.latent_size, generator=g) * 2).to(torch.bfloat16)
    out = torch.full((tokens, ex_ref.latent_size), float("nan"), device=device)  # poisoned: every row written?
    mxfp4_moe_experts(x.to(device), ids.to(device), w.to(device), ex_dev, decode=decode,
                      config=config, out=out)
    got = out.float().cpu()
    rd = ex_ref.w13.device
    ref = R.moe_experts_reference(x.to(rd), ids.to(rd), w.to(rd), ex_ref).cpu()
    has_local = ((ids - ex_ref.expert_base >= 0) & (ids - ex_ref.expert_base < ex_ref.num_local)).any(1)
    tok_err = []
    for t in range(tokens):
        if has_local[t]:
            tok_err.append(((got[t] - ref[t]).norm() / ref[t].norm()).item())
        else:
            tok_err.append(float(got[t].abs().max()))  # must be exactly 0
    denom = ref.norm().item()
    return {
        "finite": bool(torch.isfinite(got).all()),
        "rel": ((got - ref).norm() / denom).item() if denom > 0 else float(got.abs().max()),
        "max_token": max(tok_err) if tok_err else 0.0,
        "no_local_rows_zero": bool((got[~has_local] == 0).all()),
    }


def assert_ok(res: dict, label: str) -> None:
    assert res["finite"], f"{label}: NaN/inf or unwritten rows"
    assert res["no_local_rows_zero"], f"{label}: a token with no local expert got a non-zero output"
    assert res["rel"] < TOL_REL, f"{label}: relative error {res['rel']:.3e}"
    assert res["max_token"] < TOL_TOKEN, f"{label}: worst token error {res['max_token']:.3e}"


def check_tp_case(ex_ref: R.ExpertWeights, tokens: int, experts: int, top_k: int, split: int, seed: int,
                  device: str, decode: str, config=None) -> dict:
    """The TP split: each of the ``split`` slices of the experts (ExpertWeights.tp_slice) run by the kernel in
    partials mode (poisoned output), their sum against the unsplit experts' pre-norm outputs (fp32
    reference), and kernel.combine_partials of that sum (where a GPU runs it) against the whole block's
    reference. Returns the errors (asserts nothing)."""
    from mxfp4_moe.kernel import DECODE_LAYOUT, combine_partials, mxfp4_moe_experts

    g = torch.Generator().manual_seed(seed)
    local = range(ex_ref.expert_base, ex_ref.expert_base + ex_ref.num_local)
    ids, w = make_routing("random", tokens, experts, top_k, g, local)
    x = (torch.randn(tokens, ex_ref.latent_size, generator=g) * 2).to(torch.bfloat16)
    rd = ex_ref.w13.device
    total = torch.zeros(tokens * top_k, ex_ref.latent_size)
    for rank in range(split):
        sl = ex_ref.tp_slice(rank, split).to(device)
        if decode in DECODE_LAYOUT:
            sl = sl.to_layout(DECODE_LAYOUT[decode])
        out = torch.full((tokens * top_k, ex_ref.latent_size), float("nan"), device=device)
        mxfp4_moe_experts(x.to(device), ids.to(device), w.to(device), sl, decode=decode, config=config, out=out,
                          partials=True)
        total += out.float().cpu()
    want = R.moe_expert_partials_reference(x.to(rd), ids.to(rd), w.to(rd), ex_ref).cpu()
    mine = ((ids - ex_ref.expert_base >= 0) & (ids - ex_ref.expert_base < ex_ref.num_local)).reshape(-1)
    res = {"finite": bool(torch.isfinite(total).all()),
           "rel": ((total - want).norm() / want.norm()).item() if want.norm() > 0 else float(total.abs().max()),
           "no_local_rows_zero": bool((total[~mine] == 0).all())}
    pair_err = [((total[r] - want[r]).norm() / want[r].norm()).item() for r in range(total.shape[0]) if mine[r]]
    res["max_token"] = max(pair_err) if pair_err else 0.0
    if device != "cpu":
        comb = combine_partials(total.to(device), ids.to(device), w.to(device), ex_ref.norm_weight.to(device),
                                expert_base=ex_ref.expert_base).cpu()
        block = R.moe_experts_reference(x.to(rd), ids.to(rd), w.to(rd), ex_ref).cpu()
        res["combine_rel"] = ((comb - block).norm() / block.norm()).item() if block.norm() > 0 else 0.0
    return res


def assert_partials_both_ways(ex_ref: R.ExpertWeights, config: dict, seed: int, label: str) -> None:
    """check_tp_case at batch 32 (12 experts, top-4, TP 2, gluon) with the down GEMM's atomics on and off, each
    asserted (assert_ok, and combine_partials within 1e-2): the run list's partials cases."""
    for down_atomic in (True, False):
        res = check_tp_case(ex_ref, 32, 12, 4, 2, seed, "cuda", "gluon", {**config, "down_atomic": down_atomic})
        assert_ok(res, f"{label} partials down_atomic {down_atomic}")
        assert res["combine_rel"] < 1e-2, res


def assert_graph_replays(ex: R.ExpertWeights, ex_t: R.ExpertWeights, experts: int, config: dict, seed: int) -> None:
    """Four calls of 2 tokens, top-4 of ``experts``, back to back in one CUDA graph (PDL between them, where the
    configuration has it), replayed three times into poisoned buffers: each replay's outputs are the reference's.
    Each call runs once before the capture (compiles, and anything made at a first call)."""
    from mxfp4_moe.kernel import mxfp4_moe_experts

    g = torch.Generator().manual_seed(seed)
    ids, w = R.route(torch.randn(2, experts, generator=g), 4)
    x = torch.randn(2, ex.latent_size, generator=g).to(torch.bfloat16).cuda()
    ids, w = ids.cuda(), w.cuda()
    ref = R.moe_experts_reference(x, ids, w, ex)
    outs = [torch.full((2, ex.latent_size), float("nan"), device="cuda") for _ in range(4)]
    for o in outs:
        mxfp4_moe_experts(x, ids, w, ex_t, config=config, out=o)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for o in outs:
            mxfp4_moe_experts(x, ids, w, ex_t, config=config, out=o)
    for _ in range(3):
        for o in outs:
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for o in outs:
            assert ((o - ref).norm() / ref.norm()).item() < 1e-2
