"""Register-direct MXFP4 expert GEMMs for decode, in Gluon (Triton's explicit-layout dialect), NVIDIA sm_80+.

``experts_forward`` runs one chunk of <= 32 tokens in three launches, on ExpertWeights in the tiled layout
(format.to_tiled_layout, done once at load time by glue.prepare_experts):

1. ``_gemm_kernel`` GATE_UP over w13 -> silu(gate) * up in BF16 [pairs, I] (silu fused: a tile holds
   BLOCK_N/2 gate rows and the matching up rows); its slot-0 programs also zero the output;
2. ``_gemm_kernel`` over w2 -> fp32 partial sums [SPLIT_K, pairs, L] (written, no atomics, no memset);
3. ``kernel.norm_combine``: adds the parts, RMSNorm times the expert's norm weight times the router
   weight, added atomically into the output (one program per token and slot).

In partials mode (a TP-split card's share) two launches: the down GEMM stores each pair's pre-norm output
itself (the last program of a tile adds its K parts) and zeroes the rows of pairs whose expert is on
another card.

With ``persistent`` (config, off by default: measured slower, README "third round") each GEMM is a flat grid
of resident programs walking the (slot, row block, K part) items instead of one program per item.

A GEMM program (slot p, tile row block n, K split k) is one warp. It takes the expert of routing slot p
when this slot is the first naming it and the expert is on this card (as in kernel.py; otherwise it ends
at once: no loads, no mma), and computes the tile's rows for the expert's tokens (at
most BLOCK_M = 8, 16 or 32: the mma's N), BLOCK_K at a time. No shared memory, no operand re-assembly:
every value goes from global memory straight into the registers mma.sync reads.

- Weights (the A operand): Triton's mma.sync operand layout with k_width 8 gives lane (g, c) of the warp
  rows g, g+8 (+16 ...) and, within every 32 logical k, 8 consecutive k: one 32-bit word of the `mma`
  bit layout, which decodes into exactly those four BF16 pair registers. The dot's k order is ours to
  choose (the sum does not care), so lane c reads, per row, 16-byte pieces at bytes 64h + 16c of the tile
  row (h = 0 .. BLOCK_K/128 - 1): 4 words whose 32 elements share one E8M0 scale. The tiled layout orders
  the pieces so that one warp-wide 16-byte load is 512 contiguous bytes, and a lane's scales are contiguous.
- Activations (the B operand) are loaded in the same k order (4 x 8 BF16 per piece and token), as int32
  pairs (carried as one register each).
- The accumulator is the mma's own layout.
- Programmatic dependent launch (sm_90+): each program lets the next kernel launch at once and waits for
  the previous one (griddepcontrol) only before it reads activations or writes; the first tile's weights
  are requested before that wait (PEEL, batches up to 8).

The E2M1 decode is kernel.py's `mma` PTX (3 shifts, 6 logic ops, 1 integer multiply and 4 bf16x2
multiplies per word, one integer multiply-add per scale byte), so the results are those of the `mma` decode:
fp32 sums of exact BF16 products, times 2**32 at the end (exact for E8M0 scales 27..160). About 2.11 SASS
instructions per weight element in the K loop (Triton 3.6, sm_90, bench/gemm_sass_check.py; 2.46 before the
sixth round's decode and activation order, the tl.dot kernels 4.07).
"""

from __future__ import annotations

import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from .kernel import (_E2M1_BF16_MMA_ASM, _MMA_FACTOR_BIAS, _MMA_UNSCALE, PLAN_TABLE, _pow2, norm_combine, silu_mul,
                     stream_key, sum_parts)


# the `mma` decode with the word in $4..$7 (one int32 operand broadcast to the 4 element slots of a pack)
# and the factor in $8..$11
_DECODE_ASM = gl.constexpr(_E2M1_BF16_MMA_ASM.value.replace("$5", "$8"))
_DECODE_CONSTRAINTS = gl.constexpr("=r,=r,=r,=r," + ",".join(["r"] * 8))
# BF16 pairs carried as int32 (one register each) back to BF16 (no data movement)
_PAIR_ASM = gl.constexpr("mov.b32 $0, $1;")
_TABLE_AT = gl.constexpr(PLAN_TABLE)  # the run table in the plan buffer (kernel.plan_runs' table)


def _linear(reg, lane, shape, warp=()):
    return gl.DistributedLinearLayout(reg_bases=reg, lane_bases=lane, warp_bases=list(warp), block_bases=[],
                                      shape=shape)


def _pow2_bits(n):
    out, b = [], 1
    while b < n:
        out.append(b)
        b *= 2
    return out


@functools.lru_cache(maxsize=None)
def layouts(block_n: int, block_k: int, block_m: int, warps: int = 1) -> dict:
    """The load layouts whose decoded / reshaped tensors are the mma operand layouts, for a program of ``warps``
    warps (1, 2, 4, 8) that share one token tile: the mma's warps split the BLOCK_N rows in 16-row groups, warp w
    taking rows 16w.. of every 16 x warps (the layout of mma.sync's A operand for warps_per_cta [warps, 1]), and each
    warp loads the whole token tile (the activations' layout is the same in every warp: its warp bases are 0).

    w5: [BLOCK_N, 4 (c), J/4 (h), 4 (jl), 4 (element slot)]: the words are its slice over the last dim
    (lane group c's 16-byte pieces h, row bytes 64h + 16c, 4 words jl each; the element slot is the decode's
    pack); x4: [4 (c), J (j), 4 (pair), 2 (element), BLOCK_M]: BF16 pairs are its slice over the element
    dim; s3: [8 (g), 4 (c), BLOCK_N/8 * J/4]: a lane's scale bytes. J = BLOCK_K // 32, a multiple of 4.
    Raises ValueError for a BLOCK_K that is not a multiple of 128, or several warps with a BLOCK_N below 32 x warps.
    """
    J = block_k // 32
    if J % 4 or J < 4:
        raise ValueError("BLOCK_K must be a multiple of 128")
    if warps not in (1, 2, 4, 8) or warps > 1 and block_n < 32 * warps:
        raise ValueError(f"warps must be 1, 2, 4 or 8 with BLOCK_N >= 32 x warps, got {warps} and {block_n}")
    # the row bits: g in lanes 2..4 (1, 2, 4), then a register (8), the warps (16 .. 8 x warps), then registers
    warp_rows = [16 * w for w in _pow2_bits(warps)]
    rest_rows = [r for r in _pow2_bits(block_n)[4:] if r not in warp_rows]
    # weights: A operand rows g (lanes 2..4), g+8, then 16.. (registers and warps); c = lanes 0..1
    w_reg = ([[0, 0, 0, 0, 1], [0, 0, 0, 0, 2], [0, 0, 0, 1, 0], [0, 0, 0, 2, 0]]
             + [[0, 0, h, 0, 0] for h in _pow2_bits(J // 4)] + [[8, 0, 0, 0, 0]]
             + [[r, 0, 0, 0, 0] for r in rest_rows])
    w_lane = [[0, 1, 0, 0, 0], [0, 2, 0, 0, 0], [1, 0, 0, 0, 0], [2, 0, 0, 0, 0], [4, 0, 0, 0, 0]]
    w5 = _linear(w_reg, w_lane, [block_n, 4, J // 4, 4, 4], [[r, 0, 0, 0, 0] for r in warp_rows])
    # activations: B operand: k in registers (element, pair, j), c in lanes 0..1, tokens in lanes 2..4, then regs
    # (the word jl of a piece fastest after the element: the pairs (jl 0..3, pair p) are one 16-byte vector in
    # memory, format's pair transpose, and mma.sync takes pair p of words jl, jl + 1: adjacent registers)
    x_reg = ([[0, 0, 0, 1, 0], [0, 1, 0, 0, 0], [0, 2, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 2, 0, 0]]
             + [[0, j, 0, 0, 0] for j in _pow2_bits(J)[2:]] + [[0, 0, 0, 0, n] for n in _pow2_bits(block_m)[3:]])
    x_lane = [[1, 0, 0, 0, 0], [2, 0, 0, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 2], [0, 0, 0, 0, 4]]
    x4 = _linear(x_reg, x_lane, [4, J, 4, 2, block_m], [[0, 0, 0, 0, 0] for _ in _pow2_bits(warps)])
    # scales [8 (g), 4 (c), Q*JH]: lane (g, c)'s E8M0 bytes of rows 8q + g, pieces h (contiguous in memory); the
    # warps' rows 16 .. are q's bits 1 ..
    qh, jh = (block_n // 8) * (J // 4), J // 4
    s_warp = [[0, 0, jh * r // 8] for r in warp_rows]
    s3 = _linear([[0, 0, b] for b in _pow2_bits(qh) if [0, 0, b] not in s_warp],
                 [[0, 1, 0], [0, 2, 0], [1, 0, 0], [2, 0, 0], [4, 0, 0]], [8, 4, qh], s_warp)
    return {"w5": w5, "x4": x4, "s3": s3}


@gluon.jit
def _gdc_launch_dependents(GDC: gl.constexpr):
    """Programmatic dependent launch (sm_90+): the next kernel may start its programs (they wait in
    _gdc_wait)."""
    if GDC:
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32,
                                  is_pure=False, pack=1)


@gluon.jit
def _gdc_wait(GDC: gl.constexpr):
    """Wait until the previous kernel has completed and its writes are visible (a no-op without PDL)."""
    if GDC:
        gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


_TIMER_ASM = gl.constexpr("mov.u64 $0, %globaltimer;")
_CLOCK_ASM = gl.constexpr("mov.u64 $0, %clock64;")


@gluon.jit
def _stamp(tr_ptr, slot: gl.constexpr, TRACE: gl.constexpr):
    """TRACE: the GPU's global timer (``%globaltimer``, nanoseconds, one clock for every SM; it may tick
    coarsely) stored as int64 at tr_ptr + slot, and the SM's cycle counter (``%clock64``, fine, but one SM's
    own) at tr_ptr + 16 + slot: the program's row of a trace buffer (bench/trace_case.py; kernel.TRACE). Else
    nothing."""
    if TRACE:
        c = gl.inline_asm_elementwise(_CLOCK_ASM, "=l", [], dtype=gl.int64, is_pure=False, pack=1)
        t = gl.inline_asm_elementwise(_TIMER_ASM, "=l", [], dtype=gl.int64, is_pure=False, pack=1)
        gl.store(tr_ptr + slot, t)
        gl.store(tr_ptr + 16 + slot, c)


@gluon.jit
def _fence_gpu():
    """Every lane: order its earlier global writes before its later accesses at GPU scope, then meet the
    warp (the split-K fix-up's release and acquire around its counter; one-warp programs)."""
    gl.inline_asm_elementwise("fence.acq_rel.gpu; bar.warp.sync -1; // $0", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _silu_mul_bf16(g, u):
    """silu(g) x u of fp32 sums, rounded to BF16: the one formula of every gluon path that stores act (the fix-up,
    the ranked act launch), so that they store the same bits."""
    return (g / (1.0 + gl.exp(-g)) * u).to(gl.bfloat16)


@gluon.jit
def _store_act(acc, y_ptr, stride_ym, rows, has, pid_n, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """silu(gate) * up of a gate/up tile's sums acc [BLOCK_N, BLOCK_M] (rows r and r + BLOCK_N/2: gate and
    up of one act column, in the same lane: a register bit) to act [pairs, I] in BF16."""
    a3 = gl.permute(gl.reshape(acc, [2, BLOCK_N // 2, BLOCK_M]), [1, 2, 0])
    g, u = gl.split(a3)
    act = _silu_mul_bf16(g, u)
    ol_n: gl.constexpr = gl.SliceLayout(1, act.type.layout)
    ol_m: gl.constexpr = gl.SliceLayout(0, act.type.layout)
    o_n = pid_n * (BLOCK_N // 2) + gl.arange(0, BLOCK_N // 2, layout=ol_n)
    o_rows = gl.convert_layout(rows, ol_m)
    o_has = gl.convert_layout(has.to(gl.int32), ol_m) > 0
    gl.store(y_ptr + o_rows[None, :] * stride_ym + o_n[:, None], act, mask=o_has[None, :] & (o_n[:, None] >= 0))


@gluon.jit
def _route(ids_ptr, pid_p, T, expert_base, n_local, TOPK: gl.constexpr, P_P2: gl.constexpr,
           CHUNK: gl.constexpr = 0):
    l1: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    offs_p = gl.arange(0, P_P2, layout=l1)
    ids = gl.load(ids_ptr + offs_p, mask=offs_p < T * TOPK, other=-1)
    e = gl.load(ids_ptr + pid_p)
    n_before = gl.sum(((ids == e) & (offs_p < pid_p)).to(gl.int32), axis=0)
    local = e - expert_base
    if CHUNK > 0:
        # token compaction: n_before is this token's rank among the tokens routed to e (ids are distinct
        # within a token); the slot of the first token of each run of CHUNK owns that run
        owns = (n_before % CHUNK == 0) & (local >= 0) & (local < n_local)
        chunk = n_before // CHUNK
    else:
        owns = (n_before == 0) & (local >= 0) & (local < n_local)
        chunk = n_before * 0
    return e, local, owns, chunk


@gluon.jit
def _tokens(ids_ptr, e, T, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, BLOCK_M: gl.constexpr,
            layout: gl.constexpr):
    """For tokens 0..BLOCK_M-1 (in `layout`, a 1-D slice): routed to e, and its pair row t*TOPK + slot."""
    l2: gl.constexpr = gl.BlockedLayout([1, 1], [4, 8], [1, 1], [1, 0])
    offs_m = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, l2))
    offs_j = gl.arange(0, TOPK_P2, layout=gl.SliceLayout(0, l2))
    m2 = (offs_m[:, None] < T) & (offs_j[None, :] < TOPK)
    ids2 = gl.load(ids_ptr + offs_m[:, None] * TOPK + offs_j[None, :], mask=m2, other=-1)
    match = ids2 == e
    has = gl.max(match.to(gl.int32), axis=1)
    slot = gl.sum(gl.where(match, offs_j[None, :], 0), axis=1)
    rows = offs_m * TOPK + slot
    return gl.convert_layout(has, layout) > 0, gl.convert_layout(rows, layout)


@gluon.jit
def _tokens_compact(ids_ptr, e, T, chunk, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, BLOCK_M: gl.constexpr,
                    layout: gl.constexpr):
    """Token compaction (T <= 32): position m of run ``chunk`` is the token of rank chunk*BLOCK_M + m among
    those routed to e. Returns (valid, token index, pair row token*TOPK + slot), each in ``layout``."""
    l2: gl.constexpr = gl.BlockedLayout([1, 1], [4, 8], [1, 1], [1, 0])
    offs_t = gl.arange(0, 32, layout=gl.SliceLayout(1, l2))
    offs_j = gl.arange(0, TOPK_P2, layout=gl.SliceLayout(0, l2))
    m2 = (offs_t[:, None] < T) & (offs_j[None, :] < TOPK)
    ids2 = gl.load(ids_ptr + offs_t[:, None] * TOPK + offs_j[None, :], mask=m2, other=-1)
    match = ids2 == e
    has = gl.max(match.to(gl.int32), axis=1)
    slot = gl.sum(gl.where(match, offs_j[None, :], 0), axis=1)
    # rank of token t: tokens t' < t routed to e ([t in registers, t' in lanes])
    lr: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0])
    h_r = gl.convert_layout(has, gl.SliceLayout(0, lr))
    t_a = gl.arange(0, 32, layout=gl.SliceLayout(1, lr))
    t_b = gl.arange(0, 32, layout=gl.SliceLayout(0, lr))
    rank = gl.sum(gl.where(t_b[None, :] < t_a[:, None], h_r[None, :], 0), axis=1)
    # position m <- the token whose rank is chunk*BLOCK_M + m ([m in registers, t in lanes])
    rank_b = gl.convert_layout(rank, gl.SliceLayout(0, lr))
    has_b = gl.convert_layout(has, gl.SliceLayout(0, lr))
    slot_b = gl.convert_layout(slot, gl.SliceLayout(0, lr))
    offs_m = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, lr))
    sel = (has_b[None, :] > 0) & (rank_b[None, :] == chunk * BLOCK_M + offs_m[:, None])
    tok = gl.sum(gl.where(sel, t_b[None, :], 0), axis=1)
    valid = gl.max(sel.to(gl.int32), axis=1)
    rows = tok * TOPK + gl.sum(gl.where(sel, slot_b[None, :], 0), axis=1)
    return (gl.convert_layout(valid, layout) > 0, gl.convert_layout(tok, layout),
            gl.convert_layout(rows, layout))


@gluon.jit
def _decode_a(wq, ws, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, a_l: gl.constexpr):
    """The mma's A operand [BLOCK_N, BLOCK_K] BF16 in ``a_l``, decoded from wq int32 words [BLOCK_N, 4, J/4, 4]
    (slice of W5) and ws E8M0 [BLOCK_N, 4, J/4]: logical k = 32(4h + jl) + 8c + 4half + b."""
    J: gl.constexpr = BLOCK_K // 32
    JH: gl.constexpr = J // 4
    f = ws.to(gl.int32) * 0x00800080 + _MMA_FACTOR_BIAS
    f = gl.expand_dims(gl.expand_dims(f, 3), 4)
    w = gl.expand_dims(wq, 4)
    w = gl.broadcast(w, gl.full([BLOCK_N, 4, JH, 4, 4], 0, gl.int32, layout=w.type.layout))[0]
    f = gl.broadcast(f, w)[0]
    lo, hi = gl.inline_asm_elementwise(_DECODE_ASM, _DECODE_CONSTRAINTS, [w, f],
                                       dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4)
    # lo/hi [BLOCK_N, 4, JH, 4, 4]: elements b / 4+b of word (h, jl)
    w6 = gl.join(lo, hi)  # [n, c, h, jl, b, half]
    w6 = gl.permute(w6, [0, 2, 3, 1, 5, 4])  # [n, h, jl, c, half, b]: k = 32(4h + jl) + 8c + 4half + b
    return gl.convert_layout(gl.reshape(w6, [BLOCK_N, BLOCK_K]), a_l)


@gluon.jit
def _mx_mma(wq, ws, xp, acc, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, BLOCK_M: gl.constexpr,
            a_l: gl.constexpr, b_l: gl.constexpr):
    """acc [BLOCK_N, BLOCK_M] += decode(wq, ws) @ x: wq int32 words [BLOCK_N, 4, J/4, 4] (slice of W5),
    ws E8M0 [BLOCK_N, 4, J/4], xp BF16 pairs as int32 [4, J, 4, BLOCK_M] (slice of X4)."""
    J: gl.constexpr = BLOCK_K // 32
    wa = _decode_a(wq, ws, BLOCK_N, BLOCK_K, a_l)
    x = gl.expand_dims(xp, 3)
    x = gl.broadcast(x, gl.full([4, J, 4, 2, BLOCK_M], 0, gl.int32, layout=x.type.layout))[0]
    x = gl.inline_asm_elementwise(_PAIR_ASM, "=r,r,r", [x], dtype=gl.bfloat16, is_pure=True, pack=2)
    x = gl.permute(x, [1, 0, 2, 3, 4])  # [j, c, pair, element, m]: logical k = 32j + 8c + 2pair + element
    xb = gl.convert_layout(gl.reshape(x, [BLOCK_K, BLOCK_M]), b_l)
    return mma_v2(wa, xb, acc)


@gluon.jit
def _scales(ws, BLOCK_N: gl.constexpr, JH: gl.constexpr, layout: gl.constexpr):
    """Scale bytes as loaded [8 (g), 4 (c), Q*JH] -> [BLOCK_N, 4, JH] (row 8q + g) in the words' layout."""
    ws = gl.permute(gl.reshape(ws, [8, 4, BLOCK_N // 8, JH]), [2, 0, 1, 3])  # [q, g, c, h]
    return gl.convert_layout(gl.reshape(ws, [BLOCK_N, 4, JH]), layout)


@gluon.jit
def _tile_out(acc, pid_n, pid_p, pid_k, rows, has, y_ptr, stride_ym, stride_yk, act_ptr, stride_act, cnt_ptr,
              BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr, SPLIT_K: gl.constexpr, GATE_UP: gl.constexpr,
              FIXUP: gl.constexpr, ATOMIC_OUT: gl.constexpr, I_SIZE: gl.constexpr, GRID_N: gl.constexpr,
              mma: gl.constexpr, WARPS: gl.constexpr = 1, TAIL_KS: gl.constexpr = 0, tail_ptr=None, tcnt_ptr=None,
              tail_i=0, tail_parts=0):
    """A GEMM item's sums acc [BLOCK_N, BLOCK_M] (mma layout) of tile row block pid_n, K part pid_k, out: see
    _gemm_tile (GATE_UP: silu(gate) * up to act, or the K part with the fix-up; down: the K part, stored or
    added). WARPS > 1: BLOCK_N is WARPS row blocks of 32 in _gemm_tile's row order (a gate row r and its up row
    r + BLOCK_N / 2 in one lane still, and act column pid_n x BLOCK_N / 2 + r); not with FIXUP.
    TAIL_KS > 0 (twenty-sixth round; SPLIT_K 1, no FIXUP, no ATOMIC_OUT, WARPS 1): acc is K part pid_k of tail_parts
    (run time, 2 .. TAIL_KS) of the last wave's item tail_i; the part's sums go to tail_ptr ([tail_i, part, BLOCK_N,
    16] fp32, BLOCK_M <= 16, tail_parts parts an item), the last part to arrive (a counter a tail item in tcnt_ptr,
    put back to 0) adds them and stores the item as a whole one."""
    acc = acc * _MMA_UNSCALE
    if TAIL_KS > 0:
        tl_n: gl.constexpr = gl.SliceLayout(1, mma)
        tl_m: gl.constexpr = gl.SliceLayout(0, mma)
        TILE: gl.constexpr = BLOCK_N * 16  # (a part's room: 16 tokens, so 8- and 16-token items share one layout)
        t_off = gl.arange(0, BLOCK_N, layout=tl_n)[:, None] * BLOCK_M + gl.arange(0, BLOCK_M, layout=tl_m)[None, :]
        t_ptrs = tail_ptr + (tail_i * tail_parts).to(gl.int64) * TILE + t_off
        gl.store(t_ptrs + pid_k * TILE, acc)
        _fence_gpu()
        t_cnt = tcnt_ptr + tail_i
        if gl.atomic_add(t_cnt, 1, sem="acq_rel", scope="gpu") == tail_parts - 1:
            _fence_gpu()
            tot = gl.load(t_ptrs, cache_modifier=".cg")
            for s in gl.static_range(1, TAIL_KS):
                if s < tail_parts:
                    tot += gl.load(t_ptrs + s * TILE, cache_modifier=".cg")
            gl.atomic_xchg(t_cnt, 0, sem="relaxed", scope="gpu")
            if GATE_UP:
                _store_act(tot, y_ptr, stride_ym, rows, has, pid_n, BLOCK_N, BLOCK_M)
            else:
                t_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=tl_n)
                t_rows = gl.convert_layout(rows, tl_m)
                t_has = gl.convert_layout(has.to(gl.int32), tl_m) > 0
                gl.store(y_ptr + t_rows[None, :] * stride_ym + t_n[:, None], tot,
                         mask=t_has[None, :] & (t_n[:, None] >= 0))
    elif GATE_UP and SPLIT_K > 1:
        # partial sums of tile row r to y + pid_k * stride_yk ([SPLIT_K, pairs, 2I] in w13's row order: gate
        # rows first); kernel.silu_mul adds the parts and applies silu(gate) * up
        pl_n: gl.constexpr = gl.SliceLayout(1, mma)
        pl_m: gl.constexpr = gl.SliceLayout(0, mma)
        r = gl.arange(0, BLOCK_N, layout=pl_n)
        half = r // (BLOCK_N // 2)
        col = half * I_SIZE + pid_n * (BLOCK_N // 2) + r - half * (BLOCK_N // 2)
        p_rows = gl.convert_layout(rows, pl_m)
        p_has = gl.convert_layout(has.to(gl.int32), pl_m) > 0
        p_ptrs = y_ptr + p_rows[None, :] * stride_ym + col[:, None]
        p_mask = p_has[None, :] & (col[:, None] >= 0)
        gl.store(p_ptrs + pid_k * stride_yk, acc, mask=p_mask)
        if FIXUP:
            # split-K fix-up: the last of the tile's SPLIT_K programs adds the parts (L2: .cg) and stores act;
            # it also puts the counter back to 0 for the next launch
            _fence_gpu()
            c_ptr = cnt_ptr + pid_p * GRID_N + pid_n
            done = gl.atomic_add(c_ptr, 1, sem="acq_rel", scope="gpu")
            if done == SPLIT_K - 1:
                _fence_gpu()
                tot = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=mma)
                for s in gl.static_range(SPLIT_K):
                    tot += gl.load(p_ptrs + s * stride_yk, mask=p_mask, other=0.0, cache_modifier=".cg")
                gl.atomic_xchg(c_ptr, 0, sem="relaxed", scope="gpu")
                _store_act(tot, act_ptr, stride_act, rows, has, pid_n, BLOCK_N, BLOCK_M)
    elif GATE_UP:
        _store_act(acc, y_ptr, stride_ym, rows, has, pid_n, BLOCK_N, BLOCK_M)
    else:
        ol_n2: gl.constexpr = gl.SliceLayout(1, mma)
        ol_m2: gl.constexpr = gl.SliceLayout(0, mma)
        o_n2 = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=ol_n2)
        if WARPS > 1:  # logical row r -> row r % 16 + 16 (r // (16 WARPS)) of row block (r // 16) % WARPS
            o_r2 = gl.arange(0, BLOCK_N, layout=ol_n2)
            o_n2 = pid_n * BLOCK_N + (o_r2 // 16) % WARPS * (BLOCK_N // WARPS) + o_r2 % 16 + 16 * (o_r2 // (16 * WARPS))
        o_rows2 = gl.convert_layout(rows, ol_m2)
        o_has2 = gl.convert_layout(has.to(gl.int32), ol_m2) > 0
        o_mask = o_has2[None, :] & (o_n2[:, None] >= 0)
        y_rows = y_ptr + o_rows2[None, :] * stride_ym + o_n2[:, None]
        if ATOMIC_OUT:
            # partials mode: this K part added into out (act_ptr, zeroed by the gate/up kernel)
            gl.atomic_add(act_ptr + o_rows2[None, :] * stride_act + o_n2[:, None], acc, mask=o_mask,
                          sem="relaxed", scope="gpu")
        else:
            gl.store(y_rows + pid_k * stride_yk, acc, mask=o_mask)
        if FIXUP:
            # partials mode: the last of the tile's SPLIT_K programs adds the parts (L2: .cg) and stores the
            # pairs' rows to act_ptr (out [pairs, L]); the counter goes back to 0 (as in the gate/up fix-up)
            _fence_gpu()
            c_ptr2 = cnt_ptr + pid_p * GRID_N + pid_n
            done2 = gl.atomic_add(c_ptr2, 1, sem="acq_rel", scope="gpu")
            if done2 == SPLIT_K - 1:
                _fence_gpu()
                tot2 = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=mma)
                for s2 in gl.static_range(SPLIT_K):
                    tot2 += gl.load(y_rows + s2 * stride_yk, mask=o_mask, other=0.0, cache_modifier=".cg")
                gl.atomic_xchg(c_ptr2, 0, sem="relaxed", scope="gpu")
                gl.store(act_ptr + o_rows2[None, :] * stride_act + o_n2[:, None], tot2, mask=o_mask)



def _gemm_tile_fn(pid_p, pid_n, pid_k, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr, out_ptr, T, expert_base, n_local,
               out_numel, stride_am, stride_we, stride_se, stride_ym, stride_yk,
               K: gl.constexpr, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, P_P2: gl.constexpr,
               BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, SPLIT_K: gl.constexpr,
               GATE_UP: gl.constexpr, W5: gl.constexpr, X4: gl.constexpr, S3: gl.constexpr,
               ZERO_BLOCK: gl.constexpr, GDC: gl.constexpr, I_SIZE: gl.constexpr, PEEL: gl.constexpr,
               FIXUP: gl.constexpr, act_ptr, cnt_ptr, stride_act, CHUNK: gl.constexpr, ZERO_PAIRS: gl.constexpr,
               ATOMIC_OUT: gl.constexpr, GRID_N: gl.constexpr, ROUTED: gl.constexpr = False, e_in=0,
               chunk_in=0, DYN_SPLIT: gl.constexpr = False, split_rt=1, SUB_K: gl.constexpr = 0,
               ROWS: gl.constexpr = 1, TOK_TABLE: gl.constexpr = False, tab_ptr=None, WARPS: gl.constexpr = 1,
               TAIL_KS: gl.constexpr = 0, tail_ptr=None, tcnt_ptr=None, tail_i=0):
    """One work item: tile row block pid_n of the expert of slot pid_p, K range pid_k of SPLIT_K.

    ROUTED (the run list, seventh round): slot pid_p owns run chunk_in of expert e_in (local to this card),
    as kernel._plan_runs_kernel ranked it; no routing here, and no zeroing (the kernel does it). DYN_SPLIT:
    K part pid_k of split_rt (run time; with ATOMIC_OUT) instead of SPLIT_K.

    GATE_UP: a = x by token [T, K]; the tile's rows are BLOCK_N/2 gate rows then the matching up rows
    (the tiled w13), and the program stores silu(gate) * up in BF16 to y = act [pairs, I] (SPLIT_K 1), or
    with SPLIT_K > 1 its fp32 partial sums to y + pid_k * stride_yk ([SPLIT_K, pairs, 2I], w13's row
    order) for kernel.silu_mul; with FIXUP the last program of the tile's SPLIT_K to finish (a counter per
    (slot, row block) in cnt_ptr, zero before and after the launch) adds the parts and stores silu(gate) * up
    to act_ptr [pairs, I] (row stride stride_act) itself: no silu launch.
    Else (down): a = act by pair; the program stores its partial sums (fp32) to y + pid_k * stride_yk
    ([SPLIT_K, pairs, L]; the norm-combine adds the parts). a_ptr / w_ptr are int32 views (strides in
    int32 units); w in the tiled layout (format.to_tiled_layout, tiles BLOCK_N x BLOCK_K).

    SUB_K (eighth round; 0: BLOCK_K): each tile is loaded and multiplied SUB_K of its K at a time (its pieces
    h in groups of SUB_K / 128; W5 / X4 / S3 are layouts(BLOCK_N, SUB_K, BLOCK_M)), so a 16-token run holds half
    a tile's activations (32 registers, not 64) and compiles without spills; not with PEEL.

    ROWS 2 (twelfth round; not with PEEL or FIXUP): the item is row blocks pid_n and pid_n + 1, multiplied in one K
    loop with the same activation registers, so that the run's activations are loaded once for both. TOK_TABLE
    (twelfth round, ROUTED): the run's tokens are the BLOCK_M pair rows at tab_ptr (the plan's run table: -1 past its
    tokens) instead of being ranked here from the routing ids.

    WARPS > 1 (twenty-first round; BLOCK_N 32, not with ROWS 2, FIXUP or PEEL): the item is WARPS row blocks,
    pid_n x WARPS and on, one warp each, multiplied against one token tile that every warp loads (the same
    addresses at about the same time: the L1 serves the run's activations once for the program, not once a row
    block); W5 / X4 / S3 are layouts(BLOCK_N x WARPS, ..., WARPS). The program's logical row r is row
    r % 16 + 16 (r // (16 WARPS)) of row block pid_n x WARPS + (r // 16) % WARPS, the rows mma.sync's warps take."""
    J: gl.constexpr = BLOCK_K // 32
    JH: gl.constexpr = J // 4
    KC: gl.constexpr = SUB_K if SUB_K > 0 else BLOCK_K
    JHC: gl.constexpr = KC // 128
    NSUB: gl.constexpr = BLOCK_K // KC
    BN: gl.constexpr = BLOCK_N * WARPS  # the program's rows (WARPS row blocks)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, 8])
    a_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=8)
    b_l: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=8)
    if ROUTED:
        e = e_in
        local = e_in - expert_base
        owns = local >= 0  # always: the list holds local experts only
        chunk = chunk_in
    else:
        e, local, owns, chunk = _route(ids_ptr, pid_p, T, expert_base, n_local, TOPK, P_P2, CHUNK)
    is_local = ((local >= 0) & (local < n_local)).to(gl.int32)
    local = gl.where(owns, local, 0)
    if DYN_SPLIT:
        ITERS = (K // BLOCK_K) // split_rt
    else:
        ITERS = K // BLOCK_K // SPLIT_K
    TILE_WORDS: gl.constexpr = BLOCK_N * BLOCK_K // 8
    k0 = pid_k * (ITERS * BLOCK_K)

    # only a program that owns an expert (and a run of its tokens) computes: the others end here (no
    # routing of tokens, no loads, no mma)
    if owns:
        # words [BLOCK_N, 4, JH, 4] of the tile: row r = 8q + g, lane group c, piece h, word jl; the tile's
        # 16-byte pieces are ordered (q, h, g, c) (format.to_tiled_layout): one load is a warp's 512 bytes
        W4: gl.constexpr = gl.SliceLayout(4, W5)
        w3: gl.constexpr = gl.SliceLayout(3, W4)
        wl_n: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, w3))
        wl_c: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(2, w3))
        wl_h: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, w3))
        wl_j: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, W4)))
        offs_r = gl.arange(0, BN, layout=wl_n)
        offs_c = gl.arange(0, 4, layout=wl_c)
        offs_h = gl.arange(0, JHC, layout=wl_h)
        offs_j = gl.arange(0, 4, layout=wl_j)
        tile0 = (pid_n * WARPS * (K // BLOCK_K) + k0 // BLOCK_K).to(gl.int64)
        w_base = w_ptr + local.to(gl.int64) * stride_we + tile0 * TILE_WORDS
        if WARPS > 1:  # logical row r: row rr of row block (r // 16) % WARPS past the first (see the docstring)
            rr = offs_r % 16 + 16 * (offs_r // (16 * WARPS))
            piece = (((rr[:, None, None] // 8) * JH + offs_h[None, None, :]) * 8 + rr[:, None, None] % 8) * 4 \
                + offs_c[None, :, None] + ((offs_r // 16) % WARPS * ((K // BLOCK_K) * TILE_WORDS // 4))[:, None, None]
        else:
            piece = (((offs_r[:, None, None] // 8) * JH + offs_h[None, None, :]) * 8 + offs_r[:, None, None] % 8) * 4 \
                + offs_c[None, :, None]
        # the loops below carry the tile's offsets as scalars and add them to one lane tensor a load: the compiler
        # then keeps one address a lane and its pieces as immediate offsets (a tensor of pointers carried through
        # the loop is four 64-bit registers a lane for w and four for its scales; at 96 registers that spilled)
        w_lane = piece[:, :, :, None] * 4 + offs_j[None, None, None, :]
        # scales [8, 4, Q*JH]: lane (g, c)'s bytes, contiguous; the tile's scale block is (g, c, q, h)
        QH: gl.constexpr = (BLOCK_N // 8) * JH
        TILE_SCALES: gl.constexpr = BLOCK_N * BLOCK_K // 32
        sl_g: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, S3))
        sl_c: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(2, S3))
        sl_e: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, S3))
        s_g = gl.arange(0, 8, layout=sl_g)
        s_c = gl.arange(0, 4, layout=sl_c)
        s_e = gl.arange(0, (BN // 8) * JHC, layout=sl_e)
        s_base = s_ptr + local.to(gl.int64) * stride_se + tile0 * TILE_SCALES
        if WARPS > 1:  # logical row group q: group q % 2 + 2 (q // (2 WARPS)) of row block (q // 2) % WARPS
            s_q = s_e // JHC
            s_e = (s_q % 2 + 2 * (s_q // (2 * WARPS))) * JH + s_e % JHC \
                + (s_q // 2) % WARPS * ((K // BLOCK_K) * TILE_SCALES)
        elif NSUB > 1:
            s_e = (s_e // JHC) * JH + s_e % JHC  # sub-tile 0's bytes: pieces h < JHC of every row group q
        s_lane = (s_g[:, None, None] * 4 + s_c[None, :, None]) * QH + s_e[None, None, :]

        # activation pairs [4, J, 4, BLOCK_M]: lane group c, word j = 4h + jl of its run, pair p, token; pair p
        # of logical word (c, j) is the weights' word 16h + 4c + jl's pair p: BF16 pair 64h + 16c + 4p + jl
        # of the row (format's pair transpose inside each scale block)
        X3: gl.constexpr = gl.SliceLayout(3, X4)
        xs: gl.constexpr = gl.SliceLayout(3, X3)
        xl_c: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, xs))
        xl_j: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(2, xs))
        xl_p: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, xs))
        xl_m: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, X3)))
        if TOK_TABLE:
            pr = gl.load(tab_ptr + gl.arange(0, BLOCK_M, layout=xl_m))
            has = pr >= 0
            rows = gl.maximum(pr, 0)
            tok = rows // TOPK
        elif CHUNK > 0:
            has, tok, rows = _tokens_compact(ids_ptr, e, T, chunk, TOPK, TOPK_P2, BLOCK_M, xl_m)
        else:
            has, rows = _tokens(ids_ptr, e, T, TOPK, TOPK_P2, BLOCK_M, xl_m)
            tok = gl.arange(0, BLOCK_M, layout=xl_m)
        if GATE_UP:
            a_rows = tok
        else:
            a_rows = rows
        x_c = gl.arange(0, 4, layout=xl_c)
        x_j = gl.arange(0, KC // 32, layout=xl_j)
        x_p = gl.arange(0, 4, layout=xl_p)
        x_off = x_c[:, None, None] * 16 + ((x_j // 4) * 64 + x_j % 4)[None, :, None] + x_p[None, None, :] * 4
        x_ptrs = a_ptr + k0 // 2 + a_rows[None, None, None, :] * stride_am + x_off[:, :, :, None]
        x_mask = has[None, None, None, :] & (x_off[:, :, :, None] >= 0)

        acc = gl.zeros([BN, BLOCK_M], gl.float32, layout=mma)
        if ROWS == 2:  # the next row block's tiles: K // BLOCK_K tiles further on
            acc2 = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=mma)
            ROW_WORDS: gl.constexpr = (K // BLOCK_K) * TILE_WORDS
            ROW_SCALES: gl.constexpr = (K // BLOCK_K) * TILE_SCALES
        # PEEL: the first tile's weights are requested before waiting on the previous kernel (weights are never
        # written), so their latency overlaps its tail
        if PEEL:
            wq = gl.load(w_base + w_lane)
            ws = gl.load(s_base + s_lane)
            _gdc_wait(GDC)  # the activations come from the previous kernel; every write below follows it too
            xp = gl.load(x_ptrs, mask=x_mask, other=0)
            acc = _mx_mma(wq, _scales(ws, BN, JH, w3), xp, acc, BN, BLOCK_K, BLOCK_M, a_l, b_l)
            it0 = 1
            x_ptrs += BLOCK_K // 2
        else:
            _gdc_wait(GDC)
            it0 = 0
        if NSUB > 1:
            # sub-tiles of KC: the next one in the tile (pieces JHC further on), or the next tile's first
            SUB_WORDS: gl.constexpr = JHC * 128
            wo = it0 * TILE_WORDS
            so = it0 * TILE_SCALES
            for _it in range(it0 * NSUB, ITERS * NSUB):
                wq = gl.load((w_base + wo) + w_lane)
                ws = gl.load((s_base + so) + s_lane)
                if ROWS == 2:
                    wq2 = gl.load((w_base + (wo + ROW_WORDS)) + w_lane)
                    ws2 = gl.load((s_base + (so + ROW_SCALES)) + s_lane)
                xp = gl.load(x_ptrs, mask=x_mask, other=0)
                acc = _mx_mma(wq, _scales(ws, BN, JHC, w3), xp, acc, BN, KC, BLOCK_M, a_l, b_l)
                if ROWS == 2:
                    acc2 = _mx_mma(wq2, _scales(ws2, BLOCK_N, JHC, w3), xp, acc2, BLOCK_N, KC, BLOCK_M, a_l, b_l)
                last = (_it % NSUB == NSUB - 1).to(gl.int32)
                wo += SUB_WORDS + last * (TILE_WORDS - NSUB * SUB_WORDS)
                so += JHC + last * (TILE_SCALES - NSUB * JHC)
                x_ptrs += KC // 2
        else:
            wo = it0 * TILE_WORDS
            so = it0 * TILE_SCALES
            for _it in range(it0, ITERS):
                wq = gl.load((w_base + wo) + w_lane)
                ws = gl.load((s_base + so) + s_lane)
                if ROWS == 2:
                    wq2 = gl.load((w_base + (wo + ROW_WORDS)) + w_lane)
                    ws2 = gl.load((s_base + (so + ROW_SCALES)) + s_lane)
                xp = gl.load(x_ptrs, mask=x_mask, other=0)
                acc = _mx_mma(wq, _scales(ws, BN, JH, w3), xp, acc, BN, BLOCK_K, BLOCK_M, a_l, b_l)
                if ROWS == 2:
                    acc2 = _mx_mma(wq2, _scales(ws2, BLOCK_N, JH, w3), xp, acc2, BLOCK_N, BLOCK_K, BLOCK_M, a_l, b_l)
                wo += TILE_WORDS
                so += TILE_SCALES
                x_ptrs += BLOCK_K // 2
        _tile_out(acc, pid_n, pid_p, pid_k, rows, has, y_ptr, stride_ym, stride_yk, act_ptr, stride_act, cnt_ptr,
                  BN, BLOCK_M, SPLIT_K, GATE_UP, FIXUP, ATOMIC_OUT, I_SIZE, GRID_N, mma, WARPS, TAIL_KS, tail_ptr,
                  tcnt_ptr, tail_i, split_rt)
        if ROWS == 2:
            _tile_out(acc2, pid_n + 1, pid_p, pid_k, rows, has, y_ptr, stride_ym, stride_yk, act_ptr, stride_act,
                      cnt_ptr, BLOCK_N, BLOCK_M, SPLIT_K, GATE_UP, FIXUP, ATOMIC_OUT, I_SIZE, GRID_N, mma)

    if ROUTED:
        pass
    elif GATE_UP:
        if pid_p == 0:  # the norm-combine adds into out: zero it here (no memset launch)
            _gdc_wait(GDC)
            zl: gl.constexpr = gl.BlockedLayout([4], [32], [1], [0])
            zo = pid_n * ZERO_BLOCK + gl.arange(0, ZERO_BLOCK, layout=zl)
            gl.store(out_ptr + zo, gl.zeros([ZERO_BLOCK], gl.float32, layout=zl), mask=zo < out_numel)
    elif ZERO_PAIRS:
        if (pid_k == 0) & (is_local == 0):
            # partials mode: a pair whose expert is on another card gets zeros (row pid_p, this row block)
            _gdc_wait(GDC)
            zl2: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
            zn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=zl2)
            gl.store(act_ptr + pid_p * stride_act + zn, gl.zeros([BLOCK_N], gl.float32, layout=zl2))



@gluon.jit
def _run_wide(word, tab, ids_all, CHUNK: gl.constexpr, NARROW: gl.constexpr, TOK_TABLE: gl.constexpr):
    """Whether the run of plan word ``word`` takes the wide (CHUNK-token) tiles: always without NARROW; with it, where
    the run has more than 8 tokens: its run table's position 8 (``tab``) holds a pair (TOK_TABLE), or its expert's
    count in the routing ids (``ids_all``) past the earlier runs is over 8."""
    wide = True
    if NARROW:
        if TOK_TABLE:
            if gl.load(tab + 8) < 0:
                wide = False
        elif gl.sum((ids_all == (word >> 12)).to(gl.int32), axis=0) - ((word >> 9) & 7) * CHUNK <= 8:
            wide = False
    return wide


# inlined into the one-item-a-program grid; a call in the persistent loop (inlined there, the compiler keeps
# the first item's address tensors live across the loop: 106-127 registers against 80-84, Triton 3.9, sm_90)
_gemm_tile = gluon.jit(_gemm_tile_fn)
_gemm_tile_call = gluon.jit(noinline=True)(_gemm_tile_fn)

@gluon.jit(do_not_specialize=["T", "expert_base", "n_local", "n_items"])
def _gemm_kernel(a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr, out_ptr, T, expert_base, n_local, out_numel,
                 stride_am, stride_we, stride_se, stride_ym, stride_yk,
                 K: gl.constexpr, TOPK: gl.constexpr, TOPK_P2: gl.constexpr, P_P2: gl.constexpr,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, SPLIT_K: gl.constexpr,
                 GATE_UP: gl.constexpr, W5: gl.constexpr, X4: gl.constexpr, S3: gl.constexpr,
                 ZERO_BLOCK: gl.constexpr, GDC: gl.constexpr, I_SIZE: gl.constexpr = 0,
                 PEEL: gl.constexpr = True, FIXUP: gl.constexpr = False, act_ptr=None, cnt_ptr=None,
                 stride_act=0, CHUNK: gl.constexpr = 0, ZERO_PAIRS: gl.constexpr = False,
                 ATOMIC_OUT: gl.constexpr = False, GRID_N: gl.constexpr = 1, PERSIST: gl.constexpr = False,
                 DYNAMIC: gl.constexpr = False, n_items=0, sched_ptr=None, PLAN: gl.constexpr = False,
                 plan_ptr=None, z2_ptr=None, z2_numel=0, DYN_SPLIT: gl.constexpr = False,
                 LOG_MAX: gl.constexpr = 0, budget=0, PLAN_ITEMS: gl.constexpr = 1, plan_stride=0,
                 SUB_K: gl.constexpr = 0, NARROW: gl.constexpr = False, W5N: gl.constexpr = None,
                 X4N: gl.constexpr = None, S3N: gl.constexpr = None,
                 ROWS: gl.constexpr = 1, NARROW_SUB_K: gl.constexpr = 0, TOK_TABLE: gl.constexpr = False,
                 WARPS: gl.constexpr = 1, TAIL_KS: gl.constexpr = 0, slots=0, tail_ptr=None, tcnt_ptr=None):
    """The GEMM's work items (slot, row block, K part) = (P, GRID_N, SPLIT_K), slot fastest; see _gemm_tile.

    Without PERSIST the grid is that item space (one item per program). With PERSIST the grid is flat and
    program g takes item g; with DYNAMIC (more items than resident programs) it then takes the next items
    from a counter (sched_ptr[0], fetched one item ahead so that its latency overlaps the tile), and the last
    program to finish (sched_ptr[1] counts them) puts both counters back to 0, so no program is launched
    per item and an idle item (a slot that owns no expert) costs its routing only. Every persistent program
    waits for the previous kernel before it ends, so a kernel's completion implies its predecessor's (the
    counters' reuse by the next launch relies on that).

    PLAN (seventh round, token compaction): the grid is flat and program g takes item g of the ranked list
    of owning runs (kernel._plan_runs_kernel, read after the wait on the previous kernel: plan_ptr[0] runs,
    then their words), row block fastest, then K part, then run, or, past its end, nothing; GATE_UP
    programs also zero ZERO_BLOCK elements g of out (out_numel). The host launches as many programs as the
    most runs the batch can make (kernel.plan_bound), so the idle ones come after every owning item; they
    also zero z2 (z2_numel: the down GEMM's pre-norm rows, with DYN_SPLIT). DYN_SPLIT (the down GEMM): the K
    split sized on the device for the runs routed here (doubled, up to 2**LOG_MAX, while runs x row blocks x
    split stays within ``budget`` programs: ranked_kernel.run_split's rule), the parts added into act_ptr
    (ATOMIC_OUT, zeroed by the gate/up kernel); row block fastest, then run, then K part. PLAN_ITEMS (eighth
    round, not with DYN_SPLIT): the grid holds plan_stride runs and program g takes runs r, r + plan_stride, ...
    (PLAN_ITEMS of them) where they exist, so a grid of half the bound covers it. NARROW (ninth round, PLAN with
    runs of CHUNK 16, not DYN_SPLIT): a run of at most 8 tokens (its expert's tokens counted from the ids) is
    computed with 8-token tiles (the run of 8 at twice the run index: the same tokens; W5N / X4N / S3N are
    layouts(BLOCK_N, BLOCK_K, 8), no SUB_K), the others with BLOCK_M 16, so an expert of up to 16 tokens has its
    weights decoded once, and one of up to 8 pays no 16-token mma or activation loads. WARPS (twenty-first round,
    PLAN without DYN_SPLIT): programs of WARPS warps, each item WARPS row blocks of its run (_gemm_tile's WARPS).
    TAIL_KS > 0 (twenty-sixth round, PLAN without DYN_SPLIT, PLAN_ITEMS 1, SPLIT_K 1, ROWS 1, WARPS 1): the last wave's
    items split along K. Of the n_runs x GRID_N items, the t = items % ``slots`` (the programs resident at once) past
    the last full wave are, where there are more items than slots and t x TAIL_KS fit in one wave (and in the grid),
    taken as TAIL_KS K parts each by programs items - t .. items - t + TAIL_KS t - 1 (_tile_out's TAIL_KS: the last
    part adds the parts and stores the item), so the last wave's programs run a 1 / TAIL_KS of an item each; where
    t x TAIL_KS do not fit but t is at most 2/5 of the slots, in the gate/up GEMM, as 2 parts each (twenty-seventh
    round)."""
    _gdc_launch_dependents(GDC)
    if PERSIST:
        P = T * TOPK
        G = gl.num_programs(0)
        i = gl.program_id(0)
        _gemm_tile_call(i % P, (i // P) % GRID_N, i // P // GRID_N, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr, out_ptr, T,
                   expert_base, n_local, out_numel, stride_am, stride_we, stride_se, stride_ym, stride_yk,
                   K, TOPK, TOPK_P2, P_P2, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, GATE_UP, W5, X4, S3, ZERO_BLOCK,
                   GDC, I_SIZE, PEEL, FIXUP, act_ptr, cnt_ptr, stride_act, CHUNK, ZERO_PAIRS, ATOMIC_OUT, GRID_N)
        _gdc_wait(GDC)  # the counters below are the previous launch's until its successor has completed
        if DYNAMIC:
            i = gl.atomic_add(sched_ptr, 1, sem="relaxed", scope="gpu") + G
            while i < n_items:
                nxt = gl.atomic_add(sched_ptr, 1, sem="relaxed", scope="gpu") + G
                _gemm_tile_call(i % P, (i // P) % GRID_N, i // P // GRID_N, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr,
                           out_ptr, T, expert_base, n_local, out_numel, stride_am, stride_we, stride_se,
                           stride_ym, stride_yk, K, TOPK, TOPK_P2, P_P2, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K,
                           GATE_UP, W5, X4, S3, ZERO_BLOCK, GDC, I_SIZE, PEEL, FIXUP, act_ptr, cnt_ptr,
                           stride_act, CHUNK, ZERO_PAIRS, ATOMIC_OUT, GRID_N)
                i = nxt
            fin = gl.atomic_add(sched_ptr + 1, 1, sem="acq_rel", scope="gpu")
            if fin == G - 1:
                gl.atomic_xchg(sched_ptr, 0, sem="relaxed", scope="gpu")
                gl.atomic_xchg(sched_ptr + 1, 0, sem="relaxed", scope="gpu")
    elif PLAN and DYN_SPLIT:
        g = gl.program_id(0)
        q = g // GRID_N
        _gdc_wait(GDC)
        n_runs = gl.load(plan_ptr)
        split = n_runs * 0 + 1
        for _s in gl.static_range(LOG_MAX):
            split = gl.where(n_runs * GRID_N * split * 2 <= budget, split * 2, split)
        if q < n_runs * split:
            word = gl.load(plan_ptr + 1 + q % n_runs)
            _gemm_tile(word & 511, g % GRID_N, q // n_runs, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr,
                       out_ptr, T, expert_base, n_local, out_numel, stride_am, stride_we, stride_se, stride_ym,
                       stride_yk, K, TOPK, TOPK_P2, P_P2, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, GATE_UP, W5, X4, S3,
                       ZERO_BLOCK, GDC, I_SIZE, PEEL, FIXUP, act_ptr, cnt_ptr, stride_act, CHUNK, ZERO_PAIRS,
                       ATOMIC_OUT, GRID_N, True, word >> 12, (word >> 9) & 7, True, split, SUB_K)
    elif PLAN:
        # row block fastest, then K part, then run: all three from the program id and constexprs alone (warp-
        # uniform registers: with the run count in the divisions the K loop took 128 registers, not 98)
        g = gl.program_id(0)
        r = g // (GRID_N * SPLIT_K)
        ids_all = None
        if NARROW and not TOK_TABLE:  # the routing ids before the wait (as _route reads them): counted once the run is known
            l1: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
            offs_ids = gl.arange(0, P_P2, layout=l1)
            ids_all = gl.load(ids_ptr + offs_ids, mask=offs_ids < T * TOPK, other=-1)
        _gdc_wait(GDC)  # the plan (and, for the down GEMM, the activations) come from earlier kernels
        n_runs = gl.load(plan_ptr)
        whole = n_runs * GRID_N  # the items taken whole (TAIL_KS: all but the last wave's, where it splits them)
        if TAIL_KS > 0:  # (the host takes it only so)
            gl.static_assert((K // BLOCK_K) % TAIL_KS == 0, "TAIL_KS must divide the K tiles")
            gl.static_assert(SPLIT_K == 1 and PLAN_ITEMS == 1 and ROWS == 1 and WARPS == 1 and BLOCK_M <= 16,
                             "TAIL_KS needs whole items of one row block, one warp, at most 16 tokens")
            t = whole % slots
            # the parts: TAIL_KS where t x TAIL_KS fit one wave (and the grid), else, in the gate/up GEMM, 2 where t
            # is at most 2/5 of a wave (twenty-seventh round: gate/up tails of 19-36% of a wave gained 4-5% in 2
            # parts; the TP down GEMM's, 4 K tiles an item, lost 1.6-3% at 38% and 45%)
            n_prog = gl.num_programs(0)
            TWO: gl.constexpr = 2 if GATE_UP else 0
            parts = gl.where((t * TAIL_KS <= slots) & (n_prog >= whole + (TAIL_KS - 1) * t), TAIL_KS,
                             gl.where((t * 5 <= slots * TWO) & (n_prog >= whole + t), 2, 0))
            if (whole > slots) & (t > 0) & (parts > 0):
                whole = whole - t
            else:
                parts = parts * 0 + 1
        for i in gl.static_range(PLAN_ITEMS):  # runs r, r + plan_stride, ... (eighth round; 1 before)
            ri = r + i * plan_stride
            go = ri < n_runs
            if TAIL_KS > 0:
                go = go & (g < whole)
            if go:
                word = gl.load(plan_ptr + 1 + ri)
                tab = plan_ptr + _TABLE_AT + ri * CHUNK
                if _run_wide(word, tab, ids_all, CHUNK, NARROW, TOK_TABLE):
                    _gemm_tile(word & 511, (g % GRID_N) * ROWS, (g // GRID_N) % SPLIT_K, a_ptr, ids_ptr, w_ptr, s_ptr,
                               y_ptr, out_ptr, T, expert_base, n_local, out_numel, stride_am, stride_we, stride_se,
                               stride_ym, stride_yk, K, TOPK, TOPK_P2, P_P2, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K,
                               GATE_UP, W5, X4, S3, ZERO_BLOCK, GDC, I_SIZE, PEEL, FIXUP, act_ptr, cnt_ptr,
                               stride_act, CHUNK, ZERO_PAIRS, ATOMIC_OUT, GRID_N, True, word >> 12, (word >> 9) & 7,
                               False, 1, SUB_K, ROWS, TOK_TABLE, tab, WARPS)
                elif NARROW:
                    _gemm_tile(word & 511, (g % GRID_N) * ROWS, (g // GRID_N) % SPLIT_K, a_ptr, ids_ptr, w_ptr, s_ptr,
                               y_ptr, out_ptr, T, expert_base, n_local, out_numel, stride_am, stride_we, stride_se,
                               stride_ym, stride_yk, K, TOPK, TOPK_P2, P_P2, 8, BLOCK_N, BLOCK_K, SPLIT_K,
                               GATE_UP, W5N, X4N, S3N, ZERO_BLOCK, GDC, I_SIZE, PEEL, FIXUP, act_ptr, cnt_ptr,
                               stride_act, 8, ZERO_PAIRS, ATOMIC_OUT, GRID_N, True, word >> 12,
                               ((word >> 9) & 7) * (CHUNK // 8), False, 1, NARROW_SUB_K, ROWS, TOK_TABLE,
                               tab, WARPS)
        if TAIL_KS > 0:
            q = g - whole
            if (q >= 0) & (q < parts * (n_runs * GRID_N - whole)):
                ti = q // parts
                item = whole + ti
                rt = item // GRID_N
                word_t = gl.load(plan_ptr + 1 + rt)
                tab_t = plan_ptr + _TABLE_AT + rt * CHUNK
                if _run_wide(word_t, tab_t, ids_all, CHUNK, NARROW, TOK_TABLE):
                    _gemm_tile(word_t & 511, item % GRID_N, q % parts, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr,
                               out_ptr, T, expert_base, n_local, out_numel, stride_am, stride_we, stride_se, stride_ym, stride_yk,
                               K, TOPK, TOPK_P2, P_P2, BLOCK_M, BLOCK_N, BLOCK_K, 1, GATE_UP, W5, X4, S3, ZERO_BLOCK,
                               GDC, I_SIZE, PEEL, False, act_ptr, cnt_ptr, stride_act, CHUNK, ZERO_PAIRS, False,
                               GRID_N, True, word_t >> 12, (word_t >> 9) & 7, True, parts, SUB_K, 1, TOK_TABLE,
                               tab_t, 1, TAIL_KS, tail_ptr, tcnt_ptr, ti)
                elif NARROW:
                    _gemm_tile(word_t & 511, item % GRID_N, q % parts, a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr,
                               out_ptr, T, expert_base, n_local, out_numel, stride_am, stride_we, stride_se, stride_ym, stride_yk,
                               K, TOPK, TOPK_P2, P_P2, 8, BLOCK_N, BLOCK_K, 1, GATE_UP, W5N, X4N, S3N, ZERO_BLOCK,
                               GDC, I_SIZE, PEEL, False, act_ptr, cnt_ptr, stride_act, 8, ZERO_PAIRS, False,
                               GRID_N, True, word_t >> 12, ((word_t >> 9) & 7) * (CHUNK // 8), True, parts,
                               NARROW_SUB_K, 1, TOK_TABLE, tab_t, 1, TAIL_KS, tail_ptr, tcnt_ptr, ti)
        if GATE_UP:
            zl: gl.constexpr = gl.BlockedLayout([4], [32], [WARPS], [0])
            zo = g * ZERO_BLOCK + gl.arange(0, ZERO_BLOCK, layout=zl)
            gl.store(out_ptr + zo, gl.zeros([ZERO_BLOCK], gl.float32, layout=zl), mask=zo < out_numel)
            gl.store(z2_ptr + zo, gl.zeros([ZERO_BLOCK], gl.float32, layout=zl), mask=zo < z2_numel)
    else:
        _gemm_tile(gl.program_id(0), gl.program_id(1), gl.program_id(2), a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr,
                   out_ptr, T, expert_base, n_local, out_numel, stride_am, stride_we, stride_se, stride_ym,
                   stride_yk, K, TOPK, TOPK_P2, P_P2, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, GATE_UP, W5, X4, S3,
                   ZERO_BLOCK, GDC, I_SIZE, PEEL, FIXUP, act_ptr, cnt_ptr, stride_act, CHUNK, ZERO_PAIRS,
                   ATOMIC_OUT, GRID_N, False, 0, 0, False, 1, SUB_K)


def supported(device: torch.device, latent: int, expert_size: int) -> tuple[bool, str]:
    """Whether these kernels run here: an NVIDIA GPU of compute capability 8.0+ (mma.sync; programmatic
    dependent launch on 9.0+), and shapes that split into the tiles (multiples of 128)."""
    if device.type != "cuda" or getattr(torch.version, "hip", None):
        return False, "not an NVIDIA GPU"
    if torch.cuda.get_device_capability(device)[0] < 8:
        return False, "compute capability below 8.0"
    if latent % 128 or expert_size % 128:
        return False, f"latent {latent} and expert size {expert_size} must be multiples of 128"
    return True, "ok"  # ExpertWeights.default_tiles() then tile both GEMMs


_COUNTERS: dict = {}


def _counters(device: torch.device, n: int, registry: dict | None = None) -> torch.Tensor:
    """int32 zeros for the split-K fix-up's tile counters (the kernels put them back to 0), kept per device
    and stream (``stream_key``) in ``registry`` (default: these counters'; ranked_kernel's norm_down keeps its
    own); a larger need allocates a larger buffer, and earlier ones stay alive (captured graphs may hold them)."""
    key = stream_key(device)
    bufs = (_COUNTERS if registry is None else registry).setdefault(key, [])
    if not bufs or bufs[-1].numel() < n:
        bufs.append(torch.zeros(max(n, 4096), dtype=torch.int32, device=device))
    return bufs[-1]


_RESIDENT: dict = {}
_TAIL_COUNTERS: dict = {}  # the last wave's K parts' counters (TAIL_KS), a GEMM's slots each


def tail_most(tail_ks: int, k_tiles: int) -> int:
    """The most K parts the host lets a run-list GEMM of ``k_tiles`` K tiles split a last-wave item into (TAIL_KS):
    ``tail_ks``, or 2 where that does not divide the K tiles (a part must take whole tiles), or 0 (no split) where 2
    does not either."""
    return next((k for k in (tail_ks, 2) if k_tiles % k == 0), 0) if tail_ks else 0


def tail_split(items: int, slots: int, most: int, gate_up: bool, grid: int | None = None) -> tuple[int, int]:
    """_gemm_kernel's TAIL_KS rule, on the host (for the tests and bench/tail_plan.py): of a GEMM's ``items`` whole
    items on ``slots`` resident programs, the tail t past the last full wave (0: one wave or less, or whole waves)
    and the K parts each tail item takes: ``most`` (:func:`tail_most`) where t x ``most`` fit one wave, else, in the
    gate/up GEMM, 2 where t is at most 2/5 of a wave, else 0 (taken whole); ``grid``: the programs launched, which
    must hold the extra parts (None: enough)."""
    t = items % slots if items > slots else 0
    room = grid if grid is not None else items + most * t
    for parts, fits in ((most, t * most <= slots), (2, gate_up and 5 * t <= 2 * slots)):
        if t and most and parts >= 2 and fits and room >= items + (parts - 1) * t:
            return t, parts
    return t, 0


def resident_per_sm(n_regs: int, max_blocks: int = 32) -> int:
    """One-warp programs an SM holds at ``n_regs`` registers a thread (sm_80/sm_90: 64K registers in four
    partitions of 16K, allocated per warp in units of 256, at most 32 blocks an SM); 96 registers -> 20, as
    Nsight Compute's "Block Limit Registers" reads for these kernels."""
    per_warp = -(-n_regs * 32 // 256) * 256
    return max(1, min(max_blocks, 4 * (16384 // per_warp)))


def _launch(fn, grid: tuple[int, int, int], args: tuple, kw: dict, sms: int, persistent: int,
            sched: torch.Tensor, flat: bool = False) -> tuple:
    """Launch ``fn`` over the item space ``grid`` (slot, row block, K part): as that grid, or (persistent > 0)
    as a flat grid of at most the programs that stay resident (from the compiled kernel's registers; a
    positive int below 32 caps the programs per SM) walking the items (_gemm_kernel's PERSIST / DYNAMIC). Returns (the compiled kernel, the grid launched)."""
    kw = {"GRID_N": grid[1]} | kw  # the run list's down GEMM with its device split names its own (a flat grid)
    n_items = grid[0] * grid[1] * grid[2]
    if flat:  # the run list (PLAN): one flat grid over the item space
        return fn[(n_items,)](*args, **kw), (n_items,)
    if not persistent:
        return fn[grid](*args, **kw), grid
    dyn = kw | {"PERSIST": True, "DYNAMIC": True, "n_items": n_items, "sched_ptr": sched}
    key = repr(sorted((k, repr(v)) for k, v in dyn.items() if not isinstance(v, torch.Tensor) and k != "n_items"))
    key += repr([a.dtype if isinstance(a, torch.Tensor) else type(a) for a in args])
    if key not in _RESIDENT:
        ck = fn.warmup(*args, grid=(1,), **dyn)
        ck._init_handles()
        _RESIDENT[key] = resident_per_sm(int(ck.n_regs))
    progs = min(_RESIDENT[key], persistent) * sms
    if n_items <= progs:  # one item a program: the plain grid, flattened
        return fn[(n_items,)](*args, **(dyn | {"DYNAMIC": False})), (n_items,)
    return fn[(progs,)](*args, **dyn), (progs,)


def auto_split_gate_up(bound: int, grid_n: int, k_tiles: int, sms: int, programs_per_sm: int = 32,
                       min_iters: int = 2) -> int:
    """The gate/up GEMM's K split: doubled while the programs of ``bound`` experts (the most that can have
    tokens) stay under ``programs_per_sm`` one-warp programs per SM and each keeps ``min_iters`` K tiles.
    Few experts (EP shares, TP slices) give too few programs to keep enough loads in flight."""
    split = 1
    while (bound * grid_n * split * 2 <= programs_per_sm * sms and k_tiles % (2 * split) == 0
           and k_tiles // (2 * split) >= min_iters):
        split *= 2
    return split


def experts_forward(x, ids, wts, ex, out, eps: float, *, sms: int, ctas_per_sm: int = 64, min_iters: int = 8,
                    split_down: int | None = None, pdl: bool = True, maxnreg: int | None = None,
                    peel_tokens: int = 8, split_gate_up: int | None = None, gate_up_per_sm: int = 32,
                    silu_launch: bool = False, partials: bool = False, compact_m: int = 8,
                    sum_parts_launch: bool = False, down_atomic: bool = True, persistent: int = 0,
                    plan: bool = False, plan_split_per_sm: int = 0, maxnreg_down: int | None = -1,
                    plan_lanes: bool = False, plan_items: int = 1, sub_k: int = 0, narrow: bool = False,
                    rows: int = 1, run_table: bool = False, combine_early: bool = False, warps: int = 1,
                    tail_ks: int = 0, tail_slots: int = 0, last_launch: dict | None = None) -> torch.Tensor:
    """The expert part for one chunk of <= 32 tokens with ExpertWeights ``ex`` in the tiled layout:
    three launches (gate/up with silu, down with split-K partials, norm-combine), no memsets (the gate/up
    kernel zeroes ``out``). Each token's ids must be distinct (as top-k gives): a token routed twice to one
    expert is computed once.

    x bf16 [T, L] contiguous; ids int32 or int64 [T, k]; wts fp32 [T, k]; out fp32 [T, L] contiguous (written).
    split_gate_up: the gate/up GEMM's K split (default ``auto_split_gate_up`` with gate_up_per_sm); its parts
    are added and silu applied by the last program of each tile (a counter per tile), or with silu_launch by
    a fourth launch (kernel.silu_mul). split_down: the down GEMM's K split (default: until about ctas_per_sm
    one-warp programs per SM, at least min_iters iterations each).
    compact_m: token compaction above compact_m tokens (8 or 16; 0 off: one program per expert and tile
    takes all its tokens in 16- or 32-token mma tiles).
    partials: out is fp32 [T * k, L] and receives each pair's output before its norm (zero for pairs whose
    expert is not on this card): the TP-split card's share, for the TP group's sum and
    kernel.combine_partials (the norm-combine is not run). Two launches: the down GEMM zeroes the rows of
    other cards' pairs and adds its K parts itself (the last program of each tile, a counter per tile), or
    with sum_parts_launch a third launch (kernel.sum_parts) does both; with down_atomic (and a down K split)
    the gate/up kernel zeroes out and the down programs add their parts into it (atomics, no counters).
    persistent: launch each GEMM as a flat grid of at most ``persistent`` one-warp programs per SM (and no
    more than stay resident at the kernel's registers) that walk the (slot, row block, K part) items, taking
    the next from a device counter once their first is done (0: one program per item, as before).
    plan (with token compaction, not persistent; seventh round): a fourth, first launch ranks the owning runs
    on the device (kernel.plan_runs) and each GEMM is a flat grid of kernel.plan_bound runs x row blocks x K
    parts whose programs take the ranked list's items in order (_gemm_kernel's PLAN), so the idle programs
    come last instead of two to four in every five; the gate/up kernel then zeroes all of ``out`` (partials
    included: the down GEMM zeroes no pairs). plan_split_per_sm N > 0 (with plan, no split_down): the down
    GEMM's K split is sized on the device for the runs actually routed here (ranked_kernel.run_split with
    N x sms programs), its parts added into the pre-norm rows (zeroed by the gate/up kernel). plan_lanes (eighth
    round): the list built one slot a thread (kernel._plan_lanes_kernel, the same list); plan_items N > 1 (with
    plan, not plan_split_per_sm): where the bound is the slot count (no tighter: many local experts, few tokens,
    EP2 x TP4 at batches 9-16), each GEMM's grid holds ceil(bound / N) runs and each program takes up to N runs of
    the list, so fewer programs find no run. sub_k (eighth round, 0 off): where the token tile is 16 or 32, each
    weight tile is multiplied sub_k of its K at a time (_gemm_tile's SUB_K: half the activation registers at
    128). narrow (ninth round; with plan and compact_m 16: runs of 16 from 9 tokens on): a run of at most 8
    tokens takes 8-token tiles (_gemm_kernel's NARROW), the others 16-token tiles.
    maxnreg_down: the down GEMM's register cap where it differs from maxnreg (-1: maxnreg; 0 or None: none).
    rows 2 (twelfth
    round; with plan, not plan_split_per_sm): each program of a GEMM whose K parts need no fix-up takes two row
    blocks of its run in one K loop (_gemm_tile's ROWS), loading the run's activations once for both; the 8-token
    tiles of narrow then multiply sub_k of K at a time too. run_table (twelfth round; with plan and plan_lanes, not
    plan_split_per_sm): the plan launch also writes each run's pair rows (kernel.plan_runs' table), which the GEMM
    programs load instead of ranking their run's tokens from the routing ids. combine_early: kernel.norm_combine's
    ``early`` (thirteenth round). warps 2, 4 or 8 (twenty-first round; with plan and run_table, not
    plan_split_per_sm or rows 2, 32-row tiles): each GEMM whose K parts need no fix-up runs programs of that many
    warps, a row block each, against one token tile of their run (_gemm_tile's WARPS: the run's activations come
    through L2 once for the program, not once a row block); ValueError for another value. tail_ks 2 or 4
    (twenty-sixth round; with plan and a register cap, not plan_split_per_sm, plan_items, rows 2 or warps): each GEMM
    whose items are whole (no K split) and whose K tiles tail_ks divides splits the last wave's items along K on the
    device (_gemm_kernel's TAIL_KS), where the routed runs' items pass a multiple of the programs resident at the cap
    (``tail_slots`` > 0: that many instead, for the tests); ValueError for another value. tail_ks is the most K parts
    an item (twenty-seventh round): 4 where the tail's items x 4 fit one wave, else, in the gate/up GEMM, 2 where
    they are at most 2/5 of a wave (the device counts them); a GEMM whose K tiles 4 does not divide takes 2, one that 2 does not divide
    none."""
    T, L = x.shape
    if rows not in (1, 2):
        raise ValueError(f"rows must be 1 or 2, got {rows!r}")
    if type(tail_ks) is not int or tail_ks not in (0, 2, 4):
        raise ValueError(f"tail_ks must be 0 (off), 2 or 4 (K parts of the last wave's items), got {tail_ks!r}")
    if type(tail_slots) is not int or tail_slots < 0:
        raise ValueError(f"tail_slots must be a non-negative int (0: the resident programs), got {tail_slots!r}")
    if type(warps) is not int or warps not in (1, 2, 4, 8):
        raise ValueError(f"warps must be 1, 2, 4 or 8, got {warps!r}")
    topk = ids.shape[1]
    I = ex.expert_size
    P = T * topk
    if ex.layout != "tiled":
        raise ValueError("the gluon kernels read ExpertWeights in the tiled layout (ExpertWeights.to_tiled_layout)")
    if not 0 < T <= 32:
        raise ValueError(f"experts_forward runs 1 to 32 tokens, got {T} (kernel.mxfp4_moe_experts chunks)")
    if x.dtype != torch.bfloat16 or not x.is_contiguous() or not ids.is_contiguous():
        raise ValueError("x must be contiguous BF16 and ids contiguous (kernel.mxfp4_moe_experts converts them)")
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    if tuple(out.shape) != ((P, L) if partials else (T, L)):
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {(P, L) if partials else (T, L)}")
    for name, v in (("split_down", split_down), ("split_gate_up", split_gate_up)):
        if v is not None and (not isinstance(v, int) or v < 1):
            raise ValueError(f"{name} must be a positive integer (or None: automatic), got {v!r}")
    (bn1, bk1), (bn2, bk2) = ex.tiles
    for bn, bk in ex.tiles:
        if bn < 16 or bn & (bn - 1) or bk < 128 or bk & (bk - 1):
            raise ValueError(f"the gluon kernels need tiles of 16, 32, 64.. rows and 128, 256, 512.. elements; "
                             f"got {ex.tiles} (ExpertWeights.to_tiled_layout(tiles))")
    if split_down and (I // bk2) % split_down:
        raise ValueError(f"split_down={split_down} does not divide the down GEMM's {I // bk2} K tiles")
    block_m = 8 if T <= 8 else (16 if T <= 16 else 32)
    # token compaction (compact_m 8 or 16): above that many tokens, each program takes a run of compact_m of
    # its expert's tokens (the k-th run owned by the slot of its first token), so the mma tile and its
    # registers follow the tokens an expert has, not the batch; an expert's weights are read once per run
    chunk = 0
    if compact_m and (block_m > compact_m or (narrow and block_m == compact_m == 16)):
        if compact_m not in (8, 16):
            raise ValueError(f"compact_m must be 8, 16 or 0 (off), got {compact_m!r}")
        block_m = chunk = compact_m
    # the ids a program scans: the pairs of the token class's largest batch (8, 16 or 32 tokens), so a kernel is
    # compiled once per class, not per T
    topk_p2, p_p2 = _pow2(topk), _pow2((8 if T <= 8 else (16 if T <= 16 else 32)) * topk)
    bound = min(P, ex.num_local)
    act = torch.empty(P, I, dtype=torch.bfloat16, device=x.device)
    x32, a32 = x.view(torch.int32), act.view(torch.int32)
    w1, w2 = ex.w13.view(torch.int32), ex.w2.view(torch.int32)
    # sub_k (eighth round): 16- and 32-token tiles multiply each weight tile sub_k of its K at a time
    sub_k = sub_k if sub_k and block_m >= 16 and block_m > peel_tokens else 0
    if sub_k and (sub_k % 128 or bk1 % sub_k or bk2 % sub_k):
        raise ValueError(f"sub_k={sub_k} must be a multiple of 128 dividing the tiles' K ({bk1}, {bk2})")
    lay1, lay2 = layouts(bn1, sub_k or bk1, block_m), layouts(bn2, sub_k or bk2, block_m)
    gdc = torch.cuda.get_device_capability(x.device)[0] >= 9  # griddepcontrol: sm_90+
    pdl = pdl and gdc
    opts = ({"launch_pdl": pdl, "GDC": gdc, "PEEL": block_m <= peel_tokens, "CHUNK": chunk}
            | ({"maxnreg": maxnreg} if maxnreg else {}) | ({"SUB_K": sub_k} if sub_k else {}))
    grid_n1 = 2 * I // bn1
    k_iters = I // bk2
    split = split_down or 1
    if not split_down:
        while (bound * (L // bn2) * split * 2 <= ctas_per_sm * sms and k_iters % (2 * split) == 0
               and (k_iters // (2 * split) >= min_iters or bound * (L // bn2) * split < 8 * sms)
               and k_iters // (2 * split) >= 2):
            split *= 2
    # partials mode with a down K split and down_atomic: the down programs add their parts into out
    down_adds = partials and not sum_parts_launch and down_atomic and split > 1
    if not isinstance(persistent, int) or persistent < 0:
        raise ValueError(f"persistent must be a non-negative integer (programs per SM, 0: off), got {persistent!r}")
    plan = bool(plan and chunk and not persistent)
    # the gate/up kernel zeroes out for the norm-combine's (or the down GEMM's) atomic adds
    out_numel = out.numel() if (not partials or down_adds or plan) else 0
    zero_block = _pow2(-(-out.numel() // grid_n1), lo=128)
    k1 = L // bk1
    split1 = split_gate_up or auto_split_gate_up(bound, grid_n1, k1, sms, gate_up_per_sm)
    if k1 % split1:
        raise ValueError(f"split_gate_up={split1} does not divide the gate/up GEMM's {k1} K tiles")
    grid_n2 = L // bn2
    plan_kw = {}
    if plan:
        from .kernel import plan_bound, plan_runs
        runs = plan_bound(P, ex.num_local, T, chunk)
        table = bool(run_table and not (plan_split_per_sm > 0 and not split_down))
        plan_kw = {"PLAN": True, "TOK_TABLE": table,
                   "plan_ptr": plan_runs(ids, ex, chunk, gdc=gdc, pdl=pdl, lanes=plan_lanes, table=table)}
        opts = opts | {"PEEL": False}  # the weights' address is in the plan, read after the wait
    dyn = plan and plan_split_per_sm > 0 and not split_down
    rows_on = rows == 2 and plan and not dyn
    # two row blocks a program (rows 2): not where the gate/up K parts meet in a fix-up
    rows1 = 2 if rows_on and (split1 == 1 or silu_launch) and grid_n1 % 2 == 0 else 1
    nsk = sub_k if rows_on else 0  # the 8-token tiles' sub_k where two row blocks share a K loop
    # warps a program (twenty-first round): the run list with its table, one row block a warp, no fix-up
    w_on = warps > 1 and plan and not dyn and not rows_on and bool(plan_kw.get("TOK_TABLE"))
    nw1 = warps if w_on and bn1 == 32 and grid_n1 % warps == 0 and (split1 == 1 or silu_launch) else 1
    down_fixup = partials and not sum_parts_launch and not down_adds and split > 1  # the down GEMM's FIXUP below
    nw2 = warps if w_on and bn2 == 32 and grid_n2 % warps == 0 and not down_fixup else 1
    if nw1 > 1 or nw2 > 1:
        lay1, lay2 = layouts(bn1 * nw1, sub_k or bk1, block_m, nw1), layouts(bn2 * nw2, sub_k or bk2, block_m, nw2)
    if plan and narrow and chunk == 16 and not dyn:
        ln1, ln2 = layouts(bn1 * nw1, nsk or bk1, 8, nw1), layouts(bn2 * nw2, nsk or bk2, 8, nw2)
        plan_kw |= {"NARROW": True, "NARROW_SUB_K": nsk}
        narrow_kw = ({"W5N": ln1["w5"], "X4N": ln1["x4"], "S3N": ln1["s3"]},
                     {"W5N": ln2["w5"], "X4N": ln2["x4"], "S3N": ln2["s3"]})
    else:
        narrow = False
        narrow_kw = ({}, {})
    items = 1
    if plan and not dyn and plan_items > 1 and runs >= P:
        # the bound is the slot count (eighth round): a grid of ceil(runs / items) runs, each program up to items
        items = plan_items
        runs = -(-runs // items)
        plan_kw |= {"PLAN_ITEMS": items, "plan_stride": runs}
    if dyn:
        from .ranked_kernel import max_split, run_split
        max2 = max_split(k_iters, 2)
        budget2 = plan_split_per_sm * sms
        dyn_items = max(n * run_split(n, grid_n2, max2, budget2) for n in range(1, runs + 1)) * grid_n2
        split, down_adds = 1, partials
        out_numel = out.numel()
        y2 = out if partials else torch.empty(P, L, dtype=torch.float32, device=x.device)
        z2_numel = 0 if partials else y2.numel()
        zero_block = _pow2(-(-max(out.numel(), z2_numel) // (runs * grid_n1 * split1)), lo=128)
        plan_kw_gu = {"z2_ptr": y2, "z2_numel": z2_numel}
    else:
        plan_kw_gu = {"z2_ptr": out, "z2_numel": 0} if plan else {}
        if plan:
            zero_block = _pow2(-(-out.numel() // (runs * (grid_n1 // (rows1 * nw1)) * split1)), lo=128 * nw1)
    # the two launches' item counters (persistent), then the gate/up's tile counters, then the down's
    cnt = _counters(x.device, 4 + P * (grid_n1 + grid_n2))
    sched1, sched2, cnt = cnt[0:2], cnt[2:4], cnt[4:]
    fixup = {}
    if split1 == 1:
        h, h_stride = act, (act.stride(0), 0)
    else:
        h = torch.empty(split1, P, 2 * I, dtype=torch.float32, device=x.device)
        h_stride = (h.stride(1), h.stride(0))
        if not silu_launch:
            fixup = {"FIXUP": True, "act_ptr": act, "cnt_ptr": cnt,
                     "stride_act": act.stride(0)}
    # the last wave's items split along K (twenty-sixth round): where each GEMM's items are whole ones
    tail = bool(tail_ks and plan and not dyn and items == 1 and maxnreg and block_m <= 16)
    slots = (tail_slots or sms * resident_per_sm(maxnreg)) if tail else 0
    tail_kw: list[dict] = [{}, {}]

    def tail_of(i: int, k_tiles: int, bn: int) -> dict:
        """TAIL_KS's arguments for GEMM i (0 gate/up, 1 down): its scratch and counters (a part a K slice: the
        parts must divide its K tiles, else a part would leave some out; 2 where tail_ks 4 do not, none where 2 do
        not)."""
        ks = tail_most(tail_ks, k_tiles)
        if not ks:
            return {}
        tcnt = _counters(x.device, 2 * slots, _TAIL_COUNTERS)
        return {"TAIL_KS": ks, "slots": slots, "tcnt_ptr": tcnt[i * slots:(i + 1) * slots],
                "tail_ptr": torch.empty(slots * bn * 16, dtype=torch.float32, device=x.device)}
    if tail and split1 == 1 and rows1 == 1 and nw1 == 1:
        tail_kw[0] = tail_of(0, k1, bn1)
    launched, grids = {}, {}
    launched["gate_up"], grids["gate_up"] = _launch(_gemm_kernel, (runs if plan else P, grid_n1 // (rows1 * nw1), split1), (
        x32, ids, w1, ex.w13_scale, h, out, T, ex.expert_base, ex.num_local, out_numel,
        x32.stride(0), w1.stride(0), ex.w13_scale.stride(0), *h_stride), dict(
        K=L, TOPK=topk, TOPK_P2=topk_p2, P_P2=p_p2, BLOCK_M=block_m, BLOCK_N=bn1, BLOCK_K=bk1, SPLIT_K=split1,
        GATE_UP=True, W5=lay1["w5"], X4=lay1["x4"], S3=lay1["s3"], ZERO_BLOCK=zero_block, I_SIZE=I, num_warps=nw1,
        ROWS=rows1, **({"WARPS": nw1} if nw1 > 1 else {}), **opts, **fixup, **plan_kw, **plan_kw_gu, **narrow_kw[0],
        **tail_kw[0]), sms, persistent, sched1, plan)
    if split1 > 1 and silu_launch:
        silu_mul(h, act, gdc=gdc, pdl=pdl)
    opts_down = opts
    if maxnreg_down != -1:
        opts_down = {k: v for k, v in opts.items() if k != "maxnreg"} | ({"maxnreg": maxnreg_down} if maxnreg_down else {})
    down = {}
    if partials and not sum_parts_launch:
        # partials mode in two launches: the down GEMM's programs zero the rows of other cards' pairs and,
        # split along K, the last program of each tile adds the parts into out (else it stores into out)
        down = {"ZERO_PAIRS": not plan, "act_ptr": out, "stride_act": out.stride(0)}
        if down_adds:  # the parts are added into out, zeroed by the gate/up kernel: no counters, no fix-up
            down = {"ATOMIC_OUT": True, "act_ptr": out, "stride_act": out.stride(0)}
        elif split > 1:
            down |= {"FIXUP": True, "cnt_ptr": cnt[P * grid_n1:]}
    if dyn:  # the parts added into y2 (out in partials mode), zeroed by the gate/up kernel
        down = {"ATOMIC_OUT": True, "act_ptr": y2, "stride_act": y2.stride(0), "DYN_SPLIT": True,
                "LOG_MAX": max2.bit_length() - 1, "budget": budget2, "GRID_N": grid_n2}
        y, y_stride = y2, (y2.stride(0), 0)
    elif down and split == 1:
        y, y_stride = out, (out.stride(0), 0)
    else:
        y = torch.empty(split, P, L, dtype=torch.float32, device=x.device)
        y_stride = (y.stride(1), y.stride(0))
    rows2 = 2 if rows_on and "FIXUP" not in down and grid_n2 % 2 == 0 else 1
    if tail and split == 1 and rows2 == 1 and nw2 == 1 and not ({"FIXUP", "ATOMIC_OUT"} & set(down)) \
            and maxnreg_down == -1:
        tail_kw[1] = tail_of(1, k_iters, bn2)
    launched["down"], grids["down"] = _launch(_gemm_kernel, (dyn_items, 1, 1) if dyn else (
        runs if plan else P, grid_n2 // (rows2 * nw2), split), (
        a32, ids, w2, ex.w2_scale, y, out, T, ex.expert_base, ex.num_local, 0,
        a32.stride(0), w2.stride(0), ex.w2_scale.stride(0), *y_stride), dict(
        K=I, TOPK=topk, TOPK_P2=topk_p2, P_P2=p_p2, BLOCK_M=block_m, BLOCK_N=bn2, BLOCK_K=bk2, SPLIT_K=split,
        GATE_UP=False, W5=lay2["w5"], X4=lay2["x4"], S3=lay2["s3"], ZERO_BLOCK=128, num_warps=nw2, ROWS=rows2,
        **({"WARPS": nw2} if nw2 > 1 else {}),
        **opts_down, **down,
        **plan_kw, **narrow_kw[1], **tail_kw[1]), sms, persistent, sched2, plan)
    if dyn:
        if not partials:
            norm_combine(y2, ids, wts, ex, out, eps, gdc=gdc, pdl=pdl, early=combine_early)
    elif partials and not down:
        sum_parts(y, ids, ex, out, gdc=gdc, pdl=pdl)
    elif not partials:
        norm_combine(y, ids, wts, ex, out, eps, gdc=gdc, pdl=pdl, early=combine_early)
    if last_launch is not None:
        last_launch.clear()
        last_launch.update(launched)
        last_launch["splits"] = (split1, split)
        last_launch["grids"] = grids
        last_launch["launches"] = 2 + (split1 > 1 and silu_launch) + ((not partials) if dyn else (not down)) + plan
        last_launch["plan"] = plan
        last_launch["plan_items"] = items
        last_launch["sub_k"] = sub_k
        last_launch["narrow"] = narrow
        last_launch["rows"] = (rows1, rows2)
        last_launch["warps"] = (nw1, nw2)
        last_launch["run_table"] = bool(plan_kw.get("TOK_TABLE"))
        last_launch["down_split"] = f"device, up to {max2}" if dyn else split
        last_launch["tail_ks"] = (tail_kw[0].get("TAIL_KS", 0), tail_kw[1].get("TAIL_KS", 0))
    return out
