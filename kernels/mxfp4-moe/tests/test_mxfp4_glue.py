"""The switch MUSE_SPARK_MXFP4_KERNELS (CPU): the choice, the error on a bad value, said once."""

from __future__ import annotations

import dataclasses
import functools
import logging
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import PKG_ROOT  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from mxfp4_moe import glue  # noqa: E402
from mxfp4_moe import reference as R  # noqa: E402

GPU = (True, "a test GPU, Triton x")
NO_GPU = (False, "no GPU visible to torch")


@pytest.fixture(autouse=True)
def _fresh_choice():
    glue.reset_backend()
    yield
    glue.reset_backend()


@pytest.mark.parametrize("value,want", [(None, True), ("", True), ("1", True), (" 1 ", True), ("0", False)])
def test_parse_switch(value, want):
    assert glue.parse_switch(value) is want


@pytest.mark.parametrize("bad", ["2", "yes", "true", "on", "-1", "1.0", "kernels"])
def test_bad_value_is_an_error(bad):
    with pytest.raises(glue.SwitchError, match="MUSE_SPARK_MXFP4_KERNELS must be 0"):
        glue.choose({glue.ENV_VAR: bad}, GPU)
    with pytest.raises(glue.SwitchError):
        glue.init_backend({glue.ENV_VAR: bad}, NO_GPU)


def test_kernels_where_gpu_and_triton():
    c = glue.choose({glue.ENV_VAR: "1"}, GPU)
    assert c.backend == glue.KERNEL and c.requested
    assert glue.choose({}, GPU).backend == glue.KERNEL  # unset means 1


def test_reference_without_toolchain():
    c = glue.choose({glue.ENV_VAR: "1"}, NO_GPU)
    assert c.backend == glue.REFERENCE and c.requested and "no GPU" in c.reason


def test_zero_means_reference_even_with_gpu():
    c = glue.choose({glue.ENV_VAR: "0"}, GPU)
    assert c.backend == glue.REFERENCE and not c.requested


def test_choice_on_this_machine_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("this test checks the CPU machine's choice")
    present, reason = glue.detect_toolchain()
    assert not present and reason
    assert glue.choose({glue.ENV_VAR: "1"}).backend == glue.REFERENCE


def test_said_once_at_start(caplog):
    caplog.set_level(logging.INFO, logger="vllm.muse_spark.mxfp4")
    first = glue.init_backend({glue.ENV_VAR: "1"}, NO_GPU)
    again = glue.init_backend({glue.ENV_VAR: "0"}, GPU)  # later calls keep the first choice
    assert again is first
    msgs = [r.getMessage() for r in caplog.records if r.name == "vllm.muse_spark.mxfp4"]
    assert len(msgs) == 1
    assert "MUSE_SPARK_MXFP4_KERNELS=1" in msgs[0] and "reference path" in msgs[0]


def _case(seed: int, latent: int = 64, expert_size: int = 64):
    """4 local experts, 3 tokens routed top-2: (experts, ids, weights, x_lat)."""
    g = torch.Generator().manual_seed(seed)
    ex = R.random_expert_weights(4, latent, expert_size, generator=g)
    ids, w = R.route(torch.randn(3, 4, generator=g), 2)
    return ex, ids, w, torch.randn(3, latent, generator=g).to(torch.bfloat16)


def test_dispatch_reference_runs_the_stock_op(monkeypatch):
    monkeypatch.setenv(glue.ENV_VAR, "0")
    ex, ids, w, x = _case(20)
    out = glue.moe_experts(x, ids, w, ex)
    assert torch.equal(out, R.moe_experts_reference(x, ids, w, ex, dtype=torch.bfloat16))
    assert glue.init_backend().backend == glue.REFERENCE


def test_bad_value_from_the_environment_fails_the_process():
    code = ("import sys; sys.path.insert(0, %r); from mxfp4_moe import glue; glue.init_backend()" % str(PKG_ROOT))
    r = subprocess.run([sys.executable, "-c", code], env={"MUSE_SPARK_MXFP4_KERNELS": "maybe", "PATH": "/usr/bin"},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "SwitchError" in r.stderr and "'maybe'" in r.stderr


def test_build_skips_cleanly_without_toolchain():
    if torch.cuda.is_available():
        pytest.skip("the CPU machine's build step")
    r = subprocess.run([sys.executable, "-m", "mxfp4_moe.build"], cwd=PKG_ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "skipped" in r.stdout
    r = subprocess.run([sys.executable, "-m", "mxfp4_moe.build", "--require"], cwd=PKG_ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 3
    r = subprocess.run(["bash", str(PKG_ROOT / "install.sh"), sys.executable], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "skipped" in r.stdout, r.stderr


def test_prepare_experts_keeps_the_checkpoint_layout_for_the_reference(monkeypatch):
    monkeypatch.setenv(glue.ENV_VAR, "0")
    ex = R.random_expert_weights(2, 64, 64, generator=torch.Generator().manual_seed(21))
    assert glue.prepare_experts(ex) is ex


def test_dispatch_reference_takes_the_mma_layout(monkeypatch):
    """Weights re-laid out for the kernels' `mma` decode give the same stock-path result."""
    monkeypatch.setenv(glue.ENV_VAR, "0")
    ex, ids, w, x = _case(22)
    exm = ex.to_mma_layout()
    assert exm.layout == "mma" and not torch.equal(exm.w13, ex.w13)
    assert torch.equal(glue.moe_experts(x, ids, w, exm), glue.moe_experts(x, ids, w, ex))


def test_dispatch_reference_takes_the_tiled_layout(monkeypatch):
    """Weights re-laid out for the gluon kernels (tiled; w13's gate and up rows interleaved, scales moved
    too) give the same stock-path result, and convert back to the checkpoint's bytes exactly."""
    monkeypatch.setenv(glue.ENV_VAR, "0")
    ex, ids, w, x = _case(23, latent=256, expert_size=128)
    ext = ex.to_tiled_layout()
    assert ext.layout == "tiled" and ext.tiles == ((32, 256), (32, 128)) == ex.default_tiles()
    assert not torch.equal(ext.w13_scale, ex.w13_scale)
    assert torch.equal(glue.moe_experts(x, ids, w, ext), glue.moe_experts(x, ids, w, ex))
    back = ext.to_quark_layout()
    for name in ("w13", "w13_scale", "w2", "w2_scale"):
        assert torch.equal(getattr(back, name), getattr(ex, name)), name
    assert ext.to_tiled_layout() is ext and ext.to_mma_layout().layout == "mma"


def test_gluon_kernels_are_not_chosen_without_a_gpu():
    ex = R.random_expert_weights(2, 128, 128, generator=torch.Generator().manual_seed(24))
    ok, why = glue.gluon_supported(ex)
    assert not ok and why


def test_expert_weights_refuse_unknown_layouts_and_bad_tiles():
    ex = R.random_expert_weights(2, 384, 128, generator=torch.Generator().manual_seed(25))
    with pytest.raises(ValueError, match="layout must be one of"):
        dataclasses.replace(ex, layout="MMA")
    for bad in (((32, 256),), "32x256", ((32, 0), (32, 128)), ((32.5, 256), (32, 128))):
        with pytest.raises(ValueError, match="tiles must be"):
            ex.to_tiled_layout(bad)
    assert ex.default_tiles() == ((32, 128), (32, 128))  # 384 is not a multiple of 256
    t = ex.to_tiled_layout([[32, 128], [32, 128]])  # lists are normalized: the same tiles again is a no-op
    assert t.tiles == ((32, 128), (32, 128)) and t.to_tiled_layout(((32, 128), (32, 128))) is t


def test_kernel_entry_refuses_cpu_tensors(monkeypatch):
    from mxfp4_moe.kernel import mxfp4_moe_experts
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    ex = R.random_expert_weights(2, 128, 128, generator=torch.Generator().manual_seed(26))
    with pytest.raises(ValueError, match="run on a GPU"):
        mxfp4_moe_experts(torch.zeros(1, 128, dtype=torch.bfloat16), torch.zeros(1, 2, dtype=torch.int64),
                          torch.ones(1, 2), ex)


def test_to_layout_reaches_every_layout_and_back():
    ex = R.random_expert_weights(2, 256, 128, generator=torch.Generator().manual_seed(27))
    for layout in R.LAYOUTS:
        other = ex.to_layout(layout)
        assert other.layout == layout
        back = other.to_layout("quark")
        assert all(torch.equal(getattr(back, n), getattr(ex, n)) for n in ("w13", "w13_scale", "w2", "w2_scale"))
    tiled = ex.to_layout("tiled", ((16, 128), (16, 128)))
    assert tiled.to_layout("tiled") is tiled and tiled.to_layout("tiled", ((32, 256), (32, 128))).tiles == (
        (32, 256), (32, 128))
    with pytest.raises(ValueError, match="layout must be one of"):
        ex.to_layout("MMA")


def test_persistent_grid_size_from_registers():
    """The gluon GEMMs' persistent grid: one-warp programs an SM holds at a kernel's registers (Nsight Compute
    read 20 blocks at 93-96 registers on the H200); the Gluon module imports where Triton has Gluon."""
    gk = pytest.importorskip("mxfp4_moe.gluon_kernel", reason="Triton without Gluon")
    assert [gk.resident_per_sm(r) for r in (32, 64, 80, 93, 96, 104, 128, 168, 255)] == [
        32, 32, 24, 20, 20, 16, 16, 12, 8]


def test_ranked_splits_and_grid_cover_every_routing():
    """The ranked kernels' run-time K split (ranked_kernel.run_split, the device's rule) and the grid the host
    launches for it: one item a program for any number of owning slots up to the bound; EP8 at batch 1 (one
    expert of 256 gate/up row blocks, 16 K tiles) takes split 8 where the host-sized grid had 2."""
    pytest.importorskip("triton.experimental.gluon", reason="Triton without Gluon")
    from mxfp4_moe import ranked_kernel as rk
    assert [rk.max_split(16, m) for m in (1, 2, 8, 16, 32)] == [16, 8, 2, 1, 1]
    assert rk.max_split(4, 2) == 2 and rk.max_split(6, 1) == 2
    budget = 32 * 132
    assert rk.run_split(1, 256, 8, budget) == 8 and rk.run_split(2, 256, 8, budget) == 8
    assert rk.run_split(8, 256, 8, budget) == 2 and rk.run_split(20, 256, 8, budget) == 1
    for bound, grid_n, max_s in ((8, 256, 8), (8, 64, 8), (32, 64, 8), (64, 128, 2), (1, 16, 16)):
        g = rk.grid_size(bound, grid_n, max_s, budget)
        items = [n * grid_n * rk.run_split(n, grid_n, max_s, budget) for n in range(1, bound + 1)]
        assert g == max(items) and g >= bound * grid_n


def test_ranked_act_launch_auto_only_where_every_routing_splits():
    """ranked_kernel.act_launch_taken (config ranked_act_launch, eleventh round): "auto" launches the act kernel
    only where the gate/up GEMM splits K for every number of experts that can be routed here; on the H200's
    batch-1 budget (16 an SM, 132 SMs) the muse EP2 x TP4 slice (64 row blocks, 16 K tiles) splits 4 even with
    8 experts routed, local and EP8 (256 row blocks) take split 1 at 8: off; True wherever a split can happen,
    False never; other values refused."""
    pytest.importorskip("triton.experimental.gluon", reason="Triton without Gluon")
    from mxfp4_moe import ranked_kernel as rk
    budget = 16 * 132
    assert rk.run_split(8, 64, 8, budget) == 4 and rk.run_split(8, 256, 8, budget) == 1
    assert rk.act_launch_taken("auto", 8, 64, 8, budget, 16)
    assert not rk.act_launch_taken("auto", 8, 256, 8, budget, 16)
    assert rk.act_launch_taken("auto", 1, 256, 8, budget, 16)  # one expert at most: split 8
    assert not rk.act_launch_taken("auto", 32, 64, 8, 20 * 132, 16)  # batch 4 of EP2 x TP4: 32 can come
    assert rk.act_launch_taken(True, 8, 256, 8, budget) and not rk.act_launch_taken(True, 8, 256, 1, budget)
    assert not rk.act_launch_taken(False, 1, 256, 8, budget)
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="ranked_act_launch"):
            rk.act_launch_taken(bad, 8, 64, 8, budget)


def test_gluon_rows_refused_by_its_key():
    """kernel.gluon_rows_of (config gluon_rows, twelfth round): 1 or 2, absent 1; any other value refused naming the
    config key (it used to say "rows", the argument's name, and only on the batch 9-32 path)."""
    from mxfp4_moe import kernel as K
    assert K.gluon_rows_of({}) == 1 and K.gluon_rows_of({"gluon_rows": 2}) == 2
    assert K.gluon_rows_of(K.GLUON_CONFIG) == 1
    for bad in (3, 0, True, "2", None, 2.0):
        with pytest.raises(ValueError, match="gluon_rows must be 1 or 2"):
            K.gluon_rows_of({"gluon_rows": bad})


def test_gluon_warps_refused_by_its_key():
    """kernel.gluon_warps_of (config gluon_warps, twenty-first round): 1, 2, 4 or 8, absent 1; any other value refused
    naming the config key; gluon_kernel.experts_forward refuses another ``warps`` before it launches anything."""
    from mxfp4_moe import kernel as K
    assert K.gluon_warps_of({}) == 1 and K.gluon_warps_of({"gluon_warps": 4}) == 4
    assert K.gluon_warps_of(K.GLUON_CONFIG) in (1, 2, 4, 8)
    for bad in (3, 0, 16, True, "4", None, 4.0):
        with pytest.raises(ValueError, match="gluon_warps must be 1, 2, 4 or 8"):
            K.gluon_warps_of({"gluon_warps": bad})
    gk = pytest.importorskip("mxfp4_moe.gluon_kernel", reason="Triton without Gluon")
    with pytest.raises(ValueError, match="warps must be 1, 2, 4 or 8, got 3"):
        gk.experts_forward(torch.zeros(1, 128, dtype=torch.bfloat16), torch.zeros(1, 1, dtype=torch.int32),
                           torch.ones(1, 1), None, torch.zeros(1, 128), 1e-6, sms=1, warps=3)
    # the layouts: one warp takes 16-row tiles too; several warps 32 rows each at least
    assert gk.layouts(16, 256, 8) and gk.layouts(128, 256, 16, 4) and gk.layouts(32, 128, 8, 1)
    for block_n, warps in ((64, 4), (16, 2), (256, 3)):
        with pytest.raises(ValueError, match="warps must be 1, 2, 4 or 8 with BLOCK_N >= 32 x warps"):
            gk.layouts(block_n, 256, 8, warps)


def test_config_keys_are_those_the_kernels_read_and_the_benchmarks_refuse_others(tmp_path):
    """kernel.CONFIG_KEYS holds every key the package's source reads from a configuration (config.get("k"),
    config["k"], and the split_<GEMM> overrides), and nothing else; kernel.unknown_config_keys names the others with
    close matches, in the ranked_few and large_batch overrides too. Found by a fresh user: a benchmark's --ab with a
    key no kernel reads any more (an option of a past round) timed the default under that name; the benchmark and
    the trace now refuse it (exit 2) before they touch a GPU."""
    import re

    from mxfp4_moe import kernel as K
    read = set()
    for f in (PKG_ROOT / "mxfp4_moe").glob("*.py"):
        read |= set(re.findall(r"config(?:\.get\(|\[)\"([a-z0-9_]+)\"", f.read_text()))
    read |= {"split_" + g for g in ("gate_up", "down")}  # _split_k's f"split_{key}"
    read.discard("split_")
    assert read == set(K.CONFIG_KEYS), (read ^ set(K.CONFIG_KEYS))
    assert K.unknown_config_keys(K.GLUON_CONFIG) == [] and K.unknown_config_keys(K.MMA_CONFIG) == []
    said = K.unknown_config_keys({"ranked_norm_tail": 1, "combine_erly": True, "ranked_few": {"ranked_stage": 3}})
    assert said[0].startswith("'ranked_norm_tail'") and said[1].startswith("'combine_erly' (did you mean combine_early")
    assert said[2].startswith("'ranked_stage' (did you mean ranked_stages"), said
    # and what is no configuration at all (found by a fresh user: tracebacks, exit 1): not JSON, not an object
    for i, (args, says) in enumerate((
                       (["--ab", '{"x":{"combine_erly":true}}'], "--ab x: no kernel reads 'combine_erly'"),
                       (["--ab", '{"x":{"ranked_few":{"ranked_stage":3}}}'], "no kernel reads 'ranked_stage'"),
                       (["--config", '{"combine_erly":true}'], "--config: no kernel reads 'combine_erly'"),
                       (["--config", '{"combine_early":true'], "--config: not JSON"),
                       (["--config", "[1]"], "--config: a JSON object of configuration keys"),
                       (["--ab", "[1]"], "--ab: a JSON object of labels"),
                       (["--ab", '{"x":5}'], "--ab x: a JSON object of configuration keys"),
                       (["--ab", '{"x":{"ranked_few":5}}'], "--ab x: ranked_few must be an object"))):
        for tool in ("bench_mxfp4_moe.py", "trace_case.py"):
            if i == 0:  # the first: the tool's own process, as a user runs it
                r = subprocess.run([sys.executable, str(PKG_ROOT / "bench" / tool), *args], capture_output=True,
                                   text=True, cwd=tmp_path)
                rc, err = r.returncode, r.stderr
            else:  # the others through the same main() in this process (each process imports torch: 5 s)
                rc, err = _tool_main(tool, args)
            assert rc == 2 and says in err and "Traceback" not in err, (tool, args, rc, err[-500:])


@functools.cache
def _bench_module(tool: str):
    """bench/``tool`` loaded once as a module (its imports: torch, triton)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_bench_{tool[:-3]}", PKG_ROOT / "bench" / tool)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tool_main(tool: str, args: list[str]) -> tuple[int, str]:
    """bench/``tool``'s main() with ``args`` as its command line, in this process: its return code and stderr."""
    import contextlib
    import io

    mod = _bench_module(tool)
    err, argv = io.StringIO(), sys.argv
    sys.argv = [tool, *args]
    try:
        with contextlib.redirect_stderr(err):
            rc = mod.main()
    finally:
        sys.argv = argv
    return rc, err.getvalue()


def test_ranked_kernels_take_only_the_shapes_run_on_the_gpu():
    """ranked_kernel.fits: a gate/up GEMM of two or more K tiles of 256+ elements (the muse shapes, TP
    slices included); the tiny variant's one 128-wide tile, 128-wide gate/up tiles and other layouts go to
    gluon_kernel."""
    pytest.importorskip("triton.experimental.gluon", reason="Triton without Gluon")
    from mxfp4_moe import ranked_kernel as rk
    ex = R.random_expert_weights(2, 1024, 512, generator=torch.Generator().manual_seed(3))
    assert rk.fits(ex.to_tiled_layout()) and rk.fits(ex.tp_slice(0, 4).to_tiled_layout())
    assert not rk.fits(ex) and not rk.fits(ex.to_tiled_layout(((32, 128), (32, 128))))
    tiny = R.random_expert_weights(2, 128, 128, generator=torch.Generator().manual_seed(4)).to_tiled_layout()
    assert not rk.fits(tiny)
    assert not rk.fits(ex.to_tiled_layout(((32, 256), (8, 256))))  # gluon_kernel refuses these tiles


def test_ranked_wave_rule_counts_waves():
    """ranked_kernel.run_split's wave rule (config ranked_wave_cost): waves x (K tiles per item + the item's
    fixed cost), ties to the smaller split. Local batch 4 on the H200 (132 SMs, 20 resident an SM): 25
    experts' down GEMM (128 row blocks, 16 K tiles) takes split 2 (3 waves of 8 + 2 against 2 of 16 + 2), the
    budget rule 1; 20 experts stay at 1 / 1; one expert under EP8 still splits to the largest part count."""
    pytest.importorskip("triton.experimental.gluon", reason="Triton without Gluon")
    from mxfp4_moe import ranked_kernel as rk
    res = 20 * 132
    assert rk.run_split(25, 128, 8, res, 16, 2) == 2 and rk.run_split(25, 128, 8, res) == 1
    assert rk.run_split(20, 128, 8, res, 16, 2) == 1 and rk.run_split(20, 256, 8, res, 16, 2) == 1
    assert rk.run_split(1, 256, 8, res, 16, 2) == 8
    # the rule itself, against a brute force over the powers of two
    for n, grid_n, max_s, c in ((25, 128, 8, 2), (25, 256, 8, 4), (3, 64, 16, 1), (40, 256, 1, 2)):
        cands = [s for s in (1, 2, 4, 8, 16) if s <= max_s]
        cost = {s: -(-n * grid_n * s // res) * (16 // s + c) for s in cands}
        assert rk.run_split(n, grid_n, max_s, res, 16, c) == min(cands, key=lambda s: (cost[s], s))
        g = rk.grid_size(n, grid_n, max_s, res, 16, c)
        assert g == max(m * grid_n * rk.run_split(m, grid_n, max_s, res, 16, c) for m in range(1, n + 1))


def test_ranked_refuses_bad_ring_and_wave_options():
    """ranked_stages outside 0, 2..8 and a negative ranked_wave_cost are refused before any launch, naming
    the option."""
    pytest.importorskip("triton.experimental.gluon", reason="Triton without Gluon")
    from mxfp4_moe import ranked_kernel as rk
    ex = R.random_expert_weights(2, 1024, 512, generator=torch.Generator().manual_seed(5)).to_tiled_layout()
    x = torch.zeros(1, 1024, dtype=torch.bfloat16)
    ids = torch.zeros(1, 2, dtype=torch.int64)
    wts = torch.ones(1, 2)
    out = torch.zeros(1, 1024)
    for bad in (1, 9, -1, 2.0):
        with pytest.raises(ValueError, match="ranked_stages"):
            rk.experts_forward(x, ids, wts, ex, out, 1e-6, sms=8, stages=bad)
    with pytest.raises(ValueError, match="ranked_fixup_unroll"):
        rk.experts_forward(x, ids, wts, ex, out, 1e-6, sms=8, fixup_unroll=3)
    with pytest.raises(ValueError, match="ranked_wave_cost"):
        rk.experts_forward(x, ids, wts, ex, out, 1e-6, sms=8, wave_cost=-1)
    assert rk.stages_smem(3, 32, 256) == 3 * (4096 + 256)


def test_ranked_few_overrides_where_few_experts_can_be_routed():
    """kernel.ranked_config: the ``ranked_few`` overrides (by default the 3-slot cp.async ring with 16 programs
    an SM, no gate/up-only cap) apply where at most 8 experts can be routed to the card (batch 1 of top-8, or
    a card of 8 or fewer experts); from batch 2 on, 20 programs an SM and the gate/up GEMM at 96 registers.
    Since the sixth round ``ranked_maxnreg`` 96 caps both GEMMs at batch 1, ``maxnreg`` 96 at batches 9-32."""
    from mxfp4_moe.kernel import GLUON_CONFIG, ranked_config
    assert ranked_config(GLUON_CONFIG, 8, 128)["ranked_stages"] == 3
    assert ranked_config(GLUON_CONFIG, 8, 128)["ranked_per_sm"] == 16
    assert ranked_config(GLUON_CONFIG, 8, 128)["ranked_maxnreg_gate_up"] is None
    # ninth round: K parts of one tile at batch 1 (ep8 / ep2tp4 batch 1 -5%); two from batch 2 on
    assert ranked_config(GLUON_CONFIG, 8, 128)["ranked_min_iters"] == 1
    assert ranked_config(GLUON_CONFIG, 16, 128)["ranked_min_iters"] == 2
    assert ranked_config(GLUON_CONFIG, 16, 128) is GLUON_CONFIG and GLUON_CONFIG["ranked_stages"] == 0
    assert GLUON_CONFIG["ranked_per_sm"] == 20 and GLUON_CONFIG["ranked_maxnreg_gate_up"] == 96
    # sixth round: both GEMMs capped at 96 registers at batches 9-32 and (ranked) at batch 1
    assert GLUON_CONFIG["maxnreg"] == 96 and GLUON_CONFIG["ctas_per_sm"] == 32
    assert GLUON_CONFIG["ranked_maxnreg"] is None and ranked_config(GLUON_CONFIG, 8, 128)["ranked_maxnreg"] == 96
    assert ranked_config(GLUON_CONFIG, 64, 6)["ranked_stages"] == 3  # six local experts
    assert ranked_config({**GLUON_CONFIG, "ranked_few": {}}, 8, 128)["ranked_stages"] == 0
    # seventh round: the run list at batches 9-32, the down split sized on the host
    assert GLUON_CONFIG["plan_runs"] is True and GLUON_CONFIG.get("plan_split_per_sm", 0) == 0
    # eighth round (B): the list built one slot a thread; two runs a program and sub_k off
    assert GLUON_CONFIG["plan_lanes"] is True and GLUON_CONFIG["plan_items"] == 1 and not GLUON_CONFIG.get("sub_k")
    # ninth round: runs of 16 from 17 tokens on, those of at most 8 tokens on 8-token tiles, the cap kept at 96
    from mxfp4_moe.kernel import narrow_config
    assert GLUON_CONFIG["narrow_runs"] == 17
    for t in (9, 16):
        assert narrow_config(GLUON_CONFIG, t)["narrow_runs"] is False
        assert narrow_config(GLUON_CONFIG, t).get("compact_m", 8) == 8 and not narrow_config(GLUON_CONFIG, t).get("sub_k")
    for t in (17, 32):
        c = narrow_config(GLUON_CONFIG, t)
        assert c["narrow_runs"] is True and c["compact_m"] == 16 and c["sub_k"] == 128 and c["maxnreg"] == 96
    assert narrow_config({**GLUON_CONFIG, "narrow_runs": 0}, 32)["narrow_runs"] is False
    assert narrow_config({**GLUON_CONFIG, "narrow_runs": True, "narrow_sub_k": 0}, 9)["sub_k"] == 0
    assert narrow_config({}, 32) == {"narrow_runs": False}


def test_fused_few_rule_and_residency():
    """Eighth round A (fused_kernel, config fused_few): the fused persistent launch is taken only with the switch
    on and where min(pairs, local experts) <= fused_max_bound; the resident one-warp programs an SM at a kernel's
    registers and shared memory (the grid must be all resident for the grid barrier: 96 registers and the
    2-slot ring plus one down tile, 13056 bytes, hold 16 an SM on the H200's 228 KB; 17408 bytes 12); the down
    tiles a program holds for the device's split (EP8 batch 1 on 132 SMs x 16: one expert, 128 row blocks x 16
    K tiles, one tile each; two experts two tiles)."""
    from mxfp4_moe.kernel import GLUON_CONFIG, fused_few_taken
    assert not fused_few_taken(GLUON_CONFIG, 8, 32) or GLUON_CONFIG["fused_few"]
    on = {**GLUON_CONFIG, "fused_few": True}
    assert fused_few_taken(on, 8, 32) and fused_few_taken(on, 8, 128) and fused_few_taken(on, 64, 6)
    assert not fused_few_taken(on, 16, 32) and not fused_few_taken(on, 32, 128)
    assert fused_few_taken({**on, "fused_max_bound": 32}, 32, 32)
    assert not fused_few_taken({**on, "fused_few": False}, 8, 32)
    pytest.importorskip("triton.experimental.gluon", reason="Triton without Gluon")
    from mxfp4_moe import fused_kernel as fk
    assert fk.resident(96, 13056) == 16 and fk.resident(96, 17408) == 12 and fk.resident(96, 21760) == 10
    assert fk.resident(128, 0) == 16 and fk.resident(64, 0) == 32 and fk.resident(255, 200_000) == 1
    assert fk.smem_per_program(2, 1, ((32, 256), (32, 256))) == 13056
    assert fk.smem_per_program(0, 1, ((32, 256), (32, 256))) == 4352
    assert fk.down_tiles_needed(1, 128, 16, 16 * 132) == 1 and fk.down_tiles_needed(2, 128, 16, 16 * 132) == 2
    assert fk.down_tiles_needed(4, 128, 4, 16 * 132) == 1  # EP2 x TP4 batch 1: four quarter-experts
    ex = R.random_expert_weights(2, 1024, 512, generator=torch.Generator().manual_seed(6)).to_tiled_layout()
    x, ids, wts, out = torch.zeros(1, 1024, dtype=torch.bfloat16), torch.zeros(1, 2, dtype=torch.int64), \
        torch.ones(1, 2), torch.zeros(1, 1024)
    with pytest.raises(ValueError, match="fused_stages"):
        fk.experts_forward(x, ids, wts, ex, out, 1e-6, sms=8, stages=1)
    with pytest.raises(ValueError, match="fused_bar_group"):
        fk.experts_forward(x, ids, wts, ex, out, 1e-6, sms=132, per_sm=16, bar_group=1)
    # shapes the ranked kernels do not take (the checkpoint's layout, more than 8 tokens) are left to the caller
    assert fk.experts_forward(x, ids, wts, R.random_expert_weights(2, 1024, 512), out, 1e-6, sms=8) is None


def _plan_reference(ids, expert_base: int, n_local: int, chunk: int) -> tuple[int, list[int]]:
    """The run list kernel._plan_runs_kernel builds, in Python: the owning slots in slot order, each slot p
    owning run n // chunk of its expert e (n = the earlier slots naming e) when e is local and n % chunk == 0."""
    from mxfp4_moe.kernel import plan_word
    flat = [int(v) for v in ids.reshape(-1)]
    words = []
    for p, e in enumerate(flat):
        n = flat[:p].count(e)
        if 0 <= e - expert_base < n_local and n % chunk == 0:
            words.append(plan_word(p, n // chunk, e))
    return len(words), words


def test_plan_bound_is_the_most_runs_a_batch_can_make():
    """kernel.plan_bound (the run list's grid, seventh round): never below the runs of any routing, reached by
    one (brute force over every split of the pairs among the experts, small shapes), and the figures of the
    benchmark's batch-32 points: 60 runs of 8 for 32 local experts (local, ep8), 144 for 128 (ep2tp4)."""
    from mxfp4_moe.kernel import plan_bound

    def splits(total, parts, cap):  # non-increasing token counts of at most ``parts`` experts, cap each
        if total == 0:
            yield []
            return
        if parts == 0:
            return
        for c in range(min(total, cap), 0, -1):
            for rest in splits(total - c, parts - 1, c):
                yield [c] + rest

    # a routing of T tokens (distinct experts per token) exists for any counts c_e <= T summing to the pairs
    for tokens in range(1, 7):
        for topk in (1, 2, 3):
            for n_local in (1, 2, 4, 7):
                for chunk in (1, 2, 4):
                    bound = plan_bound(tokens * topk, n_local, tokens, chunk)
                    most = 0
                    for local_pairs in range(1, min(tokens * topk, n_local * tokens) + 1):
                        most = max([most] + [sum(-(-c // chunk) for c in cs)
                                             for cs in splits(local_pairs, n_local, tokens)])
                    assert most <= bound, (tokens, topk, n_local, chunk)
                    if topk <= n_local:  # every pair can be local: the bound is reached
                        assert most == bound, (tokens, topk, n_local, chunk)
    assert plan_bound(256, 32, 32, 8) == 60 and plan_bound(256, 128, 32, 8) == 144
    assert plan_bound(72, 32, 9, 8) == 32 + 40 // 8


_PLAN_SCRIPT = r"""
import json, sys
import torch
from mxfp4_moe import kernel as K
from mxfp4_moe.reference import ExpertWeights
out = []
g = torch.Generator().manual_seed(5)
for tokens, topk, experts, base, n_local, chunk in [(9, 8, 32, 0, 32, 8), (32, 8, 256, 128, 128, 8),
                                                     (32, 8, 256, 32, 32, 8), (17, 4, 12, 6, 6, 16),
                                                     (32, 1, 12, 6, 6, 8), (32, 8, 8, 0, 8, 8)]:
    ids = torch.stack([torch.randperm(experts, generator=g)[:topk] for _ in range(tokens)]).to(torch.int64)
    class Ex:  # the two fields plan_runs reads
        expert_base, num_local = base, n_local
    for lanes in (False, True):
        plan = K.plan_runs(ids, Ex, chunk, lanes=lanes, table=True)
        n = int(plan[0])
        table = plan[K.PLAN_TABLE:K.PLAN_TABLE + n * chunk].view(n, chunk).tolist()
        out.append({"ids": ids.tolist(), "base": base, "n_local": n_local, "chunk": chunk, "n": n,
                    "words": plan[1:1 + n].tolist(), "lanes": lanes, "table": table})
print(json.dumps(out))
"""


def test_plan_runs_kernel_under_the_interpreter():
    """kernel._plan_runs_kernel (one program) and _plan_lanes_kernel (one slot a thread, eighth round) under Triton's
    interpreter against the list in Python: the run count and every owner's word in slot order, batches 9-32,
    top-1/4/8, EP shares, all experts local, runs of 8 and 16, every token on the same 8 experts (4 runs each); and
    the run table (twelfth round): each run's pair rows in token order, -1 past its tokens."""
    import json

    import torch
    from _helpers import has_module, run_interpreted
    if not has_module("triton"):
        pytest.skip("triton is not installed")
    import triton
    if tuple(int(v) for v in triton.__version__.split(".")[:2]) < (3, 7):
        # Triton 3.6's interpreter hands the kernel's unspecialized int T to range() as a one-element array
        # ("only 0-dimensional arrays can be converted to Python scalars", the H200's suite, seventh round);
        # the compiled kernel is the GPU tests' (test_gluon_run_list checks the list against the routing)
        pytest.skip(f"the planning kernel's loop does not run under Triton {triton.__version__}'s interpreter")
    res = run_interpreted(_PLAN_SCRIPT)
    assert res.returncode == 0, res.stderr[-3000:]
    cases = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(cases) == 12 and sum(c["lanes"] for c in cases) == 6  # both kernels (lanes: eighth round)
    for c in cases:
        n, words = _plan_reference(torch.tensor(c["ids"]), c["base"], c["n_local"], c["chunk"])
        assert (c["n"], c["words"]) == (n, words), c
        ids, chunk = torch.tensor(c["ids"]), c["chunk"]
        for word, row in zip(words, c["table"]):
            e, run = word // 4096, (word // 512) % 8
            pairs = [t * ids.shape[1] + j for t in range(ids.shape[0]) for j in range(ids.shape[1]) if ids[t, j] == e]
            want = pairs[run * chunk:(run + 1) * chunk]
            assert row == want + [-1] * (chunk - len(want)), (c, word)
    assert cases[-1]["n"] == cases[-2]["n"] == 32  # 8 experts, 32 tokens each: 4 runs of 8
