#!/usr/bin/env python3
"""Compile the expert kernels for sm_90 without a GPU and print registers, spills and shared memory.

    python bench/compile_check.py [--variant muse] [--decode mma,asm2,explicit] [--config BN,BK,W,S,SWAP]

Uses the ptxas and cuobjdump that Triton's wheel carries (no CUDA install, no GPU). The Triton version
here may differ from the GPU machine's: treat the figures as leads (README "Measure").
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from mxfp4_moe import kernel as K  # noqa: E402
from mxfp4_moe.variants import load_variant  # noqa: E402


def _compile(fn, sig: dict, consts: dict, div16: list[str], num_warps: int, num_stages: int, arch: int):
    signature = {name: sig.get(name, "constexpr") for name in fn.arg_names}
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in div16}
    src = ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


def resource_usage(compiled) -> str:
    cubin = compiled.asm["cubin"]
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+).*?STACK:(\d+).*?SHARED:(\d+).*?LOCAL:(\d+)", out)
    regs, stack, shared, local = m.groups() if m else ("?",) * 4
    return f"regs {regs}, stack {stack}, local {local}, static shared {shared}, dyn shared {compiled.metadata.shared}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="muse")
    ap.add_argument("--decode", default="mma,asm2,explicit,dot_scaled")
    ap.add_argument("--config", action="append",
                    help="BN,BK,warps,stages,swap (repeatable; default: kernel.default_config(decode))")
    ap.add_argument("--block-m", default="16,32")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--split", type=int, default=1, help="SPLIT_K of both GEMMs")
    args = ap.parse_args()
    v = load_variant(args.variant)
    topk = v.top_k
    def cfgs_of(decode):
        if args.config:
            return [tuple(int(x) for x in c.split(",")) for c in args.config]
        d = K.default_config(decode)
        return list(dict.fromkeys([d["gate_up"], d["down"]]))
    common_sig = {"ids_ptr": "*i32", "w_ptr": "*u8", "s_ptr": "*u8", "T": "i32", "expert_base": "i32",
                  "n_local": "i32", "stride_we": "i64", "stride_wn": "i32", "stride_se": "i32", "stride_sn": "i32"}
    div16 = ["ids_ptr", "w_ptr", "s_ptr", "stride_we", "stride_wn", "stride_sn", "stride_se"]
    ok = True
    for decode in args.decode.split(","):
        for cfg in cfgs_of(decode):
            bn, bk, nw, ns = cfg[:4]
            swap = bool(cfg[4]) if len(cfg) > 4 else False
            for bm in (int(b) for b in args.block_m.split(",")):
                consts = {"TOPK": topk, "TOPK_P2": K._pow2(topk), "P_P2": K._pow2(K.MAX_TOKENS * topk),
                          "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "DECODE": K.DECODE_MODES[decode],
                          "F32_DOT": False, "SWAP_AB": swap and decode != "dot_scaled", "SPLIT_K": args.split}
                for name, fn, extra_sig, extra_c in (
                    ("gate_up", K._gate_up_kernel,
                     {"x_ptr": "*bf16", "act_ptr": "*bf16", "h_ptr": "*fp32", "stride_xm": "i32", "stride_am": "i32",
                      "stride_hm": "i32"},
                     {"I": v.expert_size, "K": v.latent_size}),
                    ("down", K._down_kernel,
                     {"act_ptr": "*bf16", "y_ptr": "*fp32", "stride_am": "i32", "stride_ym": "i32"},
                     {"K": v.expert_size})):
                    label = f"{decode:10} {name:7} BM{bm:<2} cfg {bn},{bk},{nw}w,{ns}s{',swap' if swap else ''}"
                    try:
                        c = _compile(fn, {**common_sig, **extra_sig}, {**consts, **extra_c},
                                     div16 + [k for k in extra_sig if k.endswith("_ptr") or k.startswith("stride")],
                                     nw, ns, args.arch)
                        print(f"{label}: {resource_usage(c)}")
                    except Exception as exc:  # noqa: BLE001
                        ok = False
                        print(f"{label}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
