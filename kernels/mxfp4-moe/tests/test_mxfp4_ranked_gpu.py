"""The device-ranked work list (ranked_kernel, config ``ranked``; batches 1-8) on the GPU against the fp32
reference: every batch 1..8, EP shares with one, a few and no local experts, K splits sized on the device
(forced up and down through the budget), the TP partials mode, PDL off and on, int32 and int64 ids, calls in
a row (the fix-up counters back to 0). Skipped without a GPU and Triton (CPU CI)."""

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

RANKED = {"ranked": True}


def _experts(seed: int, n: int = 6, latent: int = 1024, size: int = 512, base: int = 6):
    return R.random_expert_weights(n, latent, size, expert_base=base,
                                   generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda")


def _counters_zero() -> bool:
    from mxfp4_moe import gluon_kernel
    torch.cuda.synchronize()
    return all(int(bufs[-1].count_nonzero()) == 0 for bufs in gluon_kernel._COUNTERS.values())


def _tp_ok(ex, batches, seed0: int, conf: dict, label: str) -> None:
    """TP partials (4-of-12 routing, TP 4) of ``ex`` at each batch against the reference (check_tp_case, seed
    seed0 + batch): the partial sums and their combine (rel < 1e-2), then the fix-up counters back to 0."""
    from _kernel_cases import assert_ok, check_tp_case
    for tokens in batches:
        res = check_tp_case(ex, tokens, 12, 4, 4, seed0 + tokens, "cuda", "gluon", conf)
        assert_ok(res, f"{label} tp batch {tokens}")
        assert res["combine_rel"] < 1e-2, res
    assert _counters_zero()


@pytest.mark.parametrize("cfg", [{}, {"ranked_per_sm": 1},
                                 {"ranked_per_sm": 512, "ranked_min_iters": 1, "ranked_act_launch": False},
                                 {"ranked_stages": 3}, {"ranked_stages": 2, "ranked_per_sm": 1},
                                 {"ranked_stages": 4, "ranked_per_sm": 512, "ranked_min_iters": 1},
                                 {"ranked_wave_cost": 2, "ranked_per_sm": 20}, {"ranked_maxnreg_gate_up": 96},
                                 {"ranked_fixup_unroll": 4, "ranked_per_sm": 512, "ranked_min_iters": 1,
                                  "ranked_act_launch": False}])
def test_ranked_every_batch_1_to_8(cfg):
    """Batches 1..8 of 4-of-12 routing on a card with experts 6..11 (some pairs elsewhere), all tokens to
    the same experts, top-1; splits at the default budget, none (1 program per SM), and the largest (one K
    tile per part); three calls in a row. The same through the cp.async ring (ranked_stages: 3 slots, 2
    slots over 8 K tiles a part, 4 slots over 1 tile a part: the copies past the part masked off), with the
    wave rule's splits, with the gate/up GEMM's registers capped, and with the split's last part loading 4 parts
    at once (4 parts here: one load round). These small shapes split the gate/up GEMM at every bound, so the
    default ``ranked_act_launch`` "auto" adds the parts in the act launch; the fix-up runs where it is off."""
    from mxfp4_moe import ranked_kernel
    from mxfp4_moe.kernel import LAST_LAUNCH
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(41)
    ex_t = ex.to_tiled_layout()
    conf = {**RANKED, **cfg}
    for rep in range(3):
        for tokens in range(1, 9):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 41000 + tokens + 100 * rep, "cuda", "gluon",
                                 conf), f"ranked {cfg} batch {tokens} call {rep}")
            assert "max_splits" in LAST_LAUNCH  # the ranked kernels ran
    for tokens in (1, 8):
        assert_ok(check_case(ex, ex_t, tokens, "one-expert", 12, 4, 41500 + tokens, "cuda", "gluon", conf), "one")
        assert_ok(check_case(ex, ex_t, tokens, "top1-one-expert", 12, 1, 41600 + tokens, "cuda", "gluon", conf),
                  "top-1")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if cfg.get("ranked_min_iters") == 1:  # the largest splits: the gate/up fix-up (or act launch), down atomics
        assert ranked_kernel.run_split(1, 2 * 512 // 32, LAST_LAUNCH["max_splits"][0], 512 * sms) == 4
    assert _counters_zero()


def test_ranked_no_local_expert_gives_zeros():
    """Every pair on another card: the output is all zeros (written over a poisoned buffer), in both modes."""
    from mxfp4_moe.kernel import mxfp4_moe_experts
    ex_t = _experts(42).to_tiled_layout()
    for tokens in (1, 5):
        ids = torch.tensor([[0, 1, 2, 3]] * tokens, device="cuda")
        w = torch.full((tokens, 4), 0.25, device="cuda")
        x = torch.randn(tokens, 1024, device="cuda").to(torch.bfloat16)
        for partials in (False, True):
            out = torch.full((tokens * 4 if partials else tokens, 1024), float("nan"), device="cuda")
            mxfp4_moe_experts(x, ids, w, ex_t, config=RANKED, out=out, partials=partials)
            assert bool((out == 0).all()), (tokens, partials)


@pytest.mark.parametrize("stages", [0, 3])
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("ids_dtype", [torch.int32, torch.int64])
def test_ranked_pdl_and_id_types(pdl, ids_dtype, stages):
    """PDL on and off, int32 and int64 ids, two calls into one poisoned buffer: the reference's result (with
    register loads and through the ring, whose first copies are issued before the wait on the previous
    kernel)."""
    from mxfp4_moe.kernel import mxfp4_moe_experts
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(43, base=0)
    ex_t = ex.to_tiled_layout()
    g = torch.Generator().manual_seed(43)
    ids, w = R.route(torch.randn(5, 6, generator=g), 2)
    x = torch.randn(5, 1024, generator=g).to(torch.bfloat16)
    ref = R.moe_experts_reference(x.cuda(), ids.cuda(), w.cuda(), ex)
    out = torch.full((5, 1024), float("nan"), device="cuda")
    for _ in range(2):
        got = mxfp4_moe_experts(x.cuda(), ids.to(ids_dtype).cuda(), w.cuda(), ex_t, config={**RANKED, "pdl": pdl, "ranked_stages": stages},
                                out=out)
        assert ((got - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("cfg", [{}, {"ranked_per_sm": 512, "ranked_min_iters": 1},
                                 {"ranked_stages": 3, "ranked_per_sm": 512, "ranked_min_iters": 1}])
def test_ranked_tp_partials(cfg):
    """TP 4 slices in partials mode (zero rows for other cards' pairs), their sum against the unsplit
    experts and combine_partials against the whole block, batches 1..8."""
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(44)
    _tp_ok(ex, (1, 2, 4, 8), 44000, {**RANKED, **cfg}, "ranked")


@pytest.mark.parametrize("cfg", [{}, {"ranked_stages": 2, "ranked_stages_down": 0, "ranked_maxnreg_gate_up": 96,
                                      "ranked_few": {"ranked_stages": 3, "ranked_stages_down": 3}},
                                 {"ranked_act_launch": True}, "defaults"])
def test_ranked_muse_shapes(cfg):
    """The muse shapes as benchmarked: EP8 (32 local experts of 4096; batch 1 and 4 route one or two here)
    and EP2 x TP4 (128 local experts, slices of 1024), batches 1 and 4; register loads, and the rings (3 slots
    at batch 1, where at most 8 experts can be routed here: ranked_few; 2 for the gate/up GEMM above); the act
    launch (eleventh round) everywhere with True, and with the shipped defaults (kernel.GLUON_CONFIG, whose
    ``ranked_act_launch`` "auto" takes it at EP2 x TP4 batch 1 only; a test's config is used as it is, unset keys
    off)."""
    from _kernel_cases import assert_ok, check_case, check_tp_case
    from mxfp4_moe.kernel import GLUON_CONFIG, LAST_LAUNCH
    defaults = cfg == "defaults"
    cfg = dict(GLUON_CONFIG) if defaults else {**RANKED, **cfg}
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex8 = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                  generator=torch.Generator(device="cuda").manual_seed(45), device="cuda")
    ex8_t = ex8.to_tiled_layout()
    for tokens in (1, 4):
        assert_ok(check_case(ex8, ex8_t, tokens, "random", v.experts, v.top_k, 45000 + tokens, "cuda", "gluon",
                             cfg), f"muse ep8 batch {tokens}")
        if cfg.get("ranked_few") and not defaults:
            assert LAST_LAUNCH["stages"] == ((3, 3) if tokens == 1 else (2, 0)), LAST_LAUNCH["stages"]
        # "auto": EP8 takes split 1 where 8 experts are routed here, so no act launch at batch 1 or 4
        assert (LAST_LAUNCH["act"] is not None) == (cfg.get("ranked_act_launch") is True), (tokens, cfg)
    del ex8, ex8_t
    local = v.experts // (v.cards // v.tp_split)
    ex = R.random_expert_weights(local, v.latent_size, v.expert_size, expert_base=local,
                                 generator=torch.Generator(device="cuda").manual_seed(46), device="cuda")
    for tokens in (1, 4):
        res = check_tp_case(ex, tokens, v.experts, v.top_k, v.tp_split, 46000 + tokens, "cuda", "gluon", cfg)
        assert_ok(res, f"muse ep2tp4 batch {tokens}")
        assert res["combine_rel"] < 1e-2, res
        # "auto": at batch 1 the slice's gate/up GEMM splits K however many of the 8 experts are routed here
        want = cfg.get("ranked_act_launch", False)
        assert (LAST_LAUNCH["act"] is not None) == (want is True or (want == "auto" and tokens == 1)), (tokens, cfg)


@pytest.mark.parametrize("cfg", [{"ranked_prefetch_down_mb": 64}, {"ranked_prefetch_down_mb": 64, "ranked_stages": 3},
                                 {"ranked_prefetch_down_mb": 64, "ranked_per_sm": 512, "ranked_min_iters": 1},
                                 {"ranked_prefetch_down_mb": 0.6}])
def test_ranked_prefetch_down(cfg):
    """The gate/up programs' L2 prefetch of the down weights (``ranked_prefetch_down_mb``, seventh round; a hint:
    the results must not change): batches 1..8 of 4-of-12 routing, all tokens to the same experts, top-1,
    register loads and the ring, the largest splits (many small shares), and a limit that admits one expert of
    these (0.6 MB: the prefetch on only where one expert is routed); the TP partials; the compiled limit."""
    from mxfp4_moe.kernel import LAST_LAUNCH
    from _kernel_cases import assert_ok, check_case, check_tp_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(47, size=1024)
    ex_t = ex.to_tiled_layout()
    conf = {**RANKED, **cfg}
    per_expert = ex_t.w2[0].numel() + ex_t.w2_scale[0].numel()
    for rep in range(2):
        for tokens in range(1, 9):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 47000 + tokens + 100 * rep, "cuda", "gluon",
                                 conf), f"prefetch {cfg} batch {tokens} call {rep}")
            assert LAST_LAUNCH["prefetch_max_own"] == int(cfg["ranked_prefetch_down_mb"] * 1e6 // per_expert)
            assert LAST_LAUNCH["prefetch_max_own"] > 0
    for kind, k in (("one-expert", 4), ("top1-one-expert", 1)):
        assert_ok(check_case(ex, ex_t, 8, kind, 12, k, 47500 + k, "cuda", "gluon", conf), f"prefetch {kind}")
    res = check_tp_case(ex, 4, 12, 4, 2, 47600, "cuda", "gluon", conf)
    assert_ok(res, "prefetch tp partials")


def _same_without(ex_t, conf: dict, drop, tokens: tuple[int, ...], seed: int, label) -> None:
    """The output with ``conf`` and with ``conf`` less the keys ``drop`` picks, at each batch of ``tokens`` (4-of-12
    routing, experts 6..11): the same sums in the same order, so only the down GEMM's atomics may differ (rel <
    1e-5)."""
    from _kernel_cases import make_routing
    from mxfp4_moe.kernel import mxfp4_moe_experts
    g = torch.Generator().manual_seed(seed)
    for t in tokens:
        ids, w = make_routing("random", t, 12, 4, g, range(6, 12))
        x = (torch.randn(t, 1024, generator=g) * 2).to(torch.bfloat16).cuda()
        outs = []
        for c in (conf, {k: v for k, v in conf.items() if not drop(k)}):
            out = torch.empty(t, 1024, device="cuda")
            mxfp4_moe_experts(x, ids.cuda(), w.cuda(), ex_t, decode="gluon", config=c, out=out)
            outs.append(out)
        assert ((outs[0] - outs[1]).norm() / outs[1].norm()).item() < 1e-5, (label, t)


@pytest.mark.parametrize("cfg", [{"ranked_l2_ahead": 4}, {"ranked_l2_ahead": 64, "ranked_stages": 3},
                                 {"ranked_l2_ahead": 2, "ranked_l2_ahead_down": 64, "ranked_stages": 2,
                                  "ranked_per_sm": 512, "ranked_min_iters": 1},
                                 {"ranked_l2_ahead": 0, "ranked_l2_ahead_down": 3, "ranked_stages": 3}])
def test_ranked_l2_ahead(cfg):
    """``ranked_l2_ahead`` / ``ranked_l2_ahead_down`` (seventeenth round: an item's next K tiles past its ring's
    brought into L2 before the wait; a hint, the results must not change): batches 1..8 of 4-of-12 routing
    against the reference, twice in a row, register loads and rings of 2 and 3 slots, more tiles than an item has
    left (64) and the largest splits (one K tile a part: nothing left to ask for); the values the launch compiled
    in; the TP partials; the same output bits as without it at batch 1 and 8 (the same sums in the same order,
    only the down GEMM's atomics may differ); a negative value refused."""
    from _kernel_cases import assert_ok, check_case, check_tp_case
    from mxfp4_moe.kernel import LAST_LAUNCH
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(53)
    ex_t = ex.to_tiled_layout()
    conf = {**RANKED, **cfg}
    want = (cfg["ranked_l2_ahead"], cfg.get("ranked_l2_ahead_down", cfg["ranked_l2_ahead"]))
    for rep in range(2):
        for tokens in range(1, 9):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 53000 + tokens + 100 * rep, "cuda", "gluon",
                                 conf), f"l2 ahead {cfg} batch {tokens} call {rep}")
            assert LAST_LAUNCH["l2_ahead"] == want, (LAST_LAUNCH["l2_ahead"], want)
    assert_ok(check_tp_case(ex, 4, 12, 4, 2, 53600, "cuda", "gluon", conf), "l2 ahead tp partials")
    assert _counters_zero()
    _same_without(ex_t, conf, lambda k: k.startswith("ranked_l2_ahead"), (1, 8), 53700, cfg)
    with pytest.raises(ValueError, match="ranked_l2_ahead_down must be a non-negative integer"):
        check_case(ex, ex_t, 1, "random", 12, 4, 53900, "cuda", "gluon", {**conf, "ranked_l2_ahead_down": -1})


def _carveout_of(compiled) -> int:
    """The PREFERRED_SHARED_MEMORY_CARVEOUT attribute of a compiled kernel's CUfunction, read back from the driver."""
    import ctypes
    n = ctypes.c_int(-7)
    rc = ctypes.CDLL("libcuda.so.1").cuFuncGetAttribute(ctypes.byref(n), ctypes.c_int(9),
                                                        ctypes.c_void_p(compiled.function))
    assert rc == 0, rc
    return n.value


@pytest.mark.parametrize("cfg", [{"ranked_carveout": 100}, {"ranked_carveout": 0, "ranked_stages": 3},
                                 {"ranked_carveout": 50, "ranked_per_sm": 512, "ranked_min_iters": 1,
                                  "ranked_act_launch": True}])
def test_ranked_carveout(cfg):
    """``ranked_carveout`` (nineteenth round: the shared memory carveout asked for every kernel of the call; a
    preference, the results must not change): batches 1..8 of 4-of-12 routing against the reference, twice in a
    row, register loads and a ring, split K with the act launch; the driver holds the percent for the gate/up and
    down GEMMs, the act launch where it ran and the norm-combine; the TP partials; the same output as without it;
    a value outside 0..100, a bool or a float refused."""
    from _kernel_cases import assert_ok, check_case, check_tp_case
    from mxfp4_moe.kernel import LAST_LAUNCH
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(57)
    ex_t = ex.to_tiled_layout()
    conf = {**RANKED, **cfg}
    pct = cfg["ranked_carveout"]
    for rep in range(2):
        for tokens in range(1, 9):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 57000 + tokens + 100 * rep, "cuda", "gluon",
                                 conf), f"carveout {cfg} batch {tokens} call {rep}")
            kernels = [LAST_LAUNCH[k] for k in ("gate_up", "down", "act", "combine") if LAST_LAUNCH[k]]
            assert len(kernels) == 3 + (LAST_LAUNCH["act"] is not None), LAST_LAUNCH
            assert [_carveout_of(k) for k in kernels] == [pct] * len(kernels), (cfg, tokens)
    if cfg.get("ranked_act_launch"):
        assert LAST_LAUNCH["act"] is not None
    assert_ok(check_tp_case(ex, 4, 12, 4, 2, 57600, "cuda", "gluon", conf), "carveout tp partials")
    assert _counters_zero()
    _same_without(ex_t, conf, lambda k: k == "ranked_carveout", (1, 8), 57700, cfg)
    for bad in (101, -1, True, 1.5):
        with pytest.raises(ValueError, match="ranked_carveout must be an integer percent 0..100"):
            check_case(ex, ex_t, 1, "random", 12, 4, 57900, "cuda", "gluon", {**conf, "ranked_carveout": bad})


@pytest.mark.parametrize("cfg", [{}, {"ranked_stages": 3}, {"ranked_per_sm": 512, "ranked_min_iters": 1},
                                 {"ranked_stages": 3, "ranked_per_sm": 16, "ranked_min_iters": 1,
                                  "ranked_maxnreg": 96},
                                 {"ranked_per_sm": 1}, {"pdl": False}])
def test_ranked_norm_down(cfg):
    """``ranked_norm_down`` (twentieth round: the norm-combine done by the down GEMM's row blocks, no launch after
    it): batches 1..8 of 4-of-12 routing against the reference, three calls in a row into poisoned buffers, register
    loads and a ring, the largest splits (the parts' counters, the last part reading the sums back) and split 1
    (one program an SM), PDL off; where the grid can all be resident it is taken (two launches, no norm-combine),
    else the norm-combine launch as without it; the same output as without it (rel < 1e-5: only atomics' order may
    differ); every counter back to 0 and no spin gave up; TP partials (not taken there); a non-bool refused."""
    from _kernel_cases import assert_ok, check_case
    from mxfp4_moe import ranked_kernel
    from mxfp4_moe.kernel import LAST_LAUNCH, driver_resident
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(61)
    ex_t = ex.to_tiled_layout()
    conf = {**RANKED, **cfg, "ranked_norm_down": True}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    taken = set()
    for rep in range(3):
        for tokens in range(1, 9):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 61000 + tokens + 100 * rep, "cuda", "gluon",
                                 conf), f"norm down {cfg} batch {tokens} call {rep}")
            grid, per_sm = LAST_LAUNCH["grids"]["down"][0], LAST_LAUNCH["norm_resident"]
            assert LAST_LAUNCH["norm_down"] == (grid <= per_sm * sms), (cfg, tokens, grid, per_sm)
            if LAST_LAUNCH["norm_down"]:  # the figure the decision took is the launched (norm) kernel's
                assert driver_resident(LAST_LAUNCH["down"]) == per_sm > 0
            assert LAST_LAUNCH["launches"] == (2 if LAST_LAUNCH["norm_down"] else 3) + (LAST_LAUNCH["act"] is not None)
            assert (LAST_LAUNCH["combine"] is None) == LAST_LAUNCH["norm_down"]
            taken.add(LAST_LAUNCH["norm_down"])
    assert True in taken, cfg
    torch.cuda.synchronize()
    assert _counters_zero() and ranked_kernel.norm_errors() == 0
    assert all(int(b[1:].count_nonzero()) == 0 for bufs in ranked_kernel._NORM_COUNTERS.values() for b in bufs)
    _same_without(ex_t, conf, lambda k: k == "ranked_norm_down", (1, 3, 8), 61700, cfg)
    _tp_ok(ex, (1, 4, 8), 61800, conf, "norm down")
    assert not LAST_LAUNCH["norm_down"]
    # not with the down GEMM's claimed items (they have no norm-combine: the output was all zeros) nor a carveout
    # (the occupancy asked is at the driver's choice): the norm-combine launch, the reference's output
    for more in ({"ranked_claim_down": 1, "ranked_claim_items": 512, "ranked_stages": 3}, {"ranked_carveout": 28}):
        assert_ok(check_case(ex, ex_t, 2, "random", 12, 4, 61950, "cuda", "gluon", {**conf, **more}), f"with {more}")
        assert not LAST_LAUNCH["norm_down"] and LAST_LAUNCH["combine"] is not None, more
    with pytest.raises(ValueError, match="ranked_norm_down must be true or false"):
        check_case(ex, ex_t, 1, "random", 12, 4, 61900, "cuda", "gluon", {**conf, "ranked_norm_down": 1})


@pytest.mark.parametrize("cfg", [{}, {"ranked_per_sm": 512, "ranked_min_iters": 1},
                                 {"ranked_stages": 3, "ranked_per_sm": 512, "ranked_min_iters": 1},
                                 {"ranked_per_sm": 1}])
def test_ranked_act_launch(cfg):
    """``ranked_act_launch`` (eleventh round: the gate/up parts added and silu applied by a launch between the
    GEMMs): batches 1..8 of 4-of-12 routing against the reference, twice in a row; against the fix-up's output
    on the same inputs (the same sums in the same order: only the down GEMM's atomics may differ, rel < 1e-5);
    the act launch ran where the gate/up GEMM may split (a launch more; with one program an SM the device
    picks split 1 where several experts are routed here, and the act launch writes nothing); TP partials."""
    from _kernel_cases import assert_ok, check_case
    from mxfp4_moe.kernel import LAST_LAUNCH
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(47)
    ex_t = ex.to_tiled_layout()
    conf = {**RANKED, **cfg, "ranked_act_launch": True}
    for rep in range(2):
        for tokens in range(1, 9):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 47000 + tokens + 100 * rep, "cuda", "gluon",
                                 conf), f"act launch {cfg} batch {tokens} call {rep}")
            split = LAST_LAUNCH["max_splits"][0] > 1
            assert (LAST_LAUNCH["act"] is not None) == split, (cfg, tokens, LAST_LAUNCH["max_splits"])
            assert LAST_LAUNCH["launches"] == 3 + split
    _same_without(ex_t, conf, lambda k: k == "ranked_act_launch", (1, 3, 8), 47700, cfg)
    _tp_ok(ex, (1, 4, 8), 47800, conf, "act launch")


def test_norm_combine_early():
    """``combine_early`` (thirteenth round: the norm-combine's router and norm weights loaded before its wait) gives
    the output without it (the same sums, only the atomics' order may differ: rel < 1e-5) after the ranked GEMMs
    (batches 1, 3, 8) and the run list's (batches 9, 17, 32), twice into a poisoned buffer, and the reference's."""
    from _kernel_cases import assert_ok, check_case, make_routing
    from mxfp4_moe.kernel import GLUON_CONFIG, mxfp4_moe_experts
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(49)
    ex_t = ex.to_tiled_layout()
    base = {k: v for k, v in GLUON_CONFIG.items() if not k.startswith("combine_")}
    conf = {**base, "combine_early": True}
    g = torch.Generator().manual_seed(49000)
    for tokens in (1, 3, 8, 9, 17, 32):
        ids, w = make_routing("random", tokens, 12, 4, g, range(6, 12))
        x = (torch.randn(tokens, 1024, generator=g) * 2).to(torch.bfloat16).cuda()
        outs = []
        for c in (conf, base):
            out = torch.full((tokens, 1024), float("nan"), device="cuda")
            for _ in range(2):
                mxfp4_moe_experts(x, ids.cuda(), w.cuda(), ex_t, decode="gluon", config=c, out=out)
            outs.append(out)
        assert ((outs[0] - outs[1]).norm() / outs[1].norm()).item() < 1e-5, tokens
        assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 49100 + tokens, "cuda", "gluon", conf),
                  f"combine_early batch {tokens}")


@pytest.mark.parametrize("cfg", [{"ranked_stages": 2, "ranked_min_iters": 1, "ranked_claim_down": 1, "ranked_claim_items": 512},
                                 {"ranked_stages": 3, "ranked_claim_down": 1, "ranked_claim_items": 512},
                                 {"ranked_stages": 3, "ranked_claim_down": 1, "ranked_claim_items": 512,
                                  "ranked_claim_shards": 8},
                                 {"ranked_stages": 3, "ranked_claim_down": 2, "ranked_claim_items": 2}])
def test_ranked_claim_down(cfg):
    """``ranked_claim_down`` (fifteenth round: the down GEMM's items taken at run time from a counter): batches
    1..8 of 4-of-12 routing on a card with experts 6..11 against the reference, three calls in a row, with rings
    of 2 slots (parts of one K tile) and 3 (two), and a budget too small for the claimed list ever to be taken.
    After each call the counter holds exactly the items the down GEMM's list has where the device took it (every
    item after the first of each program claimed once, and one claim more a program past the end: n_items in
    all), and 0 where it ran the list without claims (the call's gate/up GEMM zeroed it); TP partials; the
    fix-up counters back to 0."""
    from mxfp4_moe import ranked_kernel
    from mxfp4_moe.kernel import LAST_LAUNCH
    from _kernel_cases import assert_ok, check_case, make_routing
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(48, size=1024)
    ex_t = ex.to_tiled_layout()
    conf = {**RANKED, **cfg}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    (_bn1, _bk1), (bn2, bk2) = ex_t.tiles
    grid_n2, k_tiles = ex_t.latent_size // bn2, ex_t.expert_size // bk2
    max_c = ranked_kernel.max_split(k_tiles, max(cfg["ranked_stages"] - 1, 1))
    shards = cfg.get("ranked_claim_shards", 1)
    programs = cfg["ranked_claim_down"] * sms // shards * shards
    taken = 0
    for rep in range(3):
        for tokens in range(1, 9):
            seed = 48000 + tokens + 100 * rep
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, seed, "cuda", "gluon", conf),
                      f"claim {cfg} batch {tokens} call {rep}")
            assert LAST_LAUNCH["claim_programs"] == programs
            assert LAST_LAUNCH["grids"]["down"][0] >= programs
            ids, _w = make_routing("random", tokens, 12, 4, torch.Generator().manual_seed(seed), range(6, 12))
            n_own = len({int(i) for i in ids.flatten() if 6 <= int(i) < 12})
            items = n_own * grid_n2 * ranked_kernel.run_split(n_own, grid_n2, max_c, cfg["ranked_claim_items"] * sms)
            want = items if items >= 2 * programs else 0
            taken += want > 0
            got = int(ranked_kernel._claim_counter(torch.device("cuda", torch.cuda.current_device())).sum())
            assert got == want, (cfg, tokens, n_own, items, got)
    assert taken > 0 if cfg["ranked_claim_items"] > 2 else taken == 0, taken
    _tp_ok(ex, (1, 4, 8), 48800, conf, "claim")


def test_ranked_norm_down_muse():
    """``ranked_norm_down`` at the shapes it is for: muse, the shipped configuration with it on, 32 local experts of
    4096 at batch 1 of top-8 all routed here (local) and among 256 (EP8), batch 4 of EP8, each twice; against the
    reference; taken at batch 1 (16 ring programs an SM, all resident: two launches), no spin gave up."""
    from mxfp4_moe import ranked_kernel
    from mxfp4_moe.kernel import GLUON_CONFIG, LAST_LAUNCH
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    # the card holds experts 0..31: routing among 32 puts every pair here (local), among 256 a share (EP8)
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=0,
                                 generator=torch.Generator(device="cuda").manual_seed(62), device="cuda")
    ex_t = ex.to_tiled_layout()
    cfg = {**GLUON_CONFIG, "ranked_norm_down": True}
    for experts, tokens in ((v.local_experts, 1), (v.experts, 1), (v.experts, 4)):
        for rep in range(2):
            res = check_case(ex, ex_t, tokens, "random", experts, v.top_k, 62000 + 10 * tokens + rep + experts,
                             "cuda", "gluon", cfg)
            assert_ok(res, f"muse norm down experts {experts} batch {tokens} call {rep}")
            if tokens == 1:
                assert LAST_LAUNCH["norm_down"] and LAST_LAUNCH["launches"] == 2, LAST_LAUNCH
    torch.cuda.synchronize()
    assert ranked_kernel.norm_errors() == 0


def test_ranked_claim_down_muse_local():
    """The shape the claims are for: muse, 32 local experts, batch 1 of top-8 all routed here, the shipped
    configuration with ranked_few's ``ranked_claim_down`` 8 (on the H200: the down GEMM's 8 x 128 row blocks x
    split 8 = 8,192 items taken by 8 programs an SM); against the reference, and the counter after the call."""
    from mxfp4_moe import ranked_kernel
    from mxfp4_moe.kernel import GLUON_CONFIG, LAST_LAUNCH
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=0,
                                 generator=torch.Generator(device="cuda").manual_seed(49), device="cuda")
    ex_t = ex.to_tiled_layout()
    cfg = dict(GLUON_CONFIG)
    cfg["ranked_few"] = {**cfg["ranked_few"], "ranked_claim_down": 8}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    (_bn1, _bk1), (bn2, bk2) = ex_t.tiles
    grid_n2 = v.latent_size // bn2
    max_c = ranked_kernel.max_split(v.expert_size // bk2, 2)  # parts of 2 K tiles or more: the 3-slot ring
    items = 8 * grid_n2 * ranked_kernel.run_split(8, grid_n2, max_c, GLUON_CONFIG.get("ranked_claim_items", 64) * sms)
    assert items >= 2 * 8 * sms  # the claims are taken
    for rep in range(2):
        assert_ok(check_case(ex, ex_t, 1, "random", v.local_experts, v.top_k, 49000 + rep, "cuda", "gluon", cfg),
                  f"muse local batch 1 call {rep}")
        assert LAST_LAUNCH["claim_programs"] == 8 * sms
        got = int(ranked_kernel._claim_counter(torch.device("cuda", torch.cuda.current_device())).sum())
        assert got == items, (got, items)
