#!/usr/bin/env python3
"""Benchmark the MXFP4 expert kernels on one card's experts (a GPU with Triton; see README "Measure").

    python bench/bench_mxfp4_moe.py [--variant muse] [--batches 1,4,32] [--routing local,ep8] [--sweep]
                                     [--json FILE]

Per batch size and routing it times, each captured in a CUDA graph and replayed (triton.testing.do_bench:
median, L2 flushed before every replay):

  kernel      the kernels (default `gluon`: gluon_kernel.py's register-direct one-warp programs on weights in
              the tiled layout, ExpertWeights.to_tiled_layout, done once before timing; `mma` = kernel.py's
              tl.dot kernels on the mma layout, `asm2` / `asm` = PTX decodes of the checkpoint layout,
              `explicit` = portable Triton decode, `dot_scaled` = Triton's tl.dot_scaled)
  mma         kernel.py's tl.dot kernels with the `mma` decode (the previous default), for comparison
  stock       the reference path MUSE_SPARK_MXFP4_KERNELS=0 runs: dequantize each routed expert to BF16
              with PyTorch ops, then BF16 matmuls (cuBLAS)
  stock-fused the same with a one-pass Triton dequantization (read packed, write BF16) before cuBLAS:
              the fastest "dequantize, then matmul" there is, a stricter baseline
  bf16        BF16 expert weights, per-expert cuBLAS matmuls (no dequantization; 3.8x the bytes)

One call replayed alone (the columns above) also pays the graph's launch and the first kernel's ramp-up;
a decode step runs the MoE layers back to back. `--layers N` (default 4) also times the kernel and mma
columns as N calls on N distinct copies of the weights (N layers, nothing reused through the L2) in one
graph, reported per layer ("steady" columns).

Achieved bandwidth = bytes of packed weights and scales of the distinct local experts the batch routes to,
over the kernel's time; compared with the device-to-device copy bandwidth measured in the same run
(bytes read + bytes written over the time of a 2 GiB copy).

Routing: `local` draws each token's top-k among the card's 32 local experts (every routed expert is on
this card: the most a card reads for a batch); `ep8` draws top-k among all 256 experts and the card runs
only its share (experts 0..31), as EP8 spreads a real batch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from mxfp4_moe import reference as R  # noqa: E402
from mxfp4_moe.format import dequantize_mxfp4  # noqa: E402
from mxfp4_moe.kernel import (DECODE_LAYOUT, LAST_LAUNCH, default_config, dequantize_mxfp4_triton,  # noqa: E402
                               mxfp4_moe_experts)
from mxfp4_moe.variants import load_variant  # noqa: E402

# (BLOCK_N, BLOCK_K, num_warps, num_stages, swap_ab, split_k or 0 for the heuristic, separate_gate_up,
#  ctas_per_sm of the split heuristic, stream-K programs per SM or 0 for the tiled grid)
SWEEP = [(64, 256, 4, 3, False, 0, True, 6, 0), (64, 256, 4, 4, False, 0, True, 6, 0),
         (64, 256, 4, 3, False, 0, True, 12, 0), (64, 512, 4, 3, False, 0, True, 6, 0),
         (64, 256, 8, 3, False, 0, True, 6, 0), (32, 256, 4, 3, False, 0, True, 6, 0),
         (64, 256, 4, 3, False, 0, False, 6, 0), (64, 256, 4, 3, False, 0, True, 6, 4),
         (64, 256, 4, 3, False, 0, True, 6, 5), (128, 128, 4, 3, False, 0, True, 6, 3),
         (64, 256, 4, 4, False, 0, True, 6, 4), (64, 128, 4, 4, False, 0, True, 6, 6)]


def sweep_conf(cfg) -> dict:
    conf = {"gate_up": cfg[:5], "down": cfg[:5], "separate_gate_up": bool(cfg[6])}
    if cfg[5]:
        conf.update(split_gate_up=cfg[5], split_down=cfg[5])
    if len(cfg) > 7:
        conf["ctas_per_sm"] = cfg[7]
    if len(cfg) > 8 and cfg[8]:
        conf.update(stream_k=True, programs_per_sm=cfg[8])
    return conf


def profile_kernels(fn, reps: int = 5) -> list[tuple[str, float]]:
    """Device time per kernel of one call of fn (torch.profiler, mean of reps calls), in call order."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    times: dict = {}
    for ev in prof.events():
        if str(getattr(ev, "device_type", "")).endswith("CUDA"):
            name = ev.name.split("(")[0][:40]
            t = getattr(ev, "device_time", None)
            t = getattr(ev, "cuda_time", 0.0) if t is None else t
            times[name] = times.get(name, 0.0) + t / reps
    return list(times.items())


def best_of_sweep(path: str) -> int:
    """The SWEEP index with the least summed time at the swept batches 1 and 4 (correct ones only)."""
    rows = json.loads(Path(path).read_text())["sweep"]
    total: dict = {}
    for r in rows:
        ok = "us" in r and r.get("rel_err", 1.0) < 1e-2
        if r["batch"] in (1, 4):
            total[r["index"]] = total.get(r["index"], 0.0) + (r["us"] if ok else float("inf"))
        elif not ok:
            total[r["index"]] = float("inf")
    return min(total, key=total.get)


def clone_experts(ex):
    """A copy of the weights in distinct memory (another layer)."""
    from dataclasses import replace
    return replace(ex, **{n: getattr(ex, n).clone() for n in ("w13", "w13_scale", "w2", "w2_scale", "norm_weight")})


def steady_time_us(make_fn, copies, rep_ms: int = 200) -> float:
    """make_fn(experts) -> a call; one graph of len(copies) calls (one per copy, back to back); the median
    replay time (L2 flushed before each) divided by the number of calls, in microseconds."""
    calls = [make_fn(c) for c in copies]
    return graph_time_us(lambda: [c() for c in calls], rep_ms) / len(calls)


def graph_time_us(fn, rep_ms: int = 200) -> float:
    """Capture fn in a CUDA graph, return the median replay time in microseconds."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return do_bench(g.replay, warmup=25, rep=rep_ms, return_mode="median") * 1e3


def copy_bandwidth() -> float:
    n = 2 << 30
    a = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    t_ms = do_bench(lambda: b.copy_(a), warmup=25, rep=300, return_mode="median")
    del a, b
    return 2 * n / (t_ms * 1e-3)


def routing(kind: str, batch: int, v, g: torch.Generator):
    if kind == "local":
        return R.route(torch.randn(batch, v.local_experts, generator=g), v.top_k)
    if kind == "ep8":
        return R.route(torch.randn(batch, v.experts, generator=g), v.top_k)
    raise ValueError(kind)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="muse")
    ap.add_argument("--batches", default="1,4,32")
    ap.add_argument("--routing", default="local,ep8")
    ap.add_argument("--sweep", action="store_true", help="also time a few launch configurations")
    ap.add_argument("--decode", default="gluon",
                    help="the kernel column's decode (gluon, mma, asm2, asm, explicit, dot_scaled)")
    ap.add_argument("--tiles", default=None, help="gluon: the load-time tiles as JSON [[n, k] of w13, [n, k] of w2] "
                    "(default ExpertWeights.default_tiles())")
    ap.add_argument("--layers", type=int, default=4, help="steady columns: layers per graph (0: skip)")
    ap.add_argument("--config", help="the kernel column's launch configuration as JSON (kernel.DEFAULT_CONFIG's "
                    "form), the 0-based index of a SWEEP entry, or best:SWEEP_JSON (the fastest at batches 1+4 of an "
                    "earlier --sweep --json run); default kernel.default_config(decode)")
    ap.add_argument("--sweep-batches", default="1,4,32")
    ap.add_argument("--fused-gate-up", action="store_true",
                    help="kernel column: _gate_up_kernel (gate and up tiles in one program) instead of the default "
                         "plain GEMM over the 2I rows followed by silu")
    ap.add_argument("--only-kernel", action="store_true", help="time the kernel column and the stock path only")
    ap.add_argument("--profile", action="store_true", help="print the kernel column's device time per kernel")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench: needs a GPU", file=sys.stderr)
        return 2

    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant(args.variant)
    batches = [int(b) for b in args.batches.split(",")]
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    print(f"variant {v.name}: latent {v.latent_size}, expert {v.expert_size}, top-{v.top_k}, "
          f"{v.local_experts} local experts of {v.experts}; {v.expert_bytes / 1e6:.2f} MB per expert (packed+scales)")

    copy_bw = copy_bandwidth()
    print(f"copy bandwidth (2 GiB device-to-device, read+write): {copy_bw / 1e12:.3f} TB/s")

    g_dev = torch.Generator(device="cuda").manual_seed(0)
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=0,
                                 generator=g_dev, device="cuda")
    w13_bf16 = torch.stack([dequantize_mxfp4_triton(ex.w13[e], ex.w13_scale[e]) for e in range(ex.num_local)])
    w2_bf16 = torch.stack([dequantize_mxfp4_triton(ex.w2[e], ex.w2_scale[e]) for e in range(ex.num_local)])
    torch.cuda.synchronize()

    if args.config is None:
        kconf = dict(default_config(args.decode))
        if args.fused_gate_up:
            kconf["separate_gate_up"] = False
    elif args.config.strip().isdigit():
        kconf = sweep_conf(SWEEP[int(args.config)])
    elif args.config.startswith("best:"):
        best = best_of_sweep(args.config[5:])
        print(f"best sweep configuration: SWEEP[{best}] = {SWEEP[best]}")
        kconf = sweep_conf(SWEEP[best])
    else:
        kconf = json.loads(args.config)
    # the kernel column's weights: re-laid out once (the load-time step)
    tiles = tuple(map(tuple, json.loads(args.tiles))) if args.tiles else None
    ex_k = ex.to_layout(DECODE_LAYOUT[args.decode], tiles)
    ex_mma = ex.to_mma_layout()
    torch.cuda.synchronize()
    copies = [ex_k] + [clone_experts(ex_k) for _ in range(args.layers - 1)] if args.layers else []
    copies_mma = [ex_mma] + [clone_experts(ex_mma) for _ in range(args.layers - 1)] if args.layers else []
    torch.cuda.synchronize()
    g = torch.Generator().manual_seed(1)
    results = {"device": dev.name, "copy_bw": copy_bw, "variant": v.name, "points": [], "sweep": []}

    for kind in [k for k in args.routing.split(",") if k and k != "none"]:
        for batch in batches:
            ids, w = routing(kind, batch, v, g)
            ids, w = ids.cuda(), w.cuda()
            x = torch.randn(batch, v.latent_size, generator=g).to(torch.bfloat16).cuda()
            plan = R.plan_routing(ids, w, ex.expert_base, ex.num_local)
            nbytes = ex.nbytes_of(plan.local_ids)
            point = {"routing": kind, "batch": batch, "experts_read": len(plan.local_ids), "bytes": nbytes}
            if not plan.groups:
                print(f"{kind} batch {batch}: no local expert routed, skipped")
                continue
            ref = R.moe_experts_reference(x, ids, w, ex)
            fns = {
                "kernel": lambda: mxfp4_moe_experts(x, ids, w, ex_k, decode=args.decode, config=kconf),
                "mma": lambda: mxfp4_moe_experts(x, ids, w, ex_mma, decode="mma"),
                "asm2": lambda: mxfp4_moe_experts(x, ids, w, ex, decode="asm2"),
                "asm": lambda: mxfp4_moe_experts(x, ids, w, ex, decode="asm"),
                "explicit": lambda: mxfp4_moe_experts(x, ids, w, ex, decode="explicit"),
                "dot_scaled": lambda: mxfp4_moe_experts(x, ids, w, ex, decode="dot_scaled"),
                "stock": lambda: R.run_plan(
                    x, plan, lambda e: dequantize_mxfp4(ex.w13[e], ex.w13_scale[e], torch.bfloat16),
                    lambda e: dequantize_mxfp4(ex.w2[e], ex.w2_scale[e], torch.bfloat16), ex.norm_weight,
                    dtype=torch.bfloat16),
                "stock-fused": lambda: R.run_plan(
                    x, plan, lambda e: dequantize_mxfp4_triton(ex.w13[e], ex.w13_scale[e]),
                    lambda e: dequantize_mxfp4_triton(ex.w2[e], ex.w2_scale[e]), ex.norm_weight,
                    dtype=torch.bfloat16),
                "bf16": lambda: R.run_plan(x, plan, lambda e: w13_bf16[e], lambda e: w2_bf16[e], ex.norm_weight,
                                           dtype=torch.bfloat16),
            }
            if args.only_kernel:
                fns = {k: fns[k] for k in ("kernel", "mma", "stock", "stock-fused", "bf16")}
            for name, fn in fns.items():
                try:
                    LAST_LAUNCH.clear()
                    out = fn()
                    torch.cuda.synchronize()
                    if name in ("kernel", "mma") and batch in (1, 32) and kind == "local":
                        for kname, ck in LAST_LAUNCH.items():
                            meta = getattr(ck, "metadata", None)
                            print(f"compiled {name} {kname} batch {batch}: regs {getattr(ck, 'n_regs', '?')}, "
                                  f"spills {getattr(ck, 'n_spills', '?')}, shared {getattr(meta, 'shared', '?')}, "
                                  f"warps {getattr(meta, 'num_warps', '?')}")
                    point[f"{name}_rel_err"] = ((out - ref).norm() / ref.norm()).item()
                    point[f"{name}_us"] = graph_time_us(fn)
                except Exception as exc:  # noqa: BLE001 - report and go on with the other paths
                    point[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    print(f"{kind} batch {batch} {name}: {point[f'{name}_error']}")
            if args.layers and copies:
                for name, exs, dec, conf in (("kernel", copies, args.decode, kconf), ("mma", copies_mma, "mma", None)):
                    try:
                        point[f"{name}_steady_us"] = steady_time_us(
                            lambda e, dec=dec, conf=conf: (lambda: mxfp4_moe_experts(x, ids, w, e, decode=dec,
                                                                                     config=conf)), exs)
                    except Exception as exc:  # noqa: BLE001
                        print(f"{kind} batch {batch} {name} steady: {type(exc).__name__}: {str(exc)[:300]}")
            if args.profile and kind == "local":
                try:  # without programmatic dependent launch: a kernel's device time would include its wait
                    point["profile"] = profile_kernels(lambda: mxfp4_moe_experts(
                        x, ids, w, ex_k, decode=args.decode, config={**kconf, "pdl": False}))
                    print(f"profile {kind} batch {batch}: " + ", ".join(f"{n} {t:.1f}" for n, t in point["profile"])
                          + f"; sum {sum(t for _, t in point['profile']):.1f} us")
                except Exception as exc:  # noqa: BLE001
                    print(f"profile failed: {type(exc).__name__}: {exc}")
            results["points"].append(point)

    if args.sweep:
        for batch in [int(b) for b in args.sweep_batches.split(",")]:
            ids, w = routing("local", batch, v, g)
            ids, w = ids.cuda(), w.cuda()
            x = torch.randn(batch, v.latent_size, generator=g).to(torch.bfloat16).cuda()
            nbytes = ex.nbytes_of(R.plan_routing(ids, w, 0, ex.num_local).local_ids)
            ref = R.moe_experts_reference(x, ids, w, ex)
            for ci, cfg in enumerate(SWEEP):
                conf = sweep_conf(cfg)
                row = {"batch": batch, "index": ci, "config": cfg}
                try:
                    fn = lambda: mxfp4_moe_experts(x, ids, w, ex_mma, decode="mma", config=conf)  # noqa: E731
                    row["rel_err"] = ((fn() - ref).norm() / ref.norm()).item()
                    row["us"] = graph_time_us(fn, rep_ms=100)
                    row["pct_copy"] = 100 * nbytes / (row["us"] * 1e-6) / copy_bw
                except Exception as exc:  # noqa: BLE001
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                results["sweep"].append(row)
                print("sweep", json.dumps(row))

    # ---- the table (last, so it is what the device tool's tail shows)
    print()
    print(f"kernel column: decode {args.decode}, config {kconf}; copy bandwidth {copy_bw / 1e12:.3f} TB/s; times are CUDA-graph "
          f"replays, median, L2 flushed; steady = per layer in a graph of {args.layers} layers")
    hdr = (f"{'routing':7} {'batch':>5} {'exp':>4} {'MB read':>8} {'kernel us':>9} {'TB/s':>6} {'%copy':>6} "
           f"{'steady us':>9} {'%copy':>6} {'mma us':>7} {'steady':>7} {'stock us':>9} {'x':>6} {'st-fused':>9} {'x':>6} "
           f"{'bf16 us':>8} {'x':>5} {'rel err':>8}")
    print(hdr)
    nan = float("nan")
    for p in results["points"]:
        k = p.get("kernel_us")
        ks = p.get("kernel_steady_us")
        bw = p["bytes"] / (k * 1e-6) if k else nan
        p["kernel_bw"] = bw
        p["pct_copy"] = 100 * bw / copy_bw
        p["pct_copy_steady"] = 100 * p["bytes"] / (ks * 1e-6) / copy_bw if ks else nan

        def sp(name):
            return p.get(f"{name}_us", nan) / k if k else nan
        print(f"{p['routing']:7} {p['batch']:5d} {p['experts_read']:4d} {p['bytes'] / 1e6:8.1f} "
              f"{k or nan:9.1f} {bw / 1e12:6.3f} {p['pct_copy']:5.1f}% {ks or nan:9.1f} {p['pct_copy_steady']:5.1f}% "
              f"{p.get('mma_us', nan):7.1f} {p.get('mma_steady_us', nan):7.1f} "
              f"{p.get('stock_us', nan):9.1f} {sp('stock'):5.1f}x "
              f"{p.get('stock-fused_us', nan):9.1f} {sp('stock-fused'):5.1f}x "
              f"{p.get('bf16_us', nan):8.1f} {sp('bf16'):4.1f}x {p.get('kernel_rel_err', nan):8.1e}")
    local = [p for p in results["points"] if p["routing"] == "local" and p["batch"] <= 4 and p.get("kernel_us")]
    if local:
        ok_bw = all(p["pct_copy"] >= 70 for p in local)
        ok_st = all(p["pct_copy_steady"] >= 70 for p in local)
        ok_sp = all(p.get("stock_us", 0) >= 3 * p["kernel_us"] for p in results["points"] if p.get("kernel_us"))
        print(f"target >= 70% of copy bandwidth at batch 1-4 (local routing): one call {'met' if ok_bw else 'NOT met'}, "
              f"steady {'met' if ok_st else 'NOT met'}; >= 3x the stock path at every point: "
              f"{'met' if ok_sp else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
