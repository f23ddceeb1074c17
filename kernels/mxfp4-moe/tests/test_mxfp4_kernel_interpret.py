"""The Triton kernels' code on the CPU, through Triton's interpreter (TRITON_INTERPRET=1), against the
reference in fp32: the indexing, the in-register E2M1/E8M0 decode and the routing logic, without a GPU.
Speed and the GPU's code generation are the GPU tests' and the benchmark's business."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import has_module, run_interpreted  # noqa: E402

import pytest  # noqa: E402

pytestmark = pytest.mark.skipif(not has_module("triton"), reason="triton is not installed")


def _has_gpu() -> bool:
    import torch
    return torch.cuda.is_available()

_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from mxfp4_moe import reference as R
from mxfp4_moe.variants import load_variant
from _kernel_cases import check_case, check_tp_case
v = load_variant("tiny")
results = []
for decode in ("dot_scaled", "explicit", "mma_portable"):  # the PTX decodes need a GPU
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                 generator=torch.Generator().manual_seed(7 + len(decode)))
    # mma_portable: the `mma` decode's bit logic in Triton ops, on weights re-laid out at load time
    ex_k = ex.to_mma_layout() if decode.startswith("mma") else ex
    # small tiles so the K loop and several N blocks run even at tiny sizes
    cfg = {"gate_up": (32, 64, 4, 1), "down": (64, 32, 4, 1)}
    for tokens, kind in [(1, "random"), (17, "random"), (32, "one-expert"), (5, "top1-one-expert"),
                         (33, "random")]:
        top_k = 1 if kind.startswith("top1") else v.top_k
        res = check_case(ex, ex_k, tokens, kind, v.experts, top_k, 100 + tokens, "cpu", decode, cfg)
        res.update(tokens=tokens, kind=kind, decode=decode)
        results.append(res)
    # split-K: partial sums added atomically, silu applied by the down kernel; the norm-combine reading its
    # router and norm weights first (combine_early, thirteenth round)
    split = {"gate_up": (64, 32, 4, 1), "down": (32, 32, 4, 1), "split_gate_up": 2, "split_down": 4,
             "combine_early": True}
    for tokens in (3,):
        res = check_case(ex, ex_k, tokens, "random", v.experts, v.top_k, 200 + tokens, "cpu", decode, split)
        res.update(tokens=tokens, kind="split-k", decode=decode)
        results.append(res)
    sep = {"gate_up": (64, 64, 4, 1), "down": (64, 64, 4, 1), "separate_gate_up": True}
    res = check_case(ex, ex_k, 9, "random", v.experts, v.top_k, 300, "cpu", decode, sep)
    res.update(tokens=9, kind="separate-gate-up", decode=decode)
    results.append(res)
    # persistent stream-K programs (runs of K iterations across tile boundaries, partial sums added)
    sk = {"gate_up": (32, 64, 4, 1), "down": (64, 32, 4, 1), "stream_k": True, "programs_per_sm": 3}
    res = check_case(ex, ex_k, 6, "random", v.experts, v.top_k, 400, "cpu", decode, sk)
    res.update(tokens=6, kind="stream-k", decode=decode)
    results.append(res)
# the mma decode's bit logic under the interpreter, bit for bit (scales 34..160: the interpreter flushes
# BF16 subnormal products, which the GPU keeps down to scale 27)
from mxfp4_moe import format as F
from mxfp4_moe.kernel import dequantize_mxfp4_triton
q = torch.arange(256, dtype=torch.uint8).repeat(127, 1)
s = torch.arange(34, 161, dtype=torch.uint8)[:, None].repeat(1, 16)
got = dequantize_mxfp4_triton(F.to_mma_layout(q), s, decode="mma_portable")
exact = bool(torch.equal(got.view(torch.int16), F.dequantize_mxfp4(q, s, torch.bfloat16).view(torch.int16)))
# the TP split (partials mode: each slice's pre-norm outputs, their sum against the unsplit experts)
ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                             generator=torch.Generator().manual_seed(9))
tp = [check_tp_case(ex, 3, v.experts, v.top_k, 2, 500, "cpu", "explicit",
                    {"gate_up": (32, 64, 4, 1), "down": (64, 32, 4, 1)})]
print("RESULTS" + json.dumps(results))
print("TP" + json.dumps(tp))
print("MMA_EXACT" + json.dumps(exact))
"""


@pytest.mark.skipif(_has_gpu(), reason="a GPU is present: the GPU tests run the kernels themselves")
def test_kernels_under_interpreter_match_reference():
    r = run_interpreted(_SCRIPT, str(Path(__file__).resolve().parent))
    assert r.returncode == 0, r.stderr[-4000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS")][-1]
    from _kernel_cases import assert_ok
    results = json.loads(line[len("RESULTS"):])
    assert len(results) == 24
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("MMA_EXACT")][-1] == "MMA_EXACTtrue"
    for res in results:
        assert_ok(res, f"interpreted, decode={res['decode']}, batch {res['tokens']}, {res['kind']}")
    tp = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("TP")][-1][2:])
    for res in tp:
        assert_ok(res, "interpreted, TP split 2 partials")
