#!/usr/bin/env python3
"""Run one expert-kernel call shape repeatedly, for a profiler (Nsight Compute) to attach to.

    ncu --clock-control none --set full -k regex:_down_kernel -s 4 -c 2 \\
        python3 bench/profile_case.py [--batch 1] [--routing local] [--decode mma] [--config JSON] [--calls 3]

Builds the muse variant's local experts (random weights in the checkpoint layout, re-laid out once for the
`mma` decodes), routes `--batch` tokens (`local`: top-k among the card's experts; `ep8`: among all), checks
the result against the fp32 reference once, then makes `--calls` more calls. Prints nothing timed: timing
is bench_mxfp4_moe.py's job.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from mxfp4_moe import reference as R  # noqa: E402
from mxfp4_moe.kernel import DECODE_LAYOUT, mxfp4_moe_experts  # noqa: E402
from mxfp4_moe.variants import load_variant  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="muse")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--routing", default="local", choices=("local", "ep8"))
    ap.add_argument("--decode", default="mma")
    ap.add_argument("--config", help="launch configuration as JSON (kernel.DEFAULT_CONFIG's form)")
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    v = load_variant(args.variant)
    g = torch.Generator(device="cuda").manual_seed(0)
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, generator=g, device="cuda")
    ex_k = ex.to_layout(DECODE_LAYOUT[args.decode])
    gc = torch.Generator().manual_seed(1)
    n = v.local_experts if args.routing == "local" else v.experts
    ids, w = R.route(torch.randn(args.batch, n, generator=gc), v.top_k)
    ids, w = ids.cuda(), w.cuda()
    x = torch.randn(args.batch, v.latent_size, generator=gc).to(torch.bfloat16).cuda()
    conf = json.loads(args.config) if args.config else None
    out = mxfp4_moe_experts(x, ids, w, ex_k, decode=args.decode, config=conf)
    ref = R.moe_experts_reference(x, ids, w, ex)
    print(f"rel err {((out - ref).norm() / ref.norm()).item():.2e}")
    for _ in range(args.calls):
        mxfp4_moe_experts(x, ids, w, ex_k, decode=args.decode, config=conf)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
