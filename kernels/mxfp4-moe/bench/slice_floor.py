#!/usr/bin/env python3
"""The data flow of an expert split by intermediate slice, without its arithmetic (issue #18, twenty-second round).

    python3 bench/slice_floor.py [--points ep8b1,ep2tp4b1,localb1,...] [--slices 16,32,64] [--warps 8,16]
    python3 bench/slice_floor.py --compile-only   # no GPU: each kernel's registers and stack for sm_90

Today a layer is a chain of grid-wide waits: the gate/up GEMM (its K parts added by a fix-up or a launch), the
down GEMM, the norm-combine; each costs 2-4 µs of an EP batch-1 layer of 12-27 µs (README, rounds 10-20). A slice
of S intermediate columns needs only its own gate/up rows (2S rows x the whole K) for its activations, and
then gives the whole down output's partial sums from its own S down columns (every row x S): one program a
(pair, slice) can run both GEMMs with no grid-wide wait, the slices' partial sums added by atomics into an fp32
row, and where the norm follows (EP8, unsplit experts), a counter per pair whose last slice normalizes the row.
Under the TP split (partials mode) there is no norm, but the row has to be zero before the slices add into it.

Before building the decode into that shape, this measures the shape itself: a Triton program a (pair, slice)
reads its slice's bytes from one contiguous block (the load-time layout such a kernel would take; per slice
4096 S bytes of gate/up words, 256 S of their scales, 2048 S of down words, 128 S of down scales: 6528 S bytes,
an expert's 26.74 MB over its I / S slices), sums them in place of the decode and the mma (integer sums of each
row; act = the product of a gate row's and an up row's sums), and gives each down row the sum of its words
times the sum of the slice's act. Variants (``mode``):

- ``read``: the reads and sums only, one value a program stored: what this grid and order cost by themselves;
- ``store``: each program stores its 4096 partial sums to a row of its own (no atomics);
- ``partials``: the partial sums added by ``tl.atomic_add`` (relaxed) into the pair's fp32 row, the rows set
  to zero by a memset node before each layer (TP partials mode); ``partials-nozero`` without the memset;
- ``norm``: ``partials``, then a counter per pair (acq_rel after a CTA barrier): the pair's last slice reads
  the row, writes its RMS-normalized BF16 row, and sets the row and the counter back to zero (no memset).

Each with programmatic dependent launch (``pdl``: the down block's loads issued before ``gdc_wait``, as the
kernels request their first tiles before the wait) or without. One token a routed expert (the batch-1
points; ``ep8b4`` / ``ep2tp4b4`` the bytes of batch 4's experts at one token each). Timed as the benchmark's
steady column: one graph of 4 layers on 4 distinct copies, L2 flushed before each replay, per layer; against
the benchmark's read floor over the same bytes in the same run. The sums are checked against PyTorch for
``norm`` and ``partials``.

If ``norm`` at ep8b1 cannot come within 85% of the floor, the slice design cannot meet issue #18's goal there
whatever its decode costs; if it can, what the decode adds is what is left to find.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mxfp4_moe import CHUNK_BYTES, floor_times, graph_time_us  # noqa: E402

from mxfp4_moe.format import dequantize_mxfp4_mma  # noqa: E402
from mxfp4_moe.kernel import _MMA_UNSCALE, _decode_mma  # noqa: E402

K = 4096   # latent: the gate/up GEMM's K and the down GEMM's rows (variant muse)
KW = K // 8  # int32 words of a gate/up row (8 E2M1 codes a word)
POINTS = {  # name: (routed experts at one token each, intermediate size of an expert on this card)
    "ep8b1": (1, 4096), "ep2tp4b1": (4, 1024), "localb1": (8, 4096), "ep8b4": (2, 4096), "ep2tp4b4": (19, 1024),
}
MODES = {"read": 0, "store": 1, "partials": 2, "partials-nozero": 2, "norm": 3, "dot-partials": 2, "dot-norm": 3,
         "fma-partials": 2, "fma-norm": 3}


@triton.jit
def _norm_last(y_ptr, cnt_ptr, out_ptr, norm_ptr, p, slices_per_pair, L: tl.constexpr):
    """After this program's atomics into pair ``p``'s fp32 row (y_ptr + p * L): count it (acq_rel, after a CTA
    barrier); the pair's last slice writes the row RMS-normalized in BF16 (times ``norm_ptr``) and sets the row and
    the counter back to zero."""
    rows_l = tl.arange(0, L)
    tl.debug_barrier()
    done = tl.atomic_add(cnt_ptr + p, 1, sem="acq_rel")
    if done == slices_per_pair - 1:
        row = tl.load(y_ptr + p * L + rows_l, cache_modifier=".cg")
        rms = tl.sqrt(tl.sum(row * row, axis=0) / L + 1e-6)
        w = tl.load(norm_ptr + rows_l)
        tl.store(out_ptr + p * L + rows_l, (row / rms * w).to(tl.bfloat16))
        tl.store(y_ptr + p * L + rows_l, tl.zeros([L], tl.float32))
        tl.atomic_xchg(cnt_ptr + p, 0, sem="relaxed")


@triton.jit
def _slice_kernel(w_ptr, y_ptr, cnt_ptr, out_ptr, norm_ptr, slices_per_pair,
                  S: tl.constexpr, KW: tl.constexpr, L: tl.constexpr, BK: tl.constexpr, MODE: tl.constexpr,
                  GDC: tl.constexpr, STAGES: tl.constexpr):
    """Program (pair p, slice s) of the grid pairs x slices_per_pair: its block of the weights' words at
    ``w_ptr + program * (2S*KW + 2S*32 + L*S/8 + L*S/128)``: gate rows, up rows, their scales, the down block
    ([L, S/8] words), its scales. MODE 0 read, 1 store, 2 atomics, 3 atomics + counter + norm."""
    pid = tl.program_id(0)
    p = pid // slices_per_pair
    GU: tl.constexpr = 2 * S * KW
    GUS: tl.constexpr = 2 * S * 32
    DW: tl.constexpr = L * (S // 8)
    DS: tl.constexpr = L * S // 128
    base = w_ptr + pid.to(tl.int64) * (GU + GUS + DW + DS)
    if GDC:
        gdc_launch_dependents()
    rows_l = tl.arange(0, L)
    # the down block first: it does not wait for the activations
    dwords = tl.load(base + GU + GUS + rows_l[:, None] * (S // 8) + tl.arange(0, S // 8)[None, :])
    dscale = tl.sum(tl.load(base + GU + GUS + DW + tl.arange(0, DS)) & 0xFF, axis=0)
    if GDC:
        gdc_wait()
    rows = tl.arange(0, S)
    cols = tl.arange(0, BK)
    acc_g = tl.zeros([S, BK], tl.int32)
    acc_u = tl.zeros([S, BK], tl.int32)
    for k in tl.range(0, KW, BK, num_stages=STAGES):
        acc_g += tl.load(base + rows[:, None] * KW + k + cols[None, :]) & 0xFF
        acc_u += tl.load(base + (S + rows[:, None]) * KW + k + cols[None, :]) & 0xFF
    sc = tl.load(base + GU + tl.arange(0, 2 * S)[:, None] * 32 + tl.arange(0, 32)[None, :]) & 0xFF
    scale = tl.sum(tl.sum(sc, axis=1), axis=0)
    g = tl.sum(acc_g, axis=1).to(tl.float32) * 1e-3
    u = tl.sum(acc_u, axis=1).to(tl.float32) * 1e-3
    act = tl.sum(g * u, axis=0) + (scale + dscale).to(tl.float32) * 1e-6
    part = tl.sum(dwords & 0xFF, axis=1).to(tl.float32) * act
    if MODE == 0:
        tl.store(out_ptr + pid, tl.sum(part, axis=0))
    elif MODE == 1:
        tl.store(y_ptr + pid.to(tl.int64) * L + rows_l, part)
    else:
        tl.atomic_add(y_ptr + p * L + rows_l, part, sem="relaxed")
        if MODE == 3:
            _norm_last(y_ptr, cnt_ptr, out_ptr, norm_ptr, p, slices_per_pair, L)


@triton.jit
def _wdot(x, wq, ws, acc, N: tl.constexpr, BK: tl.constexpr, DECODE: tl.constexpr, F32: tl.constexpr):
    """acc [N, 16] += W [N, BK] @ x^T, W the mma-layout codes wq [N, BK/2] with scales ws [N, BK/32]."""
    w = _decode_mma(wq, ws, N, BK, DECODE == 4)
    if F32:
        return tl.dot(w.to(tl.float32), tl.trans(x.to(tl.float32)), acc, input_precision="ieee")
    return tl.dot(w, tl.trans(x), acc)


@triton.jit
def _slice_dot_kernel(w_ptr, x_ptr, y_ptr, cnt_ptr, out_ptr, norm_ptr, slices_per_pair,
                      S: tl.constexpr, K: tl.constexpr, L: tl.constexpr, BKE: tl.constexpr, RB: tl.constexpr,
                      NORM: tl.constexpr, GDC: tl.constexpr, STAGES: tl.constexpr, DECODE: tl.constexpr,
                      PREFETCH: tl.constexpr, F32: tl.constexpr, FMA: tl.constexpr = False):
    """The same program with the arithmetic: the bytes (``w_ptr`` uint8) are mma-layout E2M1 codes and E8M0
    scales (kernel._decode_mma, DECODE 4 PTX / 5 portable); gate and up rows [S, K] against the token (row 0 of
    ``x_ptr`` [16, K] bf16, rows 1-15 zero) by tl.dot on 16-row tiles, act = silu(gate) * up in BF16, then the
    down block [L, S] against act, RB rows a step, each step's column added by atomics into the pair's fp32
    row; NORM as MODE 3 above. PREFETCH: the down block's 128-byte lines asked into L2 before the wait. F32:
    the products in fp32 (Triton's CPU interpreter, whose BF16 tl.dot is not exact). FMA: no tl.dot; each decoded
    weight times the token's value in fp32 on the CUDA cores, the sums reduced once after the K loop (more arithmetic
    a weight than the gluon kernels' mma path: a bound from above on what the decode costs in this shape)."""
    pid = tl.program_id(0)
    p = pid // slices_per_pair
    GU: tl.constexpr = 2 * S * (K // 2)
    GUS: tl.constexpr = 2 * S * (K // 32)
    DW: tl.constexpr = L * (S // 2)
    DS: tl.constexpr = L * (S // 32)
    base = w_ptr + pid.to(tl.int64) * (GU + GUS + DW + DS)
    d0 = base + GU + GUS
    if GDC:
        gdc_launch_dependents()
    if PREFETCH:
        lines = d0 + tl.arange(0, (DW + DS) // 128) * 128
        tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [lines], dtype=tl.int32,
                                  is_pure=False, pack=1)
    if GDC:
        gdc_wait()
    rows = tl.arange(0, S)
    kb = tl.arange(0, BKE // 2)
    ks = tl.arange(0, BKE // 32)
    kx = tl.arange(0, BKE)
    m = tl.arange(0, 16)
    rr = tl.arange(0, RB)
    kd = tl.arange(0, S // 2)
    kds = tl.arange(0, S // 32)
    acc_g = tl.zeros([S, BKE if FMA else 16], tl.float32)  # FMA: products summed over K after the loop
    acc_u = tl.zeros([S, BKE if FMA else 16], tl.float32)
    for k in tl.range(0, K, BKE, num_stages=STAGES):
        if FMA:  # (the token first, as measured)
            x = tl.load(x_ptr + k + kx).to(tl.float32)[None, :]
        else:
            x = tl.load(x_ptr + m[:, None] * K + k + kx[None, :])
        wg = tl.load(base + rows[:, None] * (K // 2) + k // 2 + kb[None, :])
        wu = tl.load(base + (S + rows[:, None]) * (K // 2) + k // 2 + kb[None, :])
        sg = tl.load(base + GU + rows[:, None] * (K // 32) + k // 32 + ks[None, :])
        su = tl.load(base + GU + (S + rows[:, None]) * (K // 32) + k // 32 + ks[None, :])
        if FMA:
            acc_g += _decode_mma(wg, sg, S, BKE, DECODE == 4).to(tl.float32) * x
            acc_u += _decode_mma(wu, su, S, BKE, DECODE == 4).to(tl.float32) * x
        else:
            acc_g = _wdot(x, wg, sg, acc_g, S, BKE, DECODE, F32)
            acc_u = _wdot(x, wu, su, acc_u, S, BKE, DECODE, F32)
    if FMA:
        g = tl.sum(acc_g, axis=1) * _MMA_UNSCALE
        u = tl.sum(acc_u, axis=1) * _MMA_UNSCALE
        act = (g / (1.0 + tl.exp(-g)) * u).to(tl.bfloat16).to(tl.float32)[None, :]  # [1, S]
    else:
        g = acc_g * _MMA_UNSCALE
        u = acc_u * _MMA_UNSCALE
        act = tl.trans(g / (1.0 + tl.exp(-g)) * u).to(tl.bfloat16)  # [16, S]: row 0 the token's
    for r0 in tl.range(0, L, RB, num_stages=STAGES):
        dq = tl.load(d0 + (r0 + rr)[:, None] * (S // 2) + kd[None, :])
        dsc = tl.load(d0 + DW + (r0 + rr)[:, None] * (S // 32) + kds[None, :])
        if FMA:
            col = tl.sum(_decode_mma(dq, dsc, RB, S, DECODE == 4).to(tl.float32) * act, axis=1) * _MMA_UNSCALE
        else:
            accd = _wdot(act, dq, dsc, tl.zeros([RB, 16], tl.float32), RB, S, DECODE, F32)
            col = tl.sum(tl.where(m[None, :] == 0, accd, 0.0), axis=1) * _MMA_UNSCALE
        tl.atomic_add(y_ptr + p * L + r0 + rr, col, sem="relaxed")
    if NORM:
        _norm_last(y_ptr, cnt_ptr, out_ptr, norm_ptr, p, slices_per_pair, L)


def dot_expected(buf: torch.Tensor, x0: torch.Tensor, pairs: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(partial-sum rows, normalized rows) [pairs, K] fp32 of ``_slice_dot_kernel``, in PyTorch: each block's
    gate, up and down dequantized as the mma decode does (format.dequantize_mxfp4_mma), act rounded to BF16."""
    b = buf.view(torch.uint8).view(-1, 6528 * s)
    gu, gus, dw = 2 * s * (K // 2), 2 * s * (K // 32), K * (s // 2)
    rows = torch.zeros(pairs, K, dtype=torch.float64, device=buf.device)
    per_pair = b.shape[0] // pairs
    for i in range(b.shape[0]):
        blk = b[i]
        w13 = dequantize_mxfp4_mma(blk[:gu].view(2 * s, K // 2), blk[gu:gu + gus].view(2 * s, K // 32))
        h = w13.double() @ x0.double()
        act = (torch.nn.functional.silu(h[:s]) * h[s:]).to(torch.bfloat16).double()
        w2 = dequantize_mxfp4_mma(blk[gu + gus:gu + gus + dw].view(K, s // 2), blk[gu + gus + dw:].view(K, s // 32))
        rows[i // per_pair] += w2.double() @ act
    normed = rows / torch.sqrt((rows * rows).mean(-1, keepdim=True) + 1e-6)
    return rows.float(), normed.float()


def sane_scales(buf: torch.Tensor, s: int) -> None:
    """Set every block's scale bytes to 118..127 (values 2**-9 .. 1 times E2M1), in place."""
    b = buf.view(torch.uint8).view(-1, 6528 * s)
    gu, gus, dw = 2 * s * (K // 2), 2 * s * (K // 32), K * (s // 2)
    for lo, hi in ((gu, gu + gus), (gu + gus + dw, 6528 * s)):
        b[:, lo:hi] = torch.randint(118, 128, (b.shape[0], hi - lo), dtype=torch.uint8, device=buf.device)


def block_words(s: int) -> int:
    return 2 * s * KW + 2 * s * 32 + K * (s // 8) + K * s // 128


def expected(buf: torch.Tensor, pairs: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(partial-sum rows [pairs, K] fp32, normalized rows [pairs, K] fp32) of ``_slice_kernel``'s sums, in PyTorch."""
    b = (buf.view(-1, block_words(s)) & 0xFF).to(torch.float64)
    gu, gus = 2 * s * KW, 2 * s * 32
    g = b[:, :s * KW].view(-1, s, KW).sum(-1) * 1e-3
    u = b[:, s * KW:gu].view(-1, s, KW).sum(-1) * 1e-3
    scale = b[:, gu:gu + gus].sum(-1) + b[:, gu + gus + K * (s // 8):].sum(-1)
    act = (g * u).sum(-1) + scale * 1e-6
    part = b[:, gu + gus:gu + gus + K * (s // 8)].view(-1, K, s // 8).sum(-1) * act[:, None]
    rows = part.view(pairs, -1, K).sum(1)
    normed = rows / torch.sqrt((rows * rows).mean(-1, keepdim=True) + 1e-6)
    return rows.float(), normed.float()


def kernel_of(mode: str, s: int, pdl: bool, args, decode: int = 4) -> tuple[object, dict]:
    """(the kernel, its constexprs) that ``mode`` runs at slice width ``s``: one place for a launch and for
    ``--compile-only``."""
    m = MODES[mode]
    if mode.startswith(("dot", "fma")):
        return _slice_dot_kernel, dict(S=s, K=K, L=K, BKE=args.bke, RB=args.rb, NORM=m == 3, GDC=pdl,
                                       STAGES=args.stages, DECODE=decode, PREFETCH=args.prefetch,
                                       F32=os.environ.get("TRITON_INTERPRET") == "1", FMA=mode.startswith("fma"))
    return _slice_kernel, dict(S=s, KW=KW, L=K, BK=args.bk, MODE=m, GDC=pdl, STAGES=args.stages)


def launch(c, x, y, cnt, out, outb, norm_w, mode: str, s: int, grid: int, slices: int, warps: int, pdl: bool,
           args, decode: int = 4) -> None:
    """One layer's launch of ``mode`` on copy ``c`` (int32 words)."""
    fn, consts = kernel_of(mode, s, pdl, args, decode)
    extra = {"launch_pdl": True} if pdl else {}
    if fn is _slice_dot_kernel:
        _slice_dot_kernel[(grid,)](c.view(torch.uint8), x, y, cnt, outb, norm_w, slices, **consts, num_warps=warps,
                                   **extra)
    else:
        _slice_kernel[(grid,)](c, y, cnt, outb if MODES[mode] == 3 else out, norm_w, slices, **consts,
                               num_warps=warps, **extra)


def check(copy, x, y, cnt, out, outb, norm_w, mode: str, s: int, grid: int, slices: int, warps: int, experts: int,
          args, decode: int = 4) -> str:
    """One launch of ``mode`` on ``copy`` against PyTorch ("" for the modes without a check)."""
    if mode not in ("partials", "norm", "dot-partials", "dot-norm", "fma-partials", "fma-norm"):
        return ""
    m = MODES[mode]
    if mode.startswith(("dot", "fma")):
        rows, normed = dot_expected(copy, x[0].float(), experts, s)
    else:
        rows, normed = expected(copy, experts, s)
    y.zero_()
    cnt.zero_()
    launch(copy, x, y, cnt, out, outb, norm_w, mode, s, grid, slices, warps, False, args, decode)
    got = outb.float().view(experts, K) if m == 3 else y[:experts * K].view(experts, K)
    want = normed if m == 3 else rows
    err = ((got - want).abs().max() / want.abs().max()).item()
    text = f"rel err {err:.1e}" + ("" if err < 2e-2 else " WRONG")
    if m == 3 and int(cnt.abs().sum()) + float(y[:experts * K].abs().sum()) != 0:
        text += " (counter or row not back to zero: WRONG)"
    return text


def compile_only(args) -> None:
    """Each kernel of the modes asked for, compiled for sm_90 without a GPU (the Triton installed here): registers,
    stack, shared memory a program (cuobjdump --dump-resource-usage)."""
    import re

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from sm90_compile import cuobjdump

    print(f"compiled for sm_90 by Triton {triton.__version__} (the H200 runs 3.6: figures may differ there)")
    for s in (int(v) for v in args.slices.split(",")):
        for warps in (int(v) for v in args.warps.split(",")):
            for mode in dict.fromkeys(m.replace("-nozero", "") for m in args.modes.split(",")):
                if mode.startswith(("dot", "fma")) and s < 32:
                    continue
                fn, consts = kernel_of(mode, s, True, args)
                ptrs = {"w_ptr": "*u8" if fn is _slice_dot_kernel else "*i32", "x_ptr": "*bf16", "y_ptr": "*fp32",
                        "cnt_ptr": "*i32", "out_ptr": "*bf16" if MODES[mode] == 3 else "*fp32", "norm_ptr": "*fp32"}
                sig = {n: ptrs.get(n) or ("i32" if n == "slices_per_pair" else "constexpr") for n in fn.arg_names}
                src = ASTSource(fn=fn, signature=sig,
                                constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()},
                                attrs={(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in ptrs
                                       if n in fn.arg_names})
                ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
                use = " ".join(re.findall(r"(?:REG|STACK|SHARED):\d+", cuobjdump(ck, "--dump-resource-usage")))
                print(f"  {mode:16} S {s:3} warps {warps:2}: {use}")


def describe_device() -> int:
    """Print the GPU, its SMs and the torch and Triton versions; return the SMs."""
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs, torch {torch.__version__}, triton {triton.__version__}")
    return dev.multi_processor_count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", default="ep8b1,ep2tp4b1,localb1,ep8b4,ep2tp4b4")
    ap.add_argument("--slices", default="16,32,64", help="intermediate columns a program (the dot modes: 32 up)")
    ap.add_argument("--warps", default="8,16")
    ap.add_argument("--modes", default="read,store,partials,partials-nozero,norm,dot-partials,dot-norm")
    ap.add_argument("--bk", type=int, default=64, help="words of a gate/up row a step (the sum modes)")
    ap.add_argument("--bke", type=int, default=256, help="elements of a gate/up row a step (the dot modes)")
    ap.add_argument("--rb", type=int, default=128, help="down rows a step (the dot modes)")
    ap.add_argument("--prefetch", action="store_true", help="the dot modes ask the down block into L2 first")
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--compile-only", action="store_true", help="no GPU: each kernel's registers, stack and shared "
                    "memory, compiled for sm_90")
    args = ap.parse_args()
    if args.compile_only:
        compile_only(args)
        return 0
    sms = describe_device()
    norm_w = torch.ones(K, dtype=torch.float32, device="cuda")
    x = torch.zeros(16, K, dtype=torch.bfloat16, device="cuda")
    x[0] = torch.randn(K, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    for name in args.points.split(","):
        experts, isize = POINTS[name]
        words = experts * isize * 6528 // 4
        copies = [torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
                  for _ in range(args.copies)]
        nbytes = words * 4
        tables = [torch.arange(c.data_ptr(), c.data_ptr() + nbytes, CHUNK_BYTES, dtype=torch.int64, device="cuda")
                  for c in copies]
        floor_us, cfg = min(floor_times(tables, sms), key=lambda r: r[0])
        print(f"\n{name}: {experts} expert(s) of intermediate {isize}, {nbytes / 1e6:.1f} MB a layer; read floor "
              f"{floor_us:.2f} us ({cfg['per_sm']} programs an SM x {cfg['warps']} warps), 85% of it "
              f"{floor_us / .85:.2f} us")
        print(f"  {'mode':16} {'S':>3} {'warps':>5} {'pdl':>3} {'programs':>8} {'us':>8} {'% floor':>7}  check")
        for s in (int(v) for v in args.slices.split(",")):
            if isize % s:
                continue
            slices = isize // s
            grid = experts * slices
            for c in copies:
                sane_scales(c, s)
            y = torch.zeros(grid * K, dtype=torch.float32, device="cuda")
            cnt = torch.zeros(experts, dtype=torch.int32, device="cuda")
            out = torch.empty(grid, dtype=torch.float32, device="cuda")
            outb = torch.empty(experts * K, dtype=torch.bfloat16, device="cuda")
            for warps in (int(v) for v in args.warps.split(",")):
                for mode in args.modes.split(","):
                    if mode.startswith(("dot", "fma")) and s < 32:
                        continue
                    for pdl in (True, False) if mode.endswith("norm") else (True,):
                        def fn(mode=mode, pdl=pdl, warps=warps):
                            for c in copies:
                                if mode.endswith("partials"):
                                    y[:experts * K].zero_()
                                launch(c, x, y, cnt, out, outb, norm_w, mode, s, grid, slices, warps, pdl, args)
                        head = f"  {mode:16} {s:3} {warps:5} {'on' if pdl else 'off':>3} {grid:8}"
                        try:
                            text = check(copies[0], x, y, cnt, out, outb, norm_w, mode, s, grid, slices, warps,
                                         experts, args) if pdl else ""
                            y.zero_()
                            cnt.zero_()
                            us = graph_time_us(fn, rep_ms=100) / len(copies)
                        except Exception as exc:  # a configuration that does not compile or fit: say so, go on
                            print(f"{head} {type(exc).__name__}: {str(exc)[:160]}")
                            continue
                        print(f"{head} {us:8.2f} {100 * floor_us / us:6.1f}%  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
