"""Triton kernels: fused W4A16 MXFP4 expert GEMMs for decode (1 to 32 tokens, top-k experts each).

``mxfp4_moe_experts`` is the entry for every path: weights in the tiled layout
(``ExpertWeights.to_tiled_layout``, what ``glue.prepare_experts`` gives where Gluon runs) go to
gluon_kernel.py's kernels (decode ``gluon``); the rest of this module is the ``tl.dot`` family below.

No routing metadata is built on the host and nothing is sorted. Every GEMM program is (slot p, column
block n, k-split): it takes the expert of routing slot p, unless an earlier slot names the same expert or
the expert is not on this card (then it runs no iterations), gathers every token routed to that expert
(T <= 32 fits one BLOCK_M tile), and streams that expert's packed E2M1 rows and E8M0 scales straight from
the checkpoint layout ([E, N, K/2] and [E, N, K/32]), decoding them in registers for the tensor-core dot.
Each routed expert's weights are read once per call whatever the number of its tokens; no dequantized
copy is ever written.

Launches (default configuration):
1. gate/up: ``_down_kernel`` with A_BY_TOKEN over the 2I rows of w13 -> fp32 [pairs, 2I]
   (or ``_gate_up_kernel``: gate and up tiles in one program, silu fused; ``separate_gate_up=False``);
2. ``_silu_mul_kernel``: silu(gate) * up -> BF16 activations [pairs, I];
3. down: ``_down_kernel`` over w2 -> fp32 [pairs, L];
4. ``_norm_combine_kernel``: RMSNorm of each local pair's output times the expert's norm weight, times
   its router weight, added atomically into the zeroed output (one program per pair; the sum over the
   token's slots is this card's share under EP).
Small grids split K (partial sums added atomically into zeroed buffers).

The E2M1 x BF16 product: ``mma`` (on NVIDIA for weights re-laid out at load time by
``ExpertWeights.to_mma_layout``, ``glue.prepare_experts``'s choice where Gluon does not run: a bit permutation inside each 32-bit word so
that each word decodes straight into the tensor-core operand registers; ``mma_portable`` is the same bit
logic in Triton ops), ``asm2`` / ``asm`` decode the checkpoint layout in PTX, ``explicit`` decodes it with
Triton integer/float ops (portable: AMD, the CPU interpreter), ``dot_scaled`` uses ``tl.dot_scaled``.
``stream_k`` in the configuration runs both GEMMs as persistent stream-K programs (``_streamk_kernel``).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

MAX_TOKENS = 32  # per launch; larger batches are split into chunks of 32


@triton.jit
def _route_slot(ids_ptr, pid_p, T, expert_base, n_local, TOPK: tl.constexpr, P_P2: tl.constexpr):
    """Local expert of slot pid_p, and whether this program owns it (first slot naming it, on this card)."""
    offs_p = tl.arange(0, P_P2)
    ids = tl.load(ids_ptr + offs_p, mask=offs_p < T * TOPK, other=-1)
    e = tl.load(ids_ptr + pid_p)
    n_before = tl.sum(((ids == e) & (offs_p < pid_p)).to(tl.int32), axis=0)
    local = e - expert_base
    owns = (n_before == 0) & (local >= 0) & (local < n_local)
    return e, local, owns


@triton.jit
def _expert_tokens(ids_ptr, e, T, TOPK: tl.constexpr, TOPK_P2: tl.constexpr, BLOCK_M: tl.constexpr):
    """For tokens 0..BLOCK_M-1: whether the token is routed to e, and its pair row t*TOPK + slot."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_j = tl.arange(0, TOPK_P2)
    m2 = (offs_m[:, None] < T) & (offs_j[None, :] < TOPK)
    ids2 = tl.load(ids_ptr + offs_m[:, None] * TOPK + offs_j[None, :], mask=m2, other=-1)
    match = ids2 == e
    has = tl.max(match.to(tl.int32), axis=1) > 0
    slot = tl.sum(tl.where(match, offs_j[None, :], 0), axis=1)
    return has, offs_m * TOPK + slot


@triton.jit
def _dequant_tile(wq, ws, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """packed uint8 [BLOCK_N, BLOCK_K//2] + E8M0 uint8 [BLOCK_N, BLOCK_K//32] -> bf16 [BLOCK_N, BLOCK_K].

    An E2M1 nibble s.ee.m placed as fp16 bits s00000ee.m000000000 is exactly its value times 2**-14
    (e == 0 lands on the fp16 subnormal 0.5 * 2**-14), so the decode is shifts and masks; the scale
    2**(s-127) * 2**14 is an fp32 built from its exponent bits.
    """
    b = wq.to(tl.uint16)
    lo = ((b & 0x7) << 9) | ((b & 0x8) << 12)
    hi = ((b & 0x70) << 5) | ((b & 0x80) << 8)
    lo = lo.to(tl.float16, bitcast=True).to(tl.float32)
    hi = hi.to(tl.float16, bitcast=True).to(tl.float32)
    v = tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))
    sc = (ws.to(tl.uint32) << 23).to(tl.float32, bitcast=True) * 16384.0
    v = tl.reshape(v, (BLOCK_N, BLOCK_K // 32, 32)) * sc[:, :, None]
    return tl.reshape(v, (BLOCK_N, BLOCK_K)).to(tl.bfloat16)


# E2M1 -> BF16 for 4 packed bytes (8 elements) per call, NVIDIA PTX (sm_80+ for bf16x2 mul; Hopper here).
# The 3-bit magnitude of each nibble selects, through `prmt` (byte permute: an 8-entry byte table held in
# two registers), the high and the low byte of its BF16 value; the sign bit is moved to bit 15 / 31; the
# result is multiplied by the block scale 2**(s-127) built as BF16 bits (s << 7), exact for normal results.
# Inputs: $4 = 4 packed bytes b0..b3, $5 = their 4 scale bytes. Outputs: $0,$1 = BF16 pairs of the low
# nibbles (b0,b1 | b2,b3), $2,$3 = the high nibbles.
_E2M1_BF16_ASM = tl.constexpr("""
{
.reg .b32 z, lh0, lh1, ll0, ll1, m, s, s2, t0, t1, v, p01, p23, S01, S23;
mov.b32 z, 0;
mov.b32 lh0, 0x3F3F3F00;
mov.b32 lh1, 0x40404040;
mov.b32 ll0, 0xC0800000;
mov.b32 ll1, 0xC0804000;
prmt.b32 S01, $5, z, 0x4140;
shl.b32 S01, S01, 7;
prmt.b32 S23, $5, z, 0x4342;
shl.b32 S23, S23, 7;
prmt.b32 p01, $4, z, 0x1404;
prmt.b32 p23, $4, z, 0x3424;
and.b32 m, $4, 0x07070707;
mul.lo.u32 s, m, 17;
shr.b32 s2, s, 16;
prmt.b32 t0, lh0, lh1, s;
prmt.b32 t1, ll0, ll1, s;
and.b32 t0, t0, 0xFF00FF00;
and.b32 t1, t1, 0x00FF00FF;
or.b32 v, t0, t1;
shl.b32 t0, p01, 4;
and.b32 t0, t0, 0x80008000;
or.b32 v, v, t0;
mul.rn.bf16x2 $0, v, S01;
prmt.b32 t0, lh0, lh1, s2;
prmt.b32 t1, ll0, ll1, s2;
and.b32 t0, t0, 0xFF00FF00;
and.b32 t1, t1, 0x00FF00FF;
or.b32 v, t0, t1;
shl.b32 t0, p23, 4;
and.b32 t0, t0, 0x80008000;
or.b32 v, v, t0;
mul.rn.bf16x2 $1, v, S23;
shr.b32 m, $4, 4;
and.b32 m, m, 0x07070707;
mul.lo.u32 s, m, 17;
shr.b32 s2, s, 16;
prmt.b32 t0, lh0, lh1, s;
prmt.b32 t1, ll0, ll1, s;
and.b32 t0, t0, 0xFF00FF00;
and.b32 t1, t1, 0x00FF00FF;
or.b32 v, t0, t1;
and.b32 t0, p01, 0x80008000;
or.b32 v, v, t0;
mul.rn.bf16x2 $2, v, S01;
prmt.b32 t0, lh0, lh1, s2;
prmt.b32 t1, ll0, ll1, s2;
and.b32 t0, t0, 0xFF00FF00;
and.b32 t1, t1, 0x00FF00FF;
or.b32 v, t0, t1;
and.b32 t0, p23, 0x80008000;
or.b32 v, v, t0;
mul.rn.bf16x2 $3, v, S23;
}
""")


# A cheaper E2M1 -> BF16 decode ("asm2"): a nibble s.ee.m placed as BF16 bits s.0000000ee.m000000 is its
# value times 2**-126 exactly (ee == 0 is the BF16 subnormal m * 2**-127), so two shifts and masks per
# pair of elements build it; one bf16x2 multiply by 2**126 makes it the E2M1 value (BF16 arithmetic keeps
# subnormals), one by the scale 2**(s-127) finishes. Same operands and outputs as _E2M1_BF16_ASM.
_E2M1_BF16_ASM2 = tl.constexpr("""
{
.reg .b32 z, c, t, u, v, S01, S23;
mov.b32 z, 0;
mov.b32 c, 0x7E807E80;
prmt.b32 S01, $5, z, 0x4140;
shl.b32 S01, S01, 7;
prmt.b32 S23, $5, z, 0x4342;
shl.b32 S23, S23, 7;
prmt.b32 t, $4, z, 0x1404;
shr.b32 u, t, 2;
and.b32 u, u, 0x01C001C0;
shl.b32 v, t, 4;
and.b32 v, v, 0x80008000;
or.b32 u, u, v;
mul.rn.bf16x2 u, u, c;
mul.rn.bf16x2 $0, u, S01;
shr.b32 u, t, 6;
and.b32 u, u, 0x01C001C0;
and.b32 v, t, 0x80008000;
or.b32 u, u, v;
mul.rn.bf16x2 u, u, c;
mul.rn.bf16x2 $2, u, S01;
prmt.b32 t, $4, z, 0x3424;
shr.b32 u, t, 2;
and.b32 u, u, 0x01C001C0;
shl.b32 v, t, 4;
and.b32 v, v, 0x80008000;
or.b32 u, u, v;
mul.rn.bf16x2 u, u, c;
mul.rn.bf16x2 $1, u, S23;
shr.b32 u, t, 6;
and.b32 u, u, 0x01C001C0;
and.b32 v, t, 0x80008000;
or.b32 u, u, v;
mul.rn.bf16x2 u, u, c;
mul.rn.bf16x2 $3, u, S23;
}
""")


@triton.jit
def _decode_asm(wq, ws, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, CHEAP: tl.constexpr = False):
    """packed [BLOCK_N, BLOCK_K//2] + scales [BLOCK_N, BLOCK_K//32] -> bf16 [BLOCK_N, BLOCK_K], in PTX."""
    q3 = tl.reshape(wq, (BLOCK_N, BLOCK_K // 32, 16))
    s3 = tl.broadcast_to(ws[:, :, None], (BLOCK_N, BLOCK_K // 32, 16))
    if CHEAP:
        lo, hi = tl.inline_asm_elementwise(_E2M1_BF16_ASM2, "=r,=r,=r,=r,r,r", [q3, s3],
                                           dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)
    else:
        lo, hi = tl.inline_asm_elementwise(_E2M1_BF16_ASM, "=r,=r,=r,=r,r,r", [q3, s3],
                                           dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)
    return tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))


# The "mma" decode: weights in the mma layout (format.to_mma_layout, a load-time bit permutation of the
# Quark layout), read as 32-bit words, each decoding straight into the four BF16 pair registers that one
# lane holds of the tensor-core operand for one scale block (no byte repacking, no pair reshuffles):
# r_t = ((w << MAG_SHIFT[t]) & 0x01C001C0) | ((w << SIGN_SHIFT[t]) & 0x80008000) = BF16 bits of the E2M1
# pair times 2**-126, then one bf16x2 multiply by 2**(s - 1 - MMA_SCALE_SHIFT) (built from the E8M0 byte
# with one integer multiply-add: s * 0x00800080 + bias); the fp32 sums are multiplied by 2**MMA_SCALE_SHIFT
# at the end. Per 8 elements: 3 shifts, 6 logic ops, 1 integer multiply, 4 bf16x2 multiplies (and the scale
# factor; format.py says how the bit positions allow it; 5 shifts and 6 logic ops before). Exact for E8M0
# scales 27..160 (2**-100 .. 2**33; format.dequantize_mxfp4_mma emulates it).
# Inputs: $4 = the word, $5..$8 = the factor (one value; pack 4 of an int32 operand gives 4 registers).
_MMA_SCALE_SHIFT: tl.constexpr = tl.constexpr(32)
_MMA_FACTOR_BIAS: tl.constexpr = tl.constexpr(((126 - 32) << 7) * 0x00010001)
_MMA_UNSCALE: tl.constexpr = tl.constexpr(float(2 ** 32))
_E2M1_BF16_MMA_ASM = tl.constexpr("""
{
.reg .b32 a, b, r0, r1, r2, r3;
and.b32 r0, $4, 0x81C081C0;
shl.b32 a, $4, 3;
and.b32 r1, a, 0x81C081C0;
and.b32 a, $4, 0x40074007;
mul.lo.u32 a, a, 66;
and.b32 r2, a, 0x81C081C0;
shr.b32 a, $4, 3;
shl.b32 b, $4, 2;
and.b32 a, a, 0x01C001C0;
and.b32 b, b, 0x80008000;
or.b32 r3, a, b;
mul.rn.bf16x2 $0, r0, $5;
mul.rn.bf16x2 $1, r1, $5;
mul.rn.bf16x2 $2, r2, $5;
mul.rn.bf16x2 $3, r3, $5;
}
""")


@triton.jit
def _mma_pair(r, fac):
    """uint32 BF16-pair bits [...] and fp32 factor -> bf16 [..., 2] (portable form of the asm multiply;
    each half widened to the fp32 of the same value, since the interpreter flushes BF16 subnormals)."""
    lo = (r << 16).to(tl.float32, bitcast=True) * fac
    hi = (r & 0xFFFF0000).to(tl.float32, bitcast=True) * fac
    return tl.join(lo.to(tl.bfloat16), hi.to(tl.bfloat16))


@triton.jit
def _decode_mma(wq, ws, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr):
    """mma-layout packed [BLOCK_N, BLOCK_K//2] + scales [BLOCK_N, BLOCK_K//32] -> bf16 [BLOCK_N, BLOCK_K],
    every value times 2**-MMA_SCALE_SHIFT. ASM: the PTX above (NVIDIA); else the same bit logic in Triton
    ops (the CPU interpreter, AMD). A word w holds elements 8w..8w+7; register t of it elements 2t, 2t+1."""
    KW: tl.constexpr = BLOCK_K // 8
    q3 = tl.reshape(wq, (BLOCK_N, KW, 4))  # [n, word, byte]
    if ASM:
        f = ws.to(tl.int32) * 0x00800080 + _MMA_FACTOR_BIAS
        f = tl.reshape(tl.broadcast_to(f[:, :, None], (BLOCK_N, BLOCK_K // 32, 4)), (BLOCK_N, KW))
        f3 = tl.broadcast_to(f[:, :, None], (BLOCK_N, KW, 4))
        lo, hi = tl.inline_asm_elementwise(_E2M1_BF16_MMA_ASM, "=r,=r,=r,=r,r,r,r,r,r", [q3, f3],
                                           dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)
        # lo: elements 0..3 of the word (registers 0, 1), hi: elements 4..7 (registers 2, 3)
        w = tl.permute(tl.join(lo, hi), (0, 1, 3, 2))  # [n, word, half, 4]
    else:
        sh = tl.arange(0, 4) * 8
        w32 = tl.sum(q3.to(tl.uint32) << sh[None, None, :], axis=2)  # [n, word]
        fac = ((ws.to(tl.uint32) + (126 - _MMA_SCALE_SHIFT)) << 23).to(tl.float32, bitcast=True)
        fac = tl.reshape(tl.broadcast_to(fac[:, :, None], (BLOCK_N, BLOCK_K // 32, 4)), (BLOCK_N, KW))
        r0 = _mma_pair(w32 & 0x81C081C0, fac)  # [n, word, p]
        r1 = _mma_pair((w32 << 3) & 0x81C081C0, fac)
        r2 = _mma_pair(((w32 & 0x40074007) * 66) & 0x81C081C0, fac)
        r3 = _mma_pair(((w32 >> 3) & 0x01C001C0) | ((w32 << 2) & 0x80008000), fac)
        lo = tl.permute(tl.join(r0, r1), (0, 1, 3, 2))  # [n, word, t, p]
        hi = tl.permute(tl.join(r2, r3), (0, 1, 3, 2))
        w = tl.permute(tl.join(lo, hi), (0, 1, 4, 2, 3))  # [n, word, half, t, p]
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


DECODE_MODES = {"explicit": 0, "dot_scaled": 1, "asm": 2, "asm2": 3, "mma": 4, "mma_portable": 5, "gluon": 6}
# the weight layout each decode reads (ExpertWeights.layout)
DECODE_LAYOUT = {"explicit": "quark", "dot_scaled": "quark", "asm": "quark", "asm2": "quark", "mma": "mma",
                 "mma_portable": "mma", "gluon": "tiled"}


@triton.jit
def _mx_dot(x, wq, ws, acc, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DECODE: tl.constexpr,
            F32_DOT: tl.constexpr, SWAP_AB: tl.constexpr):
    """acc += x [M, K] bf16 @ W^T, W given as packed [N, K//2] and scales [N, K//32].

    DECODE 1: tl.dot_scaled; 0: explicit Triton decode (portable); 2: PTX decode, table lookup (NVIDIA);
    3: PTX decode through BF16 subnormals (NVIDIA, fewer instructions).
    SWAP_AB: acc is [N, M] and the product is W @ x^T (the weight as the MMA's A operand).
    F32_DOT (set only under TRITON_INTERPRET=1, whose CPU interpreter mis-computes BF16 tl.dot): the
    explicit path multiplies the same values as fp32 operands (BF16 values are exact in fp32).
    """
    if DECODE == 1:
        acc = tl.dot_scaled(x, None, "bf16", tl.trans(wq), ws, "e2m1", acc=acc)
    else:
        if DECODE == 2:
            w = _decode_asm(wq, ws, BLOCK_N, BLOCK_K, False)
        elif DECODE == 3:
            w = _decode_asm(wq, ws, BLOCK_N, BLOCK_K, True)
        elif DECODE == 4:
            w = _decode_mma(wq, ws, BLOCK_N, BLOCK_K, True)
        elif DECODE == 5:
            w = _decode_mma(wq, ws, BLOCK_N, BLOCK_K, False)
        else:
            w = _dequant_tile(wq, ws, BLOCK_N, BLOCK_K)
        if F32_DOT:
            acc = tl.dot(x.to(tl.float32), tl.trans(w.to(tl.float32)), acc, input_precision="ieee")
        elif SWAP_AB:
            acc = tl.dot(w, tl.trans(x), acc)
        else:
            acc = tl.dot(x, tl.trans(w), acc)
    return acc


@triton.jit(do_not_specialize=["T", "expert_base", "n_local"])
def _gate_up_kernel(x_ptr, ids_ptr, w_ptr, s_ptr, act_ptr, h_ptr, T, expert_base, n_local,
                    stride_xm, stride_we, stride_wn, stride_se, stride_sn, stride_am, stride_hm,
                    I: tl.constexpr, K: tl.constexpr, TOPK: tl.constexpr, TOPK_P2: tl.constexpr,
                    P_P2: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    SPLIT_K: tl.constexpr, DECODE: tl.constexpr, F32_DOT: tl.constexpr, SWAP_AB: tl.constexpr):
    """Program (slot, n, k-split). SPLIT_K == 1: writes silu(gate) * up in BF16 to act. SPLIT_K > 1: adds
    its partial gate and up sums (fp32) into h [pairs, 2I] (zeroed); _silu_mul_kernel finishes."""
    pid_p = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    e, local, owns = _route_slot(ids_ptr, pid_p, T, expert_base, n_local, TOPK, P_P2)
    # Programs that do not own their slot's expert run no K iterations and store nothing (a flat loop
    # rather than one under `if`, so that Triton software-pipelines it).
    has, rows = _expert_tokens(ids_ptr, e, T, TOPK, TOPK_P2, BLOCK_M)
    has = (has.to(tl.int32) * owns.to(tl.int32)) > 0
    local = tl.where(owns, local, 0)
    ITERS: tl.constexpr = K // BLOCK_K // SPLIT_K
    n_iter = tl.where(owns, ITERS, 0)
    k0 = pid_k * (ITERS * BLOCK_K)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_kb = tl.arange(0, BLOCK_K // 2)
    offs_ks = tl.arange(0, BLOCK_K // 32)
    w_base = w_ptr + local.to(tl.int64) * stride_we + k0 // 2
    s_base = s_ptr + local.to(tl.int64) * stride_se + k0 // 32
    wg_ptrs = w_base + offs_n[:, None] * stride_wn + offs_kb[None, :]
    wu_ptrs = wg_ptrs + I * stride_wn
    sg_ptrs = s_base + offs_n[:, None] * stride_sn + offs_ks[None, :]
    su_ptrs = sg_ptrs + I * stride_sn
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + k0 + offs_k[None, :]
    if SWAP_AB:
        acc_g = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _it in range(0, n_iter):
        x = tl.load(x_ptrs, mask=has[:, None], other=0.0)
        wg = tl.load(wg_ptrs)
        wu = tl.load(wu_ptrs)
        sg = tl.load(sg_ptrs)
        su = tl.load(su_ptrs)
        acc_g = _mx_dot(x, wg, sg, acc_g, BLOCK_N, BLOCK_K, DECODE, F32_DOT, SWAP_AB)
        acc_u = _mx_dot(x, wu, su, acc_u, BLOCK_N, BLOCK_K, DECODE, F32_DOT, SWAP_AB)
        x_ptrs += BLOCK_K
        wg_ptrs += BLOCK_K // 2
        wu_ptrs += BLOCK_K // 2
        sg_ptrs += BLOCK_K // 32
        su_ptrs += BLOCK_K // 32
    if SWAP_AB:
        acc_g = tl.trans(acc_g)
        acc_u = tl.trans(acc_u)
    if DECODE >= 4:
        acc_g = acc_g * _MMA_UNSCALE
        acc_u = acc_u * _MMA_UNSCALE
    if SPLIT_K == 1:
        act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
        tl.store(act_ptr + rows[:, None] * stride_am + offs_n[None, :], act.to(tl.bfloat16), mask=has[:, None])
    else:
        h_ptrs = h_ptr + rows[:, None] * stride_hm + offs_n[None, :]
        tl.atomic_add(h_ptrs, acc_g, mask=has[:, None], sem="relaxed")
        tl.atomic_add(h_ptrs + I, acc_u, mask=has[:, None], sem="relaxed")


@triton.jit(do_not_specialize=["T", "expert_base", "n_local"])
def _down_kernel(act_ptr, ids_ptr, w_ptr, s_ptr, y_ptr, T, expert_base, n_local,
                 stride_am, stride_we, stride_wn, stride_se, stride_sn, stride_ym,
                 K: tl.constexpr, TOPK: tl.constexpr, TOPK_P2: tl.constexpr, P_P2: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                 DECODE: tl.constexpr, F32_DOT: tl.constexpr, SWAP_AB: tl.constexpr,
                 A_BY_TOKEN: tl.constexpr = False):
    """Program (slot, n, k-split): y[pair, n] = A[row] . W[e, n, :] over BF16 A rows, row = the pair
    (the down projection) or, A_BY_TOKEN, the token (the gate/up projection run as one GEMM over its 2I
    rows). SPLIT_K == 1 stores y; SPLIT_K > 1 adds into y (zeroed)."""
    pid_p = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    e, local, owns = _route_slot(ids_ptr, pid_p, T, expert_base, n_local, TOPK, P_P2)
    has, rows = _expert_tokens(ids_ptr, e, T, TOPK, TOPK_P2, BLOCK_M)
    has = (has.to(tl.int32) * owns.to(tl.int32)) > 0
    local = tl.where(owns, local, 0)
    ITERS: tl.constexpr = K // BLOCK_K // SPLIT_K
    n_iter = tl.where(owns, ITERS, 0)
    k0 = pid_k * (ITERS * BLOCK_K)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_kb = tl.arange(0, BLOCK_K // 2)
    offs_ks = tl.arange(0, BLOCK_K // 32)
    w_ptrs = (w_ptr + local.to(tl.int64) * stride_we + k0 // 2 + offs_n[:, None] * stride_wn
              + offs_kb[None, :])
    s_ptrs = (s_ptr + local.to(tl.int64) * stride_se + k0 // 32 + offs_n[:, None] * stride_sn
              + offs_ks[None, :])
    if A_BY_TOKEN:
        a_rows = tl.arange(0, BLOCK_M)
    else:
        a_rows = rows
    a_ptrs = act_ptr + a_rows[:, None] * stride_am + k0 + offs_k[None, :]
    if SWAP_AB:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _it in range(0, n_iter):
        a = tl.load(a_ptrs, mask=has[:, None], other=0.0)
        a_ptrs += BLOCK_K
        wq = tl.load(w_ptrs)
        ws = tl.load(s_ptrs)
        acc = _mx_dot(a, wq, ws, acc, BLOCK_N, BLOCK_K, DECODE, F32_DOT, SWAP_AB)
        w_ptrs += BLOCK_K // 2
        s_ptrs += BLOCK_K // 32
    if SWAP_AB:
        acc = tl.trans(acc)
    if DECODE >= 4:
        acc = acc * _MMA_UNSCALE
    if SPLIT_K == 1:
        tl.store(y_ptr + rows[:, None] * stride_ym + offs_n[None, :], acc, mask=has[:, None])
    else:
        tl.atomic_add(y_ptr + rows[:, None] * stride_ym + offs_n[None, :], acc, mask=has[:, None], sem="relaxed")


@triton.jit(do_not_specialize=["T", "expert_base", "n_local", "num_progs"])
def _streamk_kernel(a_ptr, ids_ptr, w_ptr, s_ptr, y_ptr, T, expert_base, n_local, num_progs,
                    stride_am, stride_we, stride_wn, stride_se, stride_sn, stride_ym,
                    N: tl.constexpr, K: tl.constexpr, TOPK: tl.constexpr, TOPK_P2: tl.constexpr,
                    P_P2: tl.constexpr, E_P2: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, DECODE: tl.constexpr, F32_DOT: tl.constexpr, SWAP_AB: tl.constexpr,
                    A_BY_TOKEN: tl.constexpr = False):
    """Persistent stream-K form of _down_kernel: the work (local experts with tokens x column blocks x K
    iterations) is cut into num_progs equal runs of K iterations, one per program, whatever the tile
    boundaries (no ragged last wave, one pipeline fill per program); each program adds its partial sums
    into y (zeroed) when it leaves a tile. Same operands and y as _down_kernel."""
    pid = tl.program_id(0)
    offs_q = tl.arange(0, P_P2)
    ids = tl.load(ids_ptr + offs_q, mask=offs_q < T * TOPK, other=-1)
    offs_e = tl.arange(0, E_P2)
    present = tl.max((ids[None, :] == (offs_e[:, None] + expert_base)).to(tl.int32), axis=1)
    present = present * (offs_e < n_local).to(tl.int32)  # local experts that have tokens
    rank = tl.cumsum(present, axis=0)
    NB: tl.constexpr = N // BLOCK_N
    ITERS: tl.constexpr = K // BLOCK_K
    total = tl.sum(present, axis=0) * (NB * ITERS)
    start = (pid * total) // num_progs
    end = ((pid + 1) * total) // num_progs
    offs_k = tl.arange(0, BLOCK_K)
    offs_kb = tl.arange(0, BLOCK_K // 2)
    offs_ks = tl.arange(0, BLOCK_K // 32)
    offs_bn = tl.arange(0, BLOCK_N)
    # tile state, set at the first iteration of each tile
    e = 0
    offs_n = offs_bn
    has = tl.arange(0, BLOCK_M) < 0
    rows = tl.arange(0, BLOCK_M)
    if SWAP_AB:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for g in range(start, end):
        ki = g % ITERS
        if (ki == 0) | (g == start):
            tile = g // ITERS
            j = tile // NB
            e = tl.sum(tl.where((present > 0) & (rank == j + 1), offs_e, 0), axis=0)
            offs_n = (tile % NB) * BLOCK_N + offs_bn
            has, rows = _expert_tokens(ids_ptr, e + expert_base, T, TOPK, TOPK_P2, BLOCK_M)
        w_ptrs = (w_ptr + e.to(tl.int64) * stride_we + ki * (BLOCK_K // 2) + offs_n[:, None] * stride_wn
                  + offs_kb[None, :])
        s_ptrs = (s_ptr + e.to(tl.int64) * stride_se + ki * (BLOCK_K // 32) + offs_n[:, None] * stride_sn
                  + offs_ks[None, :])
        if A_BY_TOKEN:
            a_rows = tl.arange(0, BLOCK_M)
        else:
            a_rows = rows
        a = tl.load(a_ptr + a_rows[:, None] * stride_am + ki * BLOCK_K + offs_k[None, :], mask=has[:, None],
                    other=0.0)
        wq = tl.load(w_ptrs)
        ws = tl.load(s_ptrs)
        acc = _mx_dot(a, wq, ws, acc, BLOCK_N, BLOCK_K, DECODE, F32_DOT, SWAP_AB)
        if (ki == ITERS - 1) | (g == end - 1):
            if SWAP_AB:
                out = tl.trans(acc)
            else:
                out = acc
            if DECODE >= 4:
                out = out * _MMA_UNSCALE
            tl.atomic_add(y_ptr + rows[:, None] * stride_ym + offs_n[None, :], out, mask=has[:, None],
                          sem="relaxed")
            acc = acc * 0.0


@triton.jit
def _silu_mul_kernel(h_ptr, act_ptr, stride_hk, stride_hm, stride_am, I: tl.constexpr, PARTS: tl.constexpr,
                     BLOCK: tl.constexpr, GDC: tl.constexpr):
    """act[r] = silu(g) * u in BF16, g / u = the sums of the PARTS partial gate / up halves of h's row r
    (h [PARTS, pairs, 2I], parts stride_hk apart). Rows no expert wrote hold whatever h held. GDC: the
    programmatic-dependent-launch handshake (sm_90+)."""
    if GDC:
        gdc_launch_dependents()
        gdc_wait()
    r = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    g = tl.zeros([BLOCK], tl.float32)
    u = tl.zeros([BLOCK], tl.float32)
    for p in tl.static_range(PARTS):
        g += tl.load(h_ptr + p * stride_hk + r * stride_hm + offs)
        u += tl.load(h_ptr + p * stride_hk + r * stride_hm + I + offs)
    tl.store(act_ptr + r * stride_am + offs, (g / (1.0 + tl.exp(-g)) * u).to(tl.bfloat16))


@triton.jit
def _nc_stamp(tr, slot: tl.constexpr, TRACE: tl.constexpr):
    """TRACE: ``%globaltimer`` at tr + slot and ``%clock64`` at tr + 16 + slot (the layout of
    ranked_kernel.trace_buffer's rows, for bench/trace_case.py); else nothing."""
    if TRACE:
        c = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
        now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
        tl.store(tr + slot, now)
        tl.store(tr + 16 + slot, c)


@triton.jit(do_not_specialize=["expert_base", "n_local"])
def _norm_combine_kernel(y_ptr, ids_ptr, wts_ptr, g_ptr, out_ptr, expert_base, n_local,
                         stride_ym, stride_yk, stride_g, stride_om, eps,
                         L: tl.constexpr, TOPK: tl.constexpr, PARTS: tl.constexpr, BLOCK_L: tl.constexpr,
                         GDC: tl.constexpr, EARLY: tl.constexpr = False, tr_ptr=None, TRACE: tl.constexpr = False,
                         CARVE: tl.constexpr = -1):
    """Program (token t, slot j): when the slot's expert is on this card, adds w * rmsnorm(y) * g[e] into
    out[t] (zeroed), y = the sum of the PARTS partial rows of pair t*TOPK+j (parts stride_yk apart). One
    program per pair: no chain of dependent row reductions in one program. GDC as in _silu_mul_kernel.
    EARLY (thirteenth round): the router weight and the norm weight's row (inputs and weights, never written by
    the kernels before) are loaded before the wait on the previous kernel, so that their DRAM reads are not
    queued behind the next layer's weight stream, which programmatic dependent launch lets start meanwhile.
    TRACE (kernel.TRACE; thirteenth round): program (t, j)'s row of
    tr_ptr [T * TOPK, 32] (zeroed here first) gets the timer at its start (0), once its id is read (1), past the wait
    (2), once its row's sum of squares is done (3), its adds issued (4, 5) and at its end (6); slot 8 is 1 where the
    slot's expert is here. CARVE: the shared memory carveout asked for this compiled kernel (set_carveout; a
    constexpr so that each value compiles a kernel of its own), unused in the code."""
    if GDC:
        gdc_launch_dependents()
    t = tl.program_id(0)
    j = tl.program_id(1)
    tr = tr_ptr
    if TRACE:
        tr = tr_ptr + (t * TOPK + j) * 32
        tl.store(tr + tl.arange(0, 32), tl.zeros([32], tl.int64))
        tl.debug_barrier()
    _nc_stamp(tr, 0, TRACE)
    offs = tl.arange(0, BLOCK_L)
    lm = offs < L
    local = tl.load(ids_ptr + t * TOPK + j) - expert_base
    here = (local >= 0) & (local < n_local)
    _nc_stamp(tr, 1, TRACE)
    if EARLY:
        wt = tl.load(wts_ptr + t * TOPK + j).to(tl.float32)  # every slot has one
        loc = local.to(tl.int64) + tl.zeros([BLOCK_L], tl.int64)  # a tensor mask (the interpreter takes no scalar one)
        g = tl.load(g_ptr + loc * stride_g + offs, mask=lm & (loc >= 0) & (loc < n_local), other=0.0).to(tl.float32)
    if GDC:
        gdc_wait()
    _nc_stamp(tr, 2, TRACE)
    if here:
        if TRACE:
            tl.store(tr + 8, 1)
        if not EARLY:
            wt = tl.load(wts_ptr + t * TOPK + j).to(tl.float32)
        y = tl.zeros([BLOCK_L], tl.float32)
        for p in tl.static_range(PARTS):
            y += tl.load(y_ptr + p * stride_yk + (t * TOPK + j) * stride_ym + offs, mask=lm, other=0.0)
        if not EARLY:
            g = tl.load(g_ptr + local.to(tl.int64) * stride_g + offs, mask=lm, other=0.0).to(tl.float32)
        ms = tl.sum(y * y, axis=0) / L
        _nc_stamp(tr, 3, TRACE)
        tl.atomic_add(out_ptr + t * stride_om + offs, (wt / tl.sqrt(ms + eps)) * y * g, mask=lm, sem="relaxed")
        _nc_stamp(tr, 4, TRACE)
        _nc_stamp(tr, 5, TRACE)
    _nc_stamp(tr, 6, TRACE)


# the plan buffer (int32, per device and stream): [0] the owning runs' count, [1 + rank] their words (plan_word);
# from PLAN_TABLE each run's pairs by position (PLAN_TABLE + rank * chunk + m: pair row t * k + slot of the run's
# token m, -1 past its tokens; twelfth round), from PLAN_SCRATCH the rank of run r of local expert e (e * 8 + r) the
# table is filled through
PLAN_TABLE = 512
PLAN_SCRATCH = PLAN_TABLE + 511 * 16 + 16
PLAN_MAX_LOCAL = 1024  # local experts the scratch holds
PLAN_SIZE = PLAN_SCRATCH + 8 * PLAN_MAX_LOCAL
_TABLE_AT, _SCRATCH_AT = tl.constexpr(PLAN_TABLE), tl.constexpr(PLAN_SCRATCH)


@triton.jit
def _plan_table(plan_ptr, offs, dup, owner, rank, local, is_local, CHUNK: tl.constexpr, P_P2: tl.constexpr):
    """The run table (PLAN_TABLE): each owner marks its run's CHUNK positions empty and leaves its rank in the
    scratch at (local expert, run); after a barrier every local pair writes its pair row at its run's rank, position
    dup % CHUNK (dup: the earlier pairs naming its expert, its token's rank among them)."""
    own = owner > 0
    m = tl.arange(0, CHUNK)
    tl.store(plan_ptr + _TABLE_AT + rank[:, None] * CHUNK + m[None, :], tl.full([P_P2, CHUNK], -1, tl.int32),
             mask=own[:, None])
    tl.store(plan_ptr + _SCRATCH_AT + local * 8 + dup // CHUNK, rank, mask=own)
    tl.debug_barrier()
    at = tl.load(plan_ptr + _SCRATCH_AT + local * 8 + dup // CHUNK, mask=is_local, other=0, cache_modifier=".cg")
    tl.store(plan_ptr + _TABLE_AT + at * CHUNK + dup % CHUNK, offs, mask=is_local)


@triton.jit(do_not_specialize=["T", "expert_base", "n_local"])
def _plan_runs_kernel(ids_ptr, plan_ptr, T, expert_base, n_local, TOPK: tl.constexpr, P_P2: tl.constexpr,
                      CHUNK: tl.constexpr, GDC: tl.constexpr, TABLE: tl.constexpr = False):
    """The device-ranked list of owning runs for token compaction (one program; issue #18, seventh round):
    slot p owns run n_before // CHUNK of its expert when its expert is on this card and n_before, the earlier
    slots naming the same expert (its token's rank among the expert's tokens: ids are distinct within a
    token), is a multiple of CHUNK. plan[0] = the owners' count, plan[1 + rank] = p + 512 * run + 4096 * e
    for the owners in slot order (plan_word). GDC as in _silu_mul_kernel (it reads the routing ids)."""
    if GDC:
        gdc_launch_dependents()
        gdc_wait()
    P = T * TOPK
    offs = tl.arange(0, P_P2)
    ids = tl.load(ids_ptr + offs, mask=offs < P, other=-1).to(tl.int32)
    dup = tl.zeros([P_P2], tl.int32)
    for j0 in range(0, P, 32):
        jj = j0 + tl.arange(0, 32)
        idj = tl.load(ids_ptr + jj, mask=jj < P, other=-2).to(tl.int32)
        dup += tl.sum(((idj[None, :] == ids[:, None]) & (jj[None, :] < offs[:, None])).to(tl.int32), axis=1)
    local = ids - expert_base
    is_local = (local >= 0) & (local < n_local) & (offs < P)
    owner = ((dup % CHUNK == 0) & is_local).to(tl.int32)
    rank = tl.cumsum(owner, axis=0) - owner
    tl.store(plan_ptr + 1 + rank, offs + (dup // CHUNK) * 512 + ids * 4096, mask=owner > 0)
    tl.store(plan_ptr, tl.sum(owner, axis=0))
    if TABLE:
        _plan_table(plan_ptr, offs, dup, owner, rank, local, is_local, CHUNK, P_P2)


@triton.jit(do_not_specialize=["T", "expert_base", "n_local"])
def _plan_lanes_kernel(ids_ptr, plan_ptr, T, expert_base, n_local, TOPK: tl.constexpr, P_P2: tl.constexpr,
                       CHUNK: tl.constexpr, GDC: tl.constexpr, TABLE: tl.constexpr = False):
    """_plan_runs_kernel's list (the same words, the same order) with one slot a thread (P_P2 threads; issue
    #18, eighth round, config ``plan_lanes``): each thread counts the earlier tokens naming its slot's expert
    from uniform loads of the ids (one compare a slot of every earlier token, unrolled; no cross-lane
    reduction), then one scan of the owners over the program."""
    if GDC:
        gdc_launch_dependents()
        gdc_wait()
    P = T * TOPK
    offs = tl.arange(0, P_P2)
    ids = tl.load(ids_ptr + offs, mask=offs < P, other=-1).to(tl.int32)
    tok = offs // TOPK
    dup = tl.zeros([P_P2], tl.int32)
    for t2 in tl.static_range(P_P2 // TOPK - 1):  # every token before the last one P_P2 holds
        hit = ids < -2  # false
        for j in tl.static_range(TOPK):  # (past the batch: masked, and no slot of a later token is < P)
            hit = hit | (ids == tl.load(ids_ptr + t2 * TOPK + j, mask=t2 < T).to(tl.int32))
        dup += (hit & (tok > t2)).to(tl.int32)
    local = ids - expert_base
    is_local = (local >= 0) & (local < n_local) & (offs < P)
    owner = ((dup % CHUNK == 0) & is_local).to(tl.int32)
    rank = tl.cumsum(owner, axis=0) - owner
    tl.store(plan_ptr + 1 + rank, offs + (dup // CHUNK) * 512 + ids * 4096, mask=owner > 0)
    tl.store(plan_ptr, tl.sum(owner, axis=0))
    if TABLE:
        _plan_table(plan_ptr, offs, dup, owner, rank, local, is_local, CHUNK, P_P2)


def plan_word(p: int, run: int, e: int) -> int:
    """The plan's entry for slot p owning run ``run`` of expert e (what _plan_runs_kernel stores; p < 512,
    run < 8)."""
    return p + 512 * run + 4096 * e


def plan_bound(pairs: int, n_local: int, tokens: int, chunk: int) -> int:
    """The most owning runs of ``chunk`` tokens ``pairs`` (token, slot) pairs of ``tokens`` tokens can make on
    a card of ``n_local`` experts: m = min(pairs, n_local) experts with one token each, and one more run per
    ``chunk`` further tokens (an expert of c tokens has 1 + (c - 1) // chunk runs); an expert has at most
    ``tokens`` tokens."""
    m = min(pairs, n_local)
    return min(m + (pairs - m) // chunk, m * -(-tokens // chunk))


def stream_key(device: torch.device) -> tuple:
    """(device type, index, the current CUDA stream's handle): the key of the buffers a call's kernels share
    between launches (tile counters, the run list). Kernels of one stream run in order; two streams' calls
    may run at once, so each stream has its own. A graph keeps those of the stream it was captured on: two
    graphs captured on one stream must not be replayed at the same time."""
    if device.type != "cuda":  # Triton's CPU interpreter (tests): one stream
        return (device.type, device.index, 0)
    return (device.type, device.index, torch.cuda.current_stream(device).cuda_stream)



_PLANS: dict = {}


def plan_runs(ids: torch.Tensor, ex, chunk: int, *, gdc: bool = False, pdl: bool = False,
              lanes: bool = False, table: bool = False) -> torch.Tensor:
    """Launch _plan_runs_kernel (lanes: _plan_lanes_kernel, one slot a thread) for ids [T, k] (T <= 32) into
    the plan buffer of this device and stream (``stream_key``; int32 [PLAN_SIZE], kept: captured graphs hold it;
    compiled once per top-k; each call's GEMMs read it after waiting on this launch) and return it. table (twelfth
    round): also each run's pairs by position (PLAN_TABLE; at most PLAN_MAX_LOCAL local experts)."""
    T, topk = ids.shape
    if table and (ex.num_local > PLAN_MAX_LOCAL or chunk > 16):
        raise ValueError(f"the run table takes up to {PLAN_MAX_LOCAL} local experts and runs of 16, got "
                         f"{ex.num_local} and {chunk}")
    if T * topk > 511 or T > 8 * chunk:
        raise ValueError(f"the run list takes up to 511 pairs and 8 runs an expert, got {T} tokens of top-{topk}")
    key = stream_key(ids.device)
    if key not in _PLANS:
        _PLANS[key] = torch.zeros(PLAN_SIZE, dtype=torch.int32, device=ids.device)
    plan = _PLANS[key]
    opts = {"launch_pdl": True} if pdl else {}
    p_p2 = _pow2(32 * topk, lo=32)
    if lanes:
        _plan_lanes_kernel[(1,)](ids, plan, T, ex.expert_base, ex.num_local, TOPK=topk, P_P2=p_p2, CHUNK=chunk,
                                 GDC=gdc, TABLE=table, num_warps=min(16, p_p2 // 32), **opts)
    else:
        _plan_runs_kernel[(1,)](ids, plan, T, ex.expert_base, ex.num_local, TOPK=topk, P_P2=p_p2, CHUNK=chunk,
                                GDC=gdc, TABLE=table, num_warps=4, **opts)
    return plan


@triton.jit(do_not_specialize=["expert_base", "n_local"])
def _sum_parts_kernel(y_ptr, ids_ptr, out_ptr, expert_base, n_local, stride_ym, stride_yk, stride_om,
                      L: tl.constexpr, PARTS: tl.constexpr, BLOCK_L: tl.constexpr, GDC: tl.constexpr):
    """Program (pair): out[pair] = the sum of the PARTS partial rows of y when the pair's expert is on this
    card, else zeros (the TP-split card's share before the TP group's sum)."""
    if GDC:
        gdc_launch_dependents()
    r = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)
    lm = offs < L
    local = tl.load(ids_ptr + r) - expert_base
    if GDC:
        gdc_wait()
    acc = tl.zeros([BLOCK_L], tl.float32)
    if (local >= 0) & (local < n_local):
        for p in tl.static_range(PARTS):
            acc += tl.load(y_ptr + p * stride_yk + r * stride_ym + offs, mask=lm, other=0.0)
    tl.store(out_ptr + r * stride_om + offs, acc, mask=lm)


def sum_parts(y: torch.Tensor, ids: torch.Tensor, ex, out: torch.Tensor, *, gdc: bool = False,
              pdl: bool = False) -> None:
    """out fp32 [pairs, L] = the sum of y's parts [parts, pairs, L] for this card's pairs, zeros for others."""
    L = out.shape[1]
    parts, stride_yk = (y.shape[0], y.stride(0)) if y.dim() == 3 else (1, 0)
    blk = min(_pow2(L), 2048)
    opts = {"launch_pdl": True} if pdl else {}
    _sum_parts_kernel[(out.shape[0], triton.cdiv(L, blk))](
        y, ids, out, ex.expert_base, ex.num_local, y.stride(-2), stride_yk, out.stride(0), L=L, PARTS=parts,
        BLOCK_L=blk, GDC=gdc, num_warps=4, **opts)


def combine_partials(y: torch.Tensor, ids: torch.Tensor, wts: torch.Tensor, norm_weight: torch.Tensor, *,
                     expert_base: int = 0, eps: float = 1e-6, out: torch.Tensor | None = None) -> torch.Tensor:
    """reference.combine_partials on the GPU (after the TP group's sum of the partials y fp32 [T * k, L]):
    out [T, L] = sum over the pairs whose expert has a row in norm_weight of w * rmsnorm(y) * norm_weight[e]."""
    T, topk = ids.shape
    L = y.shape[1]
    if out is None:
        out = torch.zeros(T, L, dtype=torch.float32, device=y.device)
    else:
        out.zero_()
    _norm_combine_kernel[(T, topk)](
        y, ids.contiguous(), wts.to(torch.float32).contiguous(), norm_weight, out, expert_base,
        norm_weight.shape[0], y.stride(0), 0, norm_weight.stride(0), out.stride(0), eps, L=L, TOPK=topk, PARTS=1,
        BLOCK_L=_pow2(L), GDC=False, num_warps=8 if L >= 2048 else 4)
    return out


def silu_mul(h: torch.Tensor, act: torch.Tensor, *, gdc: bool = False, pdl: bool = False) -> None:
    """act [pairs, I] = silu(gate) * up of h fp32 [pairs, 2I], or of the sum of h's parts [parts, pairs, 2I]."""
    I = act.shape[1]
    parts, stride_hk = (h.shape[0], h.stride(0)) if h.dim() == 3 else (1, 0)
    blk = _fit(1024, I)
    opts = {"launch_pdl": True} if pdl else {}
    _silu_mul_kernel[(act.shape[0], I // blk)](h, act, stride_hk, h.stride(-2), act.stride(0), I=I, PARTS=parts,
                                               BLOCK=blk, GDC=gdc, num_warps=4, **opts)


def norm_combine(y: torch.Tensor, ids: torch.Tensor, wts: torch.Tensor, ex, out: torch.Tensor, eps: float, *,
                 gdc: bool = False, pdl: bool = False, early: bool = False, trace: list | None = None,
                 carveout: int | None = None):
    """out [T, L] (zeroed) += this card's share: each local pair's RMS-normed output y [pairs, L] (or the
    sum of y's parts [parts, pairs, L]) times its expert's norm weight and its router weight. early (config
    ``combine_early``, thirteenth round): the router and norm weights read before the wait on the previous kernel.
    trace (a list; kernel.TRACE; with gdc): compiled with timer stamps, ("combine", buffer) appended
    (bench/trace_case.py). carveout: set_carveout's percent for this kernel (None: the driver's choice). Returns
    the launched compiled kernel."""
    T, topk = ids.shape
    L = out.shape[1]
    parts, stride_yk = (y.shape[0], y.stride(0)) if y.dim() == 3 else (1, 0)
    g = ex.norm_weight
    opts = {"launch_pdl": True} if pdl else {}
    tr: dict = {}
    if trace is not None and gdc:
        tr = {"tr_ptr": torch.empty(T * topk, 32, dtype=torch.int64, device=out.device), "TRACE": True}
        trace.append(("combine", tr["tr_ptr"]))
    k = _norm_combine_kernel[(T, topk)](
        y, ids, wts, g, out, ex.expert_base, ex.num_local, y.stride(-2), stride_yk, g.stride(0), out.stride(0), eps,
        L=L, TOPK=topk, PARTS=parts, BLOCK_L=_pow2(L), GDC=gdc, EARLY=early, num_warps=8 if L >= 2048 else 4, **tr, **opts,
        **({"CARVE": carveout} if carveout is not None else {}))
    set_carveout(k, carveout)
    return k


# CUfunction_attribute CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT (cuda.h)
_CU_CARVEOUT = 9
_CARVED: set = set()


def check_carveout(percent) -> None:
    """Raises ValueError unless percent is None or an integer 0..100 (config ``ranked_carveout``)."""
    if percent is not None and (not isinstance(percent, int) or isinstance(percent, bool) or not 0 <= percent <= 100):
        raise ValueError(f"ranked_carveout must be an integer percent 0..100 of the SM's L1 / shared memory given to "
                         f"shared memory, or null (the driver's choice), got {percent!r}")


def set_carveout(compiled, percent: int | None) -> None:
    """Ask the CUDA driver to give ``percent`` % of each SM's unified L1 / shared memory to shared memory whenever the
    compiled Triton kernel ``compiled`` (what a launch returns; its ``function`` a CUfunction) runs
    (``cuFuncSetAttribute(..., CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent)``; a preference: the
    driver takes more where the kernel needs more). Nineteenth round (README): two kernels whose carveouts differ
    cannot share an SM, so a kernel launched early by programmatic dependent launch waits for the previous one's
    programs to leave. None, the CPU interpreter or a handle-less Triton: nothing asked. Raises RuntimeError with the
    driver's code where it refuses."""
    fn = getattr(compiled, "function", None)
    if percent is None or not fn or (fn, percent) in _CARVED:
        return
    import ctypes
    rc = ctypes.CDLL("libcuda.so.1").cuFuncSetAttribute(ctypes.c_void_p(fn), ctypes.c_int(_CU_CARVEOUT),
                                                        ctypes.c_int(percent))
    if rc != 0:
        raise RuntimeError(f"cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT, {percent}) failed: CUresult {rc}")
    _CARVED.add((fn, percent))


def driver_resident(compiled) -> int | None:
    """Programs of a compiled Triton kernel (what a launch or ``warmup`` returns, its handles loaded) the CUDA
    driver lets reside on one SM at once: ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` with its warps and dynamic
    shared memory (registers, shared memory with the static part and the per-program reserve, the block limit).
    None where the driver cannot be asked (no libcuda, a Triton without ``function`` handles) or refuses."""
    import ctypes
    fn = getattr(compiled, "function", None)
    if not fn:
        return None
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    n = ctypes.c_int()
    rc = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(n), ctypes.c_void_p(fn), ctypes.c_int(32 * compiled.metadata.num_warps),
        ctypes.c_size_t(compiled.metadata.shared))
    return n.value if rc == 0 else None


# ----------------------------------------------------------------------------------------------------------
# Launch configuration

# per GEMM: (BLOCK_N, BLOCK_K, num_warps, num_stages, swap_ab); separate_gate_up: the gate/up projection
# as one plain GEMM over its 2I rows then a silu kernel (else _gate_up_kernel, both tiles per program);
# split_gate_up / split_down force a split-K (else _split_k decides). Chosen on an H200 (README "Measured").
DEFAULT_CONFIG = {
    "gate_up": (64, 256, 4, 3, False),
    "down": (64, 256, 4, 3, False),
    "separate_gate_up": True,
}
# the `mma` decodes (weights in the mma layout); "large_batch" overrides for batches of 17-32 tokens
# (BLOCK_M 32), where the 512-wide K tiles need too much shared memory per program
MMA_CONFIG = {
    "gate_up": (64, 512, 4, 3, False),
    "down": (64, 512, 4, 3, False),
    "separate_gate_up": True,
    "large_batch": {"gate_up": (64, 256, 4, 3, False), "down": (64, 256, 4, 3, False)},
}


# the gluon kernels (gluon_kernel.experts_forward): their tiles are the weights' (ExpertWeights.tiles, a
# load-time choice); ctas_per_sm sizes the down GEMM's K split, gate_up_per_sm the gate/up GEMM's (split
# while min(pairs, local experts) x row blocks x split stays under it per SM; 32 measured better than 16 for
# EP shares, README); pdl: programmatic dependent launch (sm_90+); persistent: N > 0 runs each GEMM as a flat
# grid of at most N resident programs per SM walking the items (slower on the H200, README "third round");
# ranked: batches of 1-8 tokens run ranked_kernel (the device-ranked work list, K splits sized on the device
# for the experts routed to this card; ranked_per_sm programs per SM, ranked_min_iters K tiles per part;
# ranked_stages N >= 2: weight tiles through a cp.async ring of N slots in shared memory, 0 register loads;
# ranked_maxnreg_gate_up: a register cap for the ranked gate/up GEMM; ranked_wave_cost c > 0: the K split
# that minimizes waves x (tiles per item + c), ranked_per_sm being the resident programs; ranked_stages_down:
# the down GEMM's ring (default ranked_stages); ranked_per_sm_down: the down GEMM's budget for its split (default
# ranked_per_sm; fourteenth round: measured, unset); ranked_few: overrides of these where at most 8 experts can be
# routed to the card (min(pairs, local experts) <= 8: batch 1 of top-8; on: the 3-slot ring there, 16
# programs an SM, no cap; above that 20 programs an SM and the gate/up GEMM capped at 96 registers, so that
# 20 of its one-warp programs stay resident as the down GEMM's do); ranked_fixup_unroll: the gate/up split's
# last part loads that many parts at once (4 measured the same as 1: off); README "fifth round")
# Sixth round (README): maxnreg 96 caps both GEMMs of batches 9-32 (20 one-warp programs an SM where the new
# decode and activation order compile to 98 registers, 16 an SM, on Triton 3.6: -8 to -10% at batch 32);
# ranked_maxnreg (the ranked path's cap of both GEMMs; absent: maxnreg) 96 at batch 1 (ranked_few: -1 to -2%),
# none from batch 2 on (the gate/up GEMM keeps ranked_maxnreg_gate_up; the cap of both cost ep2tp4 batch 4
# 1.5%); ctas_per_sm 32 (was 64; the host-sized down split of batches 9-32): no down K split for 32 local
# experts (local, ep8 batch 32: -2% / -3%)
# Seventh round (README): plan_runs (on) ranks the owning runs of batches 9-32 on the device in one small
# launch (kernel.plan_runs) and launches each GEMM over kernel.plan_bound runs instead of every slot, the idle
# programs last (local / ep8 / ep2tp4 batch 32 -14.5 / -33.7 / -6.3%, same run); plan_split_per_sm N > 0 sizes the down
# GEMM's K split on the device for the runs routed (off: a gain at ep8 batch 9 only); maxnreg_down: the down
# GEMM's own cap (-1: maxnreg)
# Eighth round A (README): fused_few runs batches of 1-8 tokens where min(pairs, local experts) <= fused_max_bound
# as one persistent launch (fused_kernel: fused_per_sm one-warp programs an SM, all resident; the gate/up ring of
# fused_stages slots; each program's down item's first fused_down_tiles K tiles copied into shared memory during
# the gate/up GEMM; a grid barrier; the down GEMM), then norm_combine unless partials; fused_maxnreg its cap
# Ninth round (README): narrow_runs N (on from 17 tokens; narrow_config) runs of 16 on the run list, each run of
# at most 8 tokens on 8-token tiles, the others on 16-token tiles narrow_sub_k of K at a time (local batch 32
# -16%, EP points within 0.4%); ranked_few's ranked_min_iters 1: K parts of one tile at batch 1 (ep8 / ep2tp4
# batch 1 -5%, local unchanged)
# Eleventh round (README): ranked_act_launch "auto" adds the gate/up GEMM's K parts and applies silu in a launch
# of its own between the GEMMs (ranked_kernel._ranked_act_kernel; no fence, counter or fix-up in the gate/up
# GEMM) where that GEMM splits K for any experts routed here (ranked_kernel.act_launch_taken: EP2 x TP4 at batch
# 1, -7% there); True: wherever it may split; False: never
# Twelfth round (README): run_table (on) has the plan launch write each run's pair rows (plan_runs' table), which the
# run list's GEMM programs load instead of ranking their run's tokens from the routing ids (the code before each
# program's K loop: 754 -> 113 SASS instructions); gluon_rows 2 (off) gives each program two row blocks of its run in
# one K loop, its activations loaded once for both (with maxnreg 128: faster where the grid keeps two waves of
# programs, slower where halving them leaves the SMs idle; README)
# Thirteenth round (README): combine_early (on) has the norm-combine read its router and norm weights before its wait
# on the down GEMM, not queued behind the next layer's weights that programmatic dependent launch streams meanwhile
# Fifteenth round (README): ranked_claim_down N > 0 (off) has N programs an SM take the down GEMM's items at run time
# from a counter (ranked_kernel._claimed_down; ranked_claim_items M: the list split for M items an SM;
# ranked_claim_shards: counters a shard) where the list holds two items a program; measured +24% at local batch 1
# Seventeenth round (README): ranked_l2_ahead N > 0 (off; ranked_l2_ahead_down the down GEMM's) has each ranked
# program ask, before its wait, for its item's next N K tiles past its ring's to be brought into L2; measured +4 to
# +44% (within 1% at ep2tp4 batch 1 only)
# Nineteenth round (README): ranked_carveout P (null: the driver's choice) asks for P % of each SM's L1 / shared memory
# as shared memory for every kernel of a ranked call (kernel.set_carveout); one value for the call's kernels measured
# no faster than the driver's own choice, which differs kernel by kernel (batch 4: 64, 32 and 16 KB)
# Twentieth round (README): ranked_norm_down (off) has the down GEMM's row blocks do the norm-combine, each its own
# columns after its expert's row blocks meet (no launch after the GEMM); measured slower, +7 to +10% at batch 1
# Twenty-first round (README): gluon_warps N (2, 4, 8; absent 1) runs the run list's GEMMs (batches 9-32, with the run
# table) as programs of N warps, a row block a warp against one token tile; measured no faster at batch 32 (eight
# warps: -1.5 to -7.1% at batch 16, up to +29% elsewhere), left out of the defaults
# Twenty-sixth round (README): tail_ks 2 or 4 (4, on) splits the run list's last wave of items along K on the device
# (gluon_kernel._gemm_kernel's TAIL_KS), where the routed runs' items pass a multiple of the resident programs
# (twenty-seventh round: at most tail_ks parts, 2 where 4 would not fit one wave and the tail is 2/5 of one or less)
GLUON_CONFIG = {"ctas_per_sm": 32, "pdl": True, "maxnreg": 96, "gate_up_per_sm": 32, "persistent": 0, "ranked": True,
                "ranked_per_sm": 20, "ranked_min_iters": 2, "ranked_stages": 0, "ranked_stages_down": None,
                "ranked_maxnreg": None, "ranked_maxnreg_gate_up": 96, "ranked_wave_cost": 0, "ranked_fixup_unroll": 1,
                "ranked_few": {"ranked_stages": 3, "ranked_per_sm": 16, "ranked_maxnreg_gate_up": None,
                               "ranked_maxnreg": 96, "ranked_min_iters": 1}, "plan_runs": True, "plan_lanes": True, "plan_items": 1,
                "fused_few": False, "fused_max_bound": 8, "fused_per_sm": 16, "fused_stages": 2, "fused_down_tiles": 1,
                "fused_maxnreg": 96, "narrow_runs": 17, "narrow_sub_k": 128, "ranked_act_launch": "auto",
                "run_table": True, "gluon_rows": 1, "combine_early": True, "tail_ks": 4}
RANKED_FEW_EXPERTS = 8  # ranked_few applies where at most this many experts can be routed to the card
# every key a launch configuration may hold: what the kernels read (GLUON_CONFIG's, the tl.dot paths', the options
# off by default); tests/test_mxfp4_glue.py checks it against the package's source
CONFIG_KEYS = frozenset({
    "combine_early", "compact_m", "ctas_per_sm", "down", "down_atomic", "fused_bar_group", "fused_down_tiles",
    "fused_early", "fused_few", "fused_group_spin", "fused_max_bound", "fused_maxnreg", "fused_per_sm", "fused_pf_rest",
    "fused_stages", "gate_up", "gate_up_per_sm", "gluon_rows", "gluon_warps", "large_batch", "maxnreg", "maxnreg_down", "min_iters",
    "narrow_runs", "narrow_sub_k", "pdl", "peel_tokens", "persistent", "plan_items", "plan_lanes", "plan_runs",
    "plan_split_per_sm", "programs_per_sm", "ranked", "ranked_act_launch", "ranked_claim_down", "ranked_claim_items",
    "ranked_carveout", "ranked_claim_shards", "ranked_few", "ranked_l2_ahead", "ranked_l2_ahead_down",
    "ranked_fixup_unroll",
    "ranked_maxnreg", "ranked_maxnreg_gate_up", "ranked_min_iters", "ranked_norm_down", "ranked_per_sm",
    "ranked_per_sm_down",
    "ranked_prefetch_down_mb", "ranked_stages", "ranked_stages_down", "ranked_wave_cost", "run_table",
    "separate_gate_up", "silu_launch", "slice_bk", "slice_dr", "slice_few", "slice_max_pairs", "slice_maxnreg",
    "slice_down_early", "slice_ksplit", "slice_per_sm", "slice_prefetch", "slice_stream", "slice_warps",
    "slice_width",
    "split_down", "split_gate_up", "stream_k", "sub_k", "sum_parts_launch", "tail_ks",
    "tail_slots"})


def config_from_json(text: str, what: str, *, labelled: bool = False) -> dict:
    """A configuration given as JSON on a benchmark's command line (``what``: the option's name): an object of keys
    the kernels read, its ``ranked_few`` and ``large_batch`` objects too; ``labelled``: an object of such
    configurations by label (``--ab``). Raises ValueError saying what is wrong: not JSON, not an object, a key no
    kernel reads (:func:`unknown_config_keys`)."""
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what}: not JSON ({exc})") from None
    if labelled and not isinstance(data, dict):
        raise ValueError(f"{what}: a JSON object of labels, each a configuration object; got {text[:60]!r}")
    for label, conf in data.items() if labelled else [("", data)]:
        where = f"{what} {label}".rstrip()
        if not isinstance(conf, dict):
            raise ValueError(f"{where}: a JSON object of configuration keys; got {json.dumps(conf)[:60]}")
        for sub in ("ranked_few", "large_batch"):
            if sub in conf and not isinstance(conf[sub], dict):
                raise ValueError(f"{where}: {sub} must be an object of configuration keys; got "
                                 f"{json.dumps(conf[sub])[:60]}")
        bad = unknown_config_keys(conf)
        if bad:  # a typo, or an option since dropped, would time the default under another name
            raise ValueError(f"{where}: no kernel reads {', '.join(bad)}")
    return dict(data)


def unknown_config_keys(config: dict) -> list[str]:
    """The keys of ``config`` (and of its ``ranked_few`` and ``large_batch`` overrides) that no kernel reads, each
    with the closest known ones: a typo, or an option since dropped, that would otherwise leave the default in
    place without a word (the benchmarks refuse them, bench/bench_mxfp4_moe.py and bench/trace_case.py)."""
    import difflib

    keys = list(config) + [k for sub in ("ranked_few", "large_batch") if isinstance(config.get(sub), dict)
                           for k in config[sub]]
    out = []
    for k in dict.fromkeys(keys):
        if k not in CONFIG_KEYS:
            close = difflib.get_close_matches(str(k), sorted(CONFIG_KEYS), n=3)
            out.append(f"{k!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    return out


def fused_few_taken(config: dict, pairs: int, n_local: int) -> bool:
    """Whether a chunk of ``pairs`` (token, slot) pairs on a card of ``n_local`` experts runs the eighth round's
    fused persistent launch (fused_kernel): config ``fused_few`` on and min(pairs, n_local), the most experts
    that can be routed here, at most ``fused_max_bound``."""
    return bool(config.get("fused_few")) and min(pairs, n_local) <= config.get("fused_max_bound", 8)


def gluon_warps_of(config: dict) -> int:
    """The run list's warps a program (config ``gluon_warps``, twenty-first round: 1, 2, 4 or 8; absent 1), checked
    for every chunk the gluon kernels take, as ``gluon_rows``. ValueError naming the key otherwise."""
    warps = config.get("gluon_warps", 1)
    if type(warps) is not int or warps not in (1, 2, 4, 8):
        raise ValueError(f"gluon_warps must be 1, 2, 4 or 8 (warps a program of the run list), got {warps!r}")
    return warps


def gluon_rows_of(config: dict) -> int:
    """The gluon GEMMs' row blocks a program (config ``gluon_rows``, twelfth round: 1 or 2; absent 1), checked for every
    chunk the gluon kernels take, the ranked ones (batches 1-8, which do not use it) included, so that a bad value is
    refused wherever it is set. ValueError naming the key otherwise."""
    rows = config.get("gluon_rows", 1)
    if type(rows) is not int or rows not in (1, 2):  # (not True, nor 2.0 from a JSON --config)
        raise ValueError(f"gluon_rows must be 1 or 2 (row blocks a program), got {rows!r}")
    return rows


def ranked_config(config: dict, pairs: int, n_local: int) -> dict:
    """The ranked kernels' configuration for a chunk of ``pairs`` (token, slot) pairs on a card holding
    ``n_local`` experts: ``config`` with its ``ranked_few`` overrides where at most RANKED_FEW_EXPERTS experts
    can be routed here (min(pairs, n_local); batch 1 of top-8), else ``config`` as it is."""
    if min(pairs, n_local) <= RANKED_FEW_EXPERTS and config.get("ranked_few"):
        return {**config, **config["ranked_few"]}
    return config


def narrow_config(config: dict, tokens: int) -> dict:
    """The gluon GEMMs' configuration for a chunk of ``tokens`` tokens (ninth round): from ``narrow_runs`` tokens
    on (an int; 0 or absent: never; True: always) runs of 16 tokens (``compact_m`` 16), each run of at most 8
    tokens computed with 8-token tiles and the others with 16-token tiles multiplied ``narrow_sub_k`` (default
    128) of K at a time (gluon_kernel.experts_forward's ``narrow``); below it ``config`` with narrow off."""
    n = config.get("narrow_runs", 0)
    if n and tokens >= int(n):
        return {**config, "compact_m": 16, "sub_k": config.get("narrow_sub_k", 128), "narrow_runs": True}
    return {**config, "narrow_runs": False}


def default_config(decode: str) -> dict:
    if decode == "gluon":
        return GLUON_CONFIG
    return MMA_CONFIG if DECODE_LAYOUT[decode] == "mma" else DEFAULT_CONFIG


def _pow2(n: int, lo: int = 2) -> int:
    return max(lo, triton.next_power_of_2(n))


def _fit(block: int, dim: int) -> int:
    """Largest power of two <= block that divides dim (dims are multiples of 32)."""
    while block > 32 and dim % block:
        block //= 2
    if dim % block:
        raise ValueError(f"dimension {dim} is not a multiple of 32")
    return block


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def default_decode(device: torch.device, layout: str = "quark") -> str:
    """PTX decode on NVIDIA GPUs; the portable Triton decode elsewhere (AMD, the CPU interpreter).
    Weights in the mma layout (ExpertWeights.to_mma_layout) take `mma` / `mma_portable`."""
    ptx = device.type == "cuda" and not _interpreting() and not getattr(torch.version, "hip", None)
    if layout == "tiled":
        return "gluon"
    if layout == "mma":
        return "mma" if ptx else "mma_portable"
    return "asm2" if ptx else "explicit"


def mxfp4_moe_experts(x_lat: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, experts, *,
                      eps: float = 1e-6, decode: str = "auto", config: dict | None = None,
                      out: torch.Tensor | None = None, partials: bool = False) -> torch.Tensor:
    """The kernel path of ``reference.moe_experts_reference``: out_lat fp32 [T, latent]; with partials, that
    of ``reference.moe_expert_partials_reference``: fp32 [T * k, latent], each pair's output before its norm
    (zero for pairs whose expert is not on this card), the TP-split card's share (``combine_partials``
    finishes once the TP group has added them).

    x_lat bf16 [T, latent]; topk_ids [T, k] global expert ids (int32 or int64), distinct within a token as
    top-k gives them (a token routed twice to one expert is computed once); topk_weights [T, k];
    experts an ``ExpertWeights`` on the GPU, in the layout the decode reads (DECODE_LAYOUT; "auto" picks
    by layout: tiled -> "gluon", mma -> "mma" / "mma_portable", quark -> "asm2" / "explicit"). Batches over
    32 tokens run in chunks of 32. Other decodes: "asm" (NVIDIA PTX), "dot_scaled" (Triton's
    tl.dot_scaled). config: kernel.default_config(decode)'s form. Raises ValueError for a decode that
    does not read the weights' layout, an unknown decode, or (gluon) tiles / splits it cannot run.
    """
    T, L = x_lat.shape
    topk = topk_ids.shape[1]
    layout = getattr(experts, "layout", "quark")
    if not _interpreting() and (x_lat.device.type != "cuda" or experts.w13.device.type != "cuda"):
        raise ValueError(f"the MXFP4 kernels run on a GPU; x_lat is on {x_lat.device} and the experts on "
                         f"{experts.w13.device} (the reference path is reference.moe_experts_reference)")
    if decode == "auto":
        decode = default_decode(x_lat.device, layout)
    if decode not in DECODE_MODES:
        raise ValueError(f"decode must be one of {sorted(DECODE_MODES)} or 'auto', got {decode!r}")
    if DECODE_LAYOUT[decode] != layout:
        raise ValueError(f"decode {decode!r} does not read weights in the {layout!r} layout (gluon needs "
                         "ExpertWeights.to_tiled_layout(), the mma decodes ExpertWeights.to_mma_layout(), the "
                         "others the checkpoint's Quark layout)")
    rows = T * topk if partials else T
    if out is None:
        out = torch.empty(rows, L, dtype=torch.float32, device=x_lat.device)
    per = topk if partials else 1
    for t0 in range(0, T, MAX_TOKENS):
        t1 = min(T, t0 + MAX_TOKENS)
        _experts_chunk(x_lat[t0:t1], topk_ids[t0:t1], topk_weights[t0:t1], experts, out[t0 * per:t1 * per], topk,
                       eps, DECODE_MODES[decode], config or default_config(decode), partials)
    return out


LAST_LAUNCH: dict = {}  # the compiled kernels of the last call (registers, spills: the benchmark prints them)
# a list: the ranked and fused kernels (batches 1-8) are compiled with timer stamps and append (name, buffer) for
# each launch (ranked_kernel.trace_buffer: [programs, 32] int64, %globaltimer ns and %clock64 cycles); None
# (default): no stamps.
# bench/trace_case.py sets it; nothing else should.
TRACE: list | None = None


def _cfg(entry):
    bn, bk, nw, ns = entry[:4]
    return bn, bk, nw, ns, bool(entry[4]) if len(entry) > 4 else False


_SM_COUNT: dict = {}


def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 8
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


def _split_k(config, key: str, ctas: int, k_iters: int, sms: int) -> int:
    """Split K until the grid has about `ctas_per_sm` (default 6) programs per SM, keeping at least
    `min_iters` (default 4) K iterations per program (decode batches route to few experts, so a plain grid
    leaves a ragged last wave); `split_<key>` in the config overrides."""
    forced = config.get("split_" + key)
    if forced:
        if k_iters % forced:
            raise ValueError(f"split_{key}={forced} does not divide {k_iters} K iterations")
        return forced
    per_sm, min_iters = config.get("ctas_per_sm", 6), config.get("min_iters", 4)
    s = 1
    while ctas * s < per_sm * sms and k_iters % (2 * s) == 0 and k_iters // (2 * s) >= min_iters:
        s *= 2
    return s


def _experts_chunk(x, ids, wts, ex, out, topk, eps, decode, config, partials=False):
    T, L = x.shape
    I = ex.expert_size
    if ex.latent_size != L:
        raise ValueError(f"x_lat has {L} features, experts expect {ex.latent_size}")
    x = x.to(torch.bfloat16).contiguous()
    wts = wts.to(torch.float32).contiguous()
    if decode == DECODE_MODES["gluon"]:
        gluon_rows_of(config)  # refused here, whichever gluon path the chunk takes
        gluon_warps_of(config)
        from . import slice_kernel
        if slice_kernel.slice_taken(config, T * topk):  # twenty-third round: both GEMMs in one launch by slice
            return slice_kernel.experts_forward(x, ids, wts, ex, out, eps, sms=_num_sms(x.device), config=config,
                                                partials=partials, last_launch=LAST_LAUNCH)
    ranked = decode == DECODE_MODES["gluon"] and config.get("ranked") and T <= 8 and topk <= 8
    if ranked:  # the device-ranked work list (ranked_kernel), where its shapes fit
        from . import ranked_kernel
        ranked = ranked_kernel.fits(ex)
    if ranked and fused_few_taken(config, T * topk, ex.num_local):  # eighth round A: one persistent launch
        from . import fused_kernel
        done = fused_kernel.experts_forward(x, ids.contiguous(), wts, ex, out, eps, sms=_num_sms(x.device),
                                            per_sm=config.get("fused_per_sm", 16),
                                            stages=config.get("fused_stages", 2),
                                            down_tiles=config.get("fused_down_tiles", 1),
                                            min_iters=config.get("ranked_min_iters", 2),
                                            pdl=config.get("pdl", True), maxnreg=config.get("fused_maxnreg", 96),
                                            early=config.get("fused_early", False),
                                            bar_group=config.get("fused_bar_group", 32),
                                            pf_rest=config.get("fused_pf_rest", True),
                                            group_spin=config.get("fused_group_spin", True),
                                            partials=partials, last_launch=LAST_LAUNCH, trace=TRACE)
        if done is not None:
            return done
    if ranked:
        config = ranked_config(config, T * topk, ex.num_local)
        return ranked_kernel.experts_forward(x, ids.contiguous(), wts, ex, out, eps, sms=_num_sms(x.device),
                                             per_sm=config.get("ranked_per_sm", 24),
                                             min_iters=config.get("ranked_min_iters", 2),
                                             pdl=config.get("pdl", True),
                                             maxnreg=config.get("ranked_maxnreg", config.get("maxnreg")),
                                             stages=config.get("ranked_stages", 0),
                                             stages_down=config.get("ranked_stages_down"),
                                             maxnreg_gate_up=config.get("ranked_maxnreg_gate_up"),
                                             wave_cost=config.get("ranked_wave_cost", 0),
                                             fixup_unroll=config.get("ranked_fixup_unroll", 1),
                                             prefetch_down_mb=config.get("ranked_prefetch_down_mb", 0),
                                             act_launch=config.get("ranked_act_launch", False),
                                             combine_early=config.get("combine_early", False),
                                             per_sm_down=config.get("ranked_per_sm_down"),
                                             claim_down=config.get("ranked_claim_down", 0),
                                             claim_items=config.get("ranked_claim_items", 64),
                                             claim_shards=config.get("ranked_claim_shards", 1),
                                             l2_ahead=config.get("ranked_l2_ahead", 0),
                                             l2_ahead_down=config.get("ranked_l2_ahead_down"),
                                             carveout=config.get("ranked_carveout"),
                                             norm_down=config.get("ranked_norm_down", False),
                                             partials=partials, last_launch=LAST_LAUNCH, trace=TRACE)
    if decode == DECODE_MODES["gluon"]:  # int32 or int64 ids as they are (no conversion launch)
        from . import gluon_kernel
        config = narrow_config(config, T)
        return gluon_kernel.experts_forward(x, ids.contiguous(), wts, ex, out, eps, sms=_num_sms(x.device),
                                            ctas_per_sm=config.get("ctas_per_sm", 64),
                                            split_down=config.get("split_down"), pdl=config.get("pdl", True),
                                            maxnreg=config.get("maxnreg"), peel_tokens=config.get("peel_tokens", 8),
                                            split_gate_up=config.get("split_gate_up"),
                                            gate_up_per_sm=config.get("gate_up_per_sm", 32),
                                            silu_launch=config.get("silu_launch", False), partials=partials,
                                            compact_m=config.get("compact_m", 8),
                                            sum_parts_launch=config.get("sum_parts_launch", False),
                                            down_atomic=config.get("down_atomic", True),
                                            persistent=config.get("persistent", 0),
                                            plan=config.get("plan_runs", False),
                                            plan_split_per_sm=config.get("plan_split_per_sm", 0),
                                            maxnreg_down=config.get("maxnreg_down", -1),
                                            plan_lanes=config.get("plan_lanes", False),
                                            plan_items=config.get("plan_items", 1),
                                            sub_k=config.get("sub_k", 0),
                                            narrow=bool(config["narrow_runs"]),
                                            rows=gluon_rows_of(config), warps=gluon_warps_of(config),
                                            run_table=config.get("run_table", False),
                                            combine_early=config.get("combine_early", False),
                                            tail_ks=config.get("tail_ks", 0),
                                            tail_slots=config.get("tail_slots", 0),
                                            last_launch=LAST_LAUNCH)
    ids = ids.to(torch.int32).contiguous()
    P = T * topk
    block_m = 16 if T <= 16 else 32
    if block_m == 32 and "large_batch" in config:
        config = {**config, **config["large_batch"]}
    sms = _num_sms(x.device)
    experts_bound = min(P, ex.num_local)  # at most this many experts have tokens
    # P_P2 covers the largest chunk, so a kernel is compiled once per BLOCK_M (16 or 32), not per T
    common = dict(TOPK=topk, TOPK_P2=_pow2(topk), P_P2=_pow2(MAX_TOKENS * topk), BLOCK_M=block_m, DECODE=decode,
                  F32_DOT=_interpreting())

    act = torch.empty(P, I, dtype=torch.bfloat16, device=x.device)
    bn, bk, nw, ns, swap = _cfg(config["gate_up"])
    if config.get("stream_k"):
        return _experts_chunk_streamk(x, ids, wts, ex, out, topk, eps, config, act, common, sms, partials)
    if config.get("separate_gate_up"):
        # gate and up rows as one plain GEMM over 2I rows (one weight tile per program), fp32 out, then silu
        bn, bk = _fit(bn, 2 * I), _fit(bk, L)
        split_gu = _split_k(config, "gate_up", experts_bound * (2 * I // bn), L // bk, sms)
        h = (torch.zeros if split_gu > 1 else torch.empty)(P, 2 * I, dtype=torch.float32, device=x.device)
        LAST_LAUNCH["gate_up"] = _down_kernel[(P, 2 * I // bn, split_gu)](
            x, ids, ex.w13, ex.w13_scale, h, T, ex.expert_base, ex.num_local,
            x.stride(0), ex.w13.stride(0), ex.w13.stride(1), ex.w13_scale.stride(0), ex.w13_scale.stride(1),
            h.stride(0), K=L, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split_gu, SWAP_AB=swap and decode != 1,
            A_BY_TOKEN=True, num_warps=nw, num_stages=ns, **common)
        split_gu = 2  # silu below
    else:
        bn, bk = _fit(bn, I), _fit(bk, L)
        split_gu = _split_k(config, "gate_up", experts_bound * (I // bn), L // bk, sms)
        h = torch.zeros(P, 2 * I, dtype=torch.float32, device=x.device) if split_gu > 1 else act
        LAST_LAUNCH["gate_up"] = _gate_up_kernel[(P, I // bn, split_gu)](
            x, ids, ex.w13, ex.w13_scale, act, h, T, ex.expert_base, ex.num_local,
            x.stride(0), ex.w13.stride(0), ex.w13.stride(1), ex.w13_scale.stride(0), ex.w13_scale.stride(1),
            act.stride(0), h.stride(0), I=I, K=L, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split_gu,
            SWAP_AB=swap and decode != 1, num_warps=nw, num_stages=ns, **common)
    if split_gu > 1:
        silu_mul(h, act)

    bn, bk, nw, ns, swap = _cfg(config["down"])
    bn, bk = _fit(bn, L), _fit(bk, I)
    split_d = _split_k(config, "down", experts_bound * (L // bn), I // bk, sms)
    alloc = torch.zeros if split_d > 1 else torch.empty
    y = alloc(P, L, dtype=torch.float32, device=x.device)
    LAST_LAUNCH["down"] = _down_kernel[(P, L // bn, split_d)](
        act, ids, ex.w2, ex.w2_scale, y, T, ex.expert_base, ex.num_local,
        act.stride(0), ex.w2.stride(0), ex.w2.stride(1), ex.w2_scale.stride(0),
        ex.w2_scale.stride(1), y.stride(0), K=I, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split_d,
        SWAP_AB=swap and decode != 1, num_warps=nw, num_stages=ns, **common)

    if partials:
        sum_parts(y, ids, ex, out)
        return out
    out.zero_()
    norm_combine(y, ids, wts, ex, out, eps, early=config.get("combine_early", False))
    return out


def _experts_chunk_streamk(x, ids, wts, ex, out, topk, eps, config, act, common, sms, partials=False):
    """config["stream_k"]: both GEMMs as persistent stream-K programs (config["programs_per_sm"] per SM,
    default 4), one zeroed buffer for both GEMMs' fp32 sums (one memset), silu between them."""
    T, L = x.shape
    I = ex.expert_size
    P = T * topk
    per_sm = config.get("programs_per_sm", 4)
    e_p2 = _pow2(ex.num_local)
    buf = torch.zeros(P, 2 * I + L, dtype=torch.float32, device=x.device)
    h, y = buf[:, :2 * I], buf[:, 2 * I:]
    for key, a, w, sc, o, n, k in (("gate_up", x, ex.w13, ex.w13_scale, h, 2 * I, L),
                                   ("down", act, ex.w2, ex.w2_scale, y, L, I)):
        bn, bk, nw, ns, swap = _cfg(config[key])
        bn, bk = _fit(bn, n), _fit(bk, k)
        progs = per_sm * sms
        LAST_LAUNCH[key] = _streamk_kernel[(progs,)](
            a, ids, w, sc, o, T, ex.expert_base, ex.num_local, progs,
            a.stride(0), w.stride(0), w.stride(1), sc.stride(0), sc.stride(1), o.stride(0),
            N=n, K=k, E_P2=e_p2, BLOCK_N=bn, BLOCK_K=bk, SWAP_AB=swap and common["DECODE"] != 1,
            A_BY_TOKEN=key == "gate_up", num_warps=nw, num_stages=ns, **common)
        if key == "gate_up":
            silu_mul(h, act)
    if partials:
        sum_parts(y, ids, ex, out)
        return out
    out.zero_()
    norm_combine(y, ids, wts, ex, out, eps, early=config.get("combine_early", False))
    return out


# ----------------------------------------------------------------------------------------------------------
# Dequantization to a dense copy: not used by the expert path; the benchmark's fair "stock" baseline
# (one fused pass: read packed + scales, write BF16) and a check of the in-register decode.

@triton.jit
def _dequant_kernel(q_ptr, s_ptr, o_ptr, R, stride_q, stride_s, stride_o,
                    K: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, DECODE: tl.constexpr):
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    k0 = tl.program_id(1) * BLOCK_K
    rm = offs_r[:, None] < R
    wq = tl.load(q_ptr + offs_r[:, None] * stride_q + k0 // 2 + tl.arange(0, BLOCK_K // 2)[None, :], mask=rm)
    ws = tl.load(s_ptr + offs_r[:, None] * stride_s + k0 // 32 + tl.arange(0, BLOCK_K // 32)[None, :], mask=rm)
    if DECODE == 2:
        w = _decode_asm(wq, ws, BLOCK_R, BLOCK_K, False)
    elif DECODE == 3:
        w = _decode_asm(wq, ws, BLOCK_R, BLOCK_K, True)
    elif DECODE >= 4:
        w = (_decode_mma(wq, ws, BLOCK_R, BLOCK_K, DECODE == 4).to(tl.float32) * _MMA_UNSCALE).to(tl.bfloat16)
    else:
        w = _dequant_tile(wq, ws, BLOCK_R, BLOCK_K)
    tl.store(o_ptr + offs_r[:, None] * stride_o + k0 + tl.arange(0, BLOCK_K)[None, :], w, mask=rm)


def dequantize_mxfp4_triton(packed: torch.Tensor, scales: torch.Tensor, out: torch.Tensor | None = None,
                            decode: str = "explicit") -> torch.Tensor:
    """packed uint8 [R, K//2] + scales uint8 [R, K//32] -> bf16 [R, K] in one pass (any decode but
    dot_scaled: the tests check the in-register decodes bit for bit with it; `mma` / `mma_portable` take
    packed in the mma layout, format.to_mma_layout)."""
    R, K = packed.shape[0], packed.shape[1] * 2
    if out is None:
        out = torch.empty(R, K, dtype=torch.bfloat16, device=packed.device)
    bk = _fit(256, K)
    _dequant_kernel[(triton.cdiv(R, 32), K // bk)](packed, scales, out, R, packed.stride(0), scales.stride(0),
                                                   out.stride(0), K=K, BLOCK_R=32, BLOCK_K=bk,
                                                   DECODE=DECODE_MODES[decode], num_warps=4)
    return out
