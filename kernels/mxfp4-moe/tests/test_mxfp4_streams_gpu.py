"""Two CUDA streams running the expert kernels at once (a server that overlaps two micro-batches, or two
models on one card): the split-K fix-up's tile counters and the run list are per (device, stream), so the
calls of one stream never count or read the other's. Each stream's outputs against the fp32 reference.
Skipped without a GPU and Triton (CPU CI)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import has_module  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from mxfp4_moe import reference as R  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
    pytest.mark.skipif(not has_module("triton"), reason="triton is not installed"),
]

CALLS = 24  # per stream; each call's kernels are queued before any of them has run
# each case is the defaults (GLUON_CONFIG: the run list on, PDL) with the overrides named


@pytest.mark.parametrize("tokens,cfg", [
    (4, {"ranked_per_sm": 512, "ranked_min_iters": 1, "ranked_act_launch": False}),  # ranked list, the largest
    # gate/up split: the fix-up's counters; then the same split added by the act launch (eleventh round)
    (4, {"ranked_per_sm": 512, "ranked_min_iters": 1, "ranked_act_launch": True}),
    (16, {"split_gate_up": 4}),  # token compaction and the run list, the gate/up fix-up's counters
    (32, {"split_gate_up": 2, "split_down": 2}),
])
def test_two_streams_at_once(tokens, cfg):
    from mxfp4_moe import gluon_kernel
    from mxfp4_moe.kernel import GLUON_CONFIG, mxfp4_moe_experts
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = R.random_expert_weights(6, 1024, 512, expert_base=6,
                                 generator=torch.Generator(device="cuda").manual_seed(77), device="cuda")
    ex_t = ex.to_tiled_layout()
    g = torch.Generator().manual_seed(7700 + tokens)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    cases = []  # (stream, x, ids, w, out)
    for i in range(2 * CALLS):
        ids, w = R.route(torch.randn(tokens, 12, generator=g), 4)
        x = (torch.randn(tokens, 1024, generator=g) * 2).to(torch.bfloat16)
        out = torch.full((tokens, 1024), float("nan"), device="cuda")
        cases.append((streams[i % 2], x.cuda(), ids.cuda(), w.cuda(), out))
    torch.cuda.synchronize()
    for s, x, ids, w, out in cases:  # interleaved: stream 0, stream 1, stream 0, ...
        with torch.cuda.stream(s):
            mxfp4_moe_experts(x, ids, w, ex_t, decode="gluon", config={**GLUON_CONFIG, **cfg}, out=out)
    torch.cuda.synchronize()
    for i, (s, x, ids, w, out) in enumerate(cases):
        ref = R.moe_experts_reference(x, ids, w, ex).float()
        got = out.float()
        assert bool(torch.isfinite(got).all()), f"call {i} (stream {i % 2}): NaN or unwritten rows"
        rel = ((got - ref).norm() / ref.norm()).item()
        assert rel < 1e-2, f"call {i} (stream {i % 2}): relative error {rel:.3e}"
    keys = {k for k in gluon_kernel._COUNTERS}
    assert {(s.device.type, s.device.index, s.cuda_stream) for s in streams} <= keys, keys
    for bufs in gluon_kernel._COUNTERS.values():
        assert int(bufs[-1].count_nonzero()) == 0  # every stream's counters back to 0
    if tokens > 8:  # token compaction: each stream planned its runs into its own list
        from mxfp4_moe import kernel as K
        assert {(s.device.type, s.device.index, s.cuda_stream) for s in streams} <= set(K._PLANS), set(K._PLANS)
