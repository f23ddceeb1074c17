"""The timer stamps (kernel.TRACE; bench/trace_case.py) on the GPU: the traced kernels still give the
reference's result, every program stamps its start and end, a program's stamps come in its order, and the down
GEMM's programs get past their wait only after the gate/up GEMM's last program ended, the norm-combine's after the
down GEMM's (the one clock of every SM, and the waits of programmatic dependent launch). Skipped without a GPU of compute capability 9.0 (the
waits) and Triton (CPU CI)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import has_module  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from mxfp4_moe import reference as R  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                       reason="needs an NVIDIA GPU of compute capability 9.0"),
    pytest.mark.skipif(not has_module("triton"), reason="triton is not installed"),
]

# the stamps of a working program, in the order it takes them (ranked_kernel / fused_kernel docstrings)
ORDER = {"gate_up": (0, 1, 2, 3, 4, 5, 6), "down": (0, 1, 2, 3, 4, 5, 6), "fused": (0, 1, 2, 3, 4, 5, 6, 7),
         "combine": (0, 1, 2, 3, 4, 5, 6)}
SLACK_NS = 1000  # the timer's steps (bench/trace_case.py prints them): at most this much


def _experts(seed: int):
    return R.random_expert_weights(6, 1024, 512, expert_base=6,
                                   generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda")


@pytest.mark.parametrize("cfg, names", [
    ({"ranked": True}, ["gate_up", "down", "combine"]),
    ({"ranked": True, "ranked_stages": 3}, ["gate_up", "down", "combine"]),
    ({"ranked": True, "ranked_per_sm": 512, "ranked_min_iters": 1, "ranked_act_launch": False}, ["gate_up", "down", "combine"]),
    ({"ranked": True, "ranked_per_sm": 512, "ranked_min_iters": 1, "ranked_act_launch": True}, ["gate_up", "down", "combine"]),
    ({"ranked": True, "fused_few": True, "fused_max_bound": 64}, ["fused"]),
])
def test_traced_kernels(cfg, names):
    from _kernel_cases import assert_ok, check_case
    from mxfp4_moe import kernel as K
    torch.backends.cuda.matmul.allow_tf32 = False
    ex = _experts(61)
    ex_t = ex.to_tiled_layout()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for tokens in (1, 3, 8):
        K.TRACE = []
        try:
            # every token to the same 4 local experts: every launch has work
            res = check_case(ex, ex_t, tokens, "one-expert", 12, 4, 61000 + tokens, "cuda", "gluon", cfg)
            torch.cuda.synchronize()
            entries = list(K.TRACE)
        finally:
            K.TRACE = None
        assert_ok(res, f"traced {cfg} batch {tokens}")
        assert [n for n, _ in entries] == names, entries
        rows = {n: b.cpu() for n, b in entries}
        for name, buf in rows.items():
            end = ORDER[name][-1]
            assert bool((buf[:, 0] > 0).all()) and bool((buf[:, end] > 0).all()), f"{name}: a program unstamped"
            working = buf[buf[:, 8] > 0] if name != "fused" else buf[buf[:, 2] > 0]  # (fused: a gate/up item)
            assert len(working) > 0, name
            stamps = working[:, list(ORDER[name])]
            assert bool((stamps[:, 1:] >= stamps[:, :-1]).all()), f"{name}: stamps out of order"
            for row in buf.tolist():  # every program: the stamps it took, in its order (no garbage: zeroed rows)
                took = [row[s] for s in ORDER[name] if row[s] != 0]
                assert took == sorted(took) and all(t > 0 for t in took), f"{name}: {row}"
                assert all(v in (0, 1) for v in (row[9],)) and all(v == 0 for v in row[11:15]), row
                # slot 15: the program's SM + 1 where ranked_kernel._trace_open opened the row (the norm-combine's
                # rows are kernel.py's own: 0)
                assert (row[15] == 0) if name == "combine" else (1 <= row[15] <= sms), (name, row[15], sms)
        if "down" in rows:  # the down GEMM's wait ends after the gate/up GEMM's last program
            first_past_wait = int(rows["down"][rows["down"][:, 8] > 0][:, 2].min())
            assert first_past_wait + SLACK_NS >= int(rows["gate_up"][:, 6].max())
            # the norm-combine (thirteenth round's stamps) gets past its wait after the down GEMM's last program
            first_combine = int(rows["combine"][rows["combine"][:, 8] > 0][:, 2].min())
            assert first_combine + SLACK_NS >= int(rows["down"][:, 6].max())
            if cfg.get("ranked_min_iters") == 1:  # splits of several parts: some programs ran the fix-up, or
                # none with the act launch between the GEMMs (eleventh round; its programs are not traced)
                assert (int(rows["gate_up"][:, 9].sum()) > 0) == (not cfg["ranked_act_launch"])
    # off again: no stamps and nothing appended
    res = check_case(ex, ex_t, 2, "random", 12, 4, 61100, "cuda", "gluon", cfg)
    assert_ok(res, "untraced")
    assert K.TRACE is None
