#!/usr/bin/env python3
"""Where a decode step's time goes, program by program: the ranked and fused kernels (batches 1-8) compiled
with timer stamps (kernel.TRACE; ``%globaltimer``, one nanosecond clock for every SM), run as the benchmark's
steady figure runs them (a CUDA graph of ``--layers`` calls back to back, each on its own copy of the weights,
L2 flushed before the replay), and each launch's programs summarized.

    python3 bench/trace_case.py [--routing local,ep8,ep2tp4] [--batches 1,4] [--seed 1] [--layers 4]
                                [--ab '{"fused": {"fused_few": true}}'] [--json out.json]

The draws are the benchmark's: ``--bench-routing`` and ``--bench-batches`` (its defaults: local,ep8,ep2tp4 and
1,4,32) and ``--seed`` walk its sequence of routings, so "ep8 b1" is the point of the benchmark's table (run the
benchmark with its default routings and batches to compare). Per launch (times in µs
from the first program start of the graph's first layer; medians over the programs that took an item):

- ``start``: the first, median and last program's start; ``ranked``: the slots ranked (the split known);
- ``wait``: past the wait on the previous kernel (programmatic dependent launch); ``loop``: the K loop done;
  ``stored``: the item's output written (the split's fix-up included, for the programs that did it);
- ``closed``: past the closing wait (every program waits for its predecessor before it ends); ``end``: the last
  program's end;
- ``by SM`` (the ranked and fused GEMMs, whose rows hold each program's SM: fourteenth round): programs an SM, each
  SM's last K loop end (min / median / max), first to last within an SM (median), the last by programs an SM.

Per layer: ``period``, the time between this layer's first program past its wait and the next layer's (a
decode step's per-layer time). The stamps cost a few instructions and stores a program: the figures are the
shape of the time, the benchmark's are the time. Needs an NVIDIA GPU of compute capability 9.0 (the stamps and
the waits); prints the timer's resolution (the smallest step between two stamps)."""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_mxfp4_moe import card_shape, clone_experts, routing  # noqa: E402

from mxfp4_moe import kernel as K  # noqa: E402
from mxfp4_moe import reference as R  # noqa: E402
from mxfp4_moe.kernel import DECODE_LAYOUT, default_config, mxfp4_moe_experts  # noqa: E402
from mxfp4_moe.variants import load_variant, split_routing  # noqa: E402

# slots of a program's row (ranked_kernel / fused_kernel docstrings); fused: 5 zeroed, 6 past the barrier, 7 end
RANKED = {"start": 0, "ranked": 1, "wait": 2, "loop": 3, "stored": 4, "closed": 5, "end": 6}
FUSED = {"start": 0, "ranked": 1, "wait": 2, "loop": 3, "stored": 4, "zeroed": 5, "barrier": 6, "end": 7}


def summarize(name: str, buf: torch.Tensor, t0: int) -> dict:
    """One launch's trace buffer [programs, 32] as µs from t0 (the timer's stamps, slots 0-7): per stamp the
    min / median / max over the programs that took an item (slot 8, the split, nonzero; fused: every program),
    the start over all; and ``cycles``: per step between two stamps, the median of the SM cycle counter's
    difference (slots 16-23; one SM's clock, so exact within a program where the timer ticks coarsely)."""
    rows = buf.cpu().tolist()
    slots = FUSED if name == "fused" else RANKED
    working = [r for r in rows if name == "fused" or r[8] > 0]
    out: dict = {"name": name, "programs": len(rows), "working": len(working),
                 "splits": sorted({r[8] for r in working} | ({r[10] for r in working} if name == "fused" else set())),
                 "fixups": sum(1 for r in working if r[9] == 1)}
    for label, s in slots.items():
        vals = [(r[s] - t0) / 1e3 for r in (rows if label == "start" else working) if r[s] > 0]
        if vals:
            out[label] = {"min": min(vals), "med": statistics.median(vals), "max": max(vals), "n": len(vals)}
    by_sm: dict[int, list[float]] = {}  # the K loop's end of each program that took an item, by its SM (slot 15)
    for r in working:
        if r[15] > 0 and r[3] > 0:
            by_sm.setdefault(r[15] - 1, []).append((r[3] - t0) / 1e3)
    if by_sm:
        last = {sm: max(v) for sm, v in by_sm.items()}
        counts = {sm: len(v) for sm, v in by_sm.items()}
        out["by_sm"] = {"sms": len(by_sm), "programs": sorted(counts.values()),
                        "last_loop": {"min": min(last.values()), "med": statistics.median(last.values()),
                                      "max": max(last.values())},
                        "within": statistics.median(last[sm] - min(v) for sm, v in by_sm.items()),
                        "last_by_programs": {n: statistics.median(t for sm, t in last.items() if counts[sm] == n)
                                             for n in sorted(set(counts.values()))}}
    fix = [(r[4] - r[3]) / 1e3 for r in working if r[9] == 1 and r[4] > 0 and r[3] > 0]
    if fix:
        out["fixup_store_med"] = statistics.median(fix)
    order = list(slots.items())
    out["cycles"] = {}
    for (a, sa), (b, sb) in zip(order, order[1:]):
        d = [r[16 + sb] - r[16 + sa] for r in working if r[16 + sa] > 0 and r[16 + sb] > 0]
        if d:
            out["cycles"][f"{a}->{b}"] = statistics.median(d)
    return out


def resolution_ns(bufs: list[torch.Tensor]) -> int:
    stamps = sorted({v for b in bufs for v in b[:, :8].flatten().tolist() if v > 0})  # the timer's
    steps = [b - a for a, b in zip(stamps, stamps[1:]) if b > a]
    return min(steps) if steps else 0


def trace_point(x, ids, w, copies, conf, partials: bool, replays: int) -> tuple[list[list[dict]], int, list[float]]:
    """Capture one graph of len(copies) traced calls; replay it ``replays`` times (L2 flushed before each); the
    replay whose span (first start to last end) is the median, summarized per layer; the timer's resolution;
    every replay's span (µs)."""
    K.TRACE = []
    try:
        calls = [(lambda e=e: mxfp4_moe_experts(x, ids, w, e, decode="gluon", config=conf, partials=partials))
                 for e in copies]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for c in calls:
                c()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        K.TRACE = []
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for c in calls:
                c()
        entries = list(K.TRACE)
    finally:
        K.TRACE = None
    if not entries or len(entries) % len(copies):
        raise RuntimeError(f"{len(entries)} traced launches for {len(copies)} layers: this point runs no ranked or "
                           "fused kernel (batches 1-8 of the gluon decode only)")
    per_layer = len(entries) // len(copies)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    runs = []
    for _ in range(replays):
        for _, b in entries:
            b.zero_()
        flush.fill_(1)
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        bufs = [b.clone() for _, b in entries]
        t0 = min(int(b[:, 0][b[:, 0] > 0].min()) for b in bufs[:per_layer])
        t1 = max(int(b[:, :8].max()) for b in bufs)
        runs.append(((t1 - t0) / 1e3, t0, bufs))
    runs.sort(key=lambda r: r[0])
    span, t0, bufs = runs[len(runs) // 2]
    layers = [[summarize(entries[i * per_layer + j][0], bufs[i * per_layer + j], t0) for j in range(per_layer)]
              for i in range(len(copies))]
    return layers, resolution_ns(bufs), [r[0] for r in runs]


def fmt(d: dict | None) -> str:
    return "-" if not d else f"{d['min']:6.2f} {d['med']:6.2f} {d['max']:6.2f}"


def print_layers(label: str, layers: list[list[dict]]) -> None:
    print(f"  [{label}] per launch: stamp min / median / max µs from the graph's first start")
    for i, launches in enumerate(layers):
        for s in launches:
            keys = [k for k in ("start", "ranked", "wait", "loop", "stored", "zeroed", "barrier", "closed", "end")
                    if k in s]
            print(f"  layer {i} {s['name']:7} programs {s['programs']:5} working {s['working']:5} splits "
                  f"{s['splits']} fix-ups {s['fixups']}")
            for k in keys:
                print(f"      {k:8} {fmt(s[k])}")
            print("      cycles (median): " + ", ".join(f"{k} {c:.0f}" for k, c in s["cycles"].items()))
            if "by_sm" in s:
                b, cnt = s["by_sm"], collections.Counter(s["by_sm"]["programs"])
                print(f"      by SM: {b['sms']} SMs, programs an SM {', '.join(f'{n} x{c}' for n, c in cnt.items())}; "
                      f"an SM's last K loop done {fmt(b['last_loop'])}; first to last within an SM (median) "
                      f"{b['within']:.2f}; the last, by programs an SM: "
                      + ", ".join(f"{n}: {t:.2f}" for n, t in b["last_by_programs"].items()))
    firsts = [launches[0].get("wait", {}).get("min") for launches in layers]
    periods = [b - a for a, b in zip(firsts, firsts[1:]) if a is not None and b is not None]
    if periods:
        print("  periods (first program past its wait, layer to layer): "
              + ", ".join(f"{p:.2f}" for p in periods) + " µs")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="muse")
    ap.add_argument("--routing", default="local,ep8,ep2tp4")
    ap.add_argument("--batches", default="1,4", help="the points to trace (1-8 tokens)")
    ap.add_argument("--bench-batches", default="1,4,32", help="the benchmark's --batches (the draws' sequence)")
    ap.add_argument("--bench-routing", default="local,ep8,ep2tp4", help="the benchmark's --routing (the draws' sequence)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--replays", type=int, default=7)
    ap.add_argument("--config", help="launch configuration as JSON (default: the gluon defaults)")
    ap.add_argument("--ab", help='JSON {label: config overrides}: trace each too (e.g. {"fused": {"fused_few": true}})')
    ap.add_argument("--json", help="write every summary here")
    args = ap.parse_args()
    try:  # before any GPU work: a typo, or an option since dropped, would trace the default under another name
        base = K.config_from_json(args.config, "--config") if args.config else dict(default_config("gluon"))
        ab = K.config_from_json(args.ab, "--ab", labelled=True) if args.ab else {}
    except ValueError as exc:
        print(f"trace: {exc}; nothing was traced", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        print("needs an NVIDIA GPU of compute capability 9.0 or more", file=sys.stderr)
        return 2
    v = load_variant(args.variant)
    variants = {"default": base} | {k: {**base, **o} for k, o in ab.items()}
    want = {int(b) for b in args.batches.split(",")}
    g_dev = torch.Generator(device="cuda").manual_seed(0)
    g = torch.Generator().manual_seed(args.seed)
    results = []
    traced = set(args.routing.split(","))
    for kind in args.bench_routing.split(","):
        n_local, isize = card_shape(kind, v)
        partials = kind != "local" and split_routing(kind)[1] > 1
        if kind in traced:
            ex = R.random_expert_weights(n_local, v.latent_size, isize, expert_base=0, generator=g_dev,
                                         device="cuda")
            ex_k = ex.to_layout(DECODE_LAYOUT["gluon"])
            copies = [ex_k] + [clone_experts(ex_k) for _ in range(args.layers - 1)]
        for batch in (int(b) for b in args.bench_batches.split(",")):
            ids, w = routing(kind, batch, v, g)  # the benchmark's draws, in its order
            ids, w = ids.cuda(), w.cuda()
            x = torch.randn(batch, v.latent_size, generator=g).to(torch.bfloat16).cuda()
            if batch not in want or kind not in traced:
                continue
            plan = R.plan_routing(ids, w, ex.expert_base, ex.num_local)
            print(f"{kind} batch {batch}: {len(plan.local_ids)} experts routed here, "
                  f"{ex.nbytes_of(plan.local_ids) / 1e6:.1f} MB")
            if not plan.groups:
                continue
            for label, conf in variants.items():
                try:
                    layers, res, spans = trace_point(x, ids, w, copies, conf, partials, args.replays)
                except Exception as exc:  # noqa: BLE001 - report and go on
                    print(f"  [{label}] {type(exc).__name__}: {str(exc)[:400]}")
                    continue
                print(f"  [{label}] timer resolution {res} ns; spans of the {len(spans)} replays (µs): "
                      + ", ".join(f"{s:.1f}" for s in spans))
                print_layers(label, layers)
                results.append({"routing": kind, "batch": batch, "variant": label, "resolution_ns": res,
                                "spans_us": spans, "layers": layers})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
