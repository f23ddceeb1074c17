#!/usr/bin/env python3
"""Run one expert-kernel call shape repeatedly, for a profiler (Nsight Compute) to attach to.

    ncu --clock-control none --set full -k regex:_down_kernel -s 4 -c 2 \\
        python3 bench/profile_case.py [--batch 1] [--routing local] [--decode gluon] [--config JSON] [--over JSON]
                                    [--calls 3]

Builds the muse variant's local experts (random weights in the checkpoint layout, re-laid out once for the
decode), routes `--batch` tokens (`local`: top-k among the card's experts; `epX` / `epXtpY`, e.g. ep8,
ep2tp4: among all, the card holding its EP share, each expert sliced to 1/Y of its intermediate size, in
partials mode as the benchmark runs it), checks the result against the fp32 reference once, then makes
`--calls` more calls. Prints nothing timed: timing is bench_mxfp4_moe.py's job.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from mxfp4_moe import reference as R  # noqa: E402
from mxfp4_moe.kernel import DECODE_LAYOUT, default_config, mxfp4_moe_experts  # noqa: E402
from mxfp4_moe.variants import load_variant, split_routing  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="muse")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--routing", default="local", help="local, epX or epXtpY (e.g. ep8, ep2tp4)")
    ap.add_argument("--decode", default="gluon")
    ap.add_argument("--config", help="launch configuration as JSON (kernel.DEFAULT_CONFIG's form)")
    ap.add_argument("--over", help="JSON overrides on the decode's default configuration (kernel.default_config), "
                    "e.g. '{\"ranked_carveout\": 100}'; with --config, on that one")
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    v = load_variant(args.variant)
    g = torch.Generator(device="cuda").manual_seed(0)
    split = (1, 1) if args.routing == "local" else split_routing(args.routing)
    if split is None or v.experts % split[0] or v.expert_size % (32 * split[1]):
        ap.error(f"--routing {args.routing!r}: local, epX or epXtpY with X dividing {v.experts} and 32Y "
                 f"dividing {v.expert_size}")
    n_local = v.local_experts if args.routing == "local" else v.experts // split[0]
    partials = split[1] > 1
    ex = R.random_expert_weights(n_local, v.latent_size, v.expert_size // split[1], generator=g, device="cuda")
    ex_k = ex.to_layout(DECODE_LAYOUT[args.decode])
    gc = torch.Generator().manual_seed(1)
    n = v.local_experts if args.routing == "local" else v.experts
    ids, w = R.route(torch.randn(args.batch, n, generator=gc), v.top_k)
    ids, w = ids.cuda(), w.cuda()
    x = torch.randn(args.batch, v.latent_size, generator=gc).to(torch.bfloat16).cuda()
    conf = json.loads(args.config) if args.config else None
    if args.over:
        conf = {**(conf or default_config(args.decode)), **json.loads(args.over)}
    out = mxfp4_moe_experts(x, ids, w, ex_k, decode=args.decode, config=conf, partials=partials)
    ref = (R.moe_expert_partials_reference if partials else R.moe_experts_reference)(x, ids, w, ex)
    print(f"rel err {((out - ref).norm() / ref.norm()).item():.2e}")
    for _ in range(args.calls):
        mxfp4_moe_experts(x, ids, w, ex_k, decode=args.decode, config=conf, partials=partials)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
