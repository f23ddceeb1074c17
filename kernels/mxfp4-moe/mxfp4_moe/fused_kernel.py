"""One persistent launch for both expert GEMMs at few-expert decode points (issue #18, eighth round A; config
``fused_few`` of kernel.GLUON_CONFIG).

ranked_kernel runs the gate/up GEMM, then the down GEMM, then (not partials) kernel.norm_combine: each launch
boundary drains the memory pipeline and the next one refills it. Here one grid of G = ``per_sm`` x SMs one-warp
programs (all resident at once: the host checks the compiled kernel's registers and shared memory) does:

1. after the wait on the previous kernel, every program ranks the owning slots from the ids (ranked_kernel's
   _rank_owners: n_own, the experts routed to this card) and sizes both K splits on the device for G programs
   (ranked_kernel's rule: doubled while n_own x row blocks x split stays within G);
2. it issues cp.async copies of its down item's first ``DOWN_TILES`` K tiles (words and scales; item g of the
   down list: owner rank fastest, then row block, then K part) into its own shared memory, so that the down
   weights stream from DRAM together with the gate/up tiles and are not read after the barrier;
3. it runs its gate/up items (g, g + G, ...) as ranked_kernel._ranked_tile does (silu fused, the split's
   fix-up by the tile's last part, the cp.async ring), and zeroes its share of the output buffers;
4. a grid-wide barrier (an arrival counter the last program puts back to 0, then a generation word it bumps;
   the others spin on the generation they read before arriving; no reset race, the words never need zeroing
   between calls): every act row is now visible;
5. the down GEMM of its item: the tiles in shared memory, K tiles past DOWN_TILES (where more experts are
   routed here than the shared memory was sized for) loaded from global memory, the activation rows read past
   L1 (.cg); the part added (relaxed atomics) into the zeroed pre-norm rows;
6. not partials: kernel.norm_combine, a second short launch (programmatic dependent launch).

The barrier's spin is bounded (about 2^24 polls); a program that gives up sets the error word (``barrier_state``)
instead of hanging the GPU; the tests check it stays 0.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as _async_copy

from .gluon_kernel import _fence_gpu, _gdc_launch_dependents, _gdc_wait, _mx_mma, _scales, _stamp, _tokens, layouts
from .kernel import _MMA_UNSCALE, _pow2, norm_combine
from .ranked_kernel import (_PREFETCH_L2_ASM, MAX_TOKENS, _act_lanes, _poll, _cp_async, _cta_barrier, _rank_owners,
                            _ranked_tile, _run_split, _tile_lanes, _trace_open, fits, max_split, run_split,
                            stages_smem, trace_buffer)

SPIN_LIMIT = 1 << 24
TILE_RESERVE = 1024  # shared memory the driver reserves per block (sm_80+)
SMEM_PER_SM = 228 * 1024  # the H100/H200 carveout's most (227 KB a block)


GEN_BASE = gl.constexpr(128 + 32 * 1024)  # the groups' generation words (barrier_state)


@gluon.jit
def _spin(ptr, gen, err_ptr):
    """Wait until the word at ``ptr`` differs from ``gen`` (about 2^24 polls at most; then set the error word)."""
    n = 0
    cur = _poll(ptr)
    while (cur == gen) & (n < 16777216):
        cur = _poll(ptr, True)
        n += 1
    if cur == gen:
        gl.atomic_xchg(err_ptr, 1, sem="relaxed", scope="gpu")


@gluon.jit
def _grid_barrier(bar_ptr, g, G, GROUP: gl.constexpr, GROUP_SPIN: gl.constexpr):
    """Every program of the grid (G one-warp programs, all resident) meets here; the writes before are visible
    to every program after. Two levels, so that no word takes more than about GROUP arrivals: program g arrives
    at its group's word bar_ptr[128 + 32 (g // GROUP)]; the group's last arrival (its leader, which puts that
    word back to 0) arrives at bar_ptr[0]; the last leader puts it back to 0 and bumps the generation
    bar_ptr[32]. GROUP_SPIN: the other leaders spin on that generation, then bump their group's generation
    bar_ptr[GEN_BASE + 32 (g // GROUP)], on which the group's other programs spin (the spins spread over as many
    words as groups); else every program spins on bar_ptr[32]. Each spin compares with the value read before
    arriving (it cannot change before). bar_ptr[64]: error (a spin that gave up)."""
    grp = g // GROUP
    n_grp = (G + GROUP - 1) // GROUP
    in_grp = gl.minimum(G - grp * GROUP, GROUP)
    gen = _poll(bar_ptr + 32)
    ggen_ptr = bar_ptr + GEN_BASE + grp * 32
    ggen = _poll(ggen_ptr)
    _fence_gpu()  # every lane's writes before the arrival (release, with the acq_rel atomics)
    old = gl.atomic_add(bar_ptr + 128 + grp * 32, 1, sem="acq_rel", scope="gpu")
    leader = old == in_grp - 1
    if leader:
        gl.atomic_xchg(bar_ptr + 128 + grp * 32, 0, sem="relaxed", scope="gpu")
        top = gl.atomic_add(bar_ptr, 1, sem="acq_rel", scope="gpu")
        if top == n_grp - 1:
            gl.atomic_xchg(bar_ptr, 0, sem="relaxed", scope="gpu")
            gl.atomic_add(bar_ptr + 32, 1, sem="release", scope="gpu")
        else:
            _spin(bar_ptr + 32, gen, bar_ptr + 64)
        if GROUP_SPIN:
            gl.atomic_add(ggen_ptr, 1, sem="release", scope="gpu")
    else:
        if GROUP_SPIN:
            _spin(ggen_ptr, ggen, bar_ptr + 64)
        else:
            _spin(bar_ptr + 32, gen, bar_ptr + 64)
    _fence_gpu()


@gluon.jit
def _down_ptrs(local, pid_n, k0, w_ptr, s_ptr, stride_we, stride_se, K: gl.constexpr, BLOCK_N: gl.constexpr,
               BLOCK_K: gl.constexpr, W5: gl.constexpr, S3: gl.constexpr):
    """The word and scale pointers of tile (row block pid_n, K offset k0) of local expert ``local`` (the
    lane order of ranked_kernel._ranked_tile)."""
    tile0 = (pid_n * (K // BLOCK_K) + k0 // BLOCK_K).to(gl.int64)
    w_off, s_off = _tile_lanes(BLOCK_N, BLOCK_K, W5, S3)
    w_ptrs = w_ptr + local.to(gl.int64) * stride_we + tile0 * (BLOCK_N * BLOCK_K // 8) + w_off
    s_ptrs = s_ptr + local.to(gl.int64) * stride_se + tile0 * (BLOCK_N * BLOCK_K // 32) + s_off
    return w_ptrs, s_ptrs


@gluon.jit(do_not_specialize=["T", "expert_base", "n_local", "G", "z1_numel", "z2_numel"])
def _fused_kernel(x_ptr, ids_ptr, w1_ptr, s1_ptr, act_ptr, a32_ptr, h_ptr, cnt_ptr, w2_ptr, s2_ptr, y_ptr,
                  bar_ptr, z1_ptr, z2_ptr, T, expert_base, n_local, G, z1_numel, z2_numel,
                  stride_xm, stride_w1e, stride_s1e, stride_actm, stride_a32m, stride_hm, stride_hk, stride_w2e,
                  stride_s2e, stride_ym,
                  L: gl.constexpr, I: gl.constexpr, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, P_P2: gl.constexpr,
                  BLOCK_M: gl.constexpr, BN1: gl.constexpr, BK1: gl.constexpr, BN2: gl.constexpr,
                  BK2: gl.constexpr, LOG_MAX1: gl.constexpr, LOG_MAX2: gl.constexpr,
                  W5A: gl.constexpr, X4A: gl.constexpr, S3A: gl.constexpr, W5B: gl.constexpr, X4B: gl.constexpr,
                  S3B: gl.constexpr, ZERO_BLOCK: gl.constexpr, GDC: gl.constexpr, STAGES: gl.constexpr,
                  DOWN_TILES: gl.constexpr, EARLY: gl.constexpr = False, BAR_GROUP: gl.constexpr = 32,
                  PF_REST: gl.constexpr = True, GROUP_SPIN: gl.constexpr = True, tr_ptr=None,
                  TRACE: gl.constexpr = False):
    """Program g of G: see the module docstring. TRACE: program g's row of tr_ptr [G, TRACE_SLOTS] int64 gets
    the timer at its start (0), once its down copies are issued (1), in its last gate/up item (2-4, as
    ranked_kernel._ranked_tile), after zeroing its share (5), past the grid barrier (6) and at its end (7),
    and the splits (8: gate/up, 10: down)."""
    g = gl.program_id(0)
    tr = _trace_open(tr_ptr, g, TRACE)
    _gdc_launch_dependents(GDC)
    GRID_N1: gl.constexpr = 2 * I // BN1
    GRID_N2: gl.constexpr = L // BN2
    KT2: gl.constexpr = I // BK2
    J2: gl.constexpr = BK2 // 32
    JH2: gl.constexpr = J2 // 4
    QH2: gl.constexpr = (BN2 // 8) * JH2
    TW2: gl.constexpr = BN2 * BK2 // 8
    TS2: gl.constexpr = BN2 * BK2 // 32
    if not EARLY:  # the ids may come from the previous kernel (EARLY: they do not; weights never change)
        _gdc_wait(GDC)
    owner, rank, offs, ids, n_own = _rank_owners(ids_ptr, T, expert_base, n_local, TOPK, P_P2)
    # the down item: its tiles' copies first, so they stream with the gate/up tiles
    W4B: gl.constexpr = gl.SliceLayout(4, W5B)
    w3b: gl.constexpr = gl.SliceLayout(3, W4B)
    dsm = gl.allocate_shared_memory(gl.int32, [DOWN_TILES, BN2, 4, JH2, 4],
                                    gl.SwizzledSharedLayout(1, 1, 1, order=[3, 1, 0, 2]))
    dssm = gl.allocate_shared_memory(gl.uint8, [DOWN_TILES, 8, 4, QH2],
                                     gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0]))
    split2 = _run_split(n_own, GRID_N2, LOG_MAX2, G, KT2, 0)
    per_k2 = n_own * GRID_N2
    has_down = g < per_k2 * split2
    iters2 = KT2 // split2
    r2 = g % gl.maximum(n_own, 1)
    sel2 = (owner > 0) & (rank == r2)
    e2 = gl.sum(gl.where(sel2, ids, 0), axis=0)
    pid_n2 = (g // gl.maximum(n_own, 1)) % GRID_N2
    k02 = (g // gl.maximum(per_k2, 1)) * (iters2 * BK2)
    dw_ptrs, ds_ptrs = _down_ptrs(e2 - expert_base, pid_n2, k02, w2_ptr, s2_ptr, stride_w2e, stride_s2e, I, BN2,
                                  BK2, W5B, S3B)
    n_cp = gl.where(has_down, iters2, 0)
    for tc in gl.static_range(DOWN_TILES):
        w_ok = (gl.full(dw_ptrs.shape, 0, gl.int32, layout=W4B) + tc) < n_cp
        s_ok = (gl.full(ds_ptrs.shape, 0, gl.int32, layout=S3B) + tc) < n_cp
        _cp_async(dsm.index(tc), dw_ptrs + tc * TW2, mask=w_ok)
        _cp_async(dssm.index(tc), ds_ptrs + tc * TS2, mask=s_ok)
    _async_copy.commit_group()
    if PF_REST:  # the item's K tiles past DOWN_TILES (contiguous in the tiled layout) into L2, one request each
        n_rest = gl.maximum(n_cp - DOWN_TILES, 0)
        if n_rest > 0:
            tile_d = (pid_n2 * KT2 + k02 // BK2 + DOWN_TILES).to(gl.int64)
            lo2 = (e2 - expert_base).to(gl.int64)
            gl.inline_asm_elementwise(_PREFETCH_L2_ASM, "=r,l,r",
                                      [w2_ptr + lo2 * stride_w2e + tile_d * TW2, n_rest * (TW2 * 4)],
                                      dtype=gl.int32, is_pure=False, pack=1)
            gl.inline_asm_elementwise(_PREFETCH_L2_ASM, "=r,l,r",
                                      [s2_ptr + lo2 * stride_s2e + tile_d * TS2, n_rest * TS2],
                                      dtype=gl.int32, is_pure=False, pack=1)
    # the gate/up items g, g + G, ...
    split1 = _run_split(n_own, GRID_N1, LOG_MAX1, G, L // BK1, 0)
    per_k1 = n_own * GRID_N1
    _stamp(tr, 1, TRACE)
    if TRACE:
        gl.store(tr + 8, split1)
        gl.store(tr + 10, split2)
    for it1 in range(g, per_k1 * split1, G):
        r1 = it1 % n_own
        sel1 = (owner > 0) & (rank == r1)
        p1 = gl.sum(gl.where(sel1, offs, 0), axis=0)
        e1 = gl.sum(gl.where(sel1, ids, 0), axis=0)
        _ranked_tile(e1 - expert_base, e1, (it1 // n_own) % GRID_N1, it1 // per_k1, split1, x_ptr, ids_ptr, w1_ptr,
                     s1_ptr, act_ptr, h_ptr, cnt_ptr, p1, T, stride_xm, stride_w1e, stride_s1e, stride_actm,
                     stride_hm, stride_hk, L, TOPK, TOPK_P2, BLOCK_M, BN1, BK1, GRID_N1, True, W5A, X4A, S3A, GDC,
                     STAGES, 1, tr, TRACE)
    _gdc_wait(GDC)  # (EARLY) every write below follows the previous kernel
    zl: gl.constexpr = gl.BlockedLayout([4], [32], [1], [0])
    zo = g * ZERO_BLOCK + gl.arange(0, ZERO_BLOCK, layout=zl)
    zeros = gl.zeros([ZERO_BLOCK], gl.float32, layout=zl)
    gl.store(z1_ptr + zo, zeros, mask=zo < z1_numel)
    gl.store(z2_ptr + zo, zeros, mask=zo < z2_numel)
    _stamp(tr, 5, TRACE)
    _grid_barrier(bar_ptr, g, G, BAR_GROUP, GROUP_SPIN)
    _stamp(tr, 6, TRACE)
    _async_copy.wait_group(0)
    _cta_barrier()
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, 1], instr_shape=[16, 8])
    a_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=8)
    b_l: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=8)
    xl_m: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, X4B))))
    pl_n: gl.constexpr = gl.SliceLayout(1, mma)
    pl_m: gl.constexpr = gl.SliceLayout(0, mma)
    x_off = _act_lanes(BK2, X4B)
    # the down items g, g + G, ...: the first one's first DOWN_TILES K tiles from shared memory, the rest (more
    # experts routed here than the grid holds in shared memory) from global memory
    for d in range(g, per_k2 * split2, G):
        first = d == g
        r2 = d % n_own
        sel2 = (owner > 0) & (rank == r2)
        e2 = gl.sum(gl.where(sel2, ids, 0), axis=0)
        pid_n2 = (d // n_own) % GRID_N2
        k02 = (d // per_k2) * (iters2 * BK2)
        dw_ptrs, ds_ptrs = _down_ptrs(e2 - expert_base, pid_n2, k02, w2_ptr, s2_ptr, stride_w2e, stride_s2e, I,
                                      BN2, BK2, W5B, S3B)
        has, rows = _tokens(ids_ptr, e2, T, TOPK, TOPK_P2, BLOCK_M, xl_m)
        a_ptrs = a32_ptr + k02 // 2 + rows[None, None, None, :] * stride_a32m + x_off[:, :, :, None]
        a_mask = has[None, None, None, :] & (x_off[:, :, :, None] >= 0)
        acc = gl.zeros([BN2, BLOCK_M], gl.float32, layout=mma)
        for ts in gl.static_range(DOWN_TILES):
            if first & (ts < iters2):
                xp = gl.load(a_ptrs + ts * (BK2 // 2), mask=a_mask, other=0, cache_modifier=".cg")
                wq = dsm.index(ts).load(W4B)
                ws = dssm.index(ts).load(S3B)
                acc = _mx_mma(wq, _scales(ws, BN2, JH2, w3b), xp, acc, BN2, BK2, BLOCK_M, a_l, b_l)
        tg0 = gl.where(first, DOWN_TILES, 0)
        if tg0 < iters2:  # from global memory, one tile ahead
            wq = gl.load(dw_ptrs + tg0 * TW2)
            ws = gl.load(ds_ptrs + tg0 * TS2)
            xp = gl.load(a_ptrs + tg0 * (BK2 // 2), mask=a_mask, other=0, cache_modifier=".cg")
            for tg in range(tg0 + 1, iters2):
                wq_n = gl.load(dw_ptrs + tg * TW2)
                ws_n = gl.load(ds_ptrs + tg * TS2)
                xp_n = gl.load(a_ptrs + tg * (BK2 // 2), mask=a_mask, other=0, cache_modifier=".cg")
                acc = _mx_mma(wq, _scales(ws, BN2, JH2, w3b), xp, acc, BN2, BK2, BLOCK_M, a_l, b_l)
                wq, ws, xp = wq_n, ws_n, xp_n
            acc = _mx_mma(wq, _scales(ws, BN2, JH2, w3b), xp, acc, BN2, BK2, BLOCK_M, a_l, b_l)
        acc = acc * _MMA_UNSCALE
        o_rows = gl.convert_layout(rows, pl_m)
        o_has = gl.convert_layout(has.to(gl.int32), pl_m) > 0
        o_n = pid_n2 * BN2 + gl.arange(0, BN2, layout=pl_n)
        gl.atomic_add(y_ptr + o_rows[None, :] * stride_ym + o_n[:, None], acc,
                      mask=o_has[None, :] & (o_n[:, None] >= 0), sem="relaxed", scope="gpu")
    _stamp(tr, 7, TRACE)


_BARRIERS: dict = {}


def barrier_state(device: torch.device) -> torch.Tensor:
    """The grid barrier's words on ``device`` (int32 [128 + 64 x 1024]: [0] the groups' arrivals, [128 + 32 i]
    group i's, all back to 0 after each call; [32] the generation and [GEN_BASE + 32 i] group i's, bumped once a
    call; [64] 1 where a program's spin gave up). Kept alive (graphs hold it)."""
    key = (device.type, device.index)
    if key not in _BARRIERS:
        _BARRIERS[key] = torch.zeros(GEN_BASE.value + 32 * 1024, dtype=torch.int32, device=device)
    return _BARRIERS[key]


def down_tiles_needed(bound: int, grid_n2: int, k_tiles2: int, programs: int) -> int:
    """K tiles of the down item each program holds where ``bound`` experts are routed here (the device's split
    over ``programs``)."""
    return k_tiles2 // run_split(bound, grid_n2, k_tiles2, programs)


def smem_per_program(stages: int, down_tiles: int, tiles) -> int:
    (bn1, bk1), (bn2, bk2) = tiles
    return (stages_smem(stages, bn1, bk1) if stages > 1 else 0) + stages_smem(down_tiles, bn2, bk2)


def resident(n_regs: int, smem: int, max_blocks: int = 32) -> int:
    """One-warp programs an SM holds at ``n_regs`` registers and ``smem`` bytes of shared memory each."""
    per_warp = -(-n_regs * 32 // 256) * 256
    by_regs = 4 * (65536 // 4 // per_warp)
    by_smem = SMEM_PER_SM // (smem + TILE_RESERVE)
    return max(0, min(max_blocks, by_regs, by_smem))


_RESIDENT: dict = {}


def experts_forward(x, ids, wts, ex, out, eps: float, *, sms: int, per_sm: int = 16, stages: int = 2,
                    down_tiles: int = 1, min_iters: int = 2, pdl: bool = True, maxnreg: int | None = 96,
                    partials: bool = False, early: bool = False, bar_group: int = 32, pf_rest: bool = True, group_spin: bool = True,
                    last_launch: dict | None = None, trace: list | None = None):
    """ranked_kernel.experts_forward's contract (1..8 tokens, tiled layout) in one persistent launch (plus
    norm_combine unless partials). early: rank the slots and issue the first copies before the wait on the
    previous kernel (only where the ids do not come from it, as ranked_kernel assumes). Returns ``out``, or None where the grid of per_sm x sms programs would not
    all be resident at the compiled kernel's registers and shared memory (the caller falls back). trace (a
    list; kernel.TRACE): compiled with the timer stamps, ("fused", buffer) appended (ranked_kernel.trace_buffer)."""
    T, L = x.shape
    topk = ids.shape[1]
    I = ex.expert_size
    P = T * topk
    if ex.layout != "tiled" or not fits(ex) or not 0 < T <= MAX_TOKENS or topk > 8:
        return None
    if stages != 0 and not 2 <= stages <= 8:
        raise ValueError(f"fused_stages must be 0 or 2..8, got {stages!r}")
    (bn1, bk1), (bn2, bk2) = ex.tiles
    grid_n1 = 2 * I // bn1
    max1, max2 = max_split(L // bk1, min_iters), max_split(I // bk2, 1)
    G = per_sm * sms
    if not 1 <= bar_group or -(-G // bar_group) > 1024:
        raise ValueError(f"fused_bar_group {bar_group!r}: at most 1024 groups of the {G} programs")
    block_m = 8
    lay1, lay2 = layouts(bn1, bk1, block_m), layouts(bn2, bk2, block_m)
    gdc = torch.cuda.get_device_capability(x.device)[0] >= 9
    act = torch.empty(P, I, dtype=torch.bfloat16, device=x.device)
    y = out if partials else torch.empty(P, L, dtype=torch.float32, device=x.device)
    h = torch.empty(max1, P, 2 * I, dtype=torch.float32, device=x.device) if max1 > 1 else y
    from .gluon_kernel import _counters
    cnt = _counters(x.device, 4 + P * grid_n1)[4:]
    bar = barrier_state(x.device)
    z2 = y if not partials else out
    z2_numel = 0 if partials else y.numel()
    zero_block = _pow2(-(-max(out.numel(), z2_numel) // G), lo=128)
    x32, a32 = x.view(torch.int32), act.view(torch.int32)
    w1, w2 = ex.w13.view(torch.int32), ex.w2.view(torch.int32)
    h_strides = (h.stride(1), h.stride(0)) if max1 > 1 else (0, 0)
    consts = dict(L=L, I=I, TOPK=topk, TOPK_P2=_pow2(topk), P_P2=_pow2(MAX_TOKENS * topk, lo=32), BLOCK_M=block_m,
                  BN1=bn1, BK1=bk1, BN2=bn2, BK2=bk2, LOG_MAX1=max1.bit_length() - 1, LOG_MAX2=max2.bit_length() - 1,
                  W5A=lay1["w5"], X4A=lay1["x4"], S3A=lay1["s3"], W5B=lay2["w5"], X4B=lay2["x4"], S3B=lay2["s3"],
                  ZERO_BLOCK=zero_block, GDC=gdc, STAGES=stages, DOWN_TILES=down_tiles, EARLY=early,
                  BAR_GROUP=bar_group, PF_REST=bool(pf_rest and gdc), GROUP_SPIN=group_spin, TRACE=trace is not None)
    opts = {"num_warps": 1} | ({"maxnreg": maxnreg} if maxnreg else {})
    tr = trace_buffer(G, x.device) if trace is not None else None
    args = (x32, ids, w1, ex.w13_scale, act, a32, h, cnt, w2, ex.w2_scale, y, bar, out, z2, T, ex.expert_base,
            ex.num_local, G, out.numel(), z2_numel, x32.stride(0), w1.stride(0), ex.w13_scale.stride(0),
            act.stride(0), a32.stride(0), *h_strides, w2.stride(0), ex.w2_scale.stride(0), y.stride(0))
    if tr is not None:
        opts["tr_ptr"] = tr  # after the constexprs in the signature: by name
    key = (x.device.index, repr(sorted((k, repr(v)) for k, v in consts.items())), maxnreg, ids.dtype)
    if key not in _RESIDENT:
        ck = _fused_kernel.warmup(*args, grid=(1,), **consts, **opts)
        ck._init_handles()
        _RESIDENT[key] = resident(int(ck.n_regs), int(ck.metadata.shared))
    if _RESIDENT[key] < per_sm:
        return None
    k = _fused_kernel[(G,)](*args, **consts, **opts, **({"launch_pdl": True} if pdl and gdc else {}))
    if trace is not None:
        trace.append(("fused", tr))
    if not partials:
        norm_combine(y, ids, wts, ex, out, eps, gdc=gdc, pdl=pdl and gdc)
    if last_launch is not None:
        last_launch.clear()
        last_launch.update({"fused": k, "grids": {"fused": (G,)}, "launches": 1 if partials else 2,
                            "resident_per_sm": _RESIDENT[key], "max_splits": (max1, max2)})
    return out
