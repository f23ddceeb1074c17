"""The kernels on the GPU against the fp32 reference: every batch 1..32, uneven routing, EP, the muse shapes.
Skipped without a GPU and Triton (CPU CI); run them on a machine with an NVIDIA GPU (an H200 here; README)."""

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

PATHS = ["gluon", "mma", "asm2", "asm", "explicit", "dot_scaled"]


@pytest.fixture(scope="module")
def tiny():
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("tiny")
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                 generator=torch.Generator().manual_seed(1))
    return v, ex, ex.to("cuda")


@pytest.mark.parametrize("decode", PATHS)
def test_every_batch_size_1_to_32(tiny, decode):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    for tokens in range(1, 33):
        res = check_case(ex, ex_dev, tokens, "random", v.experts, v.top_k, 1000 + tokens, "cuda", decode)
        assert_ok(res, f"batch {tokens}")


@pytest.mark.parametrize("decode", PATHS)
@pytest.mark.parametrize("tokens", [1, 16, 17, 32])
def test_all_tokens_to_one_expert(tiny, decode, tokens):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    assert_ok(check_case(ex, ex_dev, tokens, "one-expert", v.experts, v.top_k, 2000 + tokens, "cuda", decode),
              f"one-expert batch {tokens}")
    assert_ok(check_case(ex, ex_dev, tokens, "top1-one-expert", v.experts, 1, 3000 + tokens, "cuda", decode),
              f"top-1 one-expert batch {tokens}")


@pytest.mark.parametrize("decode", PATHS)
def test_more_than_32_tokens_run_in_chunks(tiny, decode):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    assert_ok(check_case(ex, ex_dev, 45, "random", v.experts, v.top_k, 4000, "cuda", decode), "batch 45")


@pytest.mark.parametrize("decode", PATHS)
def test_muse_shapes(decode):
    """The muse variant's shapes (32 local experts, EP rank 1), batches 1, 4 and 32."""
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex_dev = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                     generator=torch.Generator(device="cuda").manual_seed(5), device="cuda")
    for tokens, kind in [(1, "random"), (4, "random"), (32, "random"), (32, "one-expert")]:
        res = check_case(ex_dev, ex_dev, tokens, kind, v.experts, v.top_k, 5000 + tokens, "cuda", decode)
        assert_ok(res, f"muse batch {tokens} {kind}")


@pytest.mark.parametrize("decode", ["explicit", "asm", "asm2", "mma", "mma_portable"])
def test_decodes_are_exact_for_every_code_and_scale(decode):
    """All 256 byte values under every E8M0 scale 1..254 (2**-126 .. 2**127), bit for bit. Scale 0
    (2**-127) decodes to zero in the PTX paths, 255 is NaN; the explicit path's fp32 scale factor
    (2**(s-127+14)) overflows above s = 240, so it is checked up to there; the mma decodes (weights times
    2**-32 in BF16, format.dequantize_mxfp4_mma) are exact for scales 27..160."""
    from mxfp4_moe.format import dequantize_mxfp4, to_mma_layout
    from mxfp4_moe.kernel import dequantize_mxfp4_triton
    lo, top = (27, 160) if decode.startswith("mma") else (1, 240 if decode == "explicit" else 254)
    q = torch.arange(256, dtype=torch.uint8).repeat(top - lo + 1, 1)  # [rows, 256] -> K = 512
    s = torch.arange(lo, top + 1, dtype=torch.uint8)[:, None].repeat(1, 16)
    qk = to_mma_layout(q) if decode.startswith("mma") else q
    got = dequantize_mxfp4_triton(qk.cuda(), s.cuda(), decode=decode).cpu()
    want = dequantize_mxfp4(q, s, torch.bfloat16)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_dequant_kernel_matches_reference():
    from mxfp4_moe.format import dequantize_mxfp4, random_mxfp4
    from mxfp4_moe.kernel import dequantize_mxfp4_triton
    q, s = random_mxfp4((200,), 512, generator=torch.Generator().manual_seed(6), scale_range=(100, 150))
    got = dequantize_mxfp4_triton(q.cuda(), s.cuda()).cpu()
    assert torch.equal(got, dequantize_mxfp4(q, s, torch.bfloat16))


@pytest.mark.parametrize("decode", ["asm2", "mma"])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("split", [1, 2])
def test_swapped_operands_split_k_and_other_tiles(tiny, swap, split, decode):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    cfg = {"gate_up": (32, 32, 4, 2, swap), "down": (128, 32, 8, 3, swap), "split_gate_up": split,
           "split_down": 2 * split}
    for tokens in (1, 5, 16, 17, 32):
        res = check_case(ex, ex_dev, tokens, "random", v.experts, v.top_k, 6000 + tokens, "cuda", decode, cfg)
        assert_ok(res, f"swap={swap} batch {tokens}")


@pytest.mark.parametrize("decode", ["asm2", "mma"])
@pytest.mark.parametrize("tokens", [1, 4, 17, 32])
def test_separate_gate_up_gemm(tiny, tokens, decode):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    cfg = {"gate_up": (64, 64, 4, 3), "down": (64, 64, 4, 3), "separate_gate_up": True}
    assert_ok(check_case(ex, ex_dev, tokens, "random", v.experts, v.top_k, 8000 + tokens, "cuda", decode, cfg),
              f"separate gate/up batch {tokens}")


@pytest.mark.parametrize("decode", ["asm2", "mma"])
def test_muse_shapes_separate_gate_up_split(decode):
    from _kernel_cases import assert_ok, check_case
    from mxfp4_moe.kernel import default_config
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex_dev = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=0,
                                     generator=torch.Generator(device="cuda").manual_seed(8), device="cuda")
    ex_k = ex_dev.to_mma_layout() if decode == "mma" else ex_dev
    for sep in (False, True):
        cfg = dict(default_config(decode), separate_gate_up=sep, split_gate_up=2, split_down=2)
        for tokens in (1, 32):
            res = check_case(ex_dev, ex_k, tokens, "random", v.experts, v.top_k, 9000 + tokens, "cuda", decode, cfg)
            assert_ok(res, f"muse separate={sep} split 2 batch {tokens}")


def test_glue_chooses_the_kernel_here(monkeypatch):
    from mxfp4_moe import glue
    glue.reset_backend()
    monkeypatch.setenv(glue.ENV_VAR, "1")
    try:
        assert glue.init_backend().backend == glue.KERNEL
    finally:
        glue.reset_backend()


def test_glue_prepares_the_tiled_layout_here(monkeypatch):
    from _kernel_cases import assert_ok, check_case
    from mxfp4_moe import glue
    glue.reset_backend()
    monkeypatch.setenv(glue.ENV_VAR, "1")
    try:
        v = load_variant("tiny")
        ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=0,
                                     generator=torch.Generator().manual_seed(11))
        prepared = glue.prepare_experts(ex.to("cuda"))
        assert prepared.layout == "tiled" and prepared.tiles == ((32, 128), (32, 128))
        assert_ok(check_case(ex, prepared, 3, "random", v.experts, v.top_k, 10000, "cuda", "auto"), "prepared")
        got = glue.moe_experts(torch.randn(2, v.latent_size).to(torch.bfloat16).cuda(),
                               torch.tensor([[1, 2, 3, 4], [4, 5, 6, 7]]).cuda(), torch.full((2, 4), 0.25).cuda(),
                               prepared)
        assert torch.isfinite(got).all()
    finally:
        glue.reset_backend()


def _medium(seed: int, base: int = 0):
    """Experts large enough for every tile shape and K split: 6 local, latent 1024, expert size 512."""
    return R.random_expert_weights(6, 1024, 512, expert_base=base,
                                   generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda")


@pytest.mark.parametrize("tiles", [((32, 256), (32, 256)), ((16, 128), (16, 256)), ((64, 512), (16, 128)),
                                   ((32, 1024), (32, 128))])
@pytest.mark.parametrize("split_down", [1, 2])
def test_gluon_tiles_and_k_splits(tiles, split_down):
    """Other load-time tiles and forced K splits of the down GEMM (partial sums added by the norm-combine),
    EP rank 1 (expert_base 6 of 12 experts), batches across the token tiles 8 / 16 / 32."""
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _medium(20, base=6)
    ex_t = ex.to_tiled_layout(tiles)
    cfg = {"split_down": split_down}
    for tokens in (1, 3, 8, 9, 16, 17, 32):
        res = check_case(ex, ex_t, tokens, "random", 12, 4, 20000 + tokens, "cuda", "gluon", cfg)
        assert_ok(res, f"tiles {tiles} split {split_down} batch {tokens}")
    assert_ok(check_case(ex, ex_t, 32, "one-expert", 12, 4, 20100, "cuda", "gluon", cfg), "one expert")


@pytest.mark.parametrize("split_gate_up", [1, 2, 4])
@pytest.mark.parametrize("silu_launch", [False, True])
def test_gluon_gate_up_k_split(split_gate_up, silu_launch):
    """The gate/up GEMM with a K split: partial sums in w13's row order, added and silu applied by the last
    program of each tile (the fix-up: counters back to 0 after each call, so calls repeat), or by the silu
    kernel (silu_launch)."""
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _medium(24, base=6)
    ex_t = ex.to_tiled_layout(((32, 256), (32, 256)))
    for rep in range(2):
        for tokens in (1, 9, 32):
            res = check_case(ex, ex_t, tokens, "random", 12, 4, 24000 + tokens + 100 * rep, "cuda", "gluon",
                             {"split_gate_up": split_gate_up, "silu_launch": silu_launch})
            assert_ok(res, f"gate/up split {split_gate_up} batch {tokens} call {rep}")


def test_gluon_auto_gate_up_split_for_few_experts():
    """Few experts routed (an EP share of TP slices): the gate/up GEMM is split along K by default, and the
    result is the reference's."""
    from mxfp4_moe.kernel import LAST_LAUNCH
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _medium(26, base=6)
    ex_t = ex.to_tiled_layout()
    assert_ok(check_case(ex, ex_t, 1, "random", 12, 4, 26001, "cuda", "gluon", {"ranked": False}),
              "auto split batch 1")  # the host-sized split (the ranked kernels size theirs on the device)
    assert LAST_LAUNCH["splits"][0] > 1


@pytest.mark.parametrize("compact_m,maxnreg,sub_k", [(0, 96, 0), (8, 96, 0), (16, 96, 0), (8, None, 0),
                                                     (16, None, 128), (16, 96, 128), (0, None, 128)])
def test_gluon_token_compaction(compact_m, maxnreg, sub_k):
    """Token compaction (runs of 8 or 16 of an expert's tokens per program, owned by the slot of the run's
    first token) and without it: batches across the tiles, all tokens to one expert (4 runs of 8), top-1,
    the TP partials mode; with the default register cap and without it; the 16- and 32-token tiles multiplied
    128 of a tile's K at a time (sub_k, eighth round)."""
    from _kernel_cases import assert_ok, check_case, check_tp_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _medium(27, base=6)
    ex_t = ex.to_tiled_layout()
    cfg = {"compact_m": compact_m, "maxnreg": maxnreg, "sub_k": sub_k}
    from mxfp4_moe import kernel as K
    for tokens in (9, 16, 17, 25, 32):
        assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 27000 + tokens, "cuda", "gluon", cfg),
                  f"compact {compact_m} batch {tokens}")
        assert K.LAST_LAUNCH["sub_k"] == (sub_k if compact_m != 8 else 0), K.LAST_LAUNCH
    assert_ok(check_case(ex, ex_t, 32, "one-expert", 12, 4, 27100, "cuda", "gluon", cfg), "one expert")
    assert_ok(check_case(ex, ex_t, 30, "top1-one-expert", 12, 1, 27200, "cuda", "gluon", cfg), "top-1")
    assert_ok(check_tp_case(ex, 32, 12, 4, 4, 27300, "cuda", "gluon", cfg), "tp partials")


@pytest.mark.parametrize("decode", ["gluon", "mma", "asm2"])
def test_tp_split_partials(decode):
    """EP x TP (tp_slice of 4): each slice's pre-norm outputs by the kernel in partials mode (poisoned
    output; zero rows for pairs not on this card), their sum against the unsplit experts, and
    kernel.combine_partials of the sum against the whole block; batches across the token tiles."""
    from _kernel_cases import assert_ok, check_tp_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _medium(25, base=6)  # expert size 512: slices of 128
    for tokens in (1, 4, 9, 17, 32, 40):
        res = check_tp_case(ex, tokens, 12, 4, 4, 25000 + tokens, "cuda", decode)
        assert_ok(res, f"tp 4 {decode} batch {tokens}")
        assert res["combine_rel"] < 1e-2, res


@pytest.mark.parametrize("split_down", [1, 2, 4])
@pytest.mark.parametrize("sum_parts_launch,down_atomic", [(False, False), (True, False), (False, True)])
def test_gluon_partials_in_two_launches(split_down, sum_parts_launch, down_atomic):
    """Partials mode: the down GEMM zeroes the rows of other cards' pairs and the last program of each tile
    adds its K parts into the output (two launches; tile counters back to 0, so the calls repeat), or a third
    launch does both (sum_parts_launch); forced down splits 1 / 2 / 4, TP 2 slices of 1024, batches across
    the token tiles, compaction included; down_atomic: the parts added into out (zeroed by the gate/up
    kernel)."""
    from mxfp4_moe.kernel import LAST_LAUNCH
    from _kernel_cases import assert_ok, check_tp_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(6, 1024, 2048, expert_base=6,
                                 generator=torch.Generator(device="cuda").manual_seed(29), device="cuda")
    cfg = {"split_down": split_down, "sum_parts_launch": sum_parts_launch, "down_atomic": down_atomic}
    for tokens in (1, 5, 9, 32):
        res = check_tp_case(ex, tokens, 12, 4, 2, 29000 + tokens, "cuda", "gluon", cfg)
        assert_ok(res, f"partials split {split_down} batch {tokens}")
        assert res["combine_rel"] < 1e-2, res
        assert LAST_LAUNCH["splits"][1] == split_down
        assert LAST_LAUNCH["launches"] == (3 if sum_parts_launch else 2)


def test_muse_ep2tp4_shapes():
    """The served split at the muse shapes: EP2 x TP4 (128 local experts, each a quarter of 4096), the gluon
    kernels with their default splits, batches 1, 4 and 32."""
    from _kernel_cases import assert_ok, check_tp_case
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    local = v.experts // (v.cards // v.tp_split)
    ex = R.random_expert_weights(local, v.latent_size, v.expert_size, expert_base=local,
                                 generator=torch.Generator(device="cuda").manual_seed(7), device="cuda")
    for tokens in (1, 4, 32):
        res = check_tp_case(ex, tokens, v.experts, v.top_k, v.tp_split, 7000 + tokens, "cuda", "gluon")
        assert_ok(res, f"muse ep2tp4 batch {tokens}")
        assert res["combine_rel"] < 1e-2, res


@pytest.mark.parametrize("persistent", [0, 1, 3, 32])
def test_gluon_persistent_grid(persistent):
    """The GEMMs as persistent grids: at most `persistent` one-warp programs per SM (1 and 3: many items per
    program, taken from the device counter; 32: as many as stay resident) or one program per item (0);
    batches across the token tiles, down and gate/up K splits, partials mode with and without the down
    GEMM's atomics, three calls in a row (the item counters go back to 0)."""
    from mxfp4_moe import gluon_kernel
    from mxfp4_moe.kernel import LAST_LAUNCH
    from _kernel_cases import assert_ok, check_case, check_tp_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _medium(31, base=6)
    ex_t = ex.to_tiled_layout()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for rep in range(3):
        for tokens, cfg in ((1, {}), (9, {"split_down": 2}), (32, {"split_gate_up": 2}), (32, {})):
            cfg = {**cfg, "persistent": persistent}
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 31000 + tokens + 100 * rep, "cuda", "gluon",
                                 cfg), f"persistent {persistent} batch {tokens} {cfg} call {rep}")
            grids = LAST_LAUNCH["grids"]
            if persistent:
                assert all(len(g) == 1 and g[0] <= persistent * sms for g in grids.values()), grids
            else:
                assert all(len(g) == 3 for g in grids.values()), grids
        for tokens, down_atomic in ((1, True), (1, False), (32, True)):
            res = check_tp_case(ex, tokens, 12, 4, 4, 31500 + tokens + 100 * rep, "cuda", "gluon",
                                {"persistent": persistent, "down_atomic": down_atomic})
            assert_ok(res, f"persistent {persistent} partials batch {tokens}")
            assert res["combine_rel"] < 1e-2, res
    torch.cuda.synchronize()
    for bufs in gluon_kernel._COUNTERS.values():
        assert int(bufs[-1].count_nonzero()) == 0  # item and tile counters all back to 0


@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("ids_dtype", [torch.int32, torch.int64])
def test_gluon_launch_options_and_id_types(pdl, ids_dtype):
    """Programmatic dependent launch on and off, int32 and int64 expert ids (read as they are), the same
    result as the fp32 reference; two calls in a row into the same poisoned output buffer."""
    from mxfp4_moe.kernel import mxfp4_moe_experts
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _medium(21)
    ex_t = ex.to_tiled_layout()
    g = torch.Generator().manual_seed(21)
    ids, w = R.route(torch.randn(5, 6, generator=g), 2)
    x = torch.randn(5, 1024, generator=g).to(torch.bfloat16)
    ref = R.moe_experts_reference(x.cuda(), ids.cuda(), w.cuda(), ex)
    out = torch.full((5, 1024), float("nan"), device="cuda")
    for _ in range(2):
        got = mxfp4_moe_experts(x.cuda(), ids.to(ids_dtype).cuda(), w.cuda(), ex_t, config={"pdl": pdl}, out=out)
        assert ((got - ref).norm() / ref.norm()).item() < 1e-2


def test_gluon_rejects_bad_tiles_and_splits():
    from mxfp4_moe.kernel import mxfp4_moe_experts
    ex = _medium(23)
    args = (torch.zeros(1, 1024, dtype=torch.bfloat16, device="cuda"), torch.zeros(1, 2, dtype=torch.int64,
            device="cuda"), torch.ones(1, 2, device="cuda"))
    with pytest.raises(ValueError, match="split_down"):
        mxfp4_moe_experts(*args, ex.to_tiled_layout(((32, 256), (32, 256))), config={"split_down": 4})
    with pytest.raises(ValueError, match="tile"):
        mxfp4_moe_experts(*args, ex.to_tiled_layout(((32, 256), (8, 256))))


def test_gluon_rejects_other_layouts():
    from mxfp4_moe.kernel import mxfp4_moe_experts
    ex = _medium(22)
    with pytest.raises(ValueError, match="layout"):
        mxfp4_moe_experts(torch.zeros(1, 1024, dtype=torch.bfloat16, device="cuda"),
                          torch.zeros(1, 2, dtype=torch.int64, device="cuda"), torch.ones(1, 2, device="cuda"),
                          ex.to_mma_layout(), decode="gluon")


@pytest.mark.parametrize("decode", ["mma", "asm2"])
def test_stream_k_every_batch_size(tiny, decode):
    """The persistent stream-K launch (config stream_k) at every batch 1..32 and a small tile."""
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    cfg = {"gate_up": (32, 64, 4, 3), "down": (64, 32, 4, 3), "stream_k": True, "programs_per_sm": 2}
    for tokens in range(1, 33):
        res = check_case(ex, ex_dev, tokens, "random", v.experts, v.top_k, 11000 + tokens, "cuda", decode, cfg)
        assert_ok(res, f"stream-K batch {tokens}")
    assert_ok(check_case(ex, ex_dev, 32, "one-expert", v.experts, v.top_k, 11100, "cuda", decode, cfg), "one expert")


def test_stream_k_muse_shapes():
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex_dev = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                     generator=torch.Generator(device="cuda").manual_seed(12), device="cuda")
    ex_k = ex_dev.to_mma_layout()
    cfg = {"gate_up": (64, 256, 4, 3), "down": (64, 256, 4, 3), "stream_k": True, "programs_per_sm": 4}
    for tokens, kind in [(1, "random"), (4, "random"), (32, "random")]:
        res = check_case(ex_dev, ex_k, tokens, kind, v.experts, v.top_k, 12000 + tokens, "cuda", "mma", cfg)
        assert_ok(res, f"muse stream-K batch {tokens}")


@pytest.mark.parametrize("cfg", [{}, {"split_down": 2}, {"split_gate_up": 2}, {"compact_m": 16},
                                 {"maxnreg": None}, {"pdl": False}, {"plan_split_per_sm": 20},
                                 {"plan_split_per_sm": 64, "maxnreg_down": 0}, {"plan_split_per_sm": 1},
                                 {"plan_lanes": False}, {"plan_lanes": True, "pdl": False},
                                 {"plan_lanes": True, "split_down": 2}, {"plan_lanes": True, "split_gate_up": 2},
                                 {"plan_lanes": True, "compact_m": 16}, {"plan_lanes": True, "plan_split_per_sm": 20},
                                 {"plan_items": 2}, {"compact_m": 16, "sub_k": 128, "maxnreg": None},
                                 {"compact_m": 16, "sub_k": 128, "plan_split_per_sm": 20, "maxnreg": None}])
def test_gluon_run_list(cfg):
    """The run list (config ``plan_runs``, seventh round; batches 9-32 with token compaction): a first launch
    ranks the owning runs, the GEMMs take them in order over kernel.plan_bound runs. Batches 9..32 with some
    pairs on other cards, all tokens to the same experts (4 runs of 8 each), top-1, three calls in a row (the
    counters go back to 0), the gate/up and down K splits (fix-up, atomics), runs of 16 (no list at 16 tokens
    or fewer: no compaction), no cap, PDL off, the down split sized on the device (``plan_split_per_sm``: 1 no
    split, 20 and 64 splits of 2 for these few runs, the parts added into zeroed rows); the TP partials
    (every row of other cards' pairs zero: the gate/up kernel zeroes out), with and without the down atomics;
    the list itself against the routing, and the grids."""
    from mxfp4_moe import kernel as K
    from mxfp4_moe import ranked_kernel as RK
    from _kernel_cases import assert_ok, assert_partials_both_ways, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(6, 1024, 1024, expert_base=6,
                                 generator=torch.Generator(device="cuda").manual_seed(33), device="cuda")
    ex_t = ex.to_tiled_layout()
    (bn1, bk1), (bn2, bk2) = ex_t.tiles
    cfg = {"maxnreg": 96, "plan_runs": True, **cfg}
    chunk = cfg.get("compact_m", 8)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for rep in range(3):
        for tokens in (9, 16, 17, 25, 32):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 33000 + tokens + 100 * rep, "cuda", "gluon",
                                 cfg), f"run list {cfg} batch {tokens} call {rep}")
            if tokens <= chunk:
                assert not K.LAST_LAUNCH["plan"]
                continue
            assert K.LAST_LAUNCH["plan"] and K.LAST_LAUNCH["launches"] == 4
            runs = K.plan_bound(tokens * 4, 6, tokens, chunk)
            gu, dn = K.LAST_LAUNCH["grids"]["gate_up"], K.LAST_LAUNCH["grids"]["down"]
            assert gu == (runs * (2 * 1024 // bn1) * K.LAST_LAUNCH["splits"][0],), gu
            if cfg.get("plan_split_per_sm") and "split_down" not in cfg:
                mx = RK.max_split(1024 // bk2, 2)
                want = RK.grid_size(runs, 1024 // bn2, mx, cfg["plan_split_per_sm"] * sms)
                assert dn == (want,) and K.LAST_LAUNCH["down_split"] == f"device, up to {mx}", (dn, want)
            else:
                assert dn == (runs * (1024 // bn2) * K.LAST_LAUNCH["splits"][1],), dn
    assert_ok(check_case(ex, ex_t, 32, "one-expert", 12, 4, 33500, "cuda", "gluon", cfg), "one expert")
    torch.cuda.synchronize()  # four experts of 32 tokens each (one-expert: every token on the same top-k)
    assert int(K._PLANS[K.stream_key(torch.device("cuda", torch.cuda.current_device()))][0]) == 4 * (32 // chunk)
    assert_ok(check_case(ex, ex_t, 30, "top1-one-expert", 12, 1, 33600, "cuda", "gluon", cfg), "top-1")
    assert_partials_both_ways(ex, cfg, 33700, "run list")
    # the list of a routing, against the routing
    g = torch.Generator().manual_seed(33800)
    ids = torch.stack([torch.randperm(12, generator=g)[:4] for _ in range(32)]).to("cuda")
    plan = K.plan_runs(ids, ex_t, chunk, lanes=cfg.get("plan_lanes", False))
    flat = ids.reshape(-1).tolist()
    want = [K.plan_word(p, flat[:p].count(e) // chunk, e) for p, e in enumerate(flat)
            if 6 <= e < 12 and flat[:p].count(e) % chunk == 0]
    torch.cuda.synchronize()
    assert int(plan[0]) == len(want) and plan[1:1 + len(want)].tolist() == want


@pytest.mark.parametrize("cfg", [{}, {"maxnreg": 112}, {"narrow_sub_k": 0, "maxnreg": None}, {"pdl": False},
                                 {"split_down": 2}, {"split_gate_up": 2}, {"plan_lanes": False}])
def test_gluon_narrow_runs(cfg):
    """narrow_runs (ninth round; True here: from any batch of the run list on, 9 tokens): runs of 16 tokens, a
    run of at most 8 tokens computed with 8-token tiles, the others with 16-token tiles 128 of K at a time. Batches 9..32 whose experts hold from 1 to 16 tokens (both kinds of run in one call),
    all tokens to the same experts (runs of 16 only), top-1 (runs of one token), three calls in a row, the K
    splits, the register cap raised to 112 (no spills) and none with no sub_k, PDL off; the TP partials; the grids (kernel.plan_bound runs
    of 16), and the list: one run per 16 of an expert's tokens."""
    from mxfp4_moe import kernel as K
    from _kernel_cases import assert_ok, assert_partials_both_ways, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(6, 1024, 1024, expert_base=6,
                                 generator=torch.Generator(device="cuda").manual_seed(34), device="cuda")
    ex_t = ex.to_tiled_layout()
    (bn1, _), (bn2, _) = ex_t.tiles
    cfg = {"maxnreg": 96, "plan_runs": True, "narrow_runs": True, **cfg}
    for rep in range(3):
        for tokens in (9, 12, 16, 17, 25, 32):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 34000 + tokens + 100 * rep, "cuda", "gluon",
                                 cfg), f"narrow runs {cfg} batch {tokens} call {rep}")
            assert K.LAST_LAUNCH["plan"] and K.LAST_LAUNCH["narrow"], K.LAST_LAUNCH
            runs = K.plan_bound(tokens * 4, 6, tokens, 16)
            assert K.LAST_LAUNCH["grids"]["gate_up"] == (runs * (2 * 1024 // bn1) * K.LAST_LAUNCH["splits"][0],)
            assert K.LAST_LAUNCH["grids"]["down"] == (runs * (1024 // bn2) * K.LAST_LAUNCH["splits"][1],)
    assert_ok(check_case(ex, ex_t, 32, "one-expert", 12, 4, 34500, "cuda", "gluon", cfg), "one expert")
    torch.cuda.synchronize()  # four experts of 32 tokens each: two runs of 16 each
    assert int(K._PLANS[K.stream_key(torch.device("cuda", torch.cuda.current_device()))][0]) == 8
    assert_ok(check_case(ex, ex_t, 30, "top1-one-expert", 12, 1, 34600, "cuda", "gluon", cfg), "top-1")
    assert_partials_both_ways(ex, cfg, 34700, "narrow runs")
    # below narrow_runs tokens: runs of 8 as before
    assert_ok(check_case(ex, ex_t, 32, "random", 12, 4, 34800, "cuda", "gluon", {**cfg, "narrow_runs": 33}), "off")
    assert not K.LAST_LAUNCH["narrow"]
    assert K.LAST_LAUNCH["grids"]["gate_up"] == (K.plan_bound(128, 6, 32, 8) * (2 * 1024 // bn1) * K.LAST_LAUNCH["splits"][0],)


@pytest.mark.parametrize("cfg", [{}, {"narrow_runs": False}, {"pdl": False}, {"split_down": 2}, {"split_gate_up": 2},
                                 {"split_gate_up": 2, "silu_launch": True}, {"maxnreg": 128}, {"plan_items": 2},
                                 {"run_table": True}, {"run_table": True, "gluon_rows": 1},
                                 {"run_table": True, "gluon_rows": 1, "narrow_runs": False},
                                 {"run_table": True, "gluon_rows": 1, "plan_lanes": False},
                                 {"run_table": True, "gluon_rows": 1, "plan_items": 2},
                                 {"run_table": True, "gluon_rows": 1, "split_down": 2, "pdl": False}])
def test_gluon_rows(cfg):
    """gluon_rows 2 (twelfth round): on the run list, two row blocks of a run a program in one K loop (the 8-token
    tiles of narrow runs 128 of K at a time), except a GEMM whose K parts meet in a fix-up (the gate/up split
    without silu_launch). Batches 9..32 (runs of 8 and 16 tokens, both kinds in one call), all tokens on the
    same experts, top-1, three calls in a row, the weights' loads through L2 only, the K splits, PDL off, a cap
    of 128, two runs a program; the TP partials with and without the down atomics; the grids checked. With
    run_table (twelfth round) on, with one and two row blocks a program: the tokens from the plan's run table."""
    from mxfp4_moe import kernel as K
    from _kernel_cases import assert_ok, assert_partials_both_ways, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(6, 1024, 1024, expert_base=6,
                                 generator=torch.Generator(device="cuda").manual_seed(35), device="cuda")
    ex_t = ex.to_tiled_layout()
    (bn1, _), (bn2, _) = ex_t.tiles
    cfg = {"maxnreg": 96, "plan_runs": True, "narrow_runs": True, "narrow_sub_k": 128, "gluon_rows": 2, **cfg}
    for rep in range(3):
        for tokens in (9, 12, 16, 17, 25, 32):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 35000 + tokens + 100 * rep, "cuda", "gluon",
                                 cfg), f"rows {cfg} batch {tokens} call {rep}")
            launch = K.LAST_LAUNCH
            r1 = 1 if launch["splits"][0] > 1 and not cfg.get("silu_launch") else cfg["gluon_rows"]
            assert launch["plan"] and launch["rows"] == (r1, cfg["gluon_rows"]), launch
            assert launch["run_table"] == bool(cfg.get("run_table")), launch
            gu, dn = launch["grids"]["gate_up"][0], launch["grids"]["down"][0]
            assert gu % (2 * 1024 // bn1 // r1 * launch["splits"][0]) == 0, launch
            assert dn % (1024 // bn2 // cfg["gluon_rows"] * launch["splits"][1]) == 0, launch
    assert_ok(check_case(ex, ex_t, 32, "one-expert", 12, 4, 35500, "cuda", "gluon", cfg), "one expert")
    assert_ok(check_case(ex, ex_t, 30, "top1-one-expert", 12, 1, 35600, "cuda", "gluon", cfg), "top-1")
    assert_partials_both_ways(ex, cfg, 35700, "rows")


def _tail_split(items: int, slots: int, ks: int, grid: int, gate_up: bool) -> tuple[int, int]:
    """The tail items a run-list GEMM splits along K and into how many parts (gluon_kernel._gemm_kernel's TAIL_KS
    rule, as gluon_kernel.tail_split gives it on the host): those past the last full wave of ``slots``, where there
    are more items than slots, in ks parts where they fit one wave as parts and the grid holds the extra programs,
    else (the gate/up GEMM) in 2 where they are at most 2/5 of the slots; (0, 0) where every item is taken whole."""
    from mxfp4_moe.gluon_kernel import tail_split

    t, parts = tail_split(items, slots, ks, gate_up, grid)
    return (t, parts) if parts else (0, 0)


@pytest.mark.parametrize("ks", [2, 4])
@pytest.mark.parametrize("cfg", [{}, {"narrow_runs": False}, {"pdl": False}, {"run_table": False}])
def test_tail_split(cfg, ks):
    """tail_ks (twenty-sixth round): the run list's last wave of items split along K on the device. ``tail_slots``
    is set so that a GEMM's items pass a multiple of it by 3 items, or by a run's row blocks and 3 more (a tail of
    two runs or more: 8- and 16-token items in one tail where the plan's last runs differ), or by a quarter of them
    (twenty-seventh round: too many for 4 parts a tail item in one wave, so 2 in the gate/up GEMM, none in the
    down GEMM), first for the gate/up GEMM, then for
    the down GEMM. The split the kernel takes cannot be seen from here: the test works out by the
    kernel's rule (_tail_split) that its numbers reach it, and asserts that, so that numbers which would not reach
    the split fail rather than test the whole items again; what the kernel computes is checked against the
    reference. Batches 17..32 (runs of 8 and 16 tokens;
    runs of 8 with narrow runs off), three calls in a row (the counters back to 0), PDL off, the run table off; a
    count under one wave takes every item whole; the TP partials with both GEMMs split (tail_slots 187 at seed
    37700: 192 items each), where 4 parts do not divide the TP slice's 2 down K tiles and the host gives that GEMM
    2 parts at most; the grids and the host's choice per GEMM checked."""
    from mxfp4_moe import kernel as K
    from _kernel_cases import assert_ok, assert_partials_both_ways, check_case, make_routing
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(6, 1024, 1024, expert_base=6,
                                 generator=torch.Generator(device="cuda").manual_seed(37), device="cuda")
    ex_t = ex.to_tiled_layout()
    (bn1, bk1), (bn2, bk2) = ex_t.tiles
    assert (1024 // bk1) % ks == 0 and (1024 // bk2) % ks == 0  # (both GEMMs' K tiles: the host takes the tail)
    base = {"maxnreg": 96, "plan_runs": True, "narrow_runs": True, "narrow_sub_k": 128, "run_table": True, **cfg,
            "tail_ks": ks, "split_gate_up": 1, "split_down": 1}  # (items split along K already take no tail split)
    chunk = 16 if base["narrow_runs"] else 8
    grid_n = (2 * 1024 // bn1, 1024 // bn2)
    taken, halved = 0, 0
    for rep in range(3):
        for tokens in (17, 25, 32):
            seed = 37000 + tokens + 100 * rep
            ids, _ = make_routing("random", tokens, 12, 4, torch.Generator().manual_seed(seed), range(6, 12))
            counts = torch.bincount(ids.flatten(), minlength=12)[6:]
            runs = int(sum(-(-int(c) // chunk) for c in counts))
            items = (runs * grid_n[0], runs * grid_n[1])
            cases = [(0, 3), (0, grid_n[0] + 3), (1, 3), (1, grid_n[1] + 3), (0, None)]
            cases += [(g, items[g] // 4) for g in (0, 1)]  # (t x 4 > slots >= t x 5 / 2: two parts)
            for g, t in cases:
                slots = items[g] - t if t is not None else items[0] + 7  # (None: fewer items than a wave)
                if slots < 1 or t == 0:
                    continue
                res = check_case(ex, ex_t, tokens, "random", 12, 4, seed, "cuda", "gluon",
                                 {**base, "tail_slots": slots})
                assert_ok(res, f"tail {cfg} ks {ks} batch {tokens} call {rep} slots {slots}")
                launch = K.LAST_LAUNCH
                assert launch["tail_ks"] == (ks, ks), launch
                grids = (launch["grids"]["gate_up"][0], launch["grids"]["down"][0])
                split = [_tail_split(items[i], slots, ks, grids[i], i == 0) for i in (0, 1)]
                if t is None:
                    assert split == [(0, 0), (0, 0)], (split, items, slots)
                elif ks == 4 and t * 4 > slots:  # (the quarter cases: 2 parts in the gate/up GEMM, none in the down)
                    want = (t, 2) if g == 0 and grids[g] >= items[g] + t else (0, 0)
                    assert split[g] == want, (split, items, slots, grids)
                elif grids[g] >= items[g] + (ks - 1) * t:
                    assert split[g] == (t, ks), (split, items, slots, grids)
                taken += sum(1 for x in split if x[0])
                halved += sum(1 for x in split if x[1] == 2 and ks == 4)
    assert halved >= 3 or ks == 2, halved  # (tails of two parts where four would not fit were run)
    assert taken >= 20, taken  # (the tails this test means to run were run)
    assert_partials_both_ways(ex, {**base, "tail_slots": 187}, 37700, "tail")
    assert K.LAST_LAUNCH["tail_ks"] == (ks, 2), K.LAST_LAUNCH  # (the TP slice's 2 down K tiles: 2 parts at most)
    with pytest.raises(ValueError, match="tail_ks must be 0"):
        check_case(ex, ex_t, 32, "random", 12, 4, 37800, "cuda", "gluon", {**base, "tail_ks": 3})
    with pytest.raises(ValueError, match="tail_slots must be a non-negative int"):
        check_case(ex, ex_t, 32, "random", 12, 4, 37800, "cuda", "gluon", {**base, "tail_slots": -1})


@pytest.mark.parametrize("warps", [2, 4, 8])
@pytest.mark.parametrize("cfg", [{}, {"narrow_runs": False}, {"pdl": False}, {"split_down": 2}, {"split_gate_up": 2},
                                 {"split_gate_up": 2, "silu_launch": True}, {"maxnreg": 128}, {"plan_items": 2},
                                 {"plan_lanes": False}, {"run_table": False}, {"gluon_rows": 2},
                                 {"plan_split_per_sm": 8}])
def test_gluon_warps(cfg, warps):
    """gluon_warps (twenty-first round): on the run list with its table, programs of 2, 4 or 8 warps, a row block a
    warp against one token tile, except a GEMM whose K parts meet in a fix-up (the gate/up split without
    silu_launch; the TP partials' down split without the atomics) and where the table, two row blocks a program or the
    device-sized down split are on: one warp there. Batches 9..32 (runs of 8 and 16 tokens, both kinds in one call),
    all tokens on the same experts, top-1, three calls in a row, the K splits, PDL off, a cap of 128, two runs a
    program, the TP partials with and without the down atomics; the warps and grids checked."""
    from mxfp4_moe import kernel as K
    from _kernel_cases import assert_ok, assert_partials_both_ways, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(6, 1024, 1024, expert_base=6,
                                 generator=torch.Generator(device="cuda").manual_seed(36), device="cuda")
    ex_t = ex.to_tiled_layout()
    (bn1, _), (bn2, _) = ex_t.tiles
    cfg = {"maxnreg": 96, "plan_runs": True, "narrow_runs": True, "narrow_sub_k": 128, "run_table": True,
           **cfg, "gluon_warps": warps}
    off = not cfg["run_table"] or cfg.get("gluon_rows") == 2 or cfg.get("plan_split_per_sm")
    for rep in range(3):
        for tokens in (9, 12, 16, 17, 25, 32):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 36000 + tokens + 100 * rep, "cuda", "gluon",
                                 cfg), f"warps {cfg} batch {tokens} call {rep}")
            launch = K.LAST_LAUNCH
            w1 = 1 if off or (launch["splits"][0] > 1 and not cfg.get("silu_launch")) else warps
            w2 = 1 if off else warps
            assert launch["plan"] and launch["warps"] == (w1, w2), launch
            gu, dn = launch["grids"]["gate_up"][0], launch["grids"]["down"][0]
            if not cfg.get("plan_split_per_sm"):
                r1, r2 = launch["rows"]
                assert gu % (2 * 1024 // bn1 // w1 // r1 * launch["splits"][0]) == 0, launch
                assert dn % (1024 // bn2 // w2 // r2 * launch["splits"][1]) == 0, launch
                assert launch["gate_up"].metadata.num_warps == w1 and launch["down"].metadata.num_warps == w2
    assert_ok(check_case(ex, ex_t, 32, "one-expert", 12, 4, 36500, "cuda", "gluon", cfg), "one expert")
    assert_ok(check_case(ex, ex_t, 30, "top1-one-expert", 12, 1, 36600, "cuda", "gluon", cfg), "top-1")
    assert_partials_both_ways(ex, cfg, 36700, "warps")


@pytest.mark.parametrize("cfg", [{}, {"pdl": False}, {"split_down": 2}, {"split_gate_up": 2}, {"plan_lanes": False},
                                 {"down_atomic": False}, {"items_3": True}])
def test_gluon_run_list_items(cfg):
    """plan_items (eighth round): where kernel.plan_bound is the slot count (40 local experts of 64: batch 9 of
    top-4, 16 of top-2, 32 of top-1), each GEMM's grid holds ceil(bound / N) runs and a program takes up to N
    runs of the list. Random routings (about half the runs: most programs take one), every pair local (36 runs of
    a grid of 18: every program takes two), all tokens on the same experts, three calls in a row, PDL off, the
    K splits, TP partials with and without the down atomics; the grids and the items checked."""
    from mxfp4_moe import kernel as K
    from _kernel_cases import assert_ok, check_case, check_tp_case
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(40, 1024, 1024, generator=torch.Generator(device="cuda").manual_seed(34),
                                 device="cuda")
    ex_t = ex.to_tiled_layout()
    (bn1, _), (bn2, _) = ex_t.tiles
    n = 3 if cfg.pop("items_3", False) else 2
    cfg = {"maxnreg": 96, "plan_runs": True, "plan_lanes": True, "plan_items": n, **cfg}
    for rep in range(3):
        for tokens, topk, experts, kind in ((9, 4, 64, "random"), (16, 2, 64, "random"), (32, 1, 64, "random"),
                                            (9, 4, 40, "random"), (12, 3, 40, "one-expert"),
                                            (30, 1, 40, "top1-one-expert")):
            assert_ok(check_case(ex, ex_t, tokens, kind, experts, topk, 34000 + tokens + 100 * rep, "cuda", "gluon",
                                 cfg), f"items {cfg} batch {tokens} top-{topk} of {experts} {kind} call {rep}")
            P = tokens * topk
            assert K.plan_bound(P, 40, tokens, 8) == P
            assert K.LAST_LAUNCH["plan"] and K.LAST_LAUNCH["plan_items"] == n
            runs = -(-P // n)
            gu, dn = K.LAST_LAUNCH["grids"]["gate_up"], K.LAST_LAUNCH["grids"]["down"]
            assert gu == (runs * (2 * 1024 // bn1) * K.LAST_LAUNCH["splits"][0],), gu
            assert dn == (runs * (1024 // bn2) * K.LAST_LAUNCH["splits"][1],), dn
    for down_atomic in (True, False):
        res = check_tp_case(ex, 16, 64, 2, 2, 34700, "cuda", "gluon", {**cfg, "down_atomic": down_atomic})
        assert_ok(res, f"items partials down_atomic {down_atomic}")
        assert res["combine_rel"] < 1e-2, res
    # where the bound is below the slots (6 local experts), no items
    assert_ok(check_case(ex, ex_t, 9, "random", 64, 8, 34800, "cuda", "gluon", cfg), "items, bound below")
    assert K.LAST_LAUNCH["plan"] and K.LAST_LAUNCH["plan_items"] == 1


@pytest.mark.parametrize("lanes", [False, True])
def test_plan_runs_lists(lanes):
    """Both planning kernels (kernel._plan_runs_kernel, and _plan_lanes_kernel: one slot a thread, eighth round)
    against the list in Python: batches 9..32, top-1/2/4/8, int32 and int64 ids, EP shares (the card's experts
    at the start, middle and end of 256), all experts local, runs of 8 and 16, every token on the same experts,
    PDL on and off, a poisoned buffer (every word rewritten up to the count)."""
    from mxfp4_moe import kernel as K
    g = torch.Generator().manual_seed(33900)
    cases = []
    for tokens in (9, 12, 16, 17, 24, 31, 32):
        for topk, experts, base, n_local in ((8, 256, 0, 32), (8, 256, 128, 128), (8, 256, 224, 32), (4, 12, 6, 6),
                                             (1, 12, 6, 6), (2, 8, 0, 8), (8, 8, 0, 8)):
            cases.append((tokens, topk, experts, base, n_local))
    for i, (tokens, topk, experts, base, n_local) in enumerate(cases):
        ids = torch.stack([torch.randperm(experts, generator=g)[:topk] for _ in range(tokens)])
        ids = ids.to(torch.int32 if i % 2 else torch.int64).to("cuda")

        class Ex:
            expert_base, num_local = base, n_local
        for chunk in (8, 16):
            if tokens > 8 * chunk:
                continue
            flat = ids.reshape(-1).tolist()
            want = [K.plan_word(p, flat[:p].count(e) // chunk, e) for p, e in enumerate(flat)
                    if base <= e < base + n_local and flat[:p].count(e) % chunk == 0]
            key = K.stream_key(torch.device("cuda", torch.cuda.current_device()))
            if key in K._PLANS:
                K._PLANS[key].fill_(-7)
            plan = K.plan_runs(ids, Ex, chunk, gdc=True, pdl=bool(i % 3), lanes=lanes)
            torch.cuda.synchronize()
            got = plan[1:1 + len(want)].tolist()
            assert int(plan[0]) == len(want) and got == want, (tokens, topk, base, n_local, chunk)
