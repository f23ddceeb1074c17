"""The gluon expert GEMMs over a device-ranked work list, for decode batches of 1 to 8 tokens (issue #18,
fourth round; config ``ranked`` of kernel.GLUON_CONFIG).

gluon_kernel.experts_forward launches one program per (slot, row block, K part) and sizes the K splits on
the host for min(pairs, local experts), the most experts this card can have: it cannot see how many are
routed here without a device-to-host sync. Under EP8 at batch 1 one expert is local, so its gate/up GEMM
runs a split sized for eight (ep8 batch 4: two experts, split 1, 512 programs of 16 K tiles each).

Here every program of a GEMM first ranks the owning slots from the routing ids (a slot owns its expert when
the expert is on this card and no earlier slot names it: a count of earlier equal ids, in chunks of 8; an
owner's rank is the owners below it in their 64-bit mask), so it knows n_own, the experts routed to this card, and sizes the K split at
run time (``run_split``: doubled while n_own x row blocks x split stays within ``budget`` programs and each
part keeps ``min_iters`` K tiles). Program g takes item g of the compact list (owner rank fastest, then row
block, then K part) or, past its end, nothing; the host launches as many programs as the largest list any
n_own in 1..min(pairs, local experts) can make (``grid_size``), so no program takes two items and there is
no counter to fetch. Idle programs wait for the previous kernel and end.

Launches: the gate/up GEMM (silu fused; with a split, the last part of a tile adds the parts, a counter
per (slot, row block) that goes back to 0) which also zeroes the output buffers, then the down GEMM whose
parts are added (atomics) into the zeroed pre-norm rows [pairs, L], then (not partials) kernel.norm_combine.
Every program waits for the previous kernel before it ends, so a kernel's completion implies its
predecessor's (the counters and the zeroed buffers rely on that under programmatic dependent launch).

Fifth round (README): ``stages`` >= 2 streams each program's weight tiles through a cp.async ring of that
many shared-memory slots (stages - 1 tiles in flight; on by default at batch 1, kernel.ranked_config);
``maxnreg_gate_up`` caps the gate/up GEMM's registers (96 from batch 2: 20 resident programs an SM);
``wave_cost`` switches run_split to a rule that counts waves; ``fixup_unroll`` loads the split's parts
several at a time. Shared memory a program holds: ``stages_smem``.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as _async_copy

from .gluon_kernel import (_counters, _fence_gpu, _gdc_launch_dependents, _gdc_wait, _mx_mma, _scales, _silu_mul_bf16,
                           _stamp, _store_act, _tokens, layouts)
from .kernel import _MMA_UNSCALE, _pow2, check_carveout, driver_resident, norm_combine, set_carveout, stream_key

MAX_TOKENS = 8  # the ranked list covers the token class of 1..8 tokens (at most 64 pairs: top-1..8)
# cp.async (global to shared, sm_80+): Triton 3.6 names it async_copy_global_to_shared, 3.7+ async_load
_cp_async = getattr(_async_copy, "async_load", None) or _async_copy.async_copy_global_to_shared
# a barrier of the program's threads: Triton 3.6 gl.thread_barrier, 3.9 gl.barrier
_cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier


def fits(ex) -> bool:
    """Whether the ranked kernels take these experts: the tiled layout with tiles the gluon kernels run, and a
    gate/up GEMM of two or more K tiles of 256+ elements. Those are the shapes run on the H200 (the down GEMM with one tile of 128
    included); Triton 3.6 failed to lower the ranked gate/up kernel for the tiny variant (latent 128: one K
    tile of 128; ConvertTritonGPUToLLVM, not diagnosed), so such shapes stay on gluon_kernel."""
    if getattr(ex, "layout", None) != "tiled":
        return False
    if any(bn < 16 or bn & (bn - 1) or bk < 128 or bk & (bk - 1) for bn, bk in ex.tiles):
        return False  # gluon_kernel.experts_forward refuses these tiles with its ValueError
    bk1 = ex.tiles[0][1]
    return bk1 >= 256 and ex.latent_size // bk1 >= 2


def max_split(k_tiles: int, min_iters: int) -> int:
    """The largest power-of-two K split of ``k_tiles`` tiles that keeps ``min_iters`` tiles per part."""
    s = 1
    while k_tiles % (2 * s) == 0 and k_tiles // (2 * s) >= min_iters:
        s *= 2
    return s


def run_split(n_own: int, grid_n: int, max_s: int, budget: int, k_tiles: int = 0, wave_cost: int = 0) -> int:
    """The K split the kernel picks for ``n_own`` owning slots (what _run_split computes on the device).

    wave_cost 0: doubled while the items (n_own x grid_n x split) stay within ``budget`` programs. wave_cost
    c > 0 (the wave rule): ``budget`` is the programs resident at once, and the split (a power of two up to
    max_s) minimizes waves x time per item, ceil(items / budget) x (k_tiles / split + c), c being an item's
    fixed cost (ids, ranks, the first round trip, the store) in K tiles; ties go to the smaller split."""
    if wave_cost <= 0:
        s = 1
        while s * 2 <= max_s and n_own * grid_n * s * 2 <= budget:
            s *= 2
        return s
    best, best_cost, s = 1, -(-n_own * grid_n // budget) * (k_tiles + wave_cost), 2
    while s <= max_s:
        cost = -(-n_own * grid_n * s // budget) * (k_tiles // s + wave_cost)
        if cost < best_cost:
            best, best_cost = s, cost
        s *= 2
    return best


def grid_size(bound: int, grid_n: int, max_s: int, budget: int, k_tiles: int = 0, wave_cost: int = 0) -> int:
    """Programs to launch: the longest list any 1..bound owning slots make (one item a program)."""
    return max(n * grid_n * run_split(n, grid_n, max_s, budget, k_tiles, wave_cost) for n in range(1, bound + 1))


def act_launch_taken(act_launch: bool | str, bound: int, grid_n: int, max_s: int, budget: int, k_tiles: int = 0,
                     wave_cost: int = 0) -> bool:
    """Whether experts_forward launches _ranked_act_kernel (config ``ranked_act_launch``, eleventh round) for a
    gate/up GEMM of ``grid_n`` row blocks and ``k_tiles`` K tiles, with at most ``bound`` experts routed here:
    never where no split is possible (``max_s`` 1); True: wherever one is; "auto": where the device's split
    (``run_split``) is above 1 for every count of experts 1..bound, so that no call pays a launch for a split
    it did not make (on the H200's budgets: EP2 x TP4 at batch 1; not local or EP8 batch 1, where 8 routed
    experts take split 1). ValueError for any other value."""
    if act_launch == "auto":
        act_launch = min(run_split(n, grid_n, max_s, budget, k_tiles, wave_cost) for n in range(1, bound + 1)) > 1
    elif not isinstance(act_launch, bool):
        raise ValueError(f"ranked_act_launch must be true, false or \"auto\", got {act_launch!r}")
    return act_launch and max_s > 1


@gluon.jit
def _popcount64(x):
    """Set bits of each non-negative int64 (SWAR: pairs, nibbles, bytes, then one multiply)."""
    x = x - ((x >> 1) & 0x5555555555555555)
    x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
    return ((x * 0x0101010101010101) >> 56) & 0xFF


@gluon.jit
def _rank_owners(ids_ptr, T, expert_base, n_local, TOPK: gl.constexpr, P_P2: gl.constexpr):
    """Slots 0..P_P2-1 (P_P2 <= 64, P_P2 / 32 a lane): owner (int32 0/1: its expert local, no earlier slot
    naming it), the owners' exclusive prefix count (rank: the set bits of the owners' 64-bit mask below the
    slot), the slot index and its id; and n_own, the owners' count."""
    l2: gl.constexpr = gl.BlockedLayout([P_P2 // 32, 8], [32, 1], [1, 1], [1, 0])
    lr: gl.constexpr = gl.SliceLayout(1, l2)
    P = T * TOPK
    offs = gl.arange(0, P_P2, layout=lr)
    ids = gl.load(ids_ptr + offs, mask=offs < P, other=-1)
    cj = gl.arange(0, 8, layout=gl.SliceLayout(0, l2))
    dup = gl.zeros([P_P2], gl.int32, layout=lr)
    for j0 in range(0, P, 8):
        jj = j0 + cj
        idj = gl.load(ids_ptr + jj, mask=jj < P, other=-2)
        hit = (idj[None, :] == ids[:, None]) & (jj[None, :] < offs[:, None])
        dup += gl.sum(hit.to(gl.int32), axis=1)
    local = ids - expert_base
    owner = ((dup == 0) & (local >= 0) & (local < n_local) & (offs < P)).to(gl.int32)
    bit = gl.full([P_P2], 1, gl.int64, layout=lr) << offs.to(gl.int64)
    mask = gl.sum(gl.where(owner > 0, bit, 0), axis=0)  # distinct bits: the sum is their OR
    rank = _popcount64(mask & (bit - 1)).to(gl.int32)  # bit 63's (bit - 1) is 2**63 - 1: non-negative
    return owner, rank, offs, ids, gl.sum(owner, axis=0)


@gluon.jit
def _run_split(n_own, GRID_N: gl.constexpr, LOG_MAX: gl.constexpr, budget, K_TILES: gl.constexpr,
               WAVE_COST: gl.constexpr):
    """run_split on the device (the same rule, the same ties)."""
    split = n_own * 0 + 1
    if WAVE_COST > 0:
        best = ((n_own * GRID_N + budget - 1) // budget) * (K_TILES + WAVE_COST)
        for i in gl.static_range(1, LOG_MAX + 1):
            cost = ((n_own * GRID_N * (1 << i) + budget - 1) // budget) * (K_TILES // (1 << i) + WAVE_COST)
            take = cost < best
            split = gl.where(take, 1 << i, split)
            best = gl.where(take, cost, best)
    else:
        for _s in gl.static_range(LOG_MAX):
            split = gl.where(n_own * GRID_N * split * 2 <= budget, split * 2, split)
    return split


# one lane of the warp asks the TMA unit to bring ``size`` bytes at ``addr`` into L2 (sm_90+; 16-byte aligned, a
# multiple of 16 bytes; nothing is returned, no registers written)
_PREFETCH_L2_ASM = gl.constexpr(
    "{ .reg .u32 ln; .reg .pred pp; mov.u32 ln, %laneid; setp.eq.u32 pp, ln, 0; "
    "@pp cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }")


@gluon.jit
def _prefetch_l2(addr, nbytes):
    """Bulk L2 prefetch of ``nbytes`` (a multiple of 16) at ``addr`` (16-byte aligned), asked by one lane."""
    gl.inline_asm_elementwise(_PREFETCH_L2_ASM, "=r,l,r", [addr, nbytes], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _prefetch_share(base, nbytes: gl.constexpr, i, items):
    """Bulk L2 prefetch of share i of ``items`` of the ``nbytes`` bytes at ``base`` (a uint8 pointer)."""
    chunk = ((nbytes + items - 1) // items + 15) // 16 * 16
    start = i * chunk
    size = gl.minimum(chunk, gl.maximum(nbytes - start, 0))
    if size > 0:
        _prefetch_l2(base + start, size)


_POLL_ASM = gl.constexpr("ld.acquire.gpu.global.b32 $0, [$1];")
_POLL_SLEEP_ASM = gl.constexpr("nanosleep.u32 64; ld.acquire.gpu.global.b32 $0, [$1];")
SPIN_POLLS = gl.constexpr(1 << 24)  # a spin gives up after about this many polls and sets its error word


@gluon.jit
def _poll(ptr, SLEEP: gl.constexpr = False):
    """The word at ``ptr`` read at GPU scope with acquire semantics (a load, not from L1; SLEEP: after a short
    nanosleep, so that the spinning programs leave the L2 slice to the arrivals)."""
    if SLEEP:
        v = gl.inline_asm_elementwise(_POLL_SLEEP_ASM, "=r,l", [ptr], dtype=gl.int32, is_pure=False, pack=1)
    else:
        v = gl.inline_asm_elementwise(_POLL_ASM, "=r,l", [ptr], dtype=gl.int32, is_pure=False, pack=1)
    return v


@gluon.jit
def _spin_to(ptr, target, err_ptr):
    """Wait until the word at ``ptr`` reaches ``target`` (SPIN_POLLS polls at most; then the error word at
    ``err_ptr`` is set to 1 and the program goes on: wrong results, not a hung GPU)."""
    n = 0
    cur = _poll(ptr)
    while (cur < target) & (n < SPIN_POLLS):
        cur = _poll(ptr, True)
        n += 1
    if cur < target:
        gl.atomic_xchg(err_ptr, 1, sem="relaxed", scope="gpu")


@gluon.jit
def _norm_down(acc, y_ptrs, y_mask, o_rows, o_has, o_n, local, p, pid_n, split, ncnt_ptr, nrm_ptr, wts_ptr, g_ptr,
               o_ptr, stride_g, stride_om, eps, GRID_N: gl.constexpr, TOPK: gl.constexpr, L_OUT: gl.constexpr,
               P_MAX: gl.constexpr):
    """``norm_down`` (twentieth round): the down item's K part ``acc`` [BLOCK_N, BLOCK_M] (output columns o_n, pair
    rows o_rows of local expert ``local``, owned by slot p) ends in the norm-combine instead of a launch after the
    GEMM. With split > 1 the part is added (relaxed atomics) into the zeroed pre-norm rows at ``y_ptrs`` and counted
    on the row block's counter ncnt_ptr[1 + p x GRID_N + pid_n] (acq_rel; its last part reads the sums back past
    L1 and puts the counter back to 0); with split 1 the part is the row block's output. The row block's last part
    adds each row's sum of squares over its columns into nrm_ptr[row] (fp32, zeroed by the gate/up GEMM), arrives
    at the expert's word (int32, nrm_ptr + P_MAX + p, zeroed with it), waits until all GRID_N row blocks of the
    expert arrived (every down program of the grid resident: the host checks), then adds
    wt x g[e, c] x y[row, c] / sqrt(sum / L_OUT + eps) into out[row // TOPK, c] (zeroed by the gate/up GEMM), as
    kernel._norm_combine_kernel does for the whole row. ncnt_ptr[0]: the error word a spin that gave up sets."""
    yv = acc
    last = split < 2
    if split > 1:
        gl.atomic_add(y_ptrs, acc, mask=y_mask, sem="relaxed", scope="gpu")
        _fence_gpu()
        c_ptr = ncnt_ptr + 1 + p * GRID_N + pid_n
        done = gl.atomic_add(c_ptr, 1, sem="acq_rel", scope="gpu")
        last = done == split - 1
        if last:
            _fence_gpu()
            yv = gl.load(y_ptrs, mask=y_mask, other=0.0, cache_modifier=".cg")
            gl.atomic_xchg(c_ptr, 0, sem="relaxed", scope="gpu")
    if last:
        gl.atomic_add(nrm_ptr + o_rows, gl.sum(yv * yv, axis=0), mask=o_has, sem="relaxed", scope="gpu")
        _fence_gpu()
        nd_ptr = (nrm_ptr + P_MAX).to(gl.pointer_type(gl.int32), bitcast=True) + p
        if gl.atomic_add(nd_ptr, 1, sem="acq_rel", scope="gpu") < GRID_N - 1:
            _spin_to(nd_ptr, GRID_N, ncnt_ptr)
        _fence_gpu()
        tot = gl.load(nrm_ptr + o_rows, mask=o_has, other=1.0, cache_modifier=".cg")
        wt = gl.load(wts_ptr + o_rows, mask=o_has, other=0.0).to(gl.float32)
        gw = gl.load(g_ptr + local.to(gl.int64) * stride_g + o_n).to(gl.float32)
        scale = wt / gl.sqrt(tot / L_OUT + eps)
        gl.atomic_add(o_ptr + (o_rows // TOPK)[None, :] * stride_om + o_n[:, None],
                      yv * scale[None, :] * gw[:, None], mask=y_mask, sem="relaxed", scope="gpu")


# int64 words of a program's row in a trace buffer (kernel.TRACE): 0-7 the timer's stamps, 8-15 facts (the
# split, ...; 15 the SM + 1), 16-23 the cycle counter at the same stamps (gluon_kernel._stamp)
TRACE_SLOTS = gl.constexpr(32)


def trace_buffer(programs: int, device) -> torch.Tensor:
    """A trace buffer [programs, TRACE_SLOTS] int64, left as allocated: each program zeroes its row first
    (``_trace_open``; a slot left 0: the program never got there). No fill kernel: one between two launches
    would cut their programmatic dependent launch, and the trace would show a gap the untraced kernels lack."""
    return torch.empty(programs, TRACE_SLOTS.value, dtype=torch.int64, device=device)


@gluon.jit
def _trace_open(tr_ptr, g, TRACE: gl.constexpr):
    """TRACE: program g's row of the trace buffer, zeroed (then a barrier, so that no stamp can land before
    its zero), the start stamp, and the SM it runs on plus 1 (``%smid``) at slot 15 (fourteenth round: whether
    a GEMM's slow programs share SMs); else ``tr_ptr`` as it is."""
    if TRACE:
        tr = tr_ptr + g * TRACE_SLOTS
        zl: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
        zo = gl.arange(0, TRACE_SLOTS, layout=zl)
        gl.store(tr + zo, gl.zeros([TRACE_SLOTS], gl.int64, layout=zl))
        _cta_barrier()
        _stamp(tr, 0, TRACE)
        sm = gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=gl.int32, is_pure=True, pack=1)
        gl.store(tr + 15, sm.to(gl.int64) + 1)
    else:
        tr = tr_ptr
    return tr


def stages_smem(stages: int, block_n: int, block_k: int) -> int:
    """Shared memory bytes a program's ring holds: ``stages`` weight tiles (BLOCK_N x BLOCK_K / 2 bytes) and
    their E8M0 scales (BLOCK_N x BLOCK_K / 32 bytes)."""
    return stages * (block_n * block_k // 2 + block_n * block_k // 32)


@gluon.jit
def _ring_issue(wsm, ssm, w_ptrs, s_ptrs, i, iters, STAGES: gl.constexpr, TILE_WORDS: gl.constexpr,
                TILE_SCALES: gl.constexpr, W4: gl.constexpr, S3: gl.constexpr):
    """cp.async of K tile i (its words and scales) into ring slot i % STAGES, none past ``iters`` (the
    copies are masked off: no bytes read), then one commit group (empty ones too: the waits count groups)."""
    slot = i % STAGES
    w_ok = (gl.full(w_ptrs.shape, 0, gl.int32, layout=W4) + i) < iters
    s_ok = (gl.full(s_ptrs.shape, 0, gl.int32, layout=S3) + i) < iters
    _cp_async(wsm.index(slot), w_ptrs + i * TILE_WORDS, mask=w_ok)
    _cp_async(ssm.index(slot), s_ptrs + i * TILE_SCALES, mask=s_ok)
    _async_copy.commit_group()


@gluon.jit
def _tile_lanes(BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, W5: gl.constexpr, S3: gl.constexpr):
    """Each lane's offsets inside one K tile of the tiled layout (format.to_tiled_layout: the tile's BLOCK_N x
    BLOCK_K / 8 int32 words, its 16-byte pieces ordered (q, h, g, c) for row r = 8q + g; then its BLOCK_N x
    BLOCK_K / 32 E8M0 scale bytes, ordered (g, c, q, h)): ``w_off`` [BLOCK_N, 4 (c), J/4 (h), 4 (word jl)] int32
    words in W5's slice over its last dim, and ``s_off`` [8 (g), 4 (c), BLOCK_N/8 * J/4] bytes in S3 (the lane
    orders of gluon_kernel.layouts); add them to a tile's first word and first scale byte."""
    JH: gl.constexpr = BLOCK_K // 128
    QH: gl.constexpr = (BLOCK_N // 8) * JH
    W4: gl.constexpr = gl.SliceLayout(4, W5)
    w3: gl.constexpr = gl.SliceLayout(3, W4)
    offs_r = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, gl.SliceLayout(2, w3)))
    offs_c = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, w3)))
    offs_h = gl.arange(0, JH, layout=gl.SliceLayout(0, gl.SliceLayout(1, w3)))
    offs_j = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, W4))))
    piece = (((offs_r[:, None, None] // 8) * JH + offs_h[None, None, :]) * 8 + offs_r[:, None, None] % 8) * 4 \
        + offs_c[None, :, None]
    w_off = piece[:, :, :, None] * 4 + offs_j[None, None, None, :]
    s_g = gl.arange(0, 8, layout=gl.SliceLayout(1, gl.SliceLayout(2, S3)))
    s_c = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, S3)))
    s_e = gl.arange(0, QH, layout=gl.SliceLayout(0, gl.SliceLayout(1, S3)))
    s_off = (s_g[:, None, None] * 4 + s_c[None, :, None]) * QH + s_e[None, None, :]
    return w_off, s_off


@gluon.jit
def _act_lanes(BLOCK_K: gl.constexpr, X4: gl.constexpr):
    """Each lane's int32 offsets of one K tile's activation words in a token's row: [4 (c), J (j), 4 (pair p)] in
    X4's slice over its last two dims; pair p of logical word (c, j) is BF16 pair 64 (j // 4) + 16c + 4p + j % 4
    of the row (format's pair transpose inside each scale block). Add a row's first word of the tile."""
    xs: gl.constexpr = gl.SliceLayout(3, gl.SliceLayout(3, X4))
    x_c = gl.arange(0, 4, layout=gl.SliceLayout(1, gl.SliceLayout(2, xs)))
    x_j = gl.arange(0, BLOCK_K // 32, layout=gl.SliceLayout(0, gl.SliceLayout(2, xs)))
    x_p = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, xs)))
    return x_c[:, None, None] * 16 + ((x_j // 4) * 64 + x_j % 4)[None, :, None] + x_p[None, None, :] * 4


@gluon.jit
def _ranked_tile(local, e, pid_n, pid_k, split, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr, h_ptr, cnt_ptr, p, T,
                 stride_am, stride_we, stride_se, stride_ym, stride_hm, stride_hk,
                 K: gl.constexpr, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GRID_N: gl.constexpr, GATE_UP: gl.constexpr,
                 W5: gl.constexpr, X4: gl.constexpr, S3: gl.constexpr, GDC: gl.constexpr, STAGES: gl.constexpr,
                 FIX_UNROLL: gl.constexpr, tr=None, TRACE: gl.constexpr = False, ACT_LAUNCH: gl.constexpr = False,
                 L2_AHEAD: gl.constexpr = 0, nrm=None, NORM: gl.constexpr = False):
    """One item: row block pid_n of local expert ``local`` (global id e, owned by slot p), K part pid_k of
    ``split`` (run time). Loads, decode and mma as gluon_kernel._gemm_tile (tiled layout, lane order there).
    GATE_UP: silu(gate) * up to y = act [pairs, I] BF16, or with split > 1 the fp32 part to h_ptr + pid_k *
    stride_hk ([parts, pairs, 2I]) and the tile's last part adds them and stores act. Down: the part is added
    (relaxed atomics) into y [pairs, L] fp32, zeroed by the gate/up kernel. STAGES > 1: the weight tiles and
    their scales go through a ring of STAGES slots in shared memory (cp.async), STAGES - 1 tiles requested
    ahead of the one decoded (the first ones before the wait on the previous kernel); 0: register loads, one
    tile ahead of none. TRACE: the timer at ``tr`` + 2 (after the wait), 3 (the K loop done), 4 (stored; the
    split's fix-up also sets ``tr`` + 9 to 1). ACT_LAUNCH (eleventh round, ``act_launch``): with split > 1 the
    gate/up part is stored and nothing more (no fence, no counter, no fix-up): _ranked_act_kernel, launched
    between the two GEMMs, adds the parts and stores act. L2_AHEAD N > 0 (seventeenth round, ``l2_ahead``): before
    the wait, the item's next N K tiles past those the ring (or the first register load) asks for are brought into
    L2 (two bulk prefetches, one lane: the tiles' words and their scales are contiguous in the tiled layout), so
    that a program which starts while the previous kernel still runs puts the memory system to work on more of
    its item than its ring holds. NORM (twentieth round, ``norm_down``; the down GEMM): the part ends in _norm_down,
    ``nrm`` its pointers and numbers (ncnt_ptr, nrm_ptr, wts_ptr, g_ptr, o_ptr, stride_g, stride_om, eps, L_OUT,
    P_MAX)."""
    J: gl.constexpr = BLOCK_K // 32
    JH: gl.constexpr = J // 4
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, 1], instr_shape=[16, 8])
    a_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=8)
    b_l: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=8)
    TILE_WORDS: gl.constexpr = BLOCK_N * BLOCK_K // 8
    TILE_SCALES: gl.constexpr = BLOCK_N * BLOCK_K // 32
    QH: gl.constexpr = (BLOCK_N // 8) * JH
    iters = (K // BLOCK_K) // split
    k0 = pid_k * (iters * BLOCK_K)
    W4: gl.constexpr = gl.SliceLayout(4, W5)
    w3: gl.constexpr = gl.SliceLayout(3, W4)
    tile0 = (pid_n * (K // BLOCK_K) + k0 // BLOCK_K).to(gl.int64)
    w_off, s_off = _tile_lanes(BLOCK_N, BLOCK_K, W5, S3)
    # one scalar base a tensor; the loop without a ring adds its tile's offset to it, so the compiler keeps one
    # address a lane and the pieces as immediate offsets (gluon_kernel._gemm_tile_fn: a tensor of pointers
    # carried through the loop spilled at 96 registers)
    w_base = w_ptr + local.to(gl.int64) * stride_we + tile0 * TILE_WORDS
    s_base = s_ptr + local.to(gl.int64) * stride_se + tile0 * TILE_SCALES
    w_ptrs = w_base + w_off
    s_ptrs = s_base + s_off
    xl_m: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, X4))))
    if STAGES > 1:
        # the ring: slot order [row, c, h, word] with h slowest, so a warp's 16-byte pieces (8 lanes: 4 c x 2
        # rows) are 128 contiguous bytes of shared memory, for the copies and the loads alike
        wsm = gl.allocate_shared_memory(gl.int32, [STAGES, BLOCK_N, 4, JH, 4],
                                        gl.SwizzledSharedLayout(1, 1, 1, order=[3, 1, 0, 2]))
        ssm = gl.allocate_shared_memory(gl.uint8, [STAGES, 8, 4, QH],
                                        gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0]))
        for s0 in gl.static_range(STAGES - 1):  # before the wait on the previous kernel (weights never change)
            _ring_issue(wsm, ssm, w_ptrs, s_ptrs, s0, iters, STAGES, TILE_WORDS, TILE_SCALES, W4, S3)
    else:
        # the first tile's weights before the wait on the previous kernel (weights are never written)
        wq = gl.load(w_ptrs)
        ws = gl.load(s_ptrs)
    if L2_AHEAD > 0:
        first: gl.constexpr = STAGES - 1 if STAGES > 1 else 1
        n_pf = gl.minimum(iters - first, L2_AHEAD)
        if n_pf > 0:
            t_pf = tile0 + first
            _prefetch_l2(w_ptr + local.to(gl.int64) * stride_we + t_pf * TILE_WORDS, n_pf * (TILE_WORDS * 4))
            _prefetch_l2(s_ptr + local.to(gl.int64) * stride_se + t_pf * TILE_SCALES, n_pf * TILE_SCALES)
    has, rows = _tokens(ids_ptr, e, T, TOPK, TOPK_P2, BLOCK_M, xl_m)
    if GATE_UP:
        a_rows = gl.arange(0, BLOCK_M, layout=xl_m)
    else:
        a_rows = rows
    x_off = _act_lanes(BLOCK_K, X4)
    x_ptrs = a_ptr + k0 // 2 + a_rows[None, None, None, :] * stride_am + x_off[:, :, :, None]
    x_mask = has[None, None, None, :] & (x_off[:, :, :, None] >= 0)
    acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=mma)
    _gdc_wait(GDC)  # activations come from the previous kernel; every write below follows it too
    _stamp(tr, 2, TRACE)
    if STAGES > 1:
        for it in range(iters):
            _cta_barrier()  # every lane has read the slot refilled now (tile it - 1's)
            _ring_issue(wsm, ssm, w_ptrs, s_ptrs, it + STAGES - 1, iters, STAGES, TILE_WORDS, TILE_SCALES, W4, S3)
            xp = gl.load(x_ptrs + it * (BLOCK_K // 2), mask=x_mask, other=0)
            _async_copy.wait_group(STAGES - 1)  # this lane's copies of tile it have landed
            _cta_barrier()  # and every other lane's
            wq = wsm.index(it % STAGES).load(W4)
            ws = ssm.index(it % STAGES).load(S3)
            acc = _mx_mma(wq, _scales(ws, BLOCK_N, JH, w3), xp, acc, BLOCK_N, BLOCK_K, BLOCK_M, a_l, b_l)
    else:
        xp = gl.load(x_ptrs, mask=x_mask, other=0)
        acc = _mx_mma(wq, _scales(ws, BLOCK_N, JH, w3), xp, acc, BLOCK_N, BLOCK_K, BLOCK_M, a_l, b_l)
        for _it in range(1, iters):
            x_ptrs += BLOCK_K // 2
            wq = gl.load((w_base + _it * TILE_WORDS) + w_off)
            ws = gl.load((s_base + _it * TILE_SCALES) + s_off)
            xp = gl.load(x_ptrs, mask=x_mask, other=0)
            acc = _mx_mma(wq, _scales(ws, BLOCK_N, JH, w3), xp, acc, BLOCK_N, BLOCK_K, BLOCK_M, a_l, b_l)
    acc = acc * _MMA_UNSCALE
    _stamp(tr, 3, TRACE)
    pl_n: gl.constexpr = gl.SliceLayout(1, mma)
    pl_m: gl.constexpr = gl.SliceLayout(0, mma)
    o_rows = gl.convert_layout(rows, pl_m)
    o_has = gl.convert_layout(has.to(gl.int32), pl_m) > 0
    r = gl.arange(0, BLOCK_N, layout=pl_n)
    if GATE_UP:
        if split > 1:
            col = pid_n * BLOCK_N + r  # h [parts, pairs, 2I] in the tiles' row order (only this module reads it)
            p_ptrs = h_ptr + o_rows[None, :] * stride_hm + col[:, None]
            p_mask = o_has[None, :] & (col[:, None] >= 0)
            gl.store(p_ptrs + pid_k * stride_hk, acc, mask=p_mask)
            if not ACT_LAUNCH:  # the last part of the tile adds them (else _ranked_act_kernel)
                _fence_gpu()
                c_ptr = cnt_ptr + p * GRID_N + pid_n
                done = gl.atomic_add(c_ptr, 1, sem="acq_rel", scope="gpu")
                if done == split - 1:
                    _fence_gpu()
                    tot = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=mma)
                    for q0 in range(0, split, FIX_UNROLL):  # FIX_UNROLL parts' loads in flight at once
                        for j in gl.static_range(FIX_UNROLL):
                            tot += gl.load(p_ptrs + (q0 + j) * stride_hk, mask=p_mask & (q0 + j < split), other=0.0,
                                           cache_modifier=".cg")
                    gl.atomic_xchg(c_ptr, 0, sem="relaxed", scope="gpu")
                    _store_act(tot, y_ptr, stride_ym, rows, has, pid_n, BLOCK_N, BLOCK_M)
                    if TRACE:
                        gl.store(tr + 9, 1)
        else:
            _store_act(acc, y_ptr, stride_ym, rows, has, pid_n, BLOCK_N, BLOCK_M)
    else:
        o_n = pid_n * BLOCK_N + r
        y_ptrs = y_ptr + o_rows[None, :] * stride_ym + o_n[:, None]
        y_mask = o_has[None, :] & (o_n[:, None] >= 0)
        if NORM:
            _norm_down(acc, y_ptrs, y_mask, o_rows, o_has, o_n, local, p, pid_n, split, nrm[0], nrm[1], nrm[2],
                       nrm[3], nrm[4], nrm[5], nrm[6], nrm[7], GRID_N, TOPK, nrm[8], nrm[9])
        else:
            gl.atomic_add(y_ptrs, acc, mask=y_mask, sem="relaxed", scope="gpu")
    _stamp(tr, 4, TRACE)


@gluon.jit
def _item_of(item, n_own, owner, rank, offs, ids, GRID_N: gl.constexpr):
    """Item ``item`` of the ranked list (owner rank fastest, then row block, then K part): its expert's global id,
    row block and K part (for an item past the list's end: values of no use, the caller masks them)."""
    sel = (owner > 0) & (rank == item % n_own)
    e = gl.sum(gl.where(sel, ids, 0), axis=0)
    return e, (item // n_own) % GRID_N, item // (n_own * GRID_N)


# lane 0 of the warp adds 1 to the int32 at $1 and gets the old value (the other lanes 0): the warp goes on until
# the value is read (_lane0_bcast), where a scalar atomic would stop it for the round trip
_CLAIM_ASM = gl.constexpr(
    "{ .reg .u32 ln; .reg .pred pp; mov.u32 ln, %laneid; setp.eq.u32 pp, ln, 0; mov.u32 $0, 0; "
    "@pp atom.global.relaxed.gpu.add.u32 $0, [$1], 1; }")


@gluon.jit
def _claim_lane0(ptr):
    """Lane 0's claim of the counter at ``ptr`` (see _CLAIM_ASM)."""
    return gl.inline_asm_elementwise(_CLAIM_ASM, "=r,l", [ptr], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _lane0_bcast(v):
    """Lane 0's ``v`` in every lane (shfl.sync)."""
    return gl.inline_asm_elementwise("shfl.sync.idx.b32 $0, $1, 0, 0x1f, 0xffffffff;", "=r,r", [v], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _tokens_of(ids, offs, e, T, TOPK: gl.constexpr, BLOCK_M: gl.constexpr, P_P2: gl.constexpr,
               layout: gl.constexpr):
    """_tokens from the slots' ids already in registers (_rank_owners' ``ids`` and ``offs``, P_P2 slots): for
    tokens 0..BLOCK_M-1, routed to e, and the pair row t*TOPK + slot (t*TOPK where not), no memory read."""
    l2: gl.constexpr = gl.BlockedLayout([1, P_P2 // 32], [1, 32], [1, 1], [1, 0])
    sl: gl.constexpr = gl.SliceLayout(0, l2)
    idc = gl.convert_layout(ids, sl)
    oc = gl.convert_layout(offs, sl)
    m = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, l2))
    hit = (idc[None, :] == e) & (oc[None, :] // TOPK == m[:, None]) & (oc[None, :] < T * TOPK)
    rows = gl.max(gl.where(hit, oc[None, :], -1), axis=1)
    has = rows >= 0
    rows = gl.where(has, rows, m * TOPK)
    return gl.convert_layout(has, layout), gl.convert_layout(rows, layout)


@gluon.jit
def _claimed_down(first, n_items, G, claim_ptr, n_own, owner, rank, offs, ids, split, expert_base, a_ptr, ids_ptr,
                  w_ptr, s_ptr, y_ptr, T, stride_am, stride_we, stride_se, stride_ym,
                  K: gl.constexpr, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GRID_N: gl.constexpr,
                  W5: gl.constexpr, X4: gl.constexpr, S3: gl.constexpr, GDC: gl.constexpr, STAGES: gl.constexpr,
                  tr, TRACE: gl.constexpr, P_P2: gl.constexpr, SHARDS: gl.constexpr = 1):
    """The down GEMM's items handed out at run time (fifteenth round, ``claim_down``): the items and the G programs
    fall into SHARDS shards (item and program indices modulo SHARDS; G a multiple of it), each with its counter at
    ``claim_ptr`` + shard, so that fewer programs add to one address; this program takes item ``first``, then each
    next one of its shard from the shard's counter (item shard + SHARDS x (value + G / SHARDS)), until one is past
    ``n_items``; every item's part is added (relaxed atomics) into y [pairs, L] fp32 as
    _ranked_tile's down GEMM does. One cp.async ring of STAGES slots runs through the program's items: the tiles of
    the next item are requested while the last of the current one are decoded, and the next item is claimed
    (after the wait on the previous kernel) when its first tile is requested, its result needed one item later.
    Needs STAGES - 1 <= the item's K tiles ((K / BLOCK_K) / split), so that the request cursor is never more than
    one item ahead of the decode; the caller checks it."""
    J: gl.constexpr = BLOCK_K // 32
    JH: gl.constexpr = J // 4
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[1, 1], instr_shape=[16, 8])
    a_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=8)
    b_l: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=8)
    TILE_WORDS: gl.constexpr = BLOCK_N * BLOCK_K // 8
    TILE_SCALES: gl.constexpr = BLOCK_N * BLOCK_K // 32
    QH: gl.constexpr = (BLOCK_N // 8) * JH
    KT: gl.constexpr = K // BLOCK_K
    iters = KT // split
    W4: gl.constexpr = gl.SliceLayout(4, W5)
    w3: gl.constexpr = gl.SliceLayout(3, W4)
    w_off, s_off = _tile_lanes(BLOCK_N, BLOCK_K, W5, S3)
    xl_m: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, X4))))
    x_off = _act_lanes(BLOCK_K, X4)
    pl_n: gl.constexpr = gl.SliceLayout(1, mma)
    pl_m: gl.constexpr = gl.SliceLayout(0, mma)
    r_n = gl.arange(0, BLOCK_N, layout=pl_n)
    wsm = gl.allocate_shared_memory(gl.int32, [STAGES, BLOCK_N, 4, JH, 4],
                                    gl.SwizzledSharedLayout(1, 1, 1, order=[3, 1, 0, 2]))
    ssm = gl.allocate_shared_memory(gl.uint8, [STAGES, 8, 4, QH], gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0]))
    # the request cursor: item_i, its next tile t_i, its weights' bases; its tokens (rows_i, has_i) for the decode
    item_i = first
    e_i, n_i, k_i = _item_of(item_i, n_own, owner, rank, offs, ids, GRID_N)
    tile0 = (n_i * KT + k_i * iters).to(gl.int64)
    wb_i = w_ptr + (e_i - expert_base).to(gl.int64) * stride_we + tile0 * TILE_WORDS
    sb_i = s_ptr + (e_i - expert_base).to(gl.int64) * stride_se + tile0 * TILE_SCALES
    for s0 in gl.static_range(STAGES - 1):  # before the wait on the previous kernel (weights never change)
        _ring_issue(wsm, ssm, wb_i + w_off, sb_i + s_off, s0, gl.where(item_i < n_items, iters, 0), STAGES,
                    TILE_WORDS, TILE_SCALES, W4, S3)
    t_i = item_i * 0 + (STAGES - 1)
    has_i, rows_i = _tokens_of(ids, offs, e_i, T, TOPK, BLOCK_M, P_P2, xl_m)
    _gdc_wait(GDC)  # activations come from the previous kernel, the counter was zeroed before it ended
    _stamp(tr, 2, TRACE)
    shard = first % SHARDS
    c_ptr = claim_ptr + shard
    # the claims run two items ahead: next_i (its value in every lane) and pend (lane 0's, not yet read)
    next_i = (_lane0_bcast(_claim_lane0(c_ptr)) + G // SHARDS) * SHARDS + shard
    pend = n_items + next_i * 0
    if next_i < n_items:
        pend = _claim_lane0(c_ptr)
    # the decode cursor: item_c (the request cursor's item or the one before), its tile t_c
    item_c = item_i
    t_c = item_i * 0
    n_c = n_i
    has_c = has_i
    rows_c = rows_i
    xb_c = a_ptr + (k_i * iters * (BLOCK_K // 2)).to(gl.int64)
    f = item_i * 0
    acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=mma)
    while item_c < n_items:
        _cta_barrier()  # every lane has read the slot refilled now (flat tile f - 1's)
        if t_i == iters:  # the request cursor moves to the claimed item and claims the one after it
            item_i = next_i
            next_i = (_lane0_bcast(pend) + G // SHARDS) * SHARDS + shard  # claimed an item ago: landed
            if next_i < n_items:  # no claim past the first one past the end: n_items claims in all
                pend = _claim_lane0(c_ptr)
            e_i, n_i, k_i = _item_of(item_i, n_own, owner, rank, offs, ids, GRID_N)
            tile0 = (n_i * KT + k_i * iters).to(gl.int64)
            wb_i = w_ptr + (e_i - expert_base).to(gl.int64) * stride_we + tile0 * TILE_WORDS
            sb_i = s_ptr + (e_i - expert_base).to(gl.int64) * stride_se + tile0 * TILE_SCALES
            has_i, rows_i = _tokens_of(ids, offs, e_i, T, TOPK, BLOCK_M, P_P2, xl_m)
            t_i = t_i * 0
        slot_i = (f + STAGES - 1) % STAGES
        ok_w = (gl.full(w_off.shape, 0, gl.int32, layout=W4) + item_i) < n_items
        ok_s = (gl.full(s_off.shape, 0, gl.int32, layout=S3) + item_i) < n_items
        _cp_async(wsm.index(slot_i), wb_i + w_off + t_i * TILE_WORDS, mask=ok_w)
        _cp_async(ssm.index(slot_i), sb_i + s_off + t_i * TILE_SCALES, mask=ok_s)
        _async_copy.commit_group()
        t_i += 1
        x_ptrs = xb_c + rows_c[None, None, None, :] * stride_am + x_off[:, :, :, None] + t_c * (BLOCK_K // 2)
        x_mask = has_c[None, None, None, :] & (x_off[:, :, :, None] >= 0)
        xp = gl.load(x_ptrs, mask=x_mask, other=0)
        _async_copy.wait_group(STAGES - 1)  # this lane's copies of flat tile f have landed
        _cta_barrier()  # and every other lane's
        wq = wsm.index(f % STAGES).load(W4)
        ws = ssm.index(f % STAGES).load(S3)
        acc = _mx_mma(wq, _scales(ws, BLOCK_N, JH, w3), xp, acc, BLOCK_N, BLOCK_K, BLOCK_M, a_l, b_l)
        t_c += 1
        f += 1
        if t_c == iters:  # the item's part into y; the decode moves to the request cursor's item
            o_rows = gl.convert_layout(rows_c, pl_m)
            o_has = gl.convert_layout(has_c.to(gl.int32), pl_m) > 0
            o_n = n_c * BLOCK_N + r_n
            gl.atomic_add(y_ptr + o_rows[None, :] * stride_ym + o_n[:, None], acc * _MMA_UNSCALE,
                          mask=o_has[None, :] & (o_n[:, None] >= 0), sem="relaxed", scope="gpu")
            acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=mma)
            item_c = item_i
            n_c = n_i
            has_c = has_i
            rows_c = rows_i
            xb_c = a_ptr + (k_i * iters * (BLOCK_K // 2)).to(gl.int64)
            t_c = t_c * 0
    _async_copy.wait_group(0)  # no copy left in flight as the program's shared memory is given back
    _stamp(tr, 3, TRACE)


@gluon.jit
def _ranked_item(g, n_own, owner, rank, offs, ids, split, per_k, expert_base, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr,
                 h_ptr, cnt_ptr, T, stride_am, stride_we, stride_se, stride_ym, stride_hm, stride_hk,
                 K: gl.constexpr, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GRID_N: gl.constexpr, GATE_UP: gl.constexpr,
                 W5: gl.constexpr, X4: gl.constexpr, S3: gl.constexpr, GDC: gl.constexpr, STAGES: gl.constexpr,
                 FIX_UNROLL: gl.constexpr, pf_w_ptr, pf_s_ptr, pf_stride_w, pf_stride_s, PF_WBYTES: gl.constexpr,
                 PF_SBYTES: gl.constexpr, PF_MAX_OWN: gl.constexpr, tr, TRACE: gl.constexpr, ACT_LAUNCH: gl.constexpr,
                 L2_AHEAD: gl.constexpr = 0, nrm=None, NORM: gl.constexpr = False):
    """Item g of the ranked list (g < its length): its owning slot and expert, the down weights' L2 prefetch
    (PF_MAX_OWN), then _ranked_tile."""
    if TRACE:
        gl.store(tr + 8, split)
    r = g % n_own
    sel = (owner > 0) & (rank == r)
    p = gl.sum(gl.where(sel, offs, 0), axis=0)
    e = gl.sum(gl.where(sel, ids, 0), axis=0)
    if PF_MAX_OWN > 0:
        if n_own <= PF_MAX_OWN:  # the weights never change: before the wait on the previous kernel
            lo = (e - expert_base).to(gl.int64)
            _prefetch_share(pf_w_ptr + lo * pf_stride_w, PF_WBYTES, g // n_own, GRID_N * split)
            _prefetch_share(pf_s_ptr + lo * pf_stride_s, PF_SBYTES, g // n_own, GRID_N * split)
    _ranked_tile(e - expert_base, e, (g // n_own) % GRID_N, g // per_k, split, a_ptr, ids_ptr, w_ptr, s_ptr,
                 y_ptr, h_ptr, cnt_ptr, p, T, stride_am, stride_we, stride_se, stride_ym, stride_hm,
                 stride_hk, K, TOPK, TOPK_P2, BLOCK_M, BLOCK_N, BLOCK_K, GRID_N, GATE_UP, W5, X4, S3, GDC,
                 STAGES, FIX_UNROLL, tr, TRACE, ACT_LAUNCH, L2_AHEAD, nrm, NORM)


@gluon.jit(do_not_specialize=["T", "expert_base", "n_local", "budget", "z1_numel", "z2_numel", "claim_G",
                              "claim_budget"])
def _ranked_gemm_kernel(a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr, h_ptr, cnt_ptr, z1_ptr, z2_ptr,
                        T, expert_base, n_local, budget, z1_numel, z2_numel,
                        stride_am, stride_we, stride_se, stride_ym, stride_hm, stride_hk,
                        K: gl.constexpr, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, P_P2: gl.constexpr,
                        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                        GRID_N: gl.constexpr, LOG_MAX: gl.constexpr, GATE_UP: gl.constexpr,
                        W5: gl.constexpr, X4: gl.constexpr, S3: gl.constexpr, ZERO_BLOCK: gl.constexpr,
                        GDC: gl.constexpr, STAGES: gl.constexpr = 0, WAVE_COST: gl.constexpr = 0,
                        FIX_UNROLL: gl.constexpr = 1, pf_w_ptr=None, pf_s_ptr=None, pf_stride_w=0, pf_stride_s=0,
                        PF_WBYTES: gl.constexpr = 0, PF_SBYTES: gl.constexpr = 0, PF_MAX_OWN: gl.constexpr = 0,
                        tr_ptr=None, TRACE: gl.constexpr = False, ACT_LAUNCH: gl.constexpr = False,
                        claim_ptr=None, claim_G=0, claim_budget=0, LOG_MAX_C: gl.constexpr = 0,
                        CLAIM: gl.constexpr = False, CLAIM_RESET: gl.constexpr = False, CLAIM_MIN: gl.constexpr = 2,
                        SHARDS: gl.constexpr = 1, L2_AHEAD: gl.constexpr = 0, CARVE: gl.constexpr = -1,
                        ncnt_ptr=None, nrm_ptr=None, wts_ptr=None, g_ptr=None, o_ptr=None, stride_g=0, stride_om=0,
                        eps=0.0, NORM: gl.constexpr = False, L_OUT: gl.constexpr = 1, P_MAX: gl.constexpr = 1):
    """Program g: item g of the ranked list (owner rank fastest, then row block, then K part), if any; see
    _ranked_tile. GATE_UP programs also zero ZERO_BLOCK elements g of z1 [z1_numel] and z2 [z2_numel].
    PF_MAX_OWN > 0 (GATE_UP; seventh round): where at most that many experts are routed here, each item first
    asks for its share of its expert's down weights (PF_WBYTES bytes at pf_w_ptr + local x pf_stride_w, then
    PF_SBYTES of scales) to be brought into L2 (cp.async.bulk.prefetch), so the down GEMM reads L2.
    TRACE: program g's row of tr_ptr [programs, TRACE_SLOTS] int64 gets the timer at its start (0), once it
    has ranked the slots (1), in _ranked_tile (2-4), after the closing wait (5) and at its end (6), and its
    item's split (8).
    CLAIM (the down GEMM; fifteenth round, ``claim_down``): the split is also sized for ``claim_budget`` items
    (_run_split, LOG_MAX_C); where that list holds CLAIM_MIN x claim_G items or more, programs 0..claim_G-1 take
    them at run time (_claimed_down, the counter at ``claim_ptr``) and the others end; else item g as above.
    CLAIM_RESET (the gate/up GEMM): programs 0..SHARDS-1 zero the down GEMM's counters at ``claim_ptr`` after their
    wait (the previous call's down GEMM has ended by then; this call's starts claiming after this kernel ends).
    CARVE: the shared memory carveout asked for this compiled kernel (kernel.set_carveout), unused in the code.
    NORM (the down GEMM; twentieth round, ``norm_down``): each row block's last part does the norm-combine of its
    columns (_norm_down, with ncnt_ptr .. P_MAX) and no launch follows."""
    g = gl.program_id(0)
    nrm = (ncnt_ptr, nrm_ptr, wts_ptr, g_ptr, o_ptr, stride_g, stride_om, eps, L_OUT, P_MAX)
    tr = _trace_open(tr_ptr, g, TRACE)
    _gdc_launch_dependents(GDC)
    owner, rank, offs, ids, n_own = _rank_owners(ids_ptr, T, expert_base, n_local, TOPK, P_P2)
    split = _run_split(n_own, GRID_N, LOG_MAX, budget, K // BLOCK_K, WAVE_COST)
    per_k = n_own * GRID_N
    _stamp(tr, 1, TRACE)
    if CLAIM:
        split_c = _run_split(n_own, GRID_N, LOG_MAX_C, claim_budget, K // BLOCK_K, 0)
        if n_own * GRID_N * split_c >= CLAIM_MIN * claim_G:
            if g < claim_G:
                if TRACE:
                    gl.store(tr + 8, split_c)
                _claimed_down(g, n_own * GRID_N * split_c, claim_G, claim_ptr, n_own, owner, rank, offs, ids, split_c,
                              expert_base, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr, T, stride_am, stride_we, stride_se,
                              stride_ym, K, TOPK, TOPK_P2, BLOCK_M, BLOCK_N, BLOCK_K, GRID_N, W5, X4, S3, GDC,
                              STAGES, tr, TRACE, P_P2, SHARDS)
        elif g < per_k * split:
            _ranked_item(g, n_own, owner, rank, offs, ids, split, per_k, expert_base, a_ptr, ids_ptr, w_ptr, s_ptr,
                         y_ptr, h_ptr, cnt_ptr, T, stride_am, stride_we, stride_se, stride_ym, stride_hm, stride_hk,
                         K, TOPK, TOPK_P2, BLOCK_M, BLOCK_N, BLOCK_K, GRID_N, GATE_UP, W5, X4, S3, GDC, STAGES,
                         FIX_UNROLL, pf_w_ptr, pf_s_ptr, pf_stride_w, pf_stride_s, PF_WBYTES, PF_SBYTES, PF_MAX_OWN,
                         tr, TRACE, ACT_LAUNCH, L2_AHEAD)
    elif g < per_k * split:
        _ranked_item(g, n_own, owner, rank, offs, ids, split, per_k, expert_base, a_ptr, ids_ptr, w_ptr, s_ptr,
                     y_ptr, h_ptr, cnt_ptr, T, stride_am, stride_we, stride_se, stride_ym, stride_hm, stride_hk,
                     K, TOPK, TOPK_P2, BLOCK_M, BLOCK_N, BLOCK_K, GRID_N, GATE_UP, W5, X4, S3, GDC, STAGES,
                     FIX_UNROLL, pf_w_ptr, pf_s_ptr, pf_stride_w, pf_stride_s, PF_WBYTES, PF_SBYTES, PF_MAX_OWN,
                     tr, TRACE, ACT_LAUNCH, L2_AHEAD, nrm, NORM)
    _gdc_wait(GDC)  # every program: this kernel completes after its predecessor
    _stamp(tr, 5, TRACE)
    if CLAIM_RESET:
        if g < SHARDS:
            gl.store(claim_ptr + g, 0)
    if GATE_UP:
        zl: gl.constexpr = gl.BlockedLayout([4], [32], [1], [0])
        zo = g * ZERO_BLOCK + gl.arange(0, ZERO_BLOCK, layout=zl)
        zeros = gl.zeros([ZERO_BLOCK], gl.float32, layout=zl)
        gl.store(z1_ptr + zo, zeros, mask=zo < z1_numel)
        gl.store(z2_ptr + zo, zeros, mask=zo < z2_numel)
    _stamp(tr, 6, TRACE)


@gluon.jit(do_not_specialize=["T", "expert_base", "n_local", "budget"])
def _ranked_act_kernel(ids_ptr, h_ptr, act_ptr, T, expert_base, n_local, budget, stride_hm, stride_hk, stride_am,
                       I: gl.constexpr, TOPK: gl.constexpr, P_P2: gl.constexpr, GRID_N: gl.constexpr,
                       LOG_MAX: gl.constexpr, K_TILES: gl.constexpr, WAVE_COST: gl.constexpr,
                       BLOCK_N: gl.constexpr, COLS: gl.constexpr, UNROLL: gl.constexpr, GDC: gl.constexpr,
                       CARVE: gl.constexpr = -1):
    """``act_launch`` (eleventh round), between the two GEMMs: program g takes pair row g // (I / COLS) and act
    columns COLS x (g % (I / COLS)) onward; where the row's expert is on this card and the gate/up GEMM split K
    (the split it sized on the device: _run_split of the same n_own, GRID_N and budget, computed here again
    before the wait), act[row, j] = silu(gate) x up in BF16 of the sums of the split's parts in h [parts,
    pairs, 2I] (the tiles' row order: act column j's gate at 2 BLOCK_N/2 (j // (BLOCK_N/2)) + j % (BLOCK_N/2),
    its up BLOCK_N/2 further), by the fix-up's own formula (gluon_kernel._silu_mul_bf16). Rows of other cards and
    split 1 (the gate/up GEMM stored act itself): nothing. Every program waits for the gate/up GEMM before it ends."""
    g = gl.program_id(0)
    _gdc_launch_dependents(GDC)
    _owner, _rank, _offs, _ids, n_own = _rank_owners(ids_ptr, T, expert_base, n_local, TOPK, P_P2)
    split = _run_split(n_own, GRID_N, LOG_MAX, budget, K_TILES, WAVE_COST)
    NCB: gl.constexpr = I // COLS
    HALF: gl.constexpr = BLOCK_N // 2
    row = g // NCB
    local = gl.load(ids_ptr + row) - expert_base
    cl: gl.constexpr = gl.BlockedLayout([COLS // 32], [32], [1], [0])
    j = (g % NCB) * COLS + gl.arange(0, COLS, layout=cl)
    gcol = (j // HALF) * BLOCK_N + j % HALF
    base = h_ptr + row.to(gl.int64) * stride_hm + gcol
    _gdc_wait(GDC)  # the parts come from the gate/up GEMM
    if (split > 1) & (local >= 0) & (local < n_local):
        gs = gl.zeros([COLS], gl.float32, layout=cl)
        us = gl.zeros([COLS], gl.float32, layout=cl)
        for q0 in range(0, split, UNROLL):  # UNROLL parts' loads in flight at once
            for q in gl.static_range(UNROLL):
                ok = (j >= 0) & (q0 + q < split)
                gs += gl.load(base + (q0 + q) * stride_hk, mask=ok, other=0.0, cache_modifier=".cg")
                us += gl.load(base + (q0 + q) * stride_hk + HALF, mask=ok, other=0.0, cache_modifier=".cg")
        gl.store(act_ptr + row.to(gl.int64) * stride_am + j, _silu_mul_bf16(gs, us))


_CLAIMS: dict = {}
_NORM_COUNTERS: dict = {}
_RESIDENT: dict = {}


def _norm_counters(device: torch.device, n: int) -> torch.Tensor:
    """``norm_down``'s words, int32 zeros per device and stream (kernel.stream_key): [0] the error word a spin that
    gave up sets (_spin_to; stays 0), [1 + slot x row blocks + row block] the down parts' counters, which the
    kernel puts back to 0 (gluon_kernel._counters, in a registry of their own)."""
    return _counters(device, n, _NORM_COUNTERS)


def norm_errors() -> int:
    """How many of ``norm_down``'s buffers (one a device and stream) have their error word set: a spin there gave
    up (0 unless a down grid was not all resident)."""
    return sum(int(b[0].item()) for bufs in _NORM_COUNTERS.values() for b in bufs)


def _resident(args: tuple, kw: dict) -> int:
    """Programs of _ranked_gemm_kernel compiled for ``args`` and ``kw`` the driver lets reside on one SM
    (kernel.driver_resident, asked once per compiled kernel; 0 where the driver cannot say)."""
    key = (repr(sorted((k, repr(v)) for k, v in kw.items() if not isinstance(v, torch.Tensor))),
           repr([a.dtype if isinstance(a, torch.Tensor) else type(a) for a in args]),
           repr([v.dtype for v in kw.values() if isinstance(v, torch.Tensor)]), args[0].device.index)
    if key not in _RESIDENT:
        ck = _ranked_gemm_kernel.warmup(*args, grid=(1,), **kw)
        ck._init_handles()
        _RESIDENT[key] = driver_resident(ck) or 0
    return _RESIDENT[key]


def _claim_counter(device: torch.device) -> torch.Tensor:
    """The down GEMM's item counters (``claim_down``: one a shard, at most 64), int32, per device and stream
    (kernel.stream_key), zero when made: each call's gate/up GEMM zeroes them for that call's down GEMM."""
    key = stream_key(device)
    if key not in _CLAIMS:
        _CLAIMS[key] = torch.zeros(64, dtype=torch.int32, device=device)
    return _CLAIMS[key]


def experts_forward(x, ids, wts, ex, out, eps: float, *, sms: int, per_sm: int = 24, min_iters: int = 2,
                    pdl: bool = True, maxnreg: int | None = None, partials: bool = False, stages: int = 0,
                    maxnreg_gate_up: int | None = None, wave_cost: int = 0, stages_down: int | None = None,
                    fixup_unroll: int = 1, prefetch_down_mb: float = 0, last_launch: dict | None = None,
                    trace: list | None = None, act_launch: bool | str = False,
                    combine_early: bool = False, per_sm_down: int | None = None, claim_down: int = 0,
                    claim_items: int = 64, claim_shards: int = 1, l2_ahead: int = 0,
                    l2_ahead_down: int | None = None, carveout: int | None = None,
                    norm_down: bool = False) -> torch.Tensor:
    """gluon_kernel.experts_forward's contract for 1..8 tokens (same arguments and output), over the ranked
    list: both GEMMs size their K splits on the device for the experts routed to this card (``run_split``
    with budget per_sm x sms programs and min_iters K tiles per part; per_sm_down, if given, the down GEMM's
    budget instead: its parts are added by atomics, no fix-up, fourteenth round). stages: 0 loads the weight tiles into
    registers one at a time; 2..8 streams them through a cp.async ring of that many slots in shared memory
    (``stages_smem`` bytes a program; sm_80+); stages_down, if given, the down GEMM's (else ``stages``). maxnreg_gate_up: a register cap for the gate/up GEMM alone
    (maxnreg caps both). fixup_unroll: the gate/up split's last part loads that many parts at once (1, 2, 4
    or 8; 1: one after the other). wave_cost > 0: ``run_split``'s wave rule with per_sm x sms resident programs. Raises ValueError for more than 8 tokens or top-k above 8 (the ranks are a 64-bit
    mask of the slots), weights not in the tiled layout, or stages outside 0, 2..8. prefetch_down_mb > 0 (sm_90+):
    where the routed experts' down weights are at most that many MB, the gate/up programs bring them into L2
    (bulk prefetches, each program a share of its expert's) for the down GEMM. trace (a list; kernel.TRACE):
    both GEMMs compiled with their timer stamps, and ("gate_up", buffer), ("down", buffer) appended (then, not in
    partials mode, the norm-combine's ("combine", buffer), kernel.norm_combine; buffers of
    ``trace_buffer``, read after the call; a few instructions a program more, for bench/trace_case.py).
    act_launch (eleventh round): where the gate/up GEMM may split K, its parts are added and silu applied by a
    launch of its own between the GEMMs (_ranked_act_kernel) instead of each tile's last part (no fence, no
    counter in the gate/up GEMM; one launch more); "auto": only where the gate/up GEMM splits K for any number
    of experts routed here (min(pairs, local experts) of them included: ep2tp4 batch 1), so that no call pays the
    launch for a split it did not make. ValueError for any other value. combine_early: kernel.norm_combine's
    ``early`` (thirteenth round). claim_down N > 0 (fifteenth round; needs a down ring, stages_down >= 2): where
    the down GEMM's list, split for claim_items x sms items with parts of at least stages_down - 1 K tiles, holds
    two items or more for each of N x sms programs, those programs take its items at run time from a counter
    (ranked_kernel._claimed_down), so that an SM the memory serves faster takes more of them; else the list as
    without it. ValueError for a negative claim_down or a claim_items below 1. l2_ahead N > 0 (seventeenth round;
    sm_90+, weights whose experts start on 16-byte boundaries): each gate/up program, before its wait, asks for the
    next N K tiles of its item past its ring's to be brought into L2 (_ranked_tile's L2_AHEAD; a hint, results
    unchanged); l2_ahead_down the down GEMM's (default l2_ahead). ValueError for a negative or non-integer one.
    carveout (nineteenth round): kernel.set_carveout's percent for every launch of the call (both GEMMs, the act
    launch, the norm-combine); None: the driver's choice. ValueError outside 0..100. norm_down (twentieth round; not
    partials): the down GEMM's row blocks do the norm-combine (_norm_down) and no launch follows, where every program
    of its grid can be resident at once (the driver's occupancy of the compiled kernel, kernel.driver_resident: its
    row blocks wait for each other; not with claim_down's claims or a carveout); elsewhere the norm-combine launch as
    without it. ValueError for a non-bool."""
    T, L = x.shape
    topk = ids.shape[1]
    I = ex.expert_size
    P = T * topk
    if ex.layout != "tiled":
        raise ValueError("the gluon kernels read ExpertWeights in the tiled layout (ExpertWeights.to_tiled_layout)")
    if not 0 < T <= MAX_TOKENS or topk > 8:
        raise ValueError(f"the ranked kernels run 1 to {MAX_TOKENS} tokens of top-1..8, got {T} of top-{topk}")
    if tuple(out.shape) != ((P, L) if partials else (T, L)) or not out.is_contiguous():
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {(P, L) if partials else (T, L)} (contiguous)")
    if x.dtype != torch.bfloat16 or not x.is_contiguous() or not ids.is_contiguous():
        raise ValueError("x must be contiguous BF16 and ids contiguous (kernel.mxfp4_moe_experts converts them)")
    check_carveout(carveout)
    if not isinstance(norm_down, bool):
        raise ValueError(f"ranked_norm_down must be true or false, got {norm_down!r}")
    stages_down = stages if stages_down is None else stages_down
    for name, st in (("ranked_stages", stages), ("ranked_stages_down", stages_down)):
        if not isinstance(st, int) or not (st == 0 or 2 <= st <= 8):
            raise ValueError(f"{name} must be 0 (register loads) or 2..8 (ring slots), got {st!r}")
    (bn1, bk1), (bn2, bk2) = ex.tiles
    grid_n1, grid_n2 = 2 * I // bn1, L // bn2
    max1, max2 = max_split(L // bk1, min_iters), max_split(I // bk2, min_iters)
    budget = per_sm * sms
    budget2 = (per_sm_down or per_sm) * sms
    bound = min(P, ex.num_local)
    if fixup_unroll not in (1, 2, 4, 8):
        raise ValueError(f"ranked_fixup_unroll must be 1, 2, 4 or 8, got {fixup_unroll!r}")
    if not isinstance(wave_cost, int) or wave_cost < 0:
        raise ValueError(f"ranked_wave_cost must be a non-negative integer (K tiles; 0: off), got {wave_cost!r}")
    g1 = grid_size(bound, grid_n1, max1, budget, L // bk1, wave_cost)
    g2 = grid_size(bound, grid_n2, max2, budget2, I // bk2, wave_cost)
    if not isinstance(claim_down, int) or claim_down < 0 or not isinstance(claim_items, int) or claim_items < 1:
        raise ValueError(f"ranked_claim_down must be a non-negative integer (programs an SM; 0: off) and "
                         f"ranked_claim_items a positive one (items an SM), got {claim_down!r} and {claim_items!r}")
    claim = {}
    l2_ahead_down = l2_ahead if l2_ahead_down is None else l2_ahead_down
    for name, n in (("ranked_l2_ahead", l2_ahead), ("ranked_l2_ahead_down", l2_ahead_down)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"{name} must be a non-negative integer (K tiles brought into L2 ahead; 0: off), got {n!r}")
    if claim_shards not in (1, 2, 4, 8, 16, 32, 64):
        raise ValueError(f"ranked_claim_shards must be a power of two of 1..64, got {claim_shards!r}")
    if claim_down and stages_down >= 2:
        max_c = max_split(I // bk2, max(stages_down - 1, 1))
        programs = claim_down * sms // claim_shards * claim_shards
        claim = {"claim_ptr": _claim_counter(x.device), "claim_G": programs, "claim_budget": claim_items * sms,
                 "LOG_MAX_C": max_c.bit_length() - 1, "SHARDS": claim_shards}
        g2 = max(g2, programs)
    block_m = 8
    carve = {"CARVE": carveout} if carveout is not None else {}
    p_p2 = _pow2(MAX_TOKENS * topk, lo=32)
    lay1, lay2 = layouts(bn1, bk1, block_m), layouts(bn2, bk2, block_m)
    gdc = torch.cuda.get_device_capability(x.device)[0] >= 9
    opts = ({"launch_pdl": pdl and gdc, "GDC": gdc, "num_warps": 1, "TOPK": topk, "TOPK_P2": _pow2(topk),
             "P_P2": p_p2, "BLOCK_M": block_m, "STAGES": stages, "WAVE_COST": wave_cost, "FIX_UNROLL": fixup_unroll}
            | ({"maxnreg": maxnreg} if maxnreg else {}) | carve)
    opts1 = opts | ({"maxnreg": maxnreg_gate_up} if maxnreg_gate_up else {})
    opts2 = opts | {"STAGES": stages_down}
    if gdc:  # the bulk prefetch needs sm_90 and 16-byte aligned experts (a tile's bytes are multiples of 16)
        for o, n, w, sc in ((opts1, l2_ahead, ex.w13, ex.w13_scale), (opts2, l2_ahead_down, ex.w2, ex.w2_scale)):
            if n and all(t.data_ptr() % 16 == 0 and t.stride(0) * t.element_size() % 16 == 0 for t in (w, sc)):
                o["L2_AHEAD"] = n
    act_launch = act_launch_taken(act_launch, bound, grid_n1, max1, budget, L // bk1, wave_cost)
    act = torch.empty(P, I, dtype=torch.bfloat16, device=x.device)
    # not partials: the pre-norm rows [P, L], then (norm_down) each pair row's sum of squares and each owning
    # slot's arrivals (_norm_down), all zeroed by the gate/up GEMM
    ybuf = None if partials else torch.empty(P * L + 2 * P, dtype=torch.float32, device=x.device)
    y = out if partials else ybuf[:P * L].view(P, L)
    # the gate/up parts (fp32; without a split never touched, y stands in: an fp32 pointer all the same)
    h = torch.empty(max1, P, 2 * I, dtype=torch.float32, device=x.device) if max1 > 1 else y
    cnt = _counters(x.device, 4 + P * grid_n1)[4:]
    z2 = ybuf if not partials else out
    z2_numel = 0 if partials else ybuf.numel()
    zero_block = _pow2(-(-max(out.numel(), z2_numel) // g1), lo=128)
    x32, a32 = x.view(torch.int32), act.view(torch.int32)
    w1, w2 = ex.w13.view(torch.int32), ex.w2.view(torch.int32)
    h_strides = (h.stride(1), h.stride(0)) if max1 > 1 else (0, 0)
    pf = {}
    w2_bytes, s2_bytes = ex.w2[0].numel() * ex.w2.element_size(), ex.w2_scale[0].numel()
    if prefetch_down_mb and gdc:
        max_own = int(prefetch_down_mb * 1e6 // (w2_bytes + s2_bytes))
        if max_own > 0 and w2_bytes % 16 == 0 and ex.w2.stride(0) % 16 == 0 and ex.w2_scale.stride(0) % 16 == 0:
            pf = {"pf_w_ptr": ex.w2.view(torch.uint8), "pf_s_ptr": ex.w2_scale.view(torch.uint8),
                  "pf_stride_w": ex.w2.stride(0) * ex.w2.element_size(), "pf_stride_s": ex.w2_scale.stride(0),
                  "PF_WBYTES": w2_bytes, "PF_SBYTES": s2_bytes, "PF_MAX_OWN": max_own}
    tr1: dict = {}
    tr2: dict = {}
    if trace is not None:
        tr1 = {"tr_ptr": trace_buffer(g1, x.device), "TRACE": True}
        tr2 = {"tr_ptr": trace_buffer(g2, x.device), "TRACE": True}
        trace += [("gate_up", tr1["tr_ptr"]), ("down", tr2["tr_ptr"])]
    dn_args = (a32, ids, w2, ex.w2_scale, y, y, cnt, y, y, T, ex.expert_base, ex.num_local, budget2, 0, 0,
               a32.stride(0), w2.stride(0), ex.w2_scale.stride(0), y.stride(0), 0, 0)
    dn_kw = dict(K=I, BLOCK_N=bn2, BLOCK_K=bk2, GRID_N=grid_n2, LOG_MAX=max2.bit_length() - 1, GATE_UP=False,
                 W5=lay2["w5"], X4=lay2["x4"], S3=lay2["s3"], ZERO_BLOCK=128, **opts2, **tr2,
                 **(claim | {"CLAIM": True} if claim else {}))
    # norm_down: not with the down GEMM's claimed items (_claimed_down has no norm-combine) nor with a carveout
    # (the driver's occupancy is asked at its own choice); its buffers made here, before the first launch (a fill
    # between two launches would cut their programmatic dependent launch, in a graph too)
    norm = norm_down and not partials and not claim and carveout is None
    norm_resident = 0
    if norm:
        norm_kw = {"ncnt_ptr": _norm_counters(x.device, 1 + P * grid_n2), "nrm_ptr": ybuf[P * L:],
                   "wts_ptr": wts.contiguous(), "g_ptr": ex.norm_weight, "o_ptr": out,
                   "stride_g": ex.norm_weight.stride(0), "stride_om": out.stride(0), "eps": float(eps), "NORM": True,
                   "L_OUT": L, "P_MAX": P}
        norm_resident = _resident(dn_args, dn_kw | norm_kw)
        norm = norm_resident * sms >= g2
        if norm:
            dn_kw |= norm_kw
    k_gu = _ranked_gemm_kernel[(g1,)](
        x32, ids, w1, ex.w13_scale, act, h, cnt, out, z2, T, ex.expert_base, ex.num_local, budget, out.numel(),
        z2_numel, x32.stride(0), w1.stride(0), ex.w13_scale.stride(0), act.stride(0), *h_strides,
        K=L, BLOCK_N=bn1, BLOCK_K=bk1, GRID_N=grid_n1, LOG_MAX=max1.bit_length() - 1, GATE_UP=True,
        W5=lay1["w5"], X4=lay1["x4"], S3=lay1["s3"], ZERO_BLOCK=zero_block, **opts1, **pf, **tr1,
        **({"ACT_LAUNCH": True} if act_launch else {}),
        **({"claim_ptr": claim["claim_ptr"], "CLAIM_RESET": True, "SHARDS": claim_shards} if claim else {}))
    k_act = k_nc = None
    if act_launch:
        cols = 128
        while cols > 32 and I % cols:
            cols //= 2
        k_act = _ranked_act_kernel[(P * (I // cols),)](
            ids, h, act, T, ex.expert_base, ex.num_local, budget, h.stride(1), h.stride(0), act.stride(0),
            I=I, TOPK=topk, P_P2=p_p2, GRID_N=grid_n1, LOG_MAX=max1.bit_length() - 1, K_TILES=L // bk1,
            WAVE_COST=wave_cost, BLOCK_N=bn1, COLS=cols, UNROLL=min(max1, 8), GDC=gdc, num_warps=1,
            launch_pdl=pdl and gdc, **carve)
    k_dn = _ranked_gemm_kernel[(g2,)](*dn_args, **dn_kw)
    if not partials and not norm:
        k_nc = norm_combine(y, ids, wts, ex, out, eps, gdc=gdc, pdl=pdl and gdc, early=combine_early, trace=trace,
                            carveout=carveout)
    for k in (k_gu, k_act, k_dn):
        set_carveout(k, carveout)
    if last_launch is not None:
        last_launch.clear()
        last_launch.update({"gate_up": k_gu, "down": k_dn, "grids": {"gate_up": (g1,), "down": (g2,)},
                            "max_splits": (max1, max2),
                            "launches": (2 if partials or norm else 3) + act_launch, "norm_down": norm,
                            "norm_resident": norm_resident,
                            "act": k_act, "combine": k_nc,
                            "stages": (stages, stages_down), "prefetch_max_own": pf.get("PF_MAX_OWN", 0),
                            "claim_programs": claim.get("claim_G", 0),
                            "l2_ahead": (opts1.get("L2_AHEAD", 0), opts2.get("L2_AHEAD", 0))})
    return out
