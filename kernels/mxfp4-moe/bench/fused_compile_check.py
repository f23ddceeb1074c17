#!/usr/bin/env python3
"""Compile the fused persistent kernel (fused_kernel, issue #18 eighth round A) for sm_90 without a GPU; print
registers, spills, shared memory and the resident one-warp programs an SM.

    python bench/fused_compile_check.py [--size 4096,1024] [--stages 2,3] [--down-tiles 1,2] [--maxnreg 96]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from ranked_compile_check import resource_usage  # noqa: E402
from sm90_compile import compile_gluon  # noqa: E402

from mxfp4_moe import fused_kernel as fk  # noqa: E402
from mxfp4_moe.gluon_kernel import layouts  # noqa: E402

_INTS = ("T", "expert_base", "n_local", "G", "z1_numel", "z2_numel", "stride_xm", "stride_w1e", "stride_s1e",
         "stride_actm", "stride_a32m", "stride_hm", "stride_hk", "stride_w2e", "stride_s2e", "stride_ym")


def compile_fused(stages: int, down_tiles: int, maxnreg: int | None, latent: int, size: int, bn: int = 32,
                  bk: int = 256, arch: int = 90, trace: bool = False):
    fn = fk._fused_kernel
    ptrs = {"x_ptr": "*i32", "ids_ptr": "*i64", "w1_ptr": "*i32", "s1_ptr": "*u8", "act_ptr": "*bf16", "a32_ptr": "*i32",
            "h_ptr": "*fp32", "cnt_ptr": "*i32", "w2_ptr": "*i32", "s2_ptr": "*u8", "y_ptr": "*fp32",
            "bar_ptr": "*i32", "z1_ptr": "*fp32", "z2_ptr": "*fp32", "tr_ptr": "*i64"}
    lay = layouts(bn, bk, 8)
    consts = {"L": latent, "I": size, "TOPK": 8, "TOPK_P2": 8, "P_P2": 64, "BLOCK_M": 8, "BN1": bn, "BK1": bk,
              "BN2": bn, "BK2": bk, "LOG_MAX1": 3, "LOG_MAX2": 4, "W5A": lay["w5"], "X4A": lay["x4"],
              "S3A": lay["s3"], "W5B": lay["w5"], "X4B": lay["x4"], "S3B": lay["s3"], "ZERO_BLOCK": 128,
              "GDC": arch >= 90, "STAGES": stages, "DOWN_TILES": down_tiles, "EARLY": False, "BAR_GROUP": 32, "PF_REST": True, "GROUP_SPIN": True,
              "TRACE": trace} | ({} if trace else {"tr_ptr": None})
    return compile_gluon(fn, ptrs, _INTS, consts, maxnreg, arch, div16_extra=_INTS[6:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default="2,3")
    ap.add_argument("--down-tiles", default="1,2")
    ap.add_argument("--maxnreg", type=int, default=96)
    ap.add_argument("--latent", type=int, default=4096)
    ap.add_argument("--size", default="4096,1024")
    ap.add_argument("--trace", action="store_true", help="with the timer stamps (kernel.TRACE)")
    args = ap.parse_args()
    print(f"triton {triton.__version__}")
    ok = True
    for size in (int(s) for s in args.size.split(",")):
        for stages in (int(s) for s in args.stages.split(",")):
            for dt in (int(s) for s in args.down_tiles.split(",")):
                label = f"size {size} stages {stages} down_tiles {dt} maxnreg {args.maxnreg}"
                try:
                    ck = compile_fused(stages, dt, args.maxnreg or None, args.latent, size, trace=args.trace)
                    import re
                    from sm90_compile import cuobjdump
                    m = re.search(r"REG:(\d+)", cuobjdump(ck, "--dump-resource-usage"))
                    res = fk.resident(int(m.group(1)), int(ck.metadata.shared)) if m else "?"
                    print(f"{label}: {resource_usage(ck)}, resident {res} an SM")
                except Exception as exc:  # noqa: BLE001 - report and go on
                    ok = False
                    print(f"{label}: FAILED {type(exc).__name__}: {str(exc)[:1500]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
