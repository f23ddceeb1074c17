"""The vLLM model of the port, on CPU: registration, the --language-model-only refusal through
vLLM's own config path, weight loading from the Quark layout, agreement with the reference, and
expert parallelism."""

from muse_testutil import _no_stray_switches, tiny_ckpt  # noqa: F401  (fixtures)

import json
import subprocess
import sys

import pytest
import torch

pytest.importorskip("vllm")

from muse_testutil import PORT, subprocess_env  # noqa: E402


@pytest.fixture(scope="module")
def probe(tiny_ckpt):
    r = subprocess.run([sys.executable, str(PORT / "tests" / "muse_model_probe.py"), str(tiny_ckpt)],
                       capture_output=True, text=True, timeout=300, env=subprocess_env(PYTHONPATH=str(PORT)))
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("PROBE ")), None)
    assert line, f"probe failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return json.loads(line[6:])


def test_server_refuses_to_start_without_language_model_only(probe):
    assert probe["refused"] and "--language-model-only" in probe["refused"]
    assert "vision and audio towers" in probe["refused"]


def test_vllm_resolves_the_architecture_as_multimodal_text_only(probe):
    assert probe["config"] == ["MuseSparkForConditionalGeneration", True, True]
    assert probe["model_cls"] == "muse_spark_open.model"  # the port's, also over vLLM 0.33.0's own (on CPU)


def test_every_parameter_loads_from_the_published_layout(probe):
    assert probe["unloaded"] == []
    assert probe["skipped_towers"] == 3
    assert probe["mxfp4_layers"] == [False, True, True, False]  # experts of the first and last layer are BF16


def test_served_model_matches_the_reference(probe):
    assert probe["argmax_equal"]
    assert probe["max_abs_diff"] < 1e-4


def test_expert_parallel_shards_sum_to_the_whole(tiny_ckpt):
    """Two cards holding 4 experts each give, summed, what one card holding all 8 gives."""
    from muse_spark_open.model import MuseSparkLatentMoE, expert_range
    from muse_spark_open.reference import MuseSparkReference, _open_tensors
    from muse_spark_open import layout

    ref = MuseSparkReference.from_checkpoint(tiny_ckpt, dtype=torch.float32)
    c = ref.config
    tensors = _open_tensors(tiny_ckpt)

    def build(owned):
        moe = MuseSparkLatentMoE(c, mxfp4=True, owned=owned, dtype=torch.float32)
        for name, t in tensors.items():
            rel = layout.text_name(name)
            exp = rel and layout.parse_expert(rel)
            if exp and exp[0] == 1:
                moe.load_expert(exp[1], exp[2], exp[3], t)
            elif rel and rel.startswith("layers.1.mlp.") and not exp:
                getattr(moe, rel.split(".")[3]).weight.data.copy_(t.float())
        assert moe.missing() == []
        return moe

    whole = build(expert_range(c.num_experts, 0, 1))
    halves = [build(expert_range(c.num_experts, r, 2)) for r in range(2)]
    assert [h.owned for h in halves] == [range(0, 4), range(4, 8)]
    x = torch.randn(6, c.hidden_size, generator=torch.Generator().manual_seed(0))
    alone = whole(x)  # one card holding all 8 experts, no all-reduce
    summed = []
    for h in halves:
        h.all_reduce = lambda part, store=summed: store.append(part) or part
        h(x)
    total = summed[0] + summed[1]
    whole.all_reduce = lambda part: total  # the all-reduce result: both cards' partial sums
    assert torch.allclose(whole(x), ref.moe(1, x), atol=1e-5)
    assert torch.allclose(whole.post_expert_proj(total), ref.moe(1, x), atol=1e-5)
    assert torch.allclose(alone, whole(x), atol=1e-5)  # the single card's own result, not only the injected sum
    with pytest.raises(ValueError, match="do not split evenly"):
        expert_range(8, 0, 3)


def test_checkpoint_names_map_to_vllm_parameters():
    from muse_spark_open.model import map_checkpoint_name

    P = "model.language_model.layers.3."
    assert map_checkpoint_name(P + "self_attn.k_proj.weight") == ("model.layers.3.self_attn.qkv_proj.weight", "k")
    assert map_checkpoint_name(P + "self_attn.gate_proj.weight") == ("model.layers.3.self_attn.output_gate_proj.weight", None)
    assert map_checkpoint_name(P + "mlp.router.weight") == ("model.layers.3.mlp.router.weight", None)
    assert map_checkpoint_name("lm_head.weight") == ("lm_head.weight", None)
    assert map_checkpoint_name("model.audio_tower.conv.weight") is None


def test_expert_path_choice():
    from muse_spark_open import env, expert_backend as eb

    def no_kernel(value):
        return None, "no GPU visible to torch"

    def kernel(value):
        return (lambda *a: None), "Triton MXFP4 expert kernels"

    assert eb.choose("0", kernel)[0] == eb.STOCK  # 0 always takes the stock path
    path, fn, why = eb.choose("1", no_kernel)
    assert path == eb.STOCK and fn is None and "no GPU visible to torch" in why  # said why
    assert eb.choose("1", kernel)[0] == eb.KERNEL
    assert eb.choose(None, no_kernel)[0] == eb.STOCK  # unset: 1
    with pytest.raises(env.SwitchError, match="MUSE_SPARK_MXFP4_KERNELS"):
        eb.choose("auto", no_kernel)


KERNELS = PORT.parent.parent / "kernels" / "mxfp4-moe"


def quantized_moe(c, rank, generator):
    """A MoE layer holding card ``rank``'s half of the experts (of two cards), each random and MXFP4-quantized."""
    from muse_spark_open import mxfp4
    from muse_spark_open.model import MuseSparkLatentMoE, expert_range

    moe = MuseSparkLatentMoE(c, mxfp4=True, owned=expert_range(c.num_experts, rank, 2), dtype=torch.float32)
    L, I = c.moe_latent_size, c.moe_intermediate_size
    for e in moe.owned:
        for proj, shape in (("gate_proj", (I, L)), ("up_proj", (I, L)), ("down_proj", (L, I))):
            w, s = mxfp4.quantize(torch.randn(*shape, generator=generator) / shape[1] ** 0.5)
            moe.load_expert(e, proj, "weight", w)
            moe.load_expert(e, proj, "weight_scale", s)
        moe.load_expert(e, "output_norm", "weight", 1 + 0.1 * torch.randn(L, generator=generator))
    return moe


@pytest.mark.skipif(not (KERNELS / "mxfp4_moe" / "glue.py").is_file(), reason="kernels/mxfp4-moe is not in this checkout")
def test_kernel_package_agrees_with_the_port(monkeypatch):
    """kernels/mxfp4-moe's reference path computes the port's experts, on the port's packed layout,
    and on CPU its glue sends the port to the stock path with the reason."""
    monkeypatch.syspath_prepend(str(KERNELS))
    from mxfp4_moe import reference as kref

    from muse_spark_open import expert_backend as eb
    from muse_spark_open.moe import combine_experts, route
    from muse_spark_open.tiny import tiny_text_config
    from muse_spark_open.config import MuseSparkTextConfig

    c = MuseSparkTextConfig(**tiny_text_config())
    g = torch.Generator().manual_seed(5)
    moe = quantized_moe(c, rank=1, generator=g)
    assert moe.missing() == []
    h = torch.randn(5, c.moe_latent_size, generator=g)
    weights, ids = route(torch.randn(5, c.num_experts, generator=g), c.num_experts_per_tok)
    ours = combine_experts(h, weights, ids, moe.expert, c.rms_norm_eps, True, moe.owned)
    experts = kref.ExpertWeights(moe.w13.data, moe.w13_scale.data, moe.w2.data, moe.w2_scale.data,
                                 moe.output_norm.data, expert_base=moe.owned.start)
    theirs = kref.moe_experts_reference(h, ids, weights, experts, eps=c.rms_norm_eps, dtype=torch.float32)
    assert torch.allclose(ours, theirs, atol=1e-5)
    path, _fn, why = eb.choose("1")
    assert path == eb.STOCK and why  # no GPU here: the glue says why


@pytest.mark.skipif(not (KERNELS / "mxfp4_moe" / "glue.py").is_file(), reason="kernels/mxfp4-moe is not in this checkout")
def test_kernel_path_relays_experts_out_once_in_place(monkeypatch):
    """On the kernel path the port calls the glue's prepare_experts once per layer after loading, copies
    the re-laid-out experts into its own parameters (no second copy), and hands the layout to every call.
    Without a GPU here the glue's choice is forced and its two GPU steps are stood in for by the CPU
    re-layout and the reference path, which read the same layouts."""
    monkeypatch.syspath_prepend(str(KERNELS))
    from mxfp4_moe import glue
    from mxfp4_moe import reference as kref

    from muse_spark_open import expert_backend as eb
    from muse_spark_open.config import MuseSparkTextConfig
    from muse_spark_open.moe import combine_experts, route
    from muse_spark_open.tiny import tiny_text_config

    c = MuseSparkTextConfig(**{**tiny_text_config(), "moe_latent_size": 128, "moe_intermediate_size": 128})
    g = torch.Generator().manual_seed(6)
    moe = quantized_moe(c, rank=0, generator=g)
    h = torch.randn(3, c.moe_latent_size, generator=g)
    weights, ids = route(torch.randn(3, c.num_experts, generator=g), c.num_experts_per_tok)
    stock = combine_experts(h, weights, ids, moe.expert, c.rms_norm_eps, True, moe.owned)

    calls = []
    monkeypatch.setattr(glue, "_choice", glue.Choice(glue.KERNEL, True, "forced by the test"))
    monkeypatch.setattr(glue, "prepare_experts", lambda ex: calls.append(ex) or ex.to_tiled_layout(((16, 128), (16, 128))))
    monkeypatch.setattr(glue, "moe_experts", lambda x, i, w, ex, eps: kref.moe_experts_reference(x, i, w, ex, eps=eps))
    run, why = eb._load_kernel("1")
    assert run is not None and "forced by the test" in why
    monkeypatch.setattr(eb, "_chosen", (eb.KERNEL, run, why))

    ptr, before = moe.w13.data_ptr(), moe.w13.data.clone()
    moe.prepare_for_kernels()
    moe.prepare_for_kernels()  # once: already re-laid out
    assert len(calls) == 1 and moe.kernel_layout == ("tiled", ((16, 128), (16, 128)))
    assert moe.w13.data_ptr() == ptr and not torch.equal(moe.w13.data, before)
    got = run(h, ids, weights, moe.w13, moe.w13_scale, moe.w2, moe.w2_scale, moe.output_norm, c.rms_norm_eps,
              moe.owned.start, moe.kernel_layout)
    assert torch.allclose(got, stock, atol=1e-5)
    with pytest.raises(RuntimeError, match="re-laid out"):
        moe.expert(moe.owned.start)
