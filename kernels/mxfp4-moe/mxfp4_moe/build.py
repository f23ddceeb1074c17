"""Build (compile and cache) the kernels: ``python -m mxfp4_moe.build [--variant muse] [--require]``.

Triton compiles a kernel the first time it runs with a given set of compile-time constants and keeps the
result in its cache (``$TRITON_CACHE_DIR``, default ``~/.triton/cache``). This runs each kernel once for
every compile key serving uses (the token tiles of batches 1-8, 9-16 and 17-32) at the variant's shapes,
in the layout ``glue.prepare_experts`` gives the serving path here (the gluon kernels' tiled layout, else
the mma layout), so that the first decode step compiles nothing. Where the toolchain is missing it says why and exits 0
(exit 3 with ``--require``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mxfp4_moe.build", description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", help="variant name or file (repeatable; default muse)")
    ap.add_argument("--require", action="store_true", help="fail (exit 3) when no GPU or Triton is present")
    args = ap.parse_args(argv)

    from .glue import detect_toolchain
    present, info = detect_toolchain()
    if not present:
        print(f"mxfp4-moe build: skipped, {info}")
        return 3 if args.require else 0

    import torch

    from .glue import kernel_layout
    from .kernel import mxfp4_moe_experts
    from .reference import random_expert_weights
    from .variants import load_variant

    cache = os.environ.get("TRITON_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".triton", "cache"))
    print(f"mxfp4-moe build: {info}; Triton cache {cache}")
    for name in args.variant or ["muse"]:
        v = load_variant(name)
        t0 = time.perf_counter()
        # in the layout glue.prepare_experts gives the serving path
        ex = kernel_layout(random_expert_weights(v.local_experts, v.latent_size, v.expert_size, device="cuda"))
        what = f"gluon kernels, tiles {ex.tiles}" if ex.layout == "tiled" else "tl.dot kernels, mma decode"
        print(f"mxfp4-moe build: variant {v.name}: {what}")
        for tokens in (1, 9, 17):  # the token tiles 8, 16 and 32 (the mma kernels: 16, 16, 32)
            x = torch.randn(tokens, v.latent_size, device="cuda").to(torch.bfloat16)
            ids = torch.stack([torch.randperm(v.local_experts, device="cuda")[:v.top_k] for _ in range(tokens)])
            w = torch.full((tokens, v.top_k), 1.0 / v.top_k, device="cuda")
            out = mxfp4_moe_experts(x, ids, w, ex)
            torch.cuda.synchronize()
            if not bool(torch.isfinite(out).all()):
                print(f"mxfp4-moe build: variant {v.name}: non-finite output at batch {tokens}", file=sys.stderr)
                return 1
        print(f"mxfp4-moe build: variant {v.name} (latent {v.latent_size}, expert {v.expert_size}, "
              f"top-{v.top_k}, {v.local_experts} local experts) compiled in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
