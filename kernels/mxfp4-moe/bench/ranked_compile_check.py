#!/usr/bin/env python3
"""Compile the ranked gluon GEMMs (ranked_kernel) for sm_90 without a GPU; print registers, spills, shared
memory and the cp.async / barrier counts of the PTX.

    python bench/ranked_compile_check.py [--stages 0,2,3,4] [--maxnreg 96] [--latent 4096] [--size 1024] [--loops]

Uses the ptxas and cuobjdump in Triton's wheel. Put another Triton first on PYTHONPATH to check that version
(the H200 runs 3.6; fifth round: `pip install --target DIR triton==3.6.0`, then PYTHONPATH=DIR): the figures
are leads (README "Measure"); the ring's shared memory is exact.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from gemm_sass_check import report  # noqa: E402
from sm90_compile import compile_gluon, cuobjdump  # noqa: E402

from mxfp4_moe import ranked_kernel as rk  # noqa: E402
from mxfp4_moe.gluon_kernel import layouts  # noqa: E402

_INTS = ("T", "expert_base", "n_local", "budget", "z1_numel", "z2_numel", "stride_am", "stride_we", "stride_se",
         "stride_ym", "stride_hm", "stride_hk", "pf_stride_w", "pf_stride_s", "claim_G", "claim_budget", "stride_g",
         "stride_om")


def compile_ranked(gate_up: bool, stages: int, maxnreg: int | None, latent: int, size: int, bn: int = 32,
                   bk: int = 256, arch: int = 90, prefetch: int = 0, trace: bool = False, act: bool = False,
                   claim: bool = False, l2_ahead: int = 0, norm: bool = False):
    fn = rk._ranked_gemm_kernel
    ptrs = {"a_ptr": "*i32", "ids_ptr": "*i64", "w_ptr": "*i32", "s_ptr": "*u8",
            "y_ptr": "*bf16" if gate_up else "*fp32", "h_ptr": "*fp32", "cnt_ptr": "*i32", "z1_ptr": "*fp32",
            "z2_ptr": "*fp32", "pf_w_ptr": "*u8", "pf_s_ptr": "*u8", "tr_ptr": "*i64", "claim_ptr": "*i32"}
    lay = layouts(bn, bk, 8)
    consts = {"K": latent if gate_up else size, "TOPK": 8, "TOPK_P2": 8, "P_P2": 64, "BLOCK_M": 8, "BLOCK_N": bn,
              "BLOCK_K": bk, "GRID_N": 2 * size // bn if gate_up else latent // bn, "LOG_MAX": 3, "GATE_UP": gate_up,
              "W5": lay["w5"], "X4": lay["x4"], "S3": lay["s3"], "ZERO_BLOCK": 128, "GDC": arch >= 90,
              "STAGES": stages, "WAVE_COST": 0, "FIX_UNROLL": 1, "PF_WBYTES": 0, "PF_SBYTES": 0, "PF_MAX_OWN": 0,
              "TRACE": trace, "ACT_LAUNCH": act, "L2_AHEAD": l2_ahead} | ({} if trace else {"tr_ptr": None})
    # claim_down (fifteenth round): the down GEMM's run-time items, the gate/up GEMM's zeroing of their counter
    consts |= {"CLAIM_MIN": 2, "SHARDS": 8} | ({"LOG_MAX_C": 3, "CLAIM": not gate_up, "CLAIM_RESET": gate_up} if claim
                                  else {"claim_ptr": None, "LOG_MAX_C": 0, "CLAIM": False, "CLAIM_RESET": False})
    if norm and not gate_up:  # the norm-combine in the down GEMM (twentieth round)
        ptrs |= {"ncnt_ptr": "*i32", "nrm_ptr": "*fp32", "wts_ptr": "*fp32", "g_ptr": "*fp32", "o_ptr": "*fp32"}
        consts |= {"NORM": True, "L_OUT": latent, "P_MAX": 64, "eps": 1e-6}  # eps a constant here (a float argument)
    else:
        consts |= {"ncnt_ptr": None, "nrm_ptr": None, "wts_ptr": None, "g_ptr": None, "o_ptr": None, "eps": 0.0}
    if prefetch and gate_up:  # the down weights' L2 prefetch (seventh round): a size's constexprs
        consts |= {"PF_WBYTES": latent * size // 2, "PF_SBYTES": latent * size // 32, "PF_MAX_OWN": prefetch}
    return compile_gluon(fn, ptrs, _INTS, consts, maxnreg, arch)


def compile_act(latent: int, size: int, bn: int = 32, bk: int = 256, arch: int = 90):
    """_ranked_act_kernel (``act_launch``, eleventh round) at these shapes: 128 columns a program, 8 parts at once."""
    fn = rk._ranked_act_kernel
    ptrs = {"ids_ptr": "*i64", "h_ptr": "*fp32", "act_ptr": "*bf16"}
    consts = {"I": size, "TOPK": 8, "P_P2": 64, "GRID_N": 2 * size // bn, "LOG_MAX": 3, "K_TILES": latent // bk,
              "WAVE_COST": 0, "BLOCK_N": bn, "COLS": 128, "UNROLL": 8, "GDC": arch >= 90}
    return compile_gluon(fn, ptrs, ("T", "expert_base", "n_local", "budget", "stride_hm", "stride_hk", "stride_am"),
                         consts, None, arch)


def resource_usage(compiled) -> str:
    out = cuobjdump(compiled, "--dump-resource-usage")
    m = re.search(r"REG:(\d+).*?STACK:(\d+).*?SHARED:(\d+).*?LOCAL:(\d+)", out)
    regs, stack, shared, local = m.groups() if m else ("?",) * 4
    ptx = compiled.asm["ptx"]
    return (f"regs {regs}, stack {stack}, local {local}, static shared {shared}, dyn shared "
            f"{compiled.metadata.shared}, cp.async {len(re.findall(r'cp[.]async[.]c[ag]', ptx))}, "
            f"bar.sync {ptx.count('bar.sync') + ptx.count('barrier.sync')}, "
            f"bulk prefetch {ptx.count('cp.async.bulk.prefetch')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default="0,2,3,4")
    ap.add_argument("--maxnreg", type=int, default=None)
    ap.add_argument("--latent", type=int, default=4096)
    ap.add_argument("--size", type=int, default=1024, help="the expert's intermediate size (a TP slice: 1024)")
    ap.add_argument("--trace", action="store_true", help="with the timer stamps (kernel.TRACE)")
    ap.add_argument("--act", action="store_true", help="the gate/up GEMM as act_launch compiles it, and the act "
                    "launch (_ranked_act_kernel; eleventh round)")
    ap.add_argument("--prefetch", type=int, default=0, help="PF_MAX_OWN: the gate/up GEMM's L2 prefetch of the down weights")
    ap.add_argument("--claim", action="store_true", help="the down GEMM with its items taken at run time "
                    "(claim_down), the gate/up GEMM zeroing their counter (fifteenth round)")
    ap.add_argument("--l2-ahead", type=int, default=0, help="L2_AHEAD: K tiles of an item past the ring's brought "
                    "into L2 before the wait (l2_ahead, seventeenth round)")
    ap.add_argument("--norm", action="store_true", help="the down GEMM with the norm-combine of its row blocks "
                    "(norm_down, twentieth round)")
    ap.add_argument("--loops", action="store_true", help="also each loop's SASS instructions by opcode (gemm_sass_check's "
                    "count; the K loop is the one with HMMA: one iteration a BLOCK_N x BLOCK_K tile)")
    args = ap.parse_args()
    print(f"triton {triton.__version__}")
    ok = True
    for gate_up in (True, False):
        for stages in (int(s) for s in args.stages.split(",")):
            label = f"{'gate_up' if gate_up else 'down':7} stages {stages} maxnreg {args.maxnreg}"
            try:
                ck = compile_ranked(gate_up, stages, args.maxnreg, args.latent, args.size, prefetch=args.prefetch,
                                    trace=args.trace, act=args.act and gate_up, claim=args.claim,
                                    l2_ahead=args.l2_ahead, norm=args.norm)
                print(f"{label}: {resource_usage(ck)}")
                if args.loops:
                    print(f"{'':7} {report(ck)}")
            except Exception as exc:  # noqa: BLE001 - report and go on
                ok = False
                print(f"{label}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    if args.act:
        try:
            print(f"act launch: {resource_usage(compile_act(args.latent, args.size))}")
        except Exception as exc:  # noqa: BLE001 - report and go on
            ok = False
            print(f"act launch: FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
