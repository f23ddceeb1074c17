"""The slice kernel (issue #18, twenty-third round): its load-time layout on the CPU; on the GPU, the kernel against
PyTorch (act and output, the norm, the counters and rows back to zero, runs of one and two tokens, a missing token,
PDL on and off, three calls in a row). The GPU tests are skipped without a GPU and Triton (CPU CI)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import has_module  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from mxfp4_moe import format as F  # noqa: E402

needs_gpu = pytest.mark.skipif(not (torch.cuda.is_available() and has_module("triton")),
                               reason="needs an NVIDIA GPU and Triton")


def _experts(e: int, i: int, k: int, l: int, seed: int, device: str = "cpu"):
    g = torch.Generator().manual_seed(seed)

    def q(*shape):
        return torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).to(device)

    def sc(*shape):
        return torch.randint(118, 128, shape, dtype=torch.uint8, generator=g).to(device)
    return q(e, 2 * i, k // 2), sc(e, 2 * i, k // 32), q(e, l, i // 2), sc(e, l, i // 32)


def _sk():
    pytest.importorskip("triton")
    from mxfp4_moe import slice_kernel
    return slice_kernel


@pytest.mark.parametrize("s,bk", [(32, 128), (64, 256), (128, 128)])
def test_slice_layout_holds_each_slice_in_its_block(s, bk):
    sk = _sk()
    e, i, k, l = 2, 256, 512, 256
    w13, s13, w2, s2 = _experts(e, i, k, l, seed=s)
    buf = sk.to_slice_layout(w13, s13, w2, s2, s, bk)
    n = i // s
    assert buf.shape == (e, n, sk.block_bytes(s, k, l)) and buf.dtype == torch.uint8
    gu, gus, dw = 2 * s * (k // 2), 2 * s * (k // 32), l * (s // 2)
    # gate/up: the slices' sections, one after the other, are format's tiled w13 with tiles [2S, BK]
    gq = buf[:, :, :gu].reshape(e, 2 * i, k // 2)
    gs = buf[:, :, gu:gu + gus].reshape(e, 2 * i, k // 32)
    back_q, back_s = F.from_tiled_layout(gq, gs, 2 * s, bk, gate_up=True)
    assert torch.equal(back_q, w13) and torch.equal(back_s, s13)
    # down: slice j's columns as A' [L S / 128, 128] in tiles [32, 128]
    dq = buf[:, :, gu + gus:gu + gus + dw].reshape(e * n, l * s // 128, 64)
    ds = buf[:, :, gu + gus + dw:].reshape(e * n, l * s // 128, 4)
    dq, ds = F.from_tiled_layout(dq, ds, sk.DOWN_TILE, 128)
    assert torch.equal(dq.reshape(e, n, l, s // 2).permute(0, 2, 1, 3).reshape(e, l, i // 2), w2)
    assert torch.equal(ds.reshape(e, n, l, s // 32).permute(0, 2, 1, 3).reshape(e, l, i // 32), s2)
    # slice j's gate rows are w13's rows j S .., its up rows I + j S ..
    j = n - 1
    blk_q, _ = F.from_tiled_layout(buf[0, j, :gu].reshape(2 * s, k // 2), buf[0, j, gu:gu + gus].reshape(2 * s, -1),
                                   2 * s, bk, gate_up=True)
    assert torch.equal(blk_q[:s], w13[0, j * s:(j + 1) * s]) and torch.equal(blk_q[s:], w13[0, i + j * s:i + (j + 1) * s])


@pytest.mark.parametrize("s,i,bk,why", [(16, 256, 128, "slice width"), (32, 48, 128, "slice width"),
                                         (32, 256, 96, "BK"), (128, 256, 1024, "BK")])
def test_slice_layout_refuses_shapes_that_do_not_split(s, i, bk, why):
    sk = _sk()
    w = _experts(1, 256, 512, 256, seed=1)
    with pytest.raises(ValueError, match=why):
        sk.check_shape(s, 512, 256, i, bk) if i != 256 else sk.to_slice_layout(*w, s, bk)


def test_kernel_layouts_refuse_warps_and_steps_that_do_not_split():
    """The one check of a launch's shape (the bench's launch, experts_forward, --compile-only): the slice_* key named."""
    sk = _sk()
    lay = sk.kernel_layouts(32, 1024, 1024, 512, 256, 4, 2)
    assert sorted(lay) == ["DS3", "DW5", "DX4", "GS3", "GW5", "GX4"]
    for args, says in (((32, 1024, 1024, 512, 256, 8, 1), "slice_warps 8 must split latent 1024"),
                       ((32, 1024, 1024, 512, 256, 4, 4), "slice_dr 4: the down block's 256 rows"),
                       ((48, 1024, 1024, 512, 256, 4, 1), "slice width 48")):
        with pytest.raises(ValueError, match=says):
            sk.kernel_layouts(*args)
    # the K parts split the warps' tiles; early wants two tiles a warp; stream one K part and its shared memory
    for kw, says in ((dict(ks=4), "slice_warps 4 x slice_ksplit 4 must split latent 1024"),
                     (dict(early=True), "slice_down_early needs one K part"),
                     (dict(stream=True, ks=2, bk=128), "slice_stream needs one K part"),
                     (dict(stream=True, early=True), "slice_down_early|slice_stream")):
        with pytest.raises(ValueError, match=says):
            sk.kernel_layouts(32, 1024, 1024, 512, kw.pop("bk", 256), 4, 2, **kw)
    assert sk.stream_bytes(32, 4096, 4096) == 196608 and sk.kernel_layouts(32, 4096, 4096, 4096, 256, 8, 4, stream=True)
    with pytest.raises(ValueError, match="393216 bytes of shared memory within 204800"):
        sk.kernel_layouts(64, 4096, 4096, 4096, 256, 8, 2, stream=True)


def test_careless_inputs_get_clear_errors():
    """Found by a fresh user: a zero BK divided by zero, non-positive sizes passed, swapped weight and scale tensors
    blamed BK, 2-D weights failed to unpack, a string "false" switched the path on and a null cap compared None,
    and the reference took token -1 (the kernel's 'none') as the last token."""
    sk = _sk()
    from mxfp4_moe import kernel as K
    for args, says in (((32, 512, 256, 256, 0), "BK must be a positive"), ((32, 0, 256, 256, 128), "K must be"),
                       ((32, 512, 256, -32, 128), "intermediate size must"), ((True, 512, 256, 256, 128), "slice width")):
        with pytest.raises(ValueError, match=says):
            sk.check_shape(*args)
    w13, s13, w2, s2 = _experts(1, 256, 512, 256, seed=2)
    with pytest.raises(ValueError, match="shapes do not match"):
        sk.to_slice_layout(s13, w13, w2, s2, 32, 128)
    with pytest.raises(TypeError, match="w13 must be a uint8 tensor"):
        sk.to_slice_layout(w13[0], s13, w2, s2, 32, 128)
    with pytest.raises(TypeError, match="s2 must be a uint8 tensor"):
        sk.to_slice_layout(w13, s13, w2, s2.float(), 32, 128)
    for bad, says in (({"slice_few": "false"}, "slice_few must be true or false"),
                      ({"slice_max_pairs": None}, "slice_max_pairs must be 1 to 64"),
                      ({"slice_max_pairs": 65}, "slice_max_pairs must be 1 to 64"),
                      ({"slice_width": 16}, "slice_width must be"), ({"slice_bk": 0}, "slice_bk must be"),
                      ({"slice_warps": 3}, "slice_warps must be"), ({"slice_dr": 0}, "slice_dr must be"),
                      ({"slice_maxnreg": "128"}, "slice_maxnreg must be"), ({"slice_per_sm": 0}, "slice_per_sm"),
                      ({"slice_down_early": 1}, "slice_down_early must be true or false"),
                      ({"slice_ksplit": 3}, "slice_ksplit must be 1, 2 or 4"),
                      ({"slice_prefetch": "yes"}, "slice_prefetch must be true or false"),
                      ({"slice_stream": None}, "slice_stream must be true or false")):
        with pytest.raises(ValueError, match=says):
            sk.slice_taken(bad, 8)
    assert not sk.slice_taken({}, 8) and sk.slice_taken({"slice_few": True}, 32)
    assert not sk.slice_taken({"slice_few": True}, 33) and sk.slice_taken({"slice_few": True, "slice_maxnreg": None}, 1)
    assert K.unknown_config_keys({"slice_few": True, "slice_widht": 32})[0].startswith("'slice_widht' (did you mean")
    x = torch.randn(2, 512).to(torch.bfloat16)
    for runs in ([], [(0, [0, -1])], [(-1, [0])], [(0, [])]):
        with pytest.raises(ValueError, match="runs must be"):
            sk.reference(w13, s13, w2, s2, x, runs)


def test_reference_matches_a_plain_dequantized_expert():
    sk = _sk()
    w13, s13, w2, s2 = _experts(1, 64, 256, 128, seed=3)
    x = torch.randn(3, 256).to(torch.bfloat16)
    out, act = sk.reference(w13, s13, w2, s2, x, [(0, [2, 0])])
    a = F.dequantize_mxfp4_mma(w13[0], s13[0]).double() @ x[[2, 0]].double().T
    want_act = (torch.nn.functional.silu(a[:64]) * a[64:]).to(torch.bfloat16).double()
    want = F.dequantize_mxfp4_mma(w2[0], s2[0]).double() @ want_act
    assert torch.allclose(act[0], want_act.T.float()) and torch.allclose(out[0], want.T.float(), rtol=1e-5)


def _run(sk, runs_l, mt, ne, i, k, l, s, bk, warps, norm, pdl, calls, seed, early=False, ks=1, stream=False):
    w = _experts(ne, i, k, l, seed, "cuda")
    buf = sk.to_slice_layout(*w, s, bk)
    t = 1 + max(tok for _, toks in runs_l for tok in toks)
    x = torch.randn(t, k, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16).cuda()
    rows = [toks + [-1] * (mt - len(toks)) for _, toks in runs_l]  # -1: no token there
    outs = [[r * mt + m if tok >= 0 else -1 for m, tok in enumerate(row)] for r, row in enumerate(rows)]
    runs = torch.tensor([[e] + row + o for (e, _), row, o in zip(runs_l, rows, outs)], dtype=torch.int32,
                        device="cuda")
    n_rows = len(runs_l) * mt
    y = torch.zeros(n_rows, l, dtype=torch.float32, device="cuda")
    cnt = torch.zeros(len(runs_l), dtype=torch.int32, device="cuda")
    out = torch.zeros(n_rows, l, dtype=torch.bfloat16, device="cuda")
    norm_w = (1 + 0.1 * torch.randn(l, generator=torch.Generator().manual_seed(seed + 1))).cuda()
    grid = len(runs_l) * (i // s) * ks
    gacc = torch.zeros(len(runs_l) * 2 * i * mt, dtype=torch.float32, device="cuda")
    gcnt = torch.zeros(len(runs_l) * (i // s), dtype=torch.int32, device="cuda")
    scr = torch.empty(grid, warps * 2 * s * mt, dtype=torch.float32, device="cuda")
    act = torch.empty(grid, mt * s, dtype=torch.bfloat16, device="cuda")
    want, want_act = sk.reference(*w, x, [(e, [tok for tok in toks if tok >= 0]) for e, toks in runs_l])
    for _ in range(calls):
        if not norm:
            y.zero_()
        sk.launch(x, buf, runs, y, cnt, out, norm_w, scr, act, s=s, i_size=i, bk=bk, warps=warps, mt=mt, norm=norm,
                  pdl=pdl, early=early, ks=ks, gacc=gacc, gcnt=gcnt, stream=stream)
        assert int(gcnt.abs().sum()) == 0 and float(gacc.abs().sum()) == 0.0, "K parts' rows back to zero"
        torch.cuda.synchronize()
        for r, (_, toks) in enumerate(runs_l):
            live = [m for m, tok in enumerate(rows[r]) if tok >= 0]
            ref = want[r, :len(live)]
            if ks > 1:  # act is in the scratch of the program of each slice's last part: the output checks it
                got_act = want_act[r, :len(live)]
            else:
                got_act = act.view(len(runs_l), i // s, mt, s)[r].permute(1, 0, 2).reshape(mt, i)[live].float()
            assert torch.allclose(got_act, want_act[r, :len(live)], rtol=2e-2, atol=2e-2 * want_act[r].abs().max())
            if norm:
                ref = ref / torch.sqrt((ref * ref).mean(-1, keepdim=True) + 1e-6) * norm_w
                got = out[[outs[r][m] for m in live]].float()
            else:
                got = y[[outs[r][m] for m in live]]
            assert ((got - ref).abs().max() / ref.abs().max()).item() < 1e-2, (r, live)
        if norm:
            assert int(cnt.abs().sum()) == 0 and float(y.abs().sum()) == 0.0


@needs_gpu
@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("pdl", [True, False])
@pytest.mark.parametrize("s,bk,warps", [(32, 128, 4), (64, 128, 4), (32, 256, 2), (128, 128, 4)])
@pytest.mark.parametrize("early,ks,stream", [(False, 1, False), (True, 1, False), (False, 2, False), (False, 1, True)])
def test_slice_kernel_against_pytorch(norm, pdl, s, bk, warps, early, ks, stream):
    sk = _sk()
    # one token a run, then two tokens a run (one of them missing in the last run); early: the down block loaded with
    # the last gate/up tile (K 1024 / BK / warps = 2 tiles a warp here); ks: two K parts a slice; stream: an item's
    # words through shared memory (three runs of one or two slices a program: the tiles reused item after item)
    _run(sk, [(0, [0]), (2, [1]), (1, [2])], 1, 3, 256, 1024, 512, s, bk, warps, norm, pdl, 3, seed=5, early=early,
         ks=ks, stream=stream)
    _run(sk, [(0, [0, 3]), (1, [2, 1]), (2, [4])], 2, 3, 256, 1024, 512, s, bk, warps, norm, pdl, 2, seed=6,
         early=early, ks=ks, stream=stream)


# --- the routed path: kernel.mxfp4_moe_experts with config slice_few ---------------------------------------------

SLICE_CONFIGS = [{"slice_few": True, "slice_warps": 4, "slice_dr": 2},
                 {"slice_few": True, "slice_bk": 128, "slice_warps": 8, "slice_dr": 1},
                 {"slice_few": True, "slice_width": 64, "slice_warps": 4, "slice_dr": 4, "slice_maxnreg": None,
                  "slice_per_sm": 1},
                 {"slice_few": True, "slice_warps": 4, "slice_dr": 2, "pdl": False},
                 {"slice_few": True, "slice_bk": 128, "slice_warps": 4, "slice_dr": 2, "slice_down_early": True,
                  "slice_maxnreg": None, "slice_per_sm": 1},
                 {"slice_few": True, "slice_bk": 128, "slice_warps": 4, "slice_dr": 2, "slice_ksplit": 2},
                 {"slice_few": True, "slice_bk": 128, "slice_warps": 2, "slice_dr": 4, "slice_ksplit": 4,
                  "slice_prefetch": True},
                 {"slice_few": True, "slice_bk": 128, "slice_warps": 4, "slice_dr": 2, "slice_stream": True,
                  "slice_maxnreg": None, "slice_per_sm": 1},
                 {"slice_few": True, "slice_bk": 128, "slice_warps": 4, "slice_dr": 2, "slice_stream": True,
                  "slice_per_sm": 1}]


def _workspace_zero() -> bool:
    from mxfp4_moe import slice_kernel
    torch.cuda.synchronize()
    return all(int(ws[n].count_nonzero()) == 0 for bufs in slice_kernel._WORKSPACE.values() for ws in bufs
               for n in ("y", "u", "cnt", "gacc", "gcnt"))


@needs_gpu
@pytest.mark.parametrize("cfg", SLICE_CONFIGS)
def test_routed_slice_path_batches_1_to_4(cfg):
    """Batches 1..4 of 4-of-12 routing on a card with experts 6..11 (some pairs elsewhere, some tokens with no local
    expert), every token to the same experts, top-1; three calls in a row into poisoned buffers; then the TP split
    (partials, 2 slices) and combine_partials; the kernel ran (LAST_LAUNCH) and its rows and counters are back to
    zero."""
    from _kernel_cases import assert_ok, check_case, check_tp_case

    from mxfp4_moe import reference as R
    from mxfp4_moe.kernel import LAST_LAUNCH
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(6, 1024, 512, expert_base=6, generator=torch.Generator(device="cuda").manual_seed(61),
                                 device="cuda")
    ex_t = ex.to_tiled_layout()
    for rep in range(3):
        for tokens in range(1, 5):
            assert_ok(check_case(ex, ex_t, tokens, "random", 12, 4, 61000 + tokens + 100 * rep, "cuda", "gluon", cfg),
                      f"slice {cfg} batch {tokens} call {rep}")
            assert "slice" in LAST_LAUNCH, "the slice kernel did not run"
    for tokens in (1, 4):
        assert_ok(check_case(ex, ex_t, tokens, "one-expert", 12, 4, 61500 + tokens, "cuda", "gluon", cfg), "one")
        assert_ok(check_case(ex, ex_t, tokens, "top1-one-expert", 12, 1, 61600 + tokens, "cuda", "gluon", cfg), "top1")
    for tokens in (1, 3):
        res = check_tp_case(ex, tokens, 12, 4, 2, 61700 + tokens, "cuda", "gluon", cfg)
        assert_ok(res, f"slice {cfg} partials batch {tokens}")
        assert res["combine_rel"] < 1e-2, res
    assert _workspace_zero()


@needs_gpu
def test_routed_slice_path_no_local_expert_and_a_graph():
    """Every pair elsewhere: all-zero rows over a poisoned buffer in both modes; then four calls in one CUDA graph,
    replayed three times, each replay the reference's, the rows and counters back to zero."""
    from _kernel_cases import assert_graph_replays

    from mxfp4_moe import reference as R
    from mxfp4_moe.kernel import mxfp4_moe_experts
    torch.backends.cuda.matmul.allow_tf32 = False
    cfg = SLICE_CONFIGS[0]
    ex = R.random_expert_weights(6, 1024, 512, expert_base=6, generator=torch.Generator(device="cuda").manual_seed(62),
                                 device="cuda")
    ex_t = ex.to_tiled_layout()
    for tokens in (1, 4):
        ids = torch.tensor([[0, 1, 2, 3]] * tokens, device="cuda")
        w = torch.full((tokens, 4), 0.25, device="cuda")
        x = torch.randn(tokens, 1024, device="cuda").to(torch.bfloat16)
        for partials in (False, True):
            out = torch.full((tokens * 4 if partials else tokens, 1024), float("nan"), device="cuda")
            mxfp4_moe_experts(x, ids, w, ex_t, config=cfg, out=out, partials=partials)
            assert bool((out == 0).all()), (tokens, partials)
    assert_graph_replays(ex, ex_t, 12, cfg, 62)
    assert _workspace_zero()


@needs_gpu
@pytest.mark.parametrize("partials", [False, True])
def test_routed_slice_path_reads_int32_and_int64_ids(partials):
    """The kernel reads the routing in the dtype it comes in (no cast: a launch of its own between the layers): the
    same result for int64 ids (torch.topk's) and their int32 copy (vLLM's), batches 1 and 3, within the order the
    slices' atomics add in (not bytewise: two calls with the same ids differ in the last bits; the H100's run of the
    bytewise form, bench/results/2026-12-06-round24-slice-tests-h100.txt)."""
    from mxfp4_moe import reference as R
    from mxfp4_moe.kernel import mxfp4_moe_experts
    ex_t = R.random_expert_weights(6, 1024, 512, expert_base=6, generator=torch.Generator(device="cuda").manual_seed(64),
                                   device="cuda").to_tiled_layout()
    g = torch.Generator().manual_seed(64)
    for tokens in (1, 3):
        ids, w = R.route(torch.randn(tokens, 12, generator=g), 4)
        x = torch.randn(tokens, 1024, generator=g).to(torch.bfloat16).cuda()
        got = [mxfp4_moe_experts(x, ids.cuda().to(dt), w.cuda(), ex_t, config=SLICE_CONFIGS[0], partials=partials)
               for dt in (torch.int64, torch.int32)]
        assert ids.dtype == torch.int64 and got[0].abs().max() > 0, tokens
        assert ((got[0] - got[1]).abs().max() / got[0].abs().max()).item() < 1e-5, tokens
    assert _workspace_zero()


@needs_gpu
def test_routed_slice_path_refuses_shapes_it_does_not_split():
    from mxfp4_moe import reference as R
    from mxfp4_moe.kernel import mxfp4_moe_experts
    ex_t = R.random_expert_weights(2, 1024, 512, generator=torch.Generator(device="cuda").manual_seed(63),
                                   device="cuda").to_tiled_layout()
    x = torch.randn(1, 1024, device="cuda").to(torch.bfloat16)
    ids, w = torch.tensor([[0, 1]], device="cuda"), torch.full((1, 2), 0.5, device="cuda")
    for bad, says in (({"slice_warps": 8}, "slice_warps"), ({"slice_warps": 4, "slice_dr": 4}, "slice_dr"),
                      ({"slice_width": 48}, "slice.width"), ({"slice_warps": 4, "slice_down_early": True}, "two K tiles"),
                      ({"slice_warps": 4, "slice_ksplit": 4}, "slice_ksplit 4 must split")):
        with pytest.raises(ValueError, match=says):
            mxfp4_moe_experts(x, ids, w, ex_t, config={"slice_few": True, **bad})
