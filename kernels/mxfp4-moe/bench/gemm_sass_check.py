#!/usr/bin/env python3
"""Compile gluon_kernel's GEMM for sm_90 without a GPU; print registers, local-memory accesses and the SASS
of its K loop (instructions a tile, by opcode): what the decode costs per weight element.

    python bench/gemm_sass_check.py [--maxnreg 96] [--block-m 8] [--chunk 8] [--latent 4096] [--size 4096]

The loop is the kernel's backward branch; one iteration is one BLOCK_N x BLOCK_K tile (32 x 256: 256
elements a lane). Uses the cuobjdump in Triton's wheel; put another Triton first on PYTHONPATH to check that
version (the H200 runs 3.6: `pip install --target DIR triton==3.6.0`, then PYTHONPATH=DIR). Sixth round,
Triton 3.6: 630 instructions a tile before (198 IMAD, 194 LOP3, 128 HMUL2, 32 SHF, 32 HMMA), 541 after.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from sm90_compile import compile_gluon, cuobjdump  # noqa: E402

from mxfp4_moe import gluon_kernel as gk  # noqa: E402

_PTRS = {"a_ptr": "*i32", "ids_ptr": "*i64", "w_ptr": "*i32", "s_ptr": "*u8", "out_ptr": "*fp32", "act_ptr": "*fp32",
         "cnt_ptr": "*i32", "sched_ptr": "*i32", "plan_ptr": "*i32", "z2_ptr": "*fp32",
         "tail_ptr": "*fp32", "tcnt_ptr": "*i32"}
_INTS = ("T", "expert_base", "n_local", "out_numel", "stride_am", "stride_we", "stride_se", "stride_ym", "stride_yk",
         "stride_act", "n_items", "z2_numel", "budget", "plan_stride", "slots")


def compile_gemm(gate_up: bool, block_m: int, chunk: int, latent: int, size: int, maxnreg: int | None,
                 bn: int = 32, bk: int = 256, plan: bool = False, peel: bool | None = None, dyn: bool = False,
                 items: bool = False, sub_k: int = 0, narrow: bool = False, rows: int = 1, narrow_sub_k: int = 0, table: bool = False,
                 warps: int = 1, tail: int = 0):
    fn = gk._gemm_kernel
    lay = gk.layouts(bn * warps, sub_k or bk, block_m, warps)
    lay8 = gk.layouts(bn * warps, narrow_sub_k or bk, 8, warps)
    ptrs = _PTRS | {"y_ptr": "*bf16" if gate_up else "*fp32"}
    consts = {"K": latent if gate_up else size, "TOPK": 8, "TOPK_P2": 8, "P_P2": 256, "BLOCK_M": block_m,
              "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": 1, "GATE_UP": gate_up, "W5": lay["w5"], "X4": lay["x4"],
              "S3": lay["s3"], "ZERO_BLOCK": 128, "GDC": True, "I_SIZE": size, "PEEL": chunk == 0 if peel is None else peel, "FIXUP": False,
              "CHUNK": chunk, "ZERO_PAIRS": False,
              "GRID_N": (2 * size // bn if gate_up else latent // bn) // warps, "PERSIST": False, "DYNAMIC": False, "PLAN": plan,
              "DYN_SPLIT": dyn and not gate_up, "LOG_MAX": 3 if dyn and not gate_up else 0,
              "ATOMIC_OUT": dyn and not gate_up, "PLAN_ITEMS": 2 if items else 1, "SUB_K": sub_k,
              "NARROW": narrow, "ROWS": rows,
              "NARROW_SUB_K": narrow_sub_k, "TOK_TABLE": table, "WARPS": warps,
              "TAIL_KS": tail if plan else 0} | ({"W5N": lay8["w5"], "X4N": lay8["x4"], "S3N": lay8["s3"]} if narrow else {})
    return compile_gluon(fn, ptrs, _INTS, consts, maxnreg, num_warps=warps)


def report(compiled) -> str:
    sass = cuobjdump(compiled, "-sass")
    usage = cuobjdump(compiled, "--dump-resource-usage")
    regs = re.search(r"REG:(\d+)", usage)
    ins = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"/\*([0-9a-f]{4})\*/\s+(.*?);", sass)]
    back = [(int(m.group(1), 16), a) for a, t in ins if (m := re.search(r"BRA .*?0x([0-9a-f]+)", t))
            and int(m.group(1), 16) < a]
    local = sum(1 for _, t in ins if re.search(r"\b(LDL|STL)", t))
    out = f"regs {regs.group(1) if regs else '?'}, local loads/stores {local}"
    for lo, hi in back:
        body = [t.split()[1] if t.startswith("@") else t.split()[0] for a, t in ins if lo <= a <= hi]
        ops = collections.Counter(op.split(".")[0] for op in body)
        out += f"; loop {len(body)}: " + ", ".join(f"{k} {v}" for k, v in ops.most_common())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maxnreg", type=int, default=None)
    ap.add_argument("--block-m", type=int, default=8, help="the mma's token width (8, 16, 32)")
    ap.add_argument("--chunk", type=int, default=8, help="token compaction runs (batches 9-32); 0: batches 1-8")
    ap.add_argument("--latent", type=int, default=4096)
    ap.add_argument("--size", type=int, default=4096, help="the expert's intermediate size (a TP slice: 1024)")
    ap.add_argument("--plan", action="store_true", help="the run list's flat grid (PLAN, seventh round)")
    ap.add_argument("--dyn", action="store_true", help="with --plan: the down GEMM's device-sized K split")
    ap.add_argument("--items", dest="items", action="store_true", help="with --plan: two runs a program (PLAN_ITEMS 2)")
    ap.add_argument("--bk", type=int, default=256)
    ap.add_argument("--sub-k", type=int, default=0, help="SUB_K: each tile multiplied this much of K at a time")
    ap.add_argument("--narrow", action="store_true", help="with --plan --chunk 16: runs of <= 8 tokens on 8-token tiles")
    ap.add_argument("--rows", type=int, default=1, help="row blocks a program (ROWS, twelfth round)")
    ap.add_argument("--narrow-sub-k", type=int, default=0, help="with --narrow: the 8-token tiles' SUB_K")
    ap.add_argument("--table", action="store_true", help="with --plan: the run table (TOK_TABLE, twelfth round)")
    ap.add_argument("--warps", type=int, default=1, help="with --plan --table: warps a program, one row block each "
                    "(WARPS, twenty-first round)")
    ap.add_argument("--tail", type=int, default=0, help="with --plan: TAIL_KS, the last wave's items in that many "
                    "K parts (twenty-sixth round)")
    ap.add_argument("--peel", type=int, default=None, help="1/0: force PEEL (default: on without compaction)")
    args = ap.parse_args()
    if args.tail:  # (the combinations the host launches with TAIL_KS: gluon_kernel.experts_forward's tail)
        if args.tail not in (2, 4):
            ap.error(f"--tail must be 2 or 4 (K parts), got {args.tail}")
        bad = [name for name, on in (("without --plan", not args.plan), ("with --dyn", args.dyn), ("with --items", args.items),
                                     ("with --rows 2", args.rows != 1), ("with --warps > 1", args.warps != 1),
                                     ("with --block-m 32", args.block_m > 16)) if on]
        if bad:
            ap.error(f"--tail is not launched {' or '.join(bad)} (whole items of one row block, one warp, at most "
                     f"16 tokens, on the run list)")
    print(f"triton {triton.__version__}")
    for gate_up in (True, False):
        peel = None if args.peel is None else bool(args.peel)
        ck = compile_gemm(gate_up, args.block_m, args.chunk, args.latent, args.size, args.maxnreg,
                          plan=args.plan, peel=peel, dyn=args.dyn, items=args.items, bk=args.bk, sub_k=args.sub_k,
                          narrow=args.narrow,
                          rows=args.rows, narrow_sub_k=args.narrow_sub_k, table=args.table,
                          warps=args.warps, tail=args.tail)
        print(f"{'gate_up' if gate_up else 'down':7} block_m {args.block_m} chunk {args.chunk} maxnreg "
              f"{args.maxnreg} plan {args.plan} dyn {args.dyn} peel {peel} warps {args.warps}: {report(ck)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
