# SPDX-License-Identifier: Apache-2.0
"""Time vLLM's PyTorch top-k/top-p path: full vocabulary sort vs top-k subset.

Runs against whatever vllm the interpreter imports. With the topk-subset-sampler
fix applied, `apply_top_k_top_p` is timed twice: as patched, and with the
module switch `TOP_K_SUBSET_MAX_FRACTION = 0`, which sends every call to the
release's full sort (`apply_top_k_top_p_sorted`, the v0.30.0 code unchanged).
Without the fix only the full sort is timed. Both results are also compared.

    VLLM_TARGET_DEVICE=cpu python bench_topk.py --batch 1 4 32 --runs 10
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from vllm.v1.sample.ops import topk_topp_sampler as tts


def time_calls(logits, k, p, runs, warmup):
    """Median ms per apply_top_k_top_p call, and the last output."""
    times = []
    out = None
    for i in range(warmup + runs):
        x = logits.clone()  # the function works in place
        start = time.perf_counter()
        out = tts.apply_top_k_top_p(x, k, p)
        elapsed = time.perf_counter() - start
        if i >= warmup:
            times.append(elapsed * 1e3)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=202_048)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4, 32])
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--top-p", type=float, default=0.9, help="<= 0 for top-k only")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--scale", type=float, default=3.0, help="logits ~ N(0, scale^2)"
    )
    parser.add_argument(
        "--bf16-rounded",
        action="store_true",
        help="round logits to bf16 (as computed by a bf16 model; many ties)",
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    has_subset = hasattr(tts, "TOP_K_SUBSET_MAX_FRACTION")
    print(f"vllm module: {tts.__file__}")
    print(
        f"Triton path: {tts.HAS_TRITON}; subset path available: {has_subset}; "
        f"torch threads: {torch.get_num_threads()}"
    )
    print(
        f"vocab={args.vocab} top_k={args.top_k} "
        f"top_p={args.top_p if args.top_p > 0 else None} "
        f"bf16_rounded={args.bf16_rounded} median of {args.runs} runs"
    )
    print(
        f"{'batch':>6} {'full sort ms':>13} {'subset ms':>10} "
        f"{'speed-up':>9} {'identical':>9}"
    )

    gen = torch.Generator().manual_seed(args.seed)
    for batch in args.batch:
        logits = torch.randn(batch, args.vocab, generator=gen) * args.scale
        if args.bf16_rounded:
            logits = logits.to(torch.bfloat16).float()
        k = torch.full((batch,), args.top_k, dtype=torch.int32)
        p = (
            torch.full((batch,), args.top_p, dtype=torch.float32)
            if args.top_p > 0
            else None
        )

        if has_subset:
            saved = tts.TOP_K_SUBSET_MAX_FRACTION
            tts.TOP_K_SUBSET_MAX_FRACTION = 0.0  # force the full sort
            try:
                full_ms, full_out = time_calls(logits, k, p, args.runs, args.warmup)
            finally:
                tts.TOP_K_SUBSET_MAX_FRACTION = saved
            sub_ms, sub_out = time_calls(logits, k, p, args.runs, args.warmup)
            same = torch.equal(full_out, sub_out)
            print(
                f"{batch:>6} {full_ms:>13.2f} {sub_ms:>10.2f} "
                f"{full_ms / sub_ms:>8.1f}x {same!s:>9}"
            )
        else:
            full_ms, _ = time_calls(logits, k, p, args.runs, args.warmup)
            print(f"{batch:>6} {full_ms:>13.2f} {'-':>10} {'-':>9} {'-':>9}")


if __name__ == "__main__":
    main()
