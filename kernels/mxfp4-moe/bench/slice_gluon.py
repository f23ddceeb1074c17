#!/usr/bin/env python3
"""The slice kernel (mxfp4_moe/slice_kernel.py) against the read floor (issue #18, twenty-third round).

    python3 bench/slice_gluon.py [--points ep8b1,ep2tp4b1,ep8b4,...] [--slices 32,64] [--warps 4,8] [--bk 128]
    python3 bench/slice_gluon.py --compile-only [--routed] [--slices 32 --warps 8 --bk 256 --dr 4 --maxnreg 0,128]
                                  # no GPU: registers, stack, shared memory for sm_90

Each point routes one token to each of its experts (the batch-1 points, and the bytes of batch 4's experts as
bench/slice_floor.py takes them), with random mma-layout weights (E8M0 scales 118..127) put into the slice layout
by ``slice_kernel.to_slice_layout``. Every configuration is first checked against PyTorch
(``slice_kernel.reference``: the `mma` decode's values, act in BF16; then the RMS norm): the relative error, and
for ``norm`` that the counters and rows are back to zero. Then timed as the benchmark's steady column: one graph
of 4 layers on 4 distinct copies, L2 flushed before each replay, per layer; against the benchmark's read floor
over the same bytes in the same run. ``norm`` serves EP8 and local (unsplit experts); ``partials`` the EP2 x TP4
points (the rows zeroed by the layer before, so not here).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mxfp4_moe import slice_kernel as sk  # noqa: E402

K = L = 4096
POINTS = {"ep8b1": (1, 4096), "ep2tp4b1": (4, 1024), "localb1": (8, 4096), "ep8b4": (2, 4096), "ep2tp4b4": (19, 1024)}


def experts(e: int, i: int, gen: torch.Generator, device: str):
    """Random mma-layout experts: w13 [e, 2i, K/2], s13 [e, 2i, K/32], w2 [e, L, i/2], s2 [e, L, i/32]."""
    def q(*shape):
        return torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen).to(device)

    def sc(*shape):
        return torch.randint(118, 128, shape, dtype=torch.uint8, generator=gen).to(device)
    return q(e, 2 * i, K // 2), sc(e, 2 * i, K // 32), q(e, L, i // 2), sc(e, L, i // 32)


def compile_only(args) -> None:
    """Each configuration asked for compiled for sm_90 without a GPU (the Triton first on the path): registers, stack
    and shared memory a program (cuobjdump), in the bench's form (a run table) or, with --routed, the form
    mxfp4_moe_experts runs (top-8 routing read in the kernel); norm and partials each."""
    import re

    import triton

    from sm90_compile import compile_gluon, cuobjdump

    print(f"compiled for sm_90 by Triton {triton.__version__} (the GPU runs of issue #18 used 3.6)")
    ptrs = {"x_ptr": "*i32", "wq_ptr": "*i32", "wb_ptr": "*u8", "run_ptr": "*i32", "y_ptr": "*fp32",
            "cnt_ptr": "*i32", "out_ptr": "*fp32" if args.routed else "*bf16", "norm_ptr": "*fp32",
            "scr_ptr": "*fp32", "act_ptr": "*bf16", "ids_ptr": "*i64" if args.routed else "*i32",
            "wts_ptr": "*fp32", "u_ptr": "*fp32", "gacc_ptr": "*fp32", "gcnt_ptr": "*i32"}
    for s, w, bk, dr, pf, mx, ea, ks in _configs(args):
        try:
            lay = sk.kernel_layouts(s, K, L, 4096, bk, w, dr, early=bool(ea) and ea != 2, ks=ks, stream=ea == 2)
        except ValueError as exc:
            print(f"  S {s} warps {w} BK {bk} DR {dr}: {exc}")
            continue
        for norm in (True, False):
            consts = dict(S=s, K=K, L=L, I_SIZE=4096, BK=bk, W=w, MT=1, BLOCK_M=8, DR=dr, NORM=norm, GDC=True,
                          EPS=1e-6, PREFETCH=bool(pf), **lay, ROUTED=args.routed, TOPK=8, P_P2=32, EARLY=int(ea == 1), KS=ks,
                          STREAM=int(ea == 2))
            ck = compile_gluon(sk._slice_kernel, ptrs, ("T", "expert_base", "n_local", "stride_g"), consts, mx or None,
                               num_warps=w)
            use = " ".join(re.findall(r"(?:REG|STACK|SHARED):\d+", cuobjdump(ck, "--dump-resource-usage")))
            use += f" dynamic shared {ck.metadata.shared}"
            print(f"  {'routed' if args.routed else 'bench'} {'norm' if norm else 'partials':8} S {s:3} warps {w} "
                  f"BK {bk} DR {dr} prefetch {pf} cap {mx or '-'} early {ea} K parts {ks}: {use}")


def _configs(args):
    """(S, warps, BK, DR, prefetch, register cap, early down, K parts) of the command line's lists."""
    def ints(text):
        return [int(v) for v in text.split(",")]
    return [(s, w, bk, dr, pf, mx, ea, ks) for s in ints(args.slices) for w in ints(args.warps) for bk in ints(args.bk)
            for dr in ints(args.dr) for pf in ints(args.prefetch) for mx in ints(args.maxnreg) for ea in ints(args.early)
            for ks in ints(args.ks)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", default="ep8b1,ep2tp4b1,ep8b4,ep2tp4b4,localb1")
    ap.add_argument("--slices", default="32,64")
    ap.add_argument("--warps", default="4,8")
    ap.add_argument("--bk", default="128")
    ap.add_argument("--dr", default="1")
    ap.add_argument("--prefetch", default="0", help="0, 1 or 0,1: the down block asked into L2 first")
    ap.add_argument("--modes", default="auto", help="norm, partials, or auto (partials at ep2tp4, else norm)")
    ap.add_argument("--early", default="0", help="0, 1, 2 or a list: 1 the down block loaded with the last gate/up "
                    "tile (slice_down_early), 2 an item's words through shared memory (slice_stream)")
    ap.add_argument("--ks", default="1", help="K parts a slice (1, 2, 4; a list): slice_ksplit")
    ap.add_argument("--maxnreg", default="0", help="register caps a thread to try (0: the compiler's choice)")
    ap.add_argument("--pdl", default="auto", help="on, off, or auto (both for norm, on for partials)")
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--compile-only", action="store_true", help="no GPU: each configuration's registers for sm_90")
    ap.add_argument("--routed", action="store_true", help="--compile-only: the form mxfp4_moe_experts runs")
    args = ap.parse_args()
    if args.compile_only:
        compile_only(args)
        return 0
    from bench_mxfp4_moe import CHUNK_BYTES, floor_times, graph_time_us
    from slice_floor import describe_device
    sms = describe_device()
    gen = torch.Generator().manual_seed(7)
    for name in args.points.split(","):
        ne, isize = POINTS[name]
        raw = [experts(ne, isize, gen, "cuda") for _ in range(args.copies)]
        x = torch.randn(ne, K, generator=gen).to(torch.bfloat16).cuda()
        norm_w = (1 + 0.1 * torch.randn(L, generator=gen)).cuda()
        runs_l = [(e, [e]) for e in range(ne)]
        want, want_act = sk.reference(*raw[0], x, runs_l)
        want, want_act = want[:, 0], want_act[:, 0]  # [ne, L], [ne, I]
        want_n = want / torch.sqrt((want * want).mean(-1, keepdim=True) + 1e-6) * norm_w
        runs = torch.tensor([[e, e, e] for e in range(ne)], dtype=torch.int32, device="cuda")
        modes = args.modes.split(",") if args.modes != "auto" else ["partials" if "tp4" in name else "norm"]
        nbytes = None
        print(f"\n{name}: {ne} expert(s) of intermediate {isize}, one token each")
        for s in (int(v) for v in args.slices.split(",")):
            if isize % s:
                continue
            for bk in (int(v) for v in args.bk.split(",")):
                bufs = [sk.to_slice_layout(*r, s, bk) for r in raw]
                if nbytes is None:
                    nbytes = bufs[0].numel()
                    tables = [torch.arange(b.data_ptr(), b.data_ptr() + nbytes, CHUNK_BYTES, dtype=torch.int64,
                                           device="cuda") for b in bufs]
                    floor_us, cfg = min(floor_times(tables, sms), key=lambda r: r[0])
                    print(f"  {nbytes / 1e6:.1f} MB a layer; read floor {floor_us:.2f} us ({cfg['per_sm']} programs an "
                          f"SM x {cfg['warps']} warps), 85% of it {floor_us / .85:.2f} us")
                    print(f"  {'mode':9} {'S':>3} {'BK':>4} {'warps':>5} {'DR':>2} {'pf':>2} {'nreg':>4} {'pdl':>3} {'programs':>8} "
                          f"{'us':>8} {'% floor':>7}  check")
                for w in (int(v) for v in args.warps.split(",")):
                    for dr, pf, mx, ea, ks in ((d, f, m, a, k) for d in (int(v) for v in args.dr.split(","))
                                               for f in (int(v) for v in args.prefetch.split(","))
                                               for m in (int(v) for v in args.maxnreg.split(","))
                                               for a in (int(v) for v in args.early.split(","))
                                               for k in (int(v) for v in args.ks.split(","))):
                        grid = ne * (isize // s) * ks
                        gacc = torch.zeros(ne * 2 * isize, dtype=torch.float32, device="cuda")
                        gcnt = torch.zeros(ne * (isize // s), dtype=torch.int32, device="cuda")
                        y = torch.zeros(ne, L, dtype=torch.float32, device="cuda")
                        cnt = torch.zeros(ne, dtype=torch.int32, device="cuda")
                        out = torch.zeros(ne, L, dtype=torch.bfloat16, device="cuda")
                        scr = torch.empty(grid, w * 2 * s, dtype=torch.float32, device="cuda")
                        act = torch.empty(grid, s, dtype=torch.bfloat16, device="cuda")
                        for mode in modes:
                            pdls = {"on": (True,), "off": (False,)}.get(args.pdl, (True, False) if mode == "norm"
                                                                         else (True,))
                            for pdl in pdls:
                                kw = dict(s=s, i_size=isize, bk=bk, warps=w, dr=dr, norm=mode == "norm", pdl=pdl,
                                          prefetch=bool(pf), maxnreg=mx or None, early=ea == 1, ks=ks, gacc=gacc,
                                          gcnt=gcnt, stream=ea == 2)
                                head = (f"  {mode:9} {s:3} {bk:4} {w:5} {dr:2}{'k' + str(ks) if ks > 1 else '  '} {pf:2}"
                                        f"{' es'[ea]}{mx or '-':>4} "
                                        f"{'on' if pdl else 'off':>3} {grid:8}")
                                try:
                                    y.zero_()
                                    sk.launch(x, bufs[0], runs, y, cnt, out, norm_w, scr, act, **kw)
                                    torch.cuda.synchronize()
                                    got, ref = (out.float(), want_n) if mode == "norm" else (y.clone(), want)
                                    err = ((got - ref).abs().max() / ref.abs().max()).item()
                                    text = f"rel err {err:.1e}"
                                    if ks == 1:  # the scratch: (run, slice) rows of S (K parts: the last part's)
                                        got_act = act.float().view(ne, isize)
                                        err_a = ((got_act - want_act).abs().max() / want_act.abs().max()).item()
                                        text += f" (act {err_a:.1e})"
                                    text += "" if err < 2e-2 else " WRONG"
                                    if mode == "norm" and (int(cnt.abs().sum()) or float(y.abs().sum())):
                                        text += " (counter or row not back to zero: WRONG)"
                                    if int(gcnt.abs().sum()) or float(gacc.abs().sum()):
                                        text += " (K parts' row or counter not back to zero: WRONG)"

                                    def fn(kw=kw, bufs=bufs, scr=scr, act=act):
                                        for b in bufs:
                                            sk.launch(x, b, runs, y, cnt, out, norm_w, scr, act, **kw)
                                    us = graph_time_us(fn, rep_ms=100) / len(bufs)
                                except Exception as exc:  # a configuration that does not compile or fit: say so
                                    print(f"{head} {type(exc).__name__}: {str(exc)[:300]}")
                                    continue
                                print(f"{head} {us:8.2f} {100 * floor_us / us:6.1f}%  {text}")
        del raw, bufs
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
