#!/usr/bin/env python3
"""Which split of the last wave's items (``tail_ks``, twenty-sixth and twenty-seventh rounds) each run-list GEMM of
the benchmark's points takes, worked out on the CPU from the benchmark's own draws (no GPU needed).

    python3 bench/tail_plan.py [--seed 1] [--batches 9,16,24] [--bench-batches 1,4,32] [--sms 132] [--tail-ks 4]

The draws are bench/bench_mxfp4_moe.py's: its routings (local, ep8 and the variant's served split) and
``--bench-batches`` walk one generator from ``--seed``, so run this with the benchmark's ``--batches`` as
``--bench-batches`` to read the benchmark's points (those of 9-32 tokens among them are shown; ``--batches``, where
given, is the walk instead). Per point: the local experts routed, the runs of at most
16 tokens (the plan's), each GEMM's items (runs x row blocks: 2 I / 32 for gate/up, L / 32 for down), the tail t
past the last full wave of ``--sms`` x the programs resident at 96 registers, and the parts the device takes
(gluon_kernel._gemm_kernel's TAIL_KS rule, as gluon_kernel.tail_split gives it): tail_ks where t x tail_ks fit one wave, else in the gate/up GEMM 2
where t is at most 2/5 of a wave, else none ("whole"); where 4 do not divide a GEMM's K tiles (its load-time tile's
K, reference.default_tiles) it takes at most 2, and none where 2 do not (the host's rule). The grid's room for the
extra programs is not modelled (the benchmark's grids hold it). Batches over 32 run in chunks of 32
(kernel.MAX_TOKENS) and are not modelled; batches 1-8 run the ranked kernels (no run list)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_mxfp4_moe import card_shape, routing  # noqa: E402

from mxfp4_moe.gluon_kernel import resident_per_sm, tail_most, tail_split  # noqa: E402
from mxfp4_moe.kernel import MAX_TOKENS  # noqa: E402
from mxfp4_moe.reference import default_tiles  # noqa: E402
from mxfp4_moe.variants import load_variant  # noqa: E402


def _batches(text: str) -> list[int]:
    """A comma-separated list of batches (tokens, 1 or more) for argparse."""
    try:
        out = [int(b) for b in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma-separated list of token counts, got {text!r}") from None
    if any(b < 1 for b in out):
        raise argparse.ArgumentTypeError(f"batches are 1 token or more, got {text!r}")
    return out


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"1 or more, got {n}")
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", default="muse", help="a variant's name (variants/) or a path to its TOML")
    ap.add_argument("--seed", type=int, default=1, help="the benchmark's --seed (0 to 2**63 - 1)")
    ap.add_argument("--batches", type=_batches, help="the points (and the walk); default: --bench-batches' from 9 up")
    ap.add_argument("--bench-batches", type=_batches, default=[1, 4, 32],
                    help="the benchmark's --batches (the draws' sequence)")
    ap.add_argument("--sms", type=_positive, default=132, help="the card's SMs (132: H100 and H200)")
    ap.add_argument("--tail-ks", type=int, default=4, choices=(2, 4))
    args = ap.parse_args()
    if not 0 <= args.seed < 2 ** 63:
        ap.error(f"--seed must be 0 to 2**63 - 1, got {args.seed}")
    try:
        v = load_variant(args.variant)
    except (OSError, ValueError) as exc:
        ap.error(f"--variant: {exc}")
    walk = args.batches or args.bench_batches
    if not any(9 <= b <= MAX_TOKENS for b in walk):
        ap.error(f"no batch of 9 to {MAX_TOKENS} tokens in {','.join(map(str, walk))}: the run list (and its tail "
                 f"split) runs there; batches 1-8 run the ranked kernels, larger ones in chunks of {MAX_TOKENS}")
    slots = args.sms * resident_per_sm(96)
    (_, bk1), (_, bk2) = default_tiles(v.latent_size, v.expert_size)
    g = torch.Generator().manual_seed(args.seed)
    print(f"variant {v.name}, seed {args.seed}, {slots} resident programs ({args.sms} SMs x {resident_per_sm(96)})")
    for kind in ["local", "ep8", v.served_routing]:
        n_local, isize = card_shape(kind, v)
        for batch in walk:
            ids, _ = routing(kind, batch, v, g)
            torch.randn(batch, v.latent_size, generator=g)  # (the benchmark's activations: the same walk)
            if not 9 <= batch <= MAX_TOKENS:
                continue  # (batches 1-8 run the ranked kernels, no run list; larger ones in chunks: not modelled)
            local = ids[(ids >= 0) & (ids < n_local)]
            counts = torch.bincount(local.flatten(), minlength=n_local)
            runs = int(sum(-(-int(c) // 16) for c in counts))
            cols = []
            for name, items, gate_up, k_tiles in (("gate/up", runs * (2 * isize // 32), True, v.latent_size // bk1),
                                                  ("down", runs * (v.latent_size // 32), False, isize // bk2)):
                t, parts = tail_split(items, slots, tail_most(args.tail_ks, k_tiles), gate_up)
                if not t:
                    cols.append(f"{name} {items} items: no tail (whole waves, or one wave or less)")
                    continue
                cols.append(f"{name} {items} items, t {t} ({t / slots:.0%} of a wave): "
                            f"{f'{parts} parts' if parts else 'whole'}")
            print(f"{kind:7s} batch {batch:2d}: {int((counts > 0).sum())} experts, {runs} runs; " + "; ".join(cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
