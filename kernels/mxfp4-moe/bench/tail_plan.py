#!/usr/bin/env python3
"""Which split of the last wave's items (``tail_ks``, twenty-sixth and twenty-seventh rounds) each run-list GEMM of
the benchmark's points takes, worked out on the CPU from the benchmark's own draws (no GPU needed).

    python3 bench/tail_plan.py [--seed 1] [--batches 9,16,24] [--bench-batches 1,4,32] [--sms 132] [--tail-ks 4]

The draws are bench/bench_mxfp4_moe.py's: its routings (local, ep8 and the variant's served split) and
``--bench-batches`` walk one generator from ``--seed``, so run this with the benchmark's ``--batches`` as
``--bench-batches`` to read the benchmark's points (the batches shown are those of 9-32 among them, or
``--batches`` where given, which then is also the walk). Per point: the local experts routed, the runs of at most
16 tokens (the plan's), each GEMM's items (runs x row blocks: 2 I / 32 for gate/up, L / 32 for down), the tail t
past the last full wave of ``--sms`` x the programs resident at 96 registers, and the parts the device takes
(gluon_kernel._gemm_kernel's TAIL_KS rule): tail_ks where t x tail_ks fit one wave, else in the gate/up GEMM 2
where t is at most 2/5 of a wave, else none ("whole"). The grid's room for the extra programs is not modelled (the
benchmark's grids hold it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_mxfp4_moe import card_shape, routing  # noqa: E402

from mxfp4_moe.gluon_kernel import resident_per_sm  # noqa: E402
from mxfp4_moe.variants import load_variant  # noqa: E402


def tail_parts(items: int, slots: int, tail_ks: int, gate_up: bool) -> tuple[int, int]:
    """(t, parts) of a GEMM of ``items`` whole items on ``slots`` resident programs: the tail t past the last full
    wave and the K parts each of its items takes (0 where they are taken whole, t 0 where there is no tail)."""
    t = items % slots
    if items <= slots or not t:
        return 0, 0
    if t * tail_ks <= slots:
        return t, tail_ks
    if gate_up and 5 * t <= 2 * slots:
        return t, 2
    return t, 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", default="muse")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batches", help="the points (and the walk); default: --bench-batches' from 9 up")
    ap.add_argument("--bench-batches", default="1,4,32", help="the benchmark's --batches (the draws' sequence)")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--tail-ks", type=int, default=4, choices=(2, 4))
    args = ap.parse_args()
    v = load_variant(args.variant)
    walk = [int(b) for b in (args.batches or args.bench_batches).split(",")]
    slots = args.sms * resident_per_sm(96)
    g = torch.Generator().manual_seed(args.seed)
    print(f"variant {v.name}, seed {args.seed}, {slots} resident programs ({args.sms} SMs x {resident_per_sm(96)})")
    for kind in ["local", "ep8", v.served_routing]:
        n_local, isize = card_shape(kind, v)
        for batch in walk:
            ids, _ = routing(kind, batch, v, g)
            torch.randn(batch, v.latent_size, generator=g)  # (the benchmark's activations: the same walk)
            if batch < 9:
                continue  # (batches 1-8 run the ranked kernels, no run list)
            local = ids[(ids >= 0) & (ids < n_local)]
            counts = torch.bincount(local.flatten(), minlength=n_local)
            runs = int(sum(-(-int(c) // 16) for c in counts))
            cols = []
            for name, items, gate_up in (("gate/up", runs * (2 * isize // 32), True),
                                         ("down", runs * (v.latent_size // 32), False)):
                t, parts = tail_parts(items, slots, args.tail_ks, gate_up)
                how = "no tail" if not t else (f"{parts} parts" if parts else "whole")
                cols.append(f"{name} {items} items, t {t} ({t / slots:.0%} of a wave): {how}")
            print(f"{kind:7s} batch {batch:2d}: {int((counts > 0).sum())} experts, {runs} runs; " + "; ".join(cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
