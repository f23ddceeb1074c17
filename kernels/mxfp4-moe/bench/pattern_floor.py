#!/usr/bin/env python3
"""Read floors of the ranked gate/up GEMM's access pattern, without its arithmetic (issue #18, seventeenth round).

    python3 bench/pattern_floor.py [--experts 8] [--row-blocks 256] [--k-tiles 16] [--copies 4]

The ranked gate/up GEMM at local batch 1 runs one one-warp program an item: a row block of an expert, its 16 K
tiles of 4 KB of weight words read one after the other (a contiguous 64 KB range of the tiled layout), 2,048 such
programs resident at once (16 an SM). Here a plain load-and-sum kernel reads the same bytes (``experts`` x
``row-blocks`` x ``k-tiles`` tiles of 4 KB, ``copies`` copies: one graph of one launch a copy, as the benchmark's
steady state, L2 flushed before each replay) in these orders, each at 1..3 loads in flight a program (Triton's
software pipelining, ``num_stages``):

- ``item``: program g reads tiles g x K .. g x K + K - 1 (the ranked GEMM's order: each program its own range);
- ``kmajor``: program g reads tile k x G + g at step k (the programs of one step read adjacent tiles);

and the benchmark's floor (``bench_mxfp4_moe.read_floor_us``'s kernel: a grid-stride walk over 16 KB chunks, the
best of 2..16 programs an SM x 4 or 8 warps). Printed: µs a copy and TB/s. If ``item`` reads as fast as the floor,
what the GEMM loses to its floor is not where its reads go; if ``kmajor`` is faster, the tiled layout's order is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mxfp4_moe import CHUNK_BYTES, floor_times, graph_time_us  # noqa: E402

TILE_INTS = 1024  # a 32 x 256 MXFP4 tile's weight words: 4 KB


@triton.jit
def _walk_kernel(base_ptr, out_ptr, G, K_TILES: tl.constexpr, KMAJOR: tl.constexpr, STAGES: tl.constexpr,
                 TILE: tl.constexpr):
    """Program g: K_TILES tiles of TILE int32, tile g x K_TILES + k (KMAJOR: k x G + g) at step k; their sum."""
    g = tl.program_id(0)
    acc = tl.zeros([TILE], tl.int32)
    for k in tl.range(0, K_TILES, num_stages=STAGES):
        if KMAJOR:
            t = k * G + g
        else:
            t = g * K_TILES + k
        acc += tl.load(base_ptr + t.to(tl.int64) * TILE + tl.arange(0, TILE))
    tl.store(out_ptr + g, tl.sum(acc, axis=0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--row-blocks", type=int, default=256, help="an expert's row blocks (2 x 4096 / 32)")
    ap.add_argument("--k-tiles", type=int, default=16, help="K tiles an item (4096 / 256)")
    ap.add_argument("--copies", type=int, default=4)
    args = ap.parse_args()
    dev = torch.cuda.get_device_properties(0)
    items = args.experts * args.row_blocks
    n_int = items * args.k_tiles * TILE_INTS
    copies = [torch.randint(-2**31, 2**31 - 1, (n_int,), dtype=torch.int32, device="cuda") for _ in range(args.copies)]
    nbytes = n_int * 4
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs, torch {torch.__version__}, triton {triton.__version__}")
    print(f"{items} items x {args.k_tiles} tiles of 4 KB = {nbytes / 1e6:.1f} MB a copy, {args.copies} copies")
    out = torch.empty(max(items, 64 * dev.multi_processor_count), dtype=torch.int32, device="cuda")

    def show(label: str, us: float) -> None:
        print(f"{label:34} {us:8.2f} us  {nbytes / us / 1e6:6.3f} TB/s")

    for kmajor in (False, True):
        for stages in (1, 2, 3):
            for warps in (1, 2):
                def fn(kmajor=kmajor, stages=stages, warps=warps):
                    for c in copies:
                        _walk_kernel[(items,)](c, out, items, K_TILES=args.k_tiles, KMAJOR=kmajor, STAGES=stages,
                                               TILE=TILE_INTS, num_warps=warps)
                show(f"{'kmajor' if kmajor else 'item'} stages {stages} warps {warps}",
                     graph_time_us(fn, rep_ms=100) / len(copies))
    tables = [torch.arange(c.data_ptr(), c.data_ptr() + nbytes, CHUNK_BYTES, dtype=torch.int64, device="cuda")
              for c in copies]
    for us, cfg in floor_times(tables, dev.multi_processor_count):
        show(f"floor per_sm {cfg['per_sm']} warps {cfg['warps']}", us)
    return 0


if __name__ == "__main__":
    sys.exit(main())
