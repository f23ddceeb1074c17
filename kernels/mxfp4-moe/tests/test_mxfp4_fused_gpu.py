"""The eighth round's fused persistent launch (fused_kernel, config ``fused_few``; batches 1-8 where at most
fused_max_bound experts can be routed to the card) on the GPU against the fp32 reference: batches 1..8 with
some pairs on other cards, no local expert, all tokens to the same experts, top-1, PDL on and off, three calls in
a row (the barrier's words and the fix-up counters back to their state), shared memory sized for fewer
experts than routed (the down tiles past it from global memory), TP partials with combine_partials, the muse
shapes at EP8 batches 1 and 4 and EP2 x TP4 batch 1. Skipped without a GPU and Triton (CPU CI)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import has_module  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from mxfp4_moe import reference as R  # noqa: E402
from mxfp4_moe.variants import load_variant  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
    pytest.mark.skipif(not has_module("triton"), reason="triton is not installed"),
]

FUSED = {"ranked": True, "fused_few": True, "fused_max_bound": 64}


def _experts(seed: int, n: int = 6, latent: int = 1024, size: int = 512, base: int = 6):
    return R.random_expert_weights(n, latent, size, expert_base=base,
                                   generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda")


def _state_ok() -> bool:
    """The fix-up counters are 0, the barrier's arrival words are 0 and no spin gave up."""
    from mxfp4_moe import fused_kernel, gluon_kernel
    torch.cuda.synchronize()
    counters = all(int(bufs[-1].count_nonzero()) == 0 for bufs in gluon_kernel._COUNTERS.values())
    gb = fused_kernel.GEN_BASE.value
    bars = all(int(b[0]) == 0 and int(b[64]) == 0 and int(b[128:gb].count_nonzero()) == 0
               for b in fused_kernel._BARRIERS.values())
    return counters and bars


@pytest.mark.parametrize("cfg", [{}, {"fused_per_sm": 4}, {"fused_stages": 3, "fused_per_sm": 12},
                                 {"fused_down_tiles": 2, "fused_per_sm": 12}, {"fused_stages": 0},
                                 {"pdl": False}, {"ranked_min_iters": 1}, {"fused_early": True},
                                 {"fused_group_spin": False, "fused_bar_group": 7}, {"fused_pf_rest": False}])
def test_fused_every_batch_1_to_8(cfg):
    """Batches 1..8 of 4-of-12 routing on a card with experts 6..11 (some pairs elsewhere), all tokens to the
    same experts, top-1; three calls in a row; few programs an SM (more gate/up and down items than programs:
    the loops, the down tiles past the first item's from global memory), the 3-slot ring, two down tiles in
    shared memory, register loads for the gate/up tiles, PDL off, the largest gate/up split, the ranks and first
    copies before the wait on the previous kernel, the barrier with one spin word (groups of 7: a short last
    group), no L2 prefetch of the down tiles past shared memory."""
    from mxfp4_moe.kernel import LAST_LAUNCH
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(51)
    ex_t = ex.to_tiled_layout()
    conf = {**FUSED, **cfg}
    for rep in range(3):
        for tokens in range(1, 9):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 51000 + tokens + 100 * rep, "cuda", "gluon",
                                 conf), f"fused {cfg} batch {tokens} call {rep}")
            assert "fused" in LAST_LAUNCH, "the fused kernel did not run"
    for tokens in (1, 8):
        assert_ok(check_case(ex, ex_t, tokens, "one-expert", 12, 4, 51500 + tokens, "cuda", "gluon", conf), "one")
        assert_ok(check_case(ex, ex_t, tokens, "top1-one-expert", 12, 1, 51600 + tokens, "cuda", "gluon", conf),
                  "top-1")
    assert _state_ok()


def test_fused_no_local_expert_gives_zeros():
    """Every pair on another card: all-zero output over a poisoned buffer, in both modes."""
    from mxfp4_moe.kernel import LAST_LAUNCH, mxfp4_moe_experts
    ex_t = _experts(52).to_tiled_layout()
    for tokens in (1, 5):
        ids = torch.tensor([[0, 1, 2, 3]] * tokens, device="cuda")
        w = torch.full((tokens, 4), 0.25, device="cuda")
        x = torch.randn(tokens, 1024, device="cuda").to(torch.bfloat16)
        for partials in (False, True):
            out = torch.full((tokens * 4 if partials else tokens, 1024), float("nan"), device="cuda")
            mxfp4_moe_experts(x, ids, w, ex_t, config=FUSED, out=out, partials=partials)
            assert "fused" in LAST_LAUNCH
            assert bool((out == 0).all()), (tokens, partials)
    assert _state_ok()


@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("ids_dtype", [torch.int32, torch.int64])
def test_fused_pdl_and_id_types(pdl, ids_dtype):
    """PDL on and off, int32 and int64 ids, three calls into one poisoned buffer."""
    from mxfp4_moe.kernel import mxfp4_moe_experts
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(53, base=0)
    ex_t = ex.to_tiled_layout()
    g = torch.Generator().manual_seed(53)
    ids, w = R.route(torch.randn(5, 6, generator=g), 2)
    x = torch.randn(5, 1024, generator=g).to(torch.bfloat16)
    ref = R.moe_experts_reference(x.cuda(), ids.cuda(), w.cuda(), ex)
    out = torch.full((5, 1024), float("nan"), device="cuda")
    for _ in range(3):
        got = mxfp4_moe_experts(x.cuda(), ids.to(ids_dtype).cuda(), w.cuda(), ex_t, config={**FUSED, "pdl": pdl},
                                out=out)
        assert ((got - ref).norm() / ref.norm()).item() < 1e-2
    assert _state_ok()


def test_fused_in_a_graph():
    """Four calls back to back in one CUDA graph (PDL between them), replayed three times: each replay's output
    is the reference's and the barrier's words are back to their state."""
    from _kernel_cases import assert_graph_replays
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(54, base=0)
    assert_graph_replays(ex, ex.to_tiled_layout(), 6, FUSED, 54)
    assert _state_ok()


@pytest.mark.parametrize("cfg", [{}, {"fused_per_sm": 4}])
def test_fused_tp_partials(cfg):
    """TP 4 slices in partials mode (zero rows for other cards' pairs), their sum against the unsplit experts
    and combine_partials against the whole block, batches 1, 2, 4, 8."""
    from _kernel_cases import assert_ok, check_tp_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(55)
    for tokens in (1, 2, 4, 8):
        res = check_tp_case(ex, tokens, 12, 4, 4, 55000 + tokens, "cuda", "gluon", {**FUSED, **cfg})
        assert_ok(res, f"fused tp batch {tokens}")
        assert res["combine_rel"] < 1e-2, res
    assert _state_ok()


def test_fused_muse_shapes():
    """The muse shapes as benchmarked: EP8 batches 1 and 4 (32 local experts of 4096) and EP2 x TP4 batch 1
    (128 local experts, slices of 1024), the fused launch at the defaults."""
    from _kernel_cases import assert_ok, check_case, check_tp_case
    from mxfp4_moe.kernel import LAST_LAUNCH
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex8 = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                  generator=torch.Generator(device="cuda").manual_seed(56), device="cuda")
    ex8_t = ex8.to_tiled_layout()
    for tokens in (1, 4):
        assert_ok(check_case(ex8, ex8_t, tokens, "random", v.experts, v.top_k, 56000 + tokens, "cuda", "gluon",
                             FUSED), f"muse ep8 batch {tokens}")
        assert "fused" in LAST_LAUNCH
    del ex8, ex8_t
    local = v.experts // (v.cards // v.tp_split)
    ex = R.random_expert_weights(local, v.latent_size, v.expert_size, expert_base=local,
                                 generator=torch.Generator(device="cuda").manual_seed(57), device="cuda")
    res = check_tp_case(ex, 1, v.experts, v.top_k, v.tp_split, 57001, "cuda", "gluon", FUSED)
    assert_ok(res, "muse ep2tp4 batch 1")
    assert res["combine_rel"] < 1e-2, res
    assert _state_ok()
