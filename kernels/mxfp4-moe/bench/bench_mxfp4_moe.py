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
only its share (experts 0..31), as EP8 spreads a real batch; `epXtpY` (the served `ep2tp4`: EP2 x TP4, the
variant's tp_split) draws top-k among all 256, the card holds 256/X experts, each sliced to 1/Y of the
intermediate size (ExpertWeights.tp_slice), and computes its share in partials mode (each pair's output
before its norm, left for the TP group's sum; kernel.combine_partials runs after it, not timed here).

Floors (next to each steady figure): `read` = a plain grid-stride load-and-sum kernel over the same bytes
(the routed experts' four weight arrays, as many distinct buffers, in 16 KB chunks), one per layer on the
layers' distinct copies, in a graph of the same shape (the best of a few grid sizes), per layer; `empty`
= one empty kernel replayed alone in a graph. Goal per point: steady time within 1/0.85 of the read
floor (% of floor >= 85), and one call no slower than the stock-fused path. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from mxfp4_moe import reference as R  # noqa: E402
from mxfp4_moe.format import dequantize_mxfp4  # noqa: E402
from mxfp4_moe.kernel import (DECODE_LAYOUT, LAST_LAUNCH, default_config, dequantize_mxfp4_triton,  # noqa: E402
                               config_from_json, mxfp4_moe_experts)
from mxfp4_moe.variants import load_variant, split_routing  # noqa: E402

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
    return 2 * n / (t_ms * 1e-3)  # the two 2 GiB buffers go with this frame


def routing(kind: str, batch: int, v, g: torch.Generator):
    if kind == "local":
        return R.route(torch.randn(batch, v.local_experts, generator=g), v.top_k)
    if split_routing(kind):
        return R.route(torch.randn(batch, v.experts, generator=g), v.top_k)
    raise ValueError(f"routing must be local or epX / epXtpY (e.g. ep8, ep2tp4), got {kind!r}")


def card_shape(kind: str, v) -> tuple[int, int]:
    """(local experts, each one's intermediate size) of the card under this routing."""
    if kind == "local":
        return v.local_experts, v.expert_size
    ep, tp = split_routing(kind)
    if v.experts % ep or v.expert_size % (32 * tp):
        raise ValueError(f"routing {kind}: {v.experts} experts / EP {ep} or expert size {v.expert_size} / TP {tp}")
    return v.experts // ep, v.expert_size // tp


@triton.jit
def _read_kernel(addr_ptr, n_chunks, out_ptr, CHUNK: tl.constexpr):
    """Grid-stride load-and-sum over chunks of CHUNK int32 at the absolute addresses addr_ptr[0..n_chunks)."""
    pid = tl.program_id(0)
    acc = tl.zeros([CHUNK], tl.int32)
    for c in range(pid, n_chunks, tl.num_programs(0)):
        a = tl.load(addr_ptr + c).to(tl.pointer_type(tl.int32))
        acc += tl.load(a + tl.arange(0, CHUNK))
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _empty_kernel(x_ptr):
    pass


CHUNK_BYTES = 16384


def chunk_table(ex, local_ids) -> torch.Tensor:
    """Absolute addresses of the 16 KB chunks of the given local experts' w13, w13_scale, w2, w2_scale."""
    addrs = []
    for e in sorted(set(local_ids)):
        for n in ("w13", "w13_scale", "w2", "w2_scale"):
            t = getattr(ex, n)[e]
            nb = t.numel() * t.element_size()
            if nb % CHUNK_BYTES:
                raise ValueError(f"{n} of one expert is {nb} bytes, not a multiple of {CHUNK_BYTES}")
            addrs += range(t.data_ptr(), t.data_ptr() + nb, CHUNK_BYTES)
    return torch.tensor(addrs, dtype=torch.int64, device="cuda")


def floor_times(tables, sms: int):
    """(µs a table, {"per_sm", "warps"}) of the read floor's kernel at each grid size and warp count: one graph of
    a load-and-sum launch per chunk table (``chunk_table``'s absolute addresses of CHUNK_BYTES chunks)."""
    out = torch.empty(64 * sms, dtype=torch.int32, device="cuda")
    for per_sm in (2, 4, 8, 16):
        for warps in (4, 8):
            def fn(per_sm=per_sm, warps=warps):
                for t in tables:
                    _read_kernel[(per_sm * sms,)](t, t.numel(), out, CHUNK=CHUNK_BYTES // 4, num_warps=warps)
            yield graph_time_us(fn, rep_ms=100) / len(tables), {"per_sm": per_sm, "warps": warps}


def read_floor_us(copies, local_ids, sms: int) -> tuple[float, dict]:
    """The read floor: per layer, a graph of len(copies) load-and-sum kernels over the same bytes of each
    copy, the best of a few grid sizes and warp counts."""
    return min(floor_times([chunk_table(c, local_ids) for c in copies], sms), key=lambda r: r[0])


def empty_kernel_us() -> float:
    x = torch.empty(1, device="cuda")
    return graph_time_us(lambda: _empty_kernel[(1,)](x), rep_ms=100)


def driver_resident(ck) -> str:
    """kernel.driver_resident of compiled kernel ``ck`` as printed: the programs an SM, or "?" where the driver
    cannot be asked."""
    from mxfp4_moe.kernel import driver_resident as resident
    n = resident(ck)
    return "?" if n is None else str(n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="muse")
    ap.add_argument("--batches", default="1,4,32")
    ap.add_argument("--routing", default=None, help="default local,ep8 and the variant's served split (ep2tp4)")
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
    ap.add_argument("--no-baselines", action="store_true", help="the kernel column, its steady time and the floors only")
    ap.add_argument("--profile", action="store_true", help="print the kernel column's device time per kernel")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--ab", help="JSON {label: config overrides}: per point, also time each (one call, steady, error) "
                    "on the same routing draw and weights, right after the kernel column (same-run comparisons)")
    ap.add_argument("--seed", type=int, default=1, help="the routing draws' seed (another seed: other draws)")
    args = ap.parse_args()
    try:  # before any GPU work: a typo, or an option since dropped, would time the default under another name
        ab = config_from_json(args.ab, "--ab", labelled=True) if args.ab else {}
        if args.config and not args.config.strip().isdigit() and not args.config.startswith("best:"):
            config_from_json(args.config, "--config")
        if args.tiles:
            json.loads(args.tiles)
    except (ValueError, json.JSONDecodeError) as exc:
        print(f"bench: {exc}; nothing was timed", file=sys.stderr)
        return 2
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
    tiles = tuple(map(tuple, json.loads(args.tiles))) if args.tiles else None
    cards: dict = {}

    def card(n_local: int, isize: int) -> dict:
        """One card's weights at this shape (made once): the checkpoint layout, the kernel column's (re-laid
        out once: the load-time step) with its layer copies, the mma copies, BF16 copies."""
        if (n_local, isize) not in cards:
            ex = R.random_expert_weights(n_local, v.latent_size, isize, expert_base=0, generator=g_dev,
                                         device="cuda")
            c = {"ex": ex,
                 "w13_bf16": torch.stack([dequantize_mxfp4_triton(ex.w13[e], ex.w13_scale[e]) for e in range(n_local)]),
                 "w2_bf16": torch.stack([dequantize_mxfp4_triton(ex.w2[e], ex.w2_scale[e]) for e in range(n_local)])}
            ex_k = ex.to_layout(DECODE_LAYOUT[args.decode], tiles)
            ex_mma = ex.to_mma_layout()
            c["ex_k"], c["ex_mma"] = ex_k, ex_mma
            c["copies"] = [ex_k] + [clone_experts(ex_k) for _ in range(args.layers - 1)] if args.layers else []
            c["copies_mma"] = [ex_mma] + [clone_experts(ex_mma) for _ in range(args.layers - 1)] if args.layers else []
            torch.cuda.synchronize()
            cards[(n_local, isize)] = c
        return cards[(n_local, isize)]

    g = torch.Generator().manual_seed(args.seed)
    results = {"device": dev.name, "copy_bw": copy_bw, "variant": v.name, "points": [], "sweep": [],
               "empty_us": empty_kernel_us()}
    print(f"empty kernel replayed in a graph: {results['empty_us']:.1f} us")
    kinds = args.routing.split(",") if args.routing else ["local", "ep8", v.served_routing]
    kinds = list(dict.fromkeys(k for k in kinds if k and k != "none"))

    for kind in kinds:
        n_local, isize = card_shape(kind, v)
        partials = kind != "local" and split_routing(kind)[1] > 1
        c = card(n_local, isize)
        ex, ex_k, ex_mma = c["ex"], c["ex_k"], c["ex_mma"]
        w13_bf16, w2_bf16 = c["w13_bf16"], c["w2_bf16"]
        for batch in batches:
            ids, w = routing(kind, batch, v, g)
            ids, w = ids.cuda(), w.cuda()
            x = torch.randn(batch, v.latent_size, generator=g).to(torch.bfloat16).cuda()
            plan = R.plan_routing(ids, w, ex.expert_base, ex.num_local)
            nbytes = ex.nbytes_of(plan.local_ids)
            point = {"routing": kind, "batch": batch, "experts_read": len(plan.local_ids), "bytes": nbytes,
                     "partials": bool(partials)}
            if not plan.groups:
                print(f"{kind} batch {batch}: no local expert routed, skipped")
                continue
            if partials:
                ref = R.moe_expert_partials_reference(x, ids, w, ex)

                def stock_of(w13_of, w2_of, plan=plan, x=x):
                    return lambda: R.run_plan_partials(x, plan, v.top_k, w13_of, w2_of, v.latent_size,
                                                       dtype=torch.bfloat16)
            else:
                ref = R.moe_experts_reference(x, ids, w, ex)

                def stock_of(w13_of, w2_of, plan=plan, x=x, ex=ex):
                    return lambda: R.run_plan(x, plan, w13_of, w2_of, ex.norm_weight, dtype=torch.bfloat16)
            fns = {
                "kernel": lambda: mxfp4_moe_experts(x, ids, w, ex_k, decode=args.decode, config=kconf,
                                                    partials=partials),
                "mma": lambda: mxfp4_moe_experts(x, ids, w, ex_mma, decode="mma", partials=partials),
                "asm2": lambda: mxfp4_moe_experts(x, ids, w, ex, decode="asm2", partials=partials),
                "asm": lambda: mxfp4_moe_experts(x, ids, w, ex, decode="asm", partials=partials),
                "explicit": lambda: mxfp4_moe_experts(x, ids, w, ex, decode="explicit", partials=partials),
                "dot_scaled": lambda: mxfp4_moe_experts(x, ids, w, ex, decode="dot_scaled", partials=partials),
                "stock": stock_of(lambda e: dequantize_mxfp4(ex.w13[e], ex.w13_scale[e], torch.bfloat16),
                                  lambda e: dequantize_mxfp4(ex.w2[e], ex.w2_scale[e], torch.bfloat16)),
                "stock-fused": stock_of(lambda e: dequantize_mxfp4_triton(ex.w13[e], ex.w13_scale[e]),
                                        lambda e: dequantize_mxfp4_triton(ex.w2[e], ex.w2_scale[e])),
                "bf16": stock_of(lambda e: w13_bf16[e], lambda e: w2_bf16[e]),
            }
            if args.only_kernel:
                fns = {k: fns[k] for k in ("kernel", "mma", "stock", "stock-fused", "bf16")}
            if args.no_baselines:
                fns = {"kernel": fns["kernel"]}
            for name, fn in fns.items():
                try:
                    LAST_LAUNCH.clear()
                    out = fn()
                    torch.cuda.synchronize()
                    if name in ("kernel", "mma") and batch in (1, 32) and kind == "local":
                        for kname, ck in LAST_LAUNCH.items():
                            if not hasattr(ck, "n_regs"):
                                continue  # the splits and the launch count
                            meta = getattr(ck, "metadata", None)
                            print(f"compiled {name} {kname} batch {batch}: regs {getattr(ck, 'n_regs', '?')}, "
                                  f"spills {getattr(ck, 'n_spills', '?')}, shared {getattr(meta, 'shared', '?')}, "
                                  f"warps {getattr(meta, 'num_warps', '?')}, resident an SM {driver_resident(ck)}")
                    if name == "kernel" and "splits" in LAST_LAUNCH:
                        point["splits"] = LAST_LAUNCH["splits"]
                    point[f"{name}_rel_err"] = ((out - ref).norm() / ref.norm()).item()
                    point[f"{name}_us"] = graph_time_us(fn)
                except Exception as exc:  # noqa: BLE001 - report and go on with the other paths
                    point[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    print(f"{kind} batch {batch} {name}: {point[f'{name}_error']}")
            if args.layers and c["copies"]:
                for name, exs, dec, conf in (("kernel", c["copies"], args.decode, kconf),
                                             ("mma", c["copies_mma"], "mma", None))[:1 if args.no_baselines else 2]:
                    try:
                        point[f"{name}_steady_us"] = steady_time_us(
                            lambda e, dec=dec, conf=conf: (lambda: mxfp4_moe_experts(
                                x, ids, w, e, decode=dec, config=conf, partials=partials)), exs)
                    except Exception as exc:  # noqa: BLE001
                        print(f"{kind} batch {batch} {name} steady: {type(exc).__name__}: {str(exc)[:300]}")
                try:
                    point["floor_us"], point["floor_cfg"] = read_floor_us(c["copies"], plan.local_ids,
                                                                          dev.multi_processor_count)
                except Exception as exc:  # noqa: BLE001
                    print(f"{kind} batch {batch} read floor: {type(exc).__name__}: {str(exc)[:300]}")
            for label, over in ab.items():
                conf = {**kconf, **over}
                try:
                    out = mxfp4_moe_experts(x, ids, w, ex_k, decode=args.decode, config=conf, partials=partials)
                    row = {"err": ((out - ref).norm() / ref.norm()).item(),
                           "one_us": graph_time_us(lambda conf=conf: mxfp4_moe_experts(
                               x, ids, w, ex_k, decode=args.decode, config=conf, partials=partials))}
                    if args.layers and c["copies"]:
                        row["steady_us"] = steady_time_us(lambda e, conf=conf: (lambda: mxfp4_moe_experts(
                            x, ids, w, e, decode=args.decode, config=conf, partials=partials)), c["copies"])
                        if point.get("floor_us"):
                            row["pct_floor"] = 100 * point["floor_us"] / row["steady_us"]
                except Exception as exc:  # noqa: BLE001 - report and go on with the other configurations
                    row = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                point.setdefault("ab", {})[label] = row
                print(f"ab {kind} b{batch} e{point['experts_read']} {label}: " + json.dumps(
                    {k: (round(val, 4 if k == "err" else 2) if isinstance(val, float) else val) for k, val in row.items()}))
            if args.profile and kind in ("local", v.served_routing):
                try:  # without programmatic dependent launch: a kernel's device time would include its wait
                    point["profile"] = profile_kernels(lambda: mxfp4_moe_experts(
                        x, ids, w, ex_k, decode=args.decode, config={**kconf, "pdl": False}, partials=partials))
                    print(f"profile {kind} batch {batch}: " + ", ".join(f"{n} {t:.1f}" for n, t in point["profile"])
                          + f"; sum {sum(t for _, t in point['profile']):.1f} us")
                except Exception as exc:  # noqa: BLE001
                    print(f"profile failed: {type(exc).__name__}: {exc}")
            print(f"point {kind} b{batch}: " + json.dumps({k: (round(val, 2) if isinstance(val, float) else val)
                                                          for k, val in point.items() if k != "profile"}))
            results["points"].append(point)

    if args.sweep:
        c = card(v.local_experts, v.expert_size)
        ex, ex_mma = c["ex"], c["ex_mma"]
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

    # ---- the table (last, so it is what the tail of a log shows)
    print()
    print(f"kernel column: decode {args.decode}, config {kconf}; copy bandwidth {copy_bw / 1e12:.3f} TB/s; times are CUDA-graph "
          f"replays, median, L2 flushed; steady = per layer in a graph of {args.layers} layers")
    hdr = (f"{'routing':7} {'batch':>5} {'exp':>4} {'MB read':>8} {'kernel us':>9} {'%copy':>6} "
           f"{'steady us':>9} {'%copy':>6} {'floor us':>8} {'%floor':>7} {'mma st':>7} {'stock us':>9} {'x':>6} "
           f"{'st-fused':>9} {'x':>6} {'bf16 us':>8} {'x':>5} {'splits':>7} {'rel err':>8}  goal")
    print(hdr)
    nan = float("nan")
    all_ok = True
    for p in results["points"]:
        k = p.get("kernel_us")
        ks = p.get("kernel_steady_us")
        fl = p.get("floor_us")
        bw = p["bytes"] / (k * 1e-6) if k else nan
        p["kernel_bw"] = bw
        p["pct_copy"] = 100 * bw / copy_bw
        p["pct_copy_steady"] = 100 * p["bytes"] / (ks * 1e-6) / copy_bw if ks else nan
        p["pct_floor"] = 100 * fl / ks if ks and fl else nan
        fused = p.get("stock-fused_us")
        ok_floor = p["pct_floor"] >= 85
        ok_fused = bool(k and fused and k <= fused)
        p["goal_met"] = ok_floor and ok_fused
        all_ok &= p["goal_met"]
        why = "met" if p["goal_met"] else "NOT met (" + ", ".join(
            ([f"{p['pct_floor']:.0f}% of floor"] if not ok_floor else []) + (["slower than stock-fused"] if not ok_fused else [])) + ")"

        def sp(name):
            return p.get(f"{name}_us", nan) / k if k else nan
        splits = "x".join(map(str, p["splits"])) if p.get("splits") else "-"
        print(f"{p['routing']:7} {p['batch']:5d} {p['experts_read']:4d} {p['bytes'] / 1e6:8.1f} "
              f"{k or nan:9.1f} {p['pct_copy']:5.1f}% {ks or nan:9.1f} {p['pct_copy_steady']:5.1f}% "
              f"{fl or nan:8.1f} {p['pct_floor']:6.1f}% {p.get('mma_steady_us', nan):7.1f} "
              f"{p.get('stock_us', nan):9.1f} {sp('stock'):5.1f}x "
              f"{p.get('stock-fused_us', nan):9.1f} {sp('stock-fused'):5.1f}x "
              f"{p.get('bf16_us', nan):8.1f} {sp('bf16'):4.1f}x {splits:>7} {p.get('kernel_rel_err', nan):8.1e}  {why}")
    print(f"empty kernel in a graph: {results['empty_us']:.1f} us; floor = a plain read of the same bytes, same graph "
          f"shape; goal per point: steady >= 85% of its read floor and one call no slower than stock-fused: "
          f"{'met at every point' if all_ok else 'NOT met at every point'}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
