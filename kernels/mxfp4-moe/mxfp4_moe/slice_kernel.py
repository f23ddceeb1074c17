"""An expert split by intermediate slice, both GEMMs in one Gluon program (issue #18, twenty-third round).

One program a (run, slice): a run is an expert and up to MT of its tokens (the bench: one token, the batch-1
points); a slice is S of the expert's I intermediate columns. The program

1. multiplies the slice's 2S gate/up rows (the whole K) by the run's tokens: its W warps split K, warp w taking
   K range w; the warps' partial sums meet in a per-program scratch row after a CTA barrier;
2. makes act = silu(gate) x up in BF16 for the slice's S columns;
3. multiplies the slice's S down columns (every one of the L output rows) by act, and adds the partial sums into
   the run's fp32 output rows by atomics;
4. NORM (unsplit experts, EP8 and local): counts itself on the run's counter; the run's last slice to finish
   normalizes the rows (RMS, times the norm weight), stores them in BF16, and puts the rows and the counter back
   to zero. Else (the TP partials) the rows keep the sums: the layer before must have zeroed them.

No grid-wide wait inside a layer: the chain gate/up -> fix-up -> down -> norm-combine of ``gluon_kernel`` (each
link 2-4 µs at EP batch 1, README rounds 10-22) is one launch.

Both GEMMs are gluon_kernel's register-direct `mma` decode and mma.sync, with one trick each to fit this shape:

- gate/up: the mma's warps split its rows (warps_per_cta [W, 1]); warp w's rows are the slice's 2S rows read
  from K range w, and the token tile's column n holds the token n % MT read from K range n // MT (every warp loads
  the whole tile). Column w * MT + m of warp w's rows is the sum over its K range; the other columns are thrown
  away. So W x MT <= BLOCK_M (the mma's N); the mma does no more work than with one column.
- down: K is the slice's S columns, less than the 128 a lane group set of the register-direct layout takes (4
  lane groups x 32 elements). The down block is laid out as A' [L S / 128, 128]: row r' holds the S-element rows
  128 / S x r' .. of the slice (a plain reshape), and B' [128, BLOCK_M] is block-diagonal: column sub x MT + m
  holds act of token m in the rows of A' row piece ``sub``, zeros elsewhere. C' [r', sub x MT + m] is output row
  (128 / S) r' + sub of token m.

The load-time layout (``to_slice_layout``): one block a (expert, slice), [gate/up words 2S x K/2 | their scales
2S x K/32 | down words L x S/2 | their scales L x S/32] (6528 S bytes at K = L = 4096), gate/up in
format.to_tiled_layout's tiles [2S, BK] (gate rows then up rows), down as A' in tiles [32, 128].

Two forms of the one kernel: ``launch`` (bench/slice_gluon.py: runs from a table, a program an item, BF16 normalized
rows) and ``experts_forward`` (kernel.mxfp4_moe_experts with config ``slice_few``, off by default: this card's pairs
found from the ids in the kernel, a persistent grid walking the items, the fp32 outputs of the other paths, rows and
counters kept zero in a workspace). Measured on an H100: correct, and slower than the default kernels at every point
of the benchmark (README, twenty-third round).
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as _async_copy
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from . import format as fmt
from .gluon_kernel import (_decode_a, _fence_gpu, _gdc_launch_dependents, _gdc_wait, _mx_mma, _scales, _silu_mul_bf16,
                           layouts)
from .kernel import _MMA_UNSCALE

# a barrier of the program's threads (bar.sync; it orders the CTA's memory accesses): Triton 3.6 gl.thread_barrier,
# 3.9 gl.barrier (as ranked_kernel)
_cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
# cp.async (global to shared, sm_80+): Triton 3.6 names it async_copy_global_to_shared, 3.7+ async_load (as ranked_kernel)
_cp_async = getattr(_async_copy, "async_load", None) or _async_copy.async_copy_global_to_shared
DOWN_TILE = 32  # A' rows a down tile (each 128 elements: 64 bytes and 4 scale bytes)
_DT = gl.constexpr(DOWN_TILE)


def block_bytes(s: int, k: int, l: int) -> int:
    """Bytes of one (expert, slice) block: gate/up words and scales, down words and scales."""
    return 2 * s * (k // 2) + 2 * s * (k // 32) + l * (s // 2) + l * (s // 32)


def check_shape(s: int, k: int, l: int, i: int, bk: int) -> None:
    """Raises ValueError unless slices of ``s`` columns tile this expert: every size a positive integer, S 32, 64 or
    128 dividing the intermediate size I, BK a multiple of 128 dividing the latent K, L S / 128 a multiple of the down
    tile (L the output rows, the latent again)."""
    for name, v in (("slice width", s), ("K", k), ("L", l), ("intermediate size", i), ("BK", bk)):
        if type(v) is not int or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if s not in (32, 64, 128) or i % s:
        raise ValueError(f"slice width {s} must be 32, 64 or 128 and divide the intermediate size {i}")
    if bk % 128 or k % bk:
        raise ValueError(f"BK {bk} must be a multiple of 128 dividing K {k}")
    if (l * s // 128) % DOWN_TILE:
        raise ValueError(f"{l} output rows x {s} / 128 is not a multiple of {DOWN_TILE}")


def to_slice_layout(w13: torch.Tensor, s13: torch.Tensor, w2: torch.Tensor, s2: torch.Tensor, s: int,
                    bk: int) -> torch.Tensor:
    """mma-layout experts (format.to_mma_layout) -> uint8 [E, I / s, block_bytes]: one block a (expert, slice).

    w13 uint8 [E, 2I, K / 2] (gate rows, then up rows), s13 [E, 2I, K / 32], w2 [E, L, I / 2], s2 [E, L, I / 32].
    A load-time transform (any device). Raw tensors carry no layout: weights in another layout give another buffer
    without a word (``slices_of`` takes an ExpertWeights in any layout). Raises TypeError for what is not uint8
    tensors of 3 dimensions, ValueError for shapes that do not match each other or do not split (``check_shape``)."""
    for name, v in (("w13", w13), ("s13", s13), ("w2", w2), ("s2", s2)):
        if not isinstance(v, torch.Tensor) or v.dtype != torch.uint8 or v.dim() != 3:
            raise TypeError(f"{name} must be a uint8 tensor [experts, rows, bytes], got "
                            f"{getattr(v, 'dtype', type(v).__name__)} {tuple(getattr(v, 'shape', ()))}")
    e, i2, kh = w13.shape
    i, k, l = i2 // 2, kh * 2, w2.shape[1]
    if i2 % 2 or s13.shape != (e, i2, k // 32) or w2.shape != (e, l, i // 2) or s2.shape != (e, l, i // 32):
        raise ValueError(f"shapes do not match: w13 {tuple(w13.shape)}, s13 {tuple(s13.shape)}, w2 "
                         f"{tuple(w2.shape)}, s2 {tuple(s2.shape)} (want [E, 2I, K/2], [E, 2I, K/32], [E, L, I/2], "
                         "[E, L, I/32])")
    check_shape(s, k, l, i, bk)
    n = i // s
    # gate/up: tiles [2S, BK], gate rows then up rows of each slice; slice j's tiles are one range
    gq, gs = fmt.to_tiled_layout(w13, s13, 2 * s, bk, gate_up=True)
    gq = gq.reshape(e, n, 2 * s * kh)
    gs = gs.reshape(e, n, 2 * s * (k // 32))
    # down: slice j's columns [L, S] as A' [L S / 128, 128], tiles [32, 128]
    dq = w2.reshape(e, l, n, s // 2).permute(0, 2, 1, 3).reshape(e * n, l * s // 128, 64)
    ds = s2.reshape(e, l, n, s // 32).permute(0, 2, 1, 3).reshape(e * n, l * s // 128, 4)
    dq, ds = fmt.to_tiled_layout(dq.contiguous(), ds.contiguous(), DOWN_TILE, 128)
    return torch.cat([gq, gs, dq.reshape(e, n, -1), ds.reshape(e, n, -1)], dim=2).contiguous()


def reference(w13, s13, w2, s2, x: torch.Tensor, runs: list[tuple[int, list[int]]]) -> tuple[torch.Tensor,
                                                                                              torch.Tensor]:
    """(out fp32 [len(runs), MT, L], act fp32 [len(runs), MT, I]): each run's tokens through its expert as the kernel
    computes it (the `mma` decode's values, fp64 sums, act rounded to BF16), before any norm; MT the most tokens
    of a run (the others padded with zero rows). runs: (expert, token rows of x). Raises ValueError for no runs, or
    a negative expert or token (the kernel's -1 means none; here it would index from the end)."""
    if not runs or any(e < 0 or not toks or min(toks) < 0 for e, toks in runs):
        raise ValueError(f"runs must be (expert >= 0, [token >= 0, ...]) pairs, at least one, got {runs!r}")
    out, acts = [], []
    for e, toks in runs:
        a = fmt.dequantize_mxfp4_mma(w13[e], s13[e]).double()
        d = fmt.dequantize_mxfp4_mma(w2[e], s2[e]).double()
        h = a @ x[toks].double().T  # [2I, tokens]
        i = h.shape[0] // 2
        act = (torch.nn.functional.silu(h[:i]) * h[i:]).to(torch.bfloat16).double()
        out.append((d @ act).T.float())
        acts.append(act.T.float())
    mt = max(o.shape[0] for o in out)  # runs of fewer tokens padded with zero rows
    pad = [torch.nn.functional.pad(t, (0, 0, 0, mt - t.shape[0])) for t in out + acts]
    return torch.stack(pad[:len(out)]), torch.stack(pad[len(out):])


@gluon.jit
def _mma_bf16(wq, ws, xb, acc, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, BLOCK_M: gl.constexpr,
              a_l: gl.constexpr, b_l: gl.constexpr):
    """gluon_kernel._mx_mma with the B operand given as BF16 values xb [4, J, 4, 2, BLOCK_M] (X4's layout) instead
    of int32 pairs."""
    x = gl.reshape(gl.permute(xb, [1, 0, 2, 3, 4]), [BLOCK_K, BLOCK_M])
    return mma_v2(_decode_a(wq, ws, BLOCK_N, BLOCK_K, a_l), gl.convert_layout(x, b_l), acc)


@gluon.jit
def _prefetch_l2(ptrs):
    """Ask each address's 128-byte line into L2 (no registers are written)."""
    gl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [ptrs], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _row_map(r, W: gl.constexpr):
    """Logical row r of a program of W warps (layouts(..., W)) -> (warp, its row rr: r % 16 + 16 (r // 16W))."""
    return (r // 16) % W, r % 16 + 16 * (r // (16 * W))


@gluon.jit
def _down_ptrs(wq_ptr, wb_ptr, blk, S: gl.constexpr, K: gl.constexpr, L: gl.constexpr, W: gl.constexpr,
               DR: gl.constexpr, DW5: gl.constexpr, DS3: gl.constexpr):
    """(words [BND, 4, 1, 4], scales) addresses of the first down step of the block at byte ``blk`` (its A' rows in
    tiles of 32; a later step st is BND 16 words and BND 4 scale bytes further)."""
    BND: gl.constexpr = _DT * W * DR
    DTILE_W: gl.constexpr = _DT * 16  # int32 words a down tile (32 rows x 64 bytes)
    DTILE_S: gl.constexpr = _DT * 4
    DW0: gl.constexpr = 2 * S * (K // 2) + 2 * S * (K // 32)
    DS0: gl.constexpr = DW0 + L * (S // 2)
    D4: gl.constexpr = gl.SliceLayout(4, DW5)
    d3: gl.constexpr = gl.SliceLayout(3, D4)
    dr_ = gl.arange(0, BND, layout=gl.SliceLayout(1, gl.SliceLayout(2, d3)))
    dc_ = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, d3)))
    dh_ = gl.arange(0, 1, layout=gl.SliceLayout(0, gl.SliceLayout(1, d3)))
    dj_ = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, D4))))
    dw, drr = _row_map(dr_, W)
    dt = drr % _DT  # row of its tile; the tile: dw DR + drr // 32 of the step
    dpiece = (((dt[:, None, None] // 8) + dh_[None, None, :]) * 8 + dt[:, None, None] % 8) * 4 \
        + dc_[None, :, None] + ((dw * DR + drr // _DT) * (DTILE_W // 4))[:, None, None]
    d_ptrs = wq_ptr + (blk + DW0) // 4 + dpiece[:, :, :, None] * 4 + dj_[None, None, None, :]  # [BND, 4, 1, 4]
    ds_g = gl.arange(0, 8, layout=gl.SliceLayout(1, gl.SliceLayout(2, DS3)))
    ds_c = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, DS3)))
    ds_q = gl.arange(0, BND // 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, DS3)))
    ds_w = (ds_q // 2) % W
    ds_qq = ds_q % 2 + 2 * (ds_q // (2 * W))  # row group of the warp's rows
    ds_off = (ds_w * DR + ds_qq // (_DT // 8)) * DTILE_S + ds_qq % (_DT // 8)
    ds_ptrs = wb_ptr + blk + DS0 + (ds_g[:, None, None] * 4 + ds_c[None, :, None]) * (_DT // 8) \
        + ds_off[None, None, :]
    return d_ptrs, ds_ptrs


def _slice_item_fn(item, T, pid, gsm, dsm, x_ptr, wq_ptr, wb_ptr, run_ptr, y_ptr, cnt_ptr, out_ptr, norm_ptr, scr_ptr,
                   act_ptr, ids_ptr, wts_ptr, u_ptr, gacc_ptr, gcnt_ptr, expert_base, n_local, stride_g, S: gl.constexpr,
                   K: gl.constexpr, L: gl.constexpr, I_SIZE: gl.constexpr, BK: gl.constexpr, W: gl.constexpr,
                   MT: gl.constexpr, BLOCK_M: gl.constexpr, DR: gl.constexpr, NORM: gl.constexpr, GDC: gl.constexpr,
                   EPS: gl.constexpr, PREFETCH: gl.constexpr, GW5: gl.constexpr, GX4: gl.constexpr,
                   GS3: gl.constexpr, DW5: gl.constexpr, DX4: gl.constexpr, DS3: gl.constexpr, ROUTED: gl.constexpr,
                   TOPK: gl.constexpr, P_P2: gl.constexpr, EARLY: gl.constexpr,
                   KS: gl.constexpr, STREAM: gl.constexpr):
    """Work item ``item`` of _slice_kernel: K part item % KS of slice q % (I / S) of run q // (I / S), q = item // KS
    (ROUTED: of the pair that is the card's local pair of that rank), program ``pid``'s scratch. With KS > 1 the
    slice's KS parts add their gate/up sums into gacc_ptr's row q (fp32 [2S MT], zero before and after) and count on
    gcnt_ptr[q]; the last part takes the sums, puts the row and counter back to zero, and runs the rest of the item
    (act, down, the pair's counter); the others end there, having asked their share of the down block into L2 when
    PREFETCH. STREAM: gsm / dsm the program's shared memory for the item's gate/up tiles [ITERS, 2S W, 4, BK / 128,
    4] and down words [STEPS, 32 W DR, 4, 1, 4] (int32), all copied in by cp.async at the item's start in the order
    they are used, each GEMM step waiting only for its own group (the loads are not left to the compiler's schedule,
    which puts a register load next to its use). A call, not inlined: inlined in the kernel's loop,
    the compiler keeps the address tensors of the first item live across it (and the routing's, another 45
    registers)."""
    SLICES: gl.constexpr = I_SIZE // S
    q = item // KS
    kp = item % KS
    if ROUTED:
        _n, pos, e = _local_pairs(ids_ptr, q // SLICES, T, expert_base, n_local, TOPK, P_P2, W)
        p = pos
    else:
        p = q // SLICES
        e = gl.load(run_ptr + p * (1 + 2 * MT))
        pos = p
    BLOCK: gl.constexpr = 2 * S * (K // 2) + 2 * S * (K // 32) + L * (S // 2) + L * (S // 32)
    BND: gl.constexpr = _DT * W * DR  # A' rows a down step
    STEPS: gl.constexpr = (L * S // 128) // BND
    nl: gl.constexpr = gl.BlockedLayout([L // (32 * W)], [32], [W], [0])
    cols = gl.arange(0, L, layout=nl)
    blk = (e * SLICES + q % SLICES).to(gl.int64) * BLOCK
    if PREFETCH:  # the down block's 128-byte lines (K part kp's share) asked into L2 now: its loads then hit L2
        pl: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
        d0 = wb_ptr + blk + 2 * S * (K // 2) + 2 * S * (K // 32)
        LN: gl.constexpr = L * (S // 2) // 128 // KS
        _prefetch_l2(d0 + (kp * LN + gl.arange(0, LN, layout=pl)) * 128)  # words
        _prefetch_l2(d0 + L * (S // 2) + gl.arange(0, L * (S // 32) // 128, layout=pl) * 128)  # scales

    # ---- gate/up: rows R of the program: warp w, slice row rr (gate rows 0..S-1, up rows S..2S-1), K range w
    BN: gl.constexpr = 2 * S * W
    J: gl.constexpr = BK // 32
    JH: gl.constexpr = J // 4
    ITERS: gl.constexpr = K // (BK * W * KS)
    kw = kp * W  # the first of this part's K ranges
    TILE_W: gl.constexpr = 2 * S * BK // 8  # int32 words a gate/up tile
    TILE_S: gl.constexpr = 2 * S * BK // 32  # scale bytes a gate/up tile
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[W, 1], instr_shape=[16, 8])
    a_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=8)
    b_l: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=8)
    W4: gl.constexpr = gl.SliceLayout(4, GW5)
    w3: gl.constexpr = gl.SliceLayout(3, W4)
    r_ = gl.arange(0, BN, layout=gl.SliceLayout(1, gl.SliceLayout(2, w3)))
    c_ = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, w3)))
    h_ = gl.arange(0, JH, layout=gl.SliceLayout(0, gl.SliceLayout(1, w3)))
    j_ = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, W4))))
    wr, rr = _row_map(r_, W)
    piece = (((rr[:, None, None] // 8) * JH + h_[None, None, :]) * 8 + rr[:, None, None] % 8) * 4 \
        + c_[None, :, None] + ((kw + wr) * (ITERS * TILE_W // 4))[:, None, None]
    w_ptrs = wq_ptr + blk // 4 + piece[:, :, :, None] * 4 + j_[None, None, None, :]
    s_g = gl.arange(0, 8, layout=gl.SliceLayout(1, gl.SliceLayout(2, GS3)))
    s_c = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, GS3)))
    s_e = gl.arange(0, (BN // 8) * JH, layout=gl.SliceLayout(0, gl.SliceLayout(1, GS3)))
    s_q = s_e // JH
    s_w = (s_q // 2) % W
    s_qt = s_q % 2 + 2 * (s_q // (2 * W))
    s_off = s_qt * JH + s_e % JH + (kw + s_w) * (ITERS * TILE_S)
    s_ptrs = wb_ptr + blk + 2 * S * (K // 2) + (s_g[:, None, None] * 4 + s_c[None, :, None]) * ((2 * S // 8) * JH) \
        + s_off[None, None, :]
    if STREAM:  # every gate/up tile, then the down words, into shared memory now (before the wait: weights are
        _cta_barrier()  # never written), once every lane has read the program's previous item from there
        for t in gl.static_range(ITERS):
            _cp_async(gsm.index(t), w_ptrs + t * TILE_W)
            _async_copy.commit_group()
        d_ptrs, ds_ptrs = _down_ptrs(wq_ptr, wb_ptr, blk, S, K, L, W, DR, DW5, DS3)
        for st in gl.static_range(STEPS):
            _cp_async(dsm.index(st), d_ptrs + st * (BND * 16))
        _async_copy.commit_group()
    else:
        wq = gl.load(w_ptrs)  # the first tile before the wait: weights are never written
    ws = gl.load(s_ptrs)

    # the token tile: column n is token n % MT of the run, read from K range n // MT
    X3: gl.constexpr = gl.SliceLayout(3, GX4)
    xs: gl.constexpr = gl.SliceLayout(3, X3)
    x_c = gl.arange(0, 4, layout=gl.SliceLayout(1, gl.SliceLayout(2, xs)))
    x_j = gl.arange(0, J, layout=gl.SliceLayout(0, gl.SliceLayout(2, xs)))
    x_p = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, xs)))
    x_n = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, X3))))
    if ROUTED:
        x_tok = gl.zeros_like(x_n) + pos // TOPK
    else:
        x_tok = gl.load(run_ptr + p * (1 + 2 * MT) + 1 + x_n % MT)
    x_has = (x_n < W * MT) & (x_tok >= 0)
    x_col = gl.maximum(x_tok, 0) * (K // 2) + (kw + x_n // MT) * (ITERS * BK // 2)
    x_off = x_c[:, None, None] * 16 + ((x_j // 4) * 64 + x_j % 4)[None, :, None] + x_p[None, None, :] * 4
    x_ptrs = x_ptr + x_col[None, None, None, :] + x_off[:, :, :, None]
    x_mask = x_has[None, None, None, :] & (x_off[:, :, :, None] >= 0)
    _gdc_wait(GDC)  # the tokens come from the layer before; every write below follows it too

    acc = gl.zeros([BN, BLOCK_M], gl.float32, layout=mma)
    if STREAM:
        for it in gl.static_range(ITERS):
            _async_copy.wait_group(ITERS - it)  # the groups after tile it: the later tiles' and the down block's
            _cta_barrier()  # every lane's copies of tile it have landed
            if it > 0:
                ws = gl.load(s_ptrs + it * TILE_S)
            xp = gl.load(x_ptrs + it * (BK // 2), mask=x_mask, other=0)
            acc = _mx_mma(gsm.index(it).load(W4), _scales(ws, BN, JH, w3), xp, acc, BN, BK, BLOCK_M, a_l, b_l)
    else:
        for it in range(ITERS - 1 - EARLY):
            wq_n = gl.load(w_ptrs + (it + 1) * TILE_W)
            ws_n = gl.load(s_ptrs + (it + 1) * TILE_S)
            xp = gl.load(x_ptrs + it * (BK // 2), mask=x_mask, other=0)
            acc = _mx_mma(wq, _scales(ws, BN, JH, w3), xp, acc, BN, BK, BLOCK_M, a_l, b_l)
            wq = wq_n
            ws = ws_n
        if EARLY:  # the last gate/up tile, then the down block's first step, asked before the tile before is multiplied
            wq_n = gl.load(w_ptrs + (ITERS - 1) * TILE_W)
            ws_n = gl.load(s_ptrs + (ITERS - 1) * TILE_S)
            d_ptrs, ds_ptrs = _down_ptrs(wq_ptr, wb_ptr, blk, S, K, L, W, DR, DW5, DS3)
            dq = gl.load(d_ptrs)
            dsc = gl.load(ds_ptrs)
            xp = gl.load(x_ptrs + (ITERS - 2) * (BK // 2), mask=x_mask, other=0)
            acc = _mx_mma(wq, _scales(ws, BN, JH, w3), xp, acc, BN, BK, BLOCK_M, a_l, b_l)
            wq = wq_n
            ws = ws_n
        xp = gl.load(x_ptrs + (ITERS - 1) * (BK // 2), mask=x_mask, other=0)
        acc = _mx_mma(wq, _scales(ws, BN, JH, w3), xp, acc, BN, BK, BLOCK_M, a_l, b_l)

    # the warps' K ranges meet: warp w's column w MT + m to scratch [W, 2S, MT], then act [MT, S] to scratch
    o_r = gl.arange(0, BN, layout=gl.SliceLayout(1, mma))
    o_n = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, mma))
    ow, orr = _row_map(o_r, W)
    scr = scr_ptr + pid.to(gl.int64) * (W * 2 * S * MT)
    diag = (o_n[None, :] // MT) == ow[:, None]
    gl.store(scr + (ow[:, None] * (2 * S) + orr[:, None]) * MT + o_n[None, :] % MT, acc * _MMA_UNSCALE, mask=diag)
    _cta_barrier()
    al: gl.constexpr = gl.BlockedLayout([1, 1], [32, 1], [W, 1], [1, 0])
    a_a = gl.arange(0, S, layout=gl.SliceLayout(1, al))
    a_m = gl.arange(0, MT, layout=gl.SliceLayout(0, al))
    g = gl.zeros([S, MT], gl.float32, layout=al)
    u = gl.zeros([S, MT], gl.float32, layout=al)
    for w in gl.static_range(W):
        g += gl.load(scr + (w * (2 * S) + a_a[:, None]) * MT + a_m[None, :])
        u += gl.load(scr + (w * (2 * S) + S + a_a[:, None]) * MT + a_m[None, :])
    live = pid >= 0
    if KS > 1:  # the parts' sums meet in gacc row q; the last part to count goes on with them
        gq = gacc_ptr + q.to(gl.int64) * (2 * S * MT) + a_a[:, None] * MT + a_m[None, :]
        gl.atomic_add(gq, g, sem="relaxed", scope="gpu")
        gl.atomic_add(gq + S * MT, u, sem="relaxed", scope="gpu")
        _fence_gpu()
        _cta_barrier()
        live = gl.atomic_add(gcnt_ptr + q, 1, sem="acq_rel", scope="gpu") == KS - 1
        if live:
            _fence_gpu()
            g = gl.load(gq, cache_modifier=".cg")
            u = gl.load(gq + S * MT, cache_modifier=".cg")
            _cta_barrier()  # every thread has its sums before the row is zeroed
            gl.store(gq, gl.zeros([S, MT], gl.float32, layout=al))
            gl.store(gq + S * MT, gl.zeros([S, MT], gl.float32, layout=al))
            gl.atomic_xchg(gcnt_ptr + q, 0, sem="relaxed", scope="gpu")
    if live:
        act = act_ptr + pid.to(gl.int64) * (MT * S)
        gl.store(act + a_m[None, :] * S + a_a[:, None], _silu_mul_bf16(g, u))
        _cta_barrier()

        # ---- down: B' [128, BLOCK_M] block-diagonal (module docstring), in X4's layout of the down GEMM
        SB: gl.constexpr = S // 32  # scale blocks a slice row
        RPR: gl.constexpr = 128 // S  # slice rows an A' row
        b_c = gl.arange(0, 4, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, DX4)))))
        b_j = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, DX4)))))
        b_p = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, gl.SliceLayout(4, DX4)))))
        b_e = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(4, DX4)))))
        b_n = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3,
                                                                                                                DX4)))))
        a_idx = (32 * (b_c % SB))[:, None, None, None] + (2 * b_j)[None, :, None, None] \
            + (8 * b_p)[None, None, :, None] + b_e[None, None, None, :]  # [4, 4, 4, 2]
        b_c2 = gl.arange(0, 4, layout=gl.SliceLayout(1, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, DX4)))))
        b_m = b_n[None, :] - (b_c2 // SB)[:, None] * MT  # [4 (c), BLOCK_M]: the token of column n in row piece c
        b_ok = (b_m >= 0) & (b_m < MT)
        b_off = gl.expand_dims(a_idx, 4) + gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.maximum(b_m, 0) * S, 1), 2), 3)
        b_msk = gl.expand_dims(gl.expand_dims(gl.expand_dims(b_ok, 1), 2), 3) & (b_off >= 0)
        xb = gl.load(act + b_off, mask=b_msk, other=0.0)

        D4: gl.constexpr = gl.SliceLayout(4, DW5)
        d3: gl.constexpr = gl.SliceLayout(3, D4)
        if not EARLY:  # else loaded with the last gate/up tile
            d_ptrs, ds_ptrs = _down_ptrs(wq_ptr, wb_ptr, blk, S, K, L, W, DR, DW5, DS3)
        dmma: gl.constexpr = mma
        e_r = gl.arange(0, BND, layout=gl.SliceLayout(1, dmma))
        e_n = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, dmma))
        ew, err = _row_map(e_r, W)
        e_arow = (ew * DR + err // _DT) * _DT + err % _DT  # A' row within the step
        e_sub = e_n // MT
        if ROUTED:
            e_out = gl.zeros_like(e_n) + pos
        else:
            e_out = gl.load(run_ptr + p * (1 + 2 * MT) + 1 + MT + e_n % MT)
        e_ok = (e_sub < RPR) & (e_out >= 0)
        y_ptrs = y_ptr + (gl.maximum(e_out, 0).to(gl.int64) * L)[None, :] + (e_arow[:, None] * RPR + e_sub[None, :])
        y_mask = e_ok[None, :] & (e_arow[:, None] >= 0)
        if STREAM:
            _async_copy.wait_group(0)
            _cta_barrier()  # every lane's copies of the down words have landed
            for st in gl.static_range(STEPS):
                dsc = gl.load(ds_ptrs + st * (BND * 4))
                accd = _mma_bf16(dsm.index(st).load(D4), _scales(dsc, BND, 1, d3), xb,
                                 gl.zeros([BND, BLOCK_M], gl.float32, layout=dmma), BND, 128, BLOCK_M, a_l, b_l)
                gl.atomic_add(y_ptrs + st * (BND * RPR), accd * _MMA_UNSCALE, mask=y_mask, sem="relaxed",
                              scope="gpu")
        else:
            if not EARLY:
                dq = gl.load(d_ptrs)
                dsc = gl.load(ds_ptrs)
            for st in range(STEPS):
                nxt = gl.minimum(st + 1, STEPS - 1)  # the last step loads its own tile again (an L1 hit)
                dq_n = gl.load(d_ptrs + nxt * (BND * 16))
                dsc_n = gl.load(ds_ptrs + nxt * (BND * 4))
                accd = _mma_bf16(dq, _scales(dsc, BND, 1, d3), xb, gl.zeros([BND, BLOCK_M], gl.float32, layout=dmma),
                                 BND, 128, BLOCK_M, a_l, b_l)
                gl.atomic_add(y_ptrs + st * (BND * RPR), accd * _MMA_UNSCALE, mask=y_mask, sem="relaxed",
                              scope="gpu")
                dq = dq_n
                dsc = dsc_n

        if NORM or ROUTED:
            _fence_gpu()
            _cta_barrier()
            done = gl.atomic_add(cnt_ptr + p, 1, sem="acq_rel", scope="gpu")
            if done == SLICES - 1:
                _fence_gpu()
                if ROUTED:
                    yr = y_ptr + pos.to(gl.int64) * L + cols
                    v = gl.load(yr, cache_modifier=".cg")
                    gl.store(yr, gl.zeros([L], gl.float32, layout=nl))
                    gl.atomic_xchg(cnt_ptr + p, 0, sem="relaxed", scope="gpu")
                    if NORM:
                        tok = pos // TOPK
                        wt = gl.load(wts_ptr + pos)
                        nw = gl.load(norm_ptr + e.to(gl.int64) * stride_g + cols).to(gl.float32)
                        rs = wt / gl.sqrt(gl.sum(v * v, axis=0) / L + EPS)
                        tl_: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
                        tj = gl.arange(0, P_P2, layout=tl_)
                        lt = gl.load(ids_ptr + tok * TOPK + tj, mask=tj < TOPK, other=-1) - expert_base
                        n_tok = gl.sum(((tj < TOPK) & (lt >= 0) & (lt < n_local)).to(gl.int32), axis=0)
                        if n_tok == 1:  # the token's only local pair: its row is the token's
                            gl.store(out_ptr + tok.to(gl.int64) * L + cols, rs * v * nw)
                        else:  # the pairs add into the token's row; its last local pair stores it
                            gl.atomic_add(u_ptr + tok.to(gl.int64) * L + cols, rs * v * nw, sem="relaxed", scope="gpu")
                            _fence_gpu()
                            _cta_barrier()
                            done_t = gl.atomic_add(cnt_ptr + P_P2 + tok, 1, sem="acq_rel", scope="gpu")
                            if done_t == n_tok - 1:
                                _fence_gpu()
                                ur = u_ptr + tok.to(gl.int64) * L + cols
                                gl.store(out_ptr + tok.to(gl.int64) * L + cols, gl.load(ur, cache_modifier=".cg"))
                                gl.store(ur, gl.zeros([L], gl.float32, layout=nl))
                                gl.atomic_xchg(cnt_ptr + P_P2 + tok, 0, sem="relaxed", scope="gpu")
                    else:
                        gl.store(out_ptr + pos.to(gl.int64) * L + cols, v)
                else:
                    nw = gl.load(norm_ptr + cols)
                    for m in gl.static_range(MT):
                        orow = gl.load(run_ptr + p * (1 + 2 * MT) + 1 + MT + m)
                        if orow >= 0:
                            yr = y_ptr + orow.to(gl.int64) * L + cols
                            v = gl.load(yr, cache_modifier=".cg")
                            rms = gl.sqrt(gl.sum(v * v, axis=0) / L + EPS)
                            gl.store(out_ptr + orow.to(gl.int64) * L + cols, (v / rms * nw).to(gl.bfloat16))
                            gl.store(yr, gl.zeros([L], gl.float32, layout=nl))
                    gl.atomic_xchg(cnt_ptr + p, 0, sem="relaxed", scope="gpu")


_slice_item = gluon.jit(noinline=True)(_slice_item_fn)
_slice_item_inline = gluon.jit(_slice_item_fn)  # STREAM: shared memory descriptors are passed to inlined calls


@gluon.jit
def _local_pairs(ids_ptr, k, T, expert_base, n_local, TOPK: gl.constexpr, P_P2: gl.constexpr, W: gl.constexpr):
    """(this card's pairs in ids_ptr [T, TOPK] (global ids; local expert = id - expert_base in [0, n_local)), the
    position of the k-th of them and its local expert; 0, 0 for a k past them)."""
    rl: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [W, 1], [1, 0])
    P = T * TOPK
    pi = gl.arange(0, P_P2, layout=gl.SliceLayout(1, rl))
    pj = gl.arange(0, P_P2, layout=gl.SliceLayout(0, rl))
    li = gl.load(ids_ptr + pi, mask=pi < P, other=-1) - expert_base
    loc_i = (pi < P) & (li >= 0) & (li < n_local)
    lj = gl.load(ids_ptr + pj, mask=pj < P, other=-1) - expert_base
    loc_j = (pj < P) & (lj >= 0) & (lj < n_local)
    rank = gl.sum(((pj[None, :] < pi[:, None]) & loc_j[None, :]).to(gl.int32), axis=1)  # local pairs before
    sel = loc_i & (rank == k)
    return (gl.sum(loc_i.to(gl.int32), axis=0), gl.sum(gl.where(sel, pi, 0), axis=0),
            gl.sum(gl.where(sel, li, 0), axis=0))


@gluon.jit
def _slice_kernel(x_ptr, wq_ptr, wb_ptr, run_ptr, y_ptr, cnt_ptr, out_ptr, norm_ptr, scr_ptr, act_ptr,
                  ids_ptr, wts_ptr, u_ptr, gacc_ptr, gcnt_ptr, T, expert_base, n_local, stride_g,
                  S: gl.constexpr, K: gl.constexpr, L: gl.constexpr, I_SIZE: gl.constexpr, BK: gl.constexpr,
                  W: gl.constexpr, MT: gl.constexpr, BLOCK_M: gl.constexpr, DR: gl.constexpr, NORM: gl.constexpr,
                  GDC: gl.constexpr, EPS: gl.constexpr, PREFETCH: gl.constexpr, GW5: gl.constexpr, GX4: gl.constexpr, GS3: gl.constexpr, DW5: gl.constexpr,
                  DX4: gl.constexpr, DS3: gl.constexpr, ROUTED: gl.constexpr = False, TOPK: gl.constexpr = 1,
                  P_P2: gl.constexpr = 1, EARLY: gl.constexpr = 0, KS: gl.constexpr = 1, STREAM: gl.constexpr = 0):
    """Program (run p, slice s) of the grid runs x I / S (module docstring). x_ptr int32 view of x [T, K] BF16;
    wq_ptr / wb_ptr int32 / uint8 views of the slice layout [E, I / S, block]; run_ptr int32 [runs, 1 + 2 MT]:
    the local expert, MT token rows of x, MT output rows of y / out (-1: none); y_ptr fp32 [rows, L]; cnt_ptr int32
    [runs] (zero before and after); out_ptr BF16 [rows, L]; norm_ptr fp32 [L]; scr_ptr fp32 [grid, W 2S MT],
    act_ptr BF16 [grid, MT S]: the program's scratch; gacc_ptr fp32 [runs I / S, 2S MT] and gcnt_ptr int32 [runs I / S]
    (zero before and after) with KS > 1, where each (run, slice) is KS items, a K part each (_slice_item_fn). GW5 .. GS3 / DW5 .. DS3: the layouts of gate/up (layouts(2S W, BK, BLOCK_M,
    W)) and of down (layouts(32 W DR, 128, BLOCK_M, W)): their w5, x4 and s3.

    The programs walk the work items (run, slice, K part) item = pid, pid + G, ... (G the grid). ROUTED (MT 1; experts_forward):
    the runs are this card's pairs of ids_ptr [T, TOPK] (global expert ids; expert_base, n_local), found here: item
    (k x SLICES + s) KS + kp is K part kp of slice s of the k-th local pair. Pair pos adds into y_ptr's row pos (zero before and after), its
    last slice (counter pos) then either stores that row to out_ptr's row pos (fp32 [T TOPK, L]: partials) or with
    NORM adds wts[pos] / rms x row x norm_ptr[e] (fp32 [n_local, L], rows stride_g apart) into u_ptr's row of the
    token (zero before and after), whose last local pair (counter P_P2 + token) stores it to out_ptr's row (fp32
    [T, L]; a token's only local pair stores its own row there); after its items, program pid stores zeros to out row pid where no pair adds (no local expert there).
    The grid must then have at least T x TOPK programs."""
    SLICES: gl.constexpr = I_SIZE // S
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    _gdc_launch_dependents(GDC)
    if ROUTED:
        total = _local_pairs(ids_ptr, -1, T, expert_base, n_local, TOPK, P_P2, W)[0] * (SLICES * KS)
    else:
        total = G
    if STREAM:  # the item's tiles (_slice_item_fn), allocated once for the program's items
        ITERS: gl.constexpr = K // (BK * W)
        BND: gl.constexpr = _DT * W * DR
        sl: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[3, 1, 0, 2])  # ranked_kernel's ring slot order
        gsm = gl.allocate_shared_memory(gl.int32, [ITERS, 2 * S * W, 4, BK // 128, 4], sl)
        dsm = gl.allocate_shared_memory(gl.int32, [(L * S // 128) // BND, BND, 4, 1, 4], sl)
        for item in range(pid, total, G):
            _slice_item_inline(item, T, pid, gsm, dsm, x_ptr, wq_ptr, wb_ptr, run_ptr, y_ptr, cnt_ptr, out_ptr,
                               norm_ptr, scr_ptr, act_ptr, ids_ptr, wts_ptr, u_ptr, gacc_ptr, gcnt_ptr, expert_base,
                               n_local, stride_g, S, K, L, I_SIZE, BK, W, MT, BLOCK_M, DR, NORM, GDC, EPS, PREFETCH,
                               GW5, GX4, GS3, DW5, DX4, DS3, ROUTED, TOPK, P_P2, EARLY, KS, STREAM)
    else:
        for item in range(pid, total, G):
            _slice_item(item, T, pid, None, None, x_ptr, wq_ptr, wb_ptr, run_ptr, y_ptr, cnt_ptr, out_ptr, norm_ptr,
                        scr_ptr, act_ptr, ids_ptr, wts_ptr, u_ptr, gacc_ptr, gcnt_ptr, expert_base, n_local, stride_g, S,
                        K, L, I_SIZE, BK, W, MT, BLOCK_M, DR, NORM, GDC, EPS, PREFETCH, GW5, GX4, GS3, DW5, DX4, DS3,
                        ROUTED, TOPK, P_P2, EARLY, KS, STREAM)

    if ROUTED:  # rows no pair adds into: zeros (program pid's row; the grid has a program a pair)
        _gdc_wait(GDC)
        rl: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
        pi = gl.arange(0, P_P2, layout=rl)
        li = gl.load(ids_ptr + pi, mask=pi < T * TOPK, other=-1) - expert_base
        loc = (pi < T * TOPK) & (li >= 0) & (li < n_local)
        if NORM:
            none_here = (pid < T) & (gl.sum((loc & (pi // TOPK == pid)).to(gl.int32), axis=0) == 0)
        else:
            none_here = (pid < T * TOPK) & (gl.sum((loc & (pi == pid)).to(gl.int32), axis=0) == 0)
        if none_here:
            nl: gl.constexpr = gl.BlockedLayout([L // (32 * W)], [32], [W], [0])
            cols = gl.arange(0, L, layout=nl)
            gl.store(out_ptr + pid.to(gl.int64) * L + cols, gl.zeros([L], gl.float32, layout=nl))


STREAM_MAX = 200 * 1024  # shared memory a program may take for slice_stream (sm_90 allows 227 KB a block)


def stream_bytes(s: int, k: int, l: int) -> int:
    """Shared memory of a slice_stream program: the slice's gate/up words (2S x K / 2 bytes) and down words (L x S /
    2 bytes); the scales stay in registers."""
    return 2 * s * (k // 2) + l * (s // 2)


def kernel_layouts(s: int, k: int, l: int, i: int, bk: int, warps: int, dr: int, block_m: int = 8,
                   early: bool = False, ks: int = 1, stream: bool = False) -> dict:
    """The layout constexprs of ``_slice_kernel`` (GW5 .. DS3: gluon_kernel.layouts of its gate/up rows, 2S a warp,
    and of its down steps, DR tiles of 32 A' rows a warp), once the shape splits: ``check_shape``, K / BK tiles over
    the warps (slice_warps), the down block's L S / 128 rows of A' into steps of 32 x warps x DR (slice_dr), L over
    the warps' threads; ``ks`` K parts (slice_ksplit) split the warps' tiles again and the down block's 128-byte
    lines; ``early`` (slice_down_early) needs two K tiles a warp at least and one K part; ``stream`` (slice_stream)
    one K part, not early, and its shared memory (``stream_bytes``) within 200 KB. Raises ValueError naming the
    configuration key otherwise."""
    check_shape(s, k, l, i, bk)
    if (k // bk) % (warps * ks):
        by = f" x slice_ksplit {ks!r}" if ks != 1 else ""
        raise ValueError(f"slice_warps {warps!r}{by} must split latent {k} / slice_bk {bk}")
    if (l * s // 256) % ks:
        raise ValueError(f"slice_ksplit {ks!r} must split the down block's {l * s // 256} lines of 128 bytes")
    if early and (ks > 1 or k // bk // warps < 2):
        raise ValueError(f"slice_down_early needs one K part (slice_ksplit {ks!r}) and two K tiles a warp: latent "
                         f"{k} / slice_bk {bk} / slice_warps {warps} is {k // bk // warps}")
    if stream and (ks > 1 or early or stream_bytes(s, k, l) > STREAM_MAX):
        raise ValueError(f"slice_stream needs one K part (slice_ksplit {ks!r}), slice_down_early off ({early!r}) and "
                         f"{stream_bytes(s, k, l)} bytes of shared memory within {STREAM_MAX} (a narrower slice_width)")
    if (l * s // 128) % (DOWN_TILE * warps * dr) or l % (32 * warps):
        raise ValueError(f"slice_dr {dr!r}: the down block's {l * s // 128} rows of 128 do not split into steps of "
                         f"{DOWN_TILE} x {warps} warps x {dr}")
    gu = layouts(2 * s * warps, bk, block_m, warps)
    gd = layouts(DOWN_TILE * warps * dr, 128, block_m, warps)
    return dict(GW5=gu["w5"], GX4=gu["x4"], GS3=gu["s3"], DW5=gd["w5"], DX4=gd["x4"], DS3=gd["s3"])


def launch(x, buf, runs, y, cnt, out, norm_w, scr, act, *, s: int, i_size: int, bk: int = 128, warps: int = 8,
           mt: int = 1, block_m: int = 8, dr: int = 1, norm: bool = True, pdl: bool = True, eps: float = 1e-6,
           prefetch: bool = False, maxnreg: int | None = None, early: bool = False, ks: int = 1, gacc=None,
           gcnt=None, stream: bool = False):
    """One layer: grid runs x I / s. x BF16 [T, K]; buf the slice layout (uint8 [E, I / s, block]); runs int32
    [R, 1 + 2 mt]; y fp32 [rows, L]; cnt int32 [R]; out BF16 [rows, L]; norm_w fp32 [L]; scr fp32 [grid, warps 2s
    mt]; act BF16 [grid, mt s]. prefetch: the down block asked into L2 before the gate/up GEMM. maxnreg: a cap on the registers a thread
    (None: the compiler's choice). early: the down block's first step loaded into registers with the last gate/up
    tile, before the gate/up products (slice_down_early). ks: K parts an item (slice_ksplit; grid runs x I / s x ks),
    with gacc fp32 [R I / s, 2 s mt] and gcnt int32 [R I / s], zero before and after. stream: an item's words
    copied into shared memory at its start (slice_stream)."""
    k, l = x.shape[1], y.shape[1]
    if warps * mt > block_m:
        raise ValueError(f"{warps} warps x {mt} tokens exceed BLOCK_M {block_m}")
    lay = kernel_layouts(s, k, l, i_size, bk, warps, dr, block_m, early, ks, stream)
    grid = runs.shape[0] * (i_size // s) * ks
    if ks > 1 and (gacc is None or gcnt is None):
        raise ValueError("ks > 1 needs the zeroed gacc and gcnt buffers")
    extra = ({"launch_pdl": True} if pdl else {}) | ({"maxnreg": maxnreg} if maxnreg else {})
    _slice_kernel[(grid,)](x.view(torch.int32), buf.view(torch.int32), buf, runs, y, cnt, out, norm_w, scr, act,
                           runs, norm_w, y, y if gacc is None else gacc, cnt if gcnt is None else gcnt, 0, 0, 0, 0, S=s, K=k, L=l, I_SIZE=i_size, BK=bk, W=warps, MT=mt, BLOCK_M=block_m, DR=dr,
                           NORM=norm, GDC=pdl, EPS=eps, PREFETCH=prefetch, **lay, EARLY=int(early), KS=ks, STREAM=int(stream), num_warps=warps,
                           **extra)


_WORKSPACE: dict = {}


def slices_of(ex, s: int, bk: int) -> torch.Tensor:
    """``ex``'s experts in the slice layout (``to_slice_layout``), made at the first call and kept on ``ex`` (a
    second copy of the weights: the price of this path while the other kernels read the tiled layout)."""
    cache = ex.__dict__.setdefault("_slice_layouts", {})
    if (s, bk) not in cache:
        m = ex.to_mma_layout()
        cache[(s, bk)] = to_slice_layout(m.w13, m.w13_scale, m.w2, m.w2_scale, s, bk)
    return cache[(s, bk)]


def _workspace(device: torch.device, p2: int, l: int, grid: int, w: int, s: int, i: int) -> dict:
    """The path's buffers, per device and stream (kernel.stream_key): the pairs' and tokens' fp32 rows and their
    counters, the K parts' gate/up rows (2i a pair) and their counters (all zero before and after every launch: the
    kernel puts them back), and the programs' scratch. A larger need allocates larger ones; earlier ones stay alive
    (captured graphs may hold them)."""
    from .kernel import stream_key

    key = (stream_key(device), l, w, s)
    have = _WORKSPACE.setdefault(key, [])
    if not have or have[-1]["p2"] < p2 or have[-1]["grid"] < grid or have[-1]["i"] < i:
        p2, grid = max(p2, have[-1]["p2"] if have else 0), max(grid, have[-1]["grid"] if have else 0)
        i = max(i, have[-1]["i"] if have else 0)
        have.append({"p2": p2, "grid": grid, "i": i,
                     "gacc": torch.zeros(p2 * 2 * i, dtype=torch.float32, device=device),
                     "gcnt": torch.zeros(p2 * (i // s), dtype=torch.int32, device=device),
                     "y": torch.zeros(p2, l, dtype=torch.float32, device=device),
                     "u": torch.zeros(p2, l, dtype=torch.float32, device=device),
                     "cnt": torch.zeros(2 * p2, dtype=torch.int32, device=device),
                     "scr": torch.empty(grid, w * 2 * s, dtype=torch.float32, device=device),
                     "act": torch.empty(grid, s, dtype=torch.bfloat16, device=device)})
    return have[-1]


def slice_config(config: dict) -> dict:
    """This path's configuration keys, checked, with their defaults: slice_few (false), slice_max_pairs (32, at most
    64: the routing is read into one program's registers), slice_width (32), slice_bk (256), slice_warps (8),
    slice_dr (4), slice_maxnreg (128; null: the compiler's choice), slice_per_sm (2), slice_down_early (false), slice_ksplit (1), slice_prefetch (false), slice_stream (false). Raises
    ValueError naming the key
    (a string "false" would otherwise switch the path on)."""
    c = {"few": config.get("slice_few", False), "max_pairs": config.get("slice_max_pairs", 32),
         "s": config.get("slice_width", 32), "bk": config.get("slice_bk", 256), "w": config.get("slice_warps", 8),
         "dr": config.get("slice_dr", 4), "maxnreg": config.get("slice_maxnreg", 128),
         "per_sm": config.get("slice_per_sm", 2), "early": config.get("slice_down_early", False),
         "ks": config.get("slice_ksplit", 1), "prefetch": config.get("slice_prefetch", False),
         "stream": config.get("slice_stream", False)}
    for key, v in (("slice_few", c["few"]), ("slice_down_early", c["early"]), ("slice_prefetch", c["prefetch"]),
                   ("slice_stream", c["stream"])):
        if type(v) is not bool:
            raise ValueError(f"{key} must be true or false, got {v!r}")
    checks = (("slice_max_pairs", c["max_pairs"], lambda v: 1 <= v <= 64, "1 to 64"),
              ("slice_width", c["s"], lambda v: v in (32, 64, 128), "32, 64 or 128"),
              ("slice_bk", c["bk"], lambda v: v > 0 and v % 128 == 0, "a positive multiple of 128"),
              ("slice_warps", c["w"], lambda v: v in (1, 2, 4, 8), "1, 2, 4 or 8"),
              ("slice_dr", c["dr"], lambda v: v >= 1, "a positive integer"),
              ("slice_per_sm", c["per_sm"], lambda v: v >= 1, "a positive integer"),
              ("slice_ksplit", c["ks"], lambda v: v in (1, 2, 4), "1, 2 or 4"),
              ("slice_maxnreg", c["maxnreg"], lambda v: 24 <= v <= 255, "24 to 255 or null"))
    for key, v, ok, want in checks:
        if not (type(v) is int and ok(v)) and not (key == "slice_maxnreg" and v is None):
            raise ValueError(f"{key} must be {want}, got {v!r}")
    return c


def slice_taken(config: dict, pairs: int) -> bool:
    """Whether a chunk of ``pairs`` (token, slot) pairs runs this path: config ``slice_few`` on and at most
    ``slice_max_pairs`` pairs. Checks the keys (``slice_config``) wherever the gluon decode runs, on or off."""
    c = slice_config(config)
    return c["few"] and pairs <= c["max_pairs"]


def experts_forward(x: torch.Tensor, ids: torch.Tensor, wts: torch.Tensor, ex, out: torch.Tensor, eps: float, *,
                    sms: int, config: dict, partials: bool = False, last_launch: dict | None = None) -> torch.Tensor:
    """kernel.mxfp4_moe_experts's chunk on this path (config ``slice_few``), one launch: out fp32 [T, L] (this card's
    share of every token: the sum of w x rmsnorm(y) x g[e] over its local pairs, zero where none) or with partials
    [T k, L] (each pair's output before its norm, zero where its expert is elsewhere). x BF16 [T, L]; ids [T, k]
    global expert ids, distinct within a token; wts fp32 [T, k]; ex an ExpertWeights (any layout; its slice layout
    made at the first call, ``slices_of``). Config keys: slice_width S (32), slice_bk (256), slice_warps (8),
    slice_dr (4), slice_maxnreg (128; None: the compiler's choice), slice_per_sm (programs an SM, 2),
    slice_down_early (false), slice_ksplit (K parts a slice, 1), slice_prefetch (each K part's share of the down
    block asked into L2 first; false), slice_stream (an item's words through shared memory; false). Raises
    ValueError for shapes the configuration does not split."""
    c = slice_config(config)
    s, bk, w, dr, maxnreg, per_sm = c["s"], c["bk"], c["w"], c["dr"], c["maxnreg"], c["per_sm"]
    t, topk = ids.shape
    l, i = ex.latent_size, ex.expert_size
    lay = kernel_layouts(s, l, l, i, bk, w, dr, early=c["early"], ks=c["ks"], stream=c["stream"])
    p = t * topk
    p2 = max(2, 1 << (p - 1).bit_length())
    grid = max(sms * per_sm, p)
    ws = _workspace(x.device, p2, l, grid, w, s, i)
    buf = slices_of(ex, s, bk)
    ids_c = ids.contiguous()  # int32 or int64 as routed: a cast would be a launch of its own between the layers
    pdl = config.get("pdl", True)
    extra = ({"launch_pdl": True} if pdl else {}) | ({"maxnreg": maxnreg} if maxnreg else {})
    g = ex.norm_weight
    k = _slice_kernel[(grid,)](x.view(torch.int32), buf.view(torch.int32), buf, ids_c, ws["y"], ws["cnt"], out, g,
                               ws["scr"], ws["act"], ids_c, wts, ws["u"], ws["gacc"], ws["gcnt"], t, ex.expert_base, ex.num_local, g.stride(0),
                               S=s, K=l, L=l, I_SIZE=i, BK=bk, W=w, MT=1, BLOCK_M=8, DR=dr, NORM=not partials,
                               GDC=pdl, EPS=eps, PREFETCH=c["prefetch"], **lay, ROUTED=True, TOPK=topk, P_P2=p2, EARLY=int(c["early"]),
                               KS=c["ks"], STREAM=int(c["stream"]), num_warps=w,
                               **extra)
    if last_launch is not None:
        last_launch.clear()
        last_launch["slice"] = k
    return out

