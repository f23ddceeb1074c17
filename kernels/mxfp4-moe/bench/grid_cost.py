#!/usr/bin/env python3
"""What a grid of one-warp programs costs by itself on this GPU: the time of N programs that end at once
(or read one id first, as an idle GEMM program does), replayed in a CUDA graph of 8 launches back to back.

    python3 bench/grid_cost.py [--programs 1056,2112,4224,8448,16896,33792,67584]

The gluon GEMMs launch one program per (slot, row block, K part); most are idle at EP shares (their slot's
expert is on another card). Prints per grid size the microseconds per launch and per 1000 programs.
"""

from __future__ import annotations

import argparse
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def _idle_kernel(ids_ptr, out_ptr, READ: tl.constexpr):
    if READ:
        e = tl.load(ids_ptr + tl.program_id(0) % 64)
        if e == -12345:  # never: the program ends after the load, as a GEMM program that owns no expert
            tl.store(out_ptr, e)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default="1056,2112,4224,8448,16896,33792,67584")
    ap.add_argument("--launches", type=int, default=8)
    args = ap.parse_args()
    ids = torch.arange(64, dtype=torch.int32, device="cuda")
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    for read in (False, True):
        for n in (int(p) for p in args.programs.split(",")):
            _idle_kernel[(n,)](ids, out, READ=read, num_warps=1)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(args.launches):
                    _idle_kernel[(n,)](ids, out, READ=read, num_warps=1)
            us = do_bench(g.replay, warmup=25, rep=200) * 1000 / args.launches
            print(f"{'read id' if read else 'empty  '} programs {n:6d}: {us:6.2f} us per launch, "
                  f"{us / n * 1000:5.2f} us per 1000 programs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
