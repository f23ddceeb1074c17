"""The run list's planning launch by itself (issue #18, eighth round): kernel._plan_runs_kernel (one 4-warp program)
against _plan_lanes_kernel (one slot a thread), per launch in a CUDA graph of N back-to-back launches (with and
without programmatic dependent launch), and the device time per launch (torch.profiler), at batch 9..32 of top-8
for 32 and 128 local experts."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402

from mxfp4_moe import kernel as K  # noqa: E402


def main() -> int:
    n = 50
    g = torch.Generator().manual_seed(1)
    for tokens in (9, 16, 32):
        for base, n_local in ((0, 32), (0, 128)):
            ids = torch.stack([torch.randperm(256, generator=g)[:8] for _ in range(tokens)]).to("cuda", torch.int32)

            class Ex:
                expert_base, num_local = base, n_local
            row = []
            for lanes in (False, True):
                for pdl in (False, True):
                    K.plan_runs(ids, Ex, 8, gdc=True, pdl=pdl, lanes=lanes)
                    torch.cuda.synchronize()
                    graph = torch.cuda.CUDAGraph()
                    s = torch.cuda.Stream()
                    with torch.cuda.stream(s):
                        with torch.cuda.graph(graph, stream=s):
                            for _ in range(n):
                                K.plan_runs(ids, Ex, 8, gdc=True, pdl=pdl, lanes=lanes)
                    torch.cuda.synchronize()
                    us = triton.testing.do_bench(graph.replay, warmup=20, rep=200) * 1e3 / n
                    row.append(f"{'lanes' if lanes else 'runs'}{'+pdl' if pdl else ''} {us:.2f}")
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(20):
                        K.plan_runs(ids, Ex, 8, lanes=lanes)
                    torch.cuda.synchronize()
                ev = [e for e in prof.events() if "plan" in e.name]
                dev = sum(e.device_time for e in ev) / max(1, len(ev))
                row.append(f"{'lanes' if lanes else 'runs'} device {dev:.2f}")
            print(f"plan batch {tokens} n_local {n_local}: us per launch in a graph of {n}: " + ", ".join(row),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
