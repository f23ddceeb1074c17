"""MUSE_SPARK_MOE_TP_SPLIT: the experts spread as EP x TP (each card a slice of every expert of its EP
group), on CPU: eight simulated cards of EP2 x TP4 (and EP4 x TP2) give, after the all-reduce, what one card
holding every whole expert gives; the stock path and the kernel path (kernels/mxfp4-moe's glue, its GPU
steps stood in for by its reference) agree; bad splits are refused."""

from muse_testutil import PORT, _no_stray_switches  # noqa: F401  (fixture)

import pytest
import torch

pytest.importorskip("vllm")

KERNELS = PORT.parent.parent / "kernels" / "mxfp4-moe"


def _config(intermediate=128, norm=True):
    from muse_spark_open.config import MuseSparkTextConfig
    from muse_spark_open.tiny import tiny_text_config
    return MuseSparkTextConfig(**{**tiny_text_config(), "moe_intermediate_size": intermediate,
                                  "expert_output_norm": norm})


def _checkpoint(c, g):
    """Whole experts as the checkpoint holds them: {(expert, proj, kind): tensor}, MXFP4-quantized."""
    from muse_spark_open import mxfp4
    L, I = c.moe_latent_size, c.moe_intermediate_size
    t = {}
    for e in range(c.num_experts):
        for proj, shape in (("gate_proj", (I, L)), ("up_proj", (I, L)), ("down_proj", (L, I))):
            w, s = mxfp4.quantize(torch.randn(*shape, generator=g) / shape[1] ** 0.5)
            t[(e, proj, "weight")], t[(e, proj, "weight_scale")] = w, s
        t[(e, "output_norm", "weight")] = 1 + 0.1 * torch.randn(L, generator=g)
    return t


def _card(c, ckpt, rank, world, split, g):
    from muse_spark_open.model import MuseSparkLatentMoE, moe_split
    owned, tp_slice = moe_split(c.num_experts, rank, world, split)
    moe = MuseSparkLatentMoE(c, mxfp4=True, owned=owned, dtype=torch.float32, tp_slice=tp_slice)
    loaded = [moe.load_expert(e, p, k, t) for (e, p, k), t in ckpt.items()]
    assert moe.missing() == [] and any(loaded)
    gen = torch.Generator().manual_seed(99)  # the same dense weights on every card
    for lin in (moe.router, moe.pre_expert_proj, moe.post_expert_proj):
        lin.weight.data.copy_(torch.randn(lin.weight.shape, generator=gen) / lin.weight.shape[1] ** 0.5)
    return moe


def _run_group(cards, x):
    """Each card's forward with the all-reduce simulated: first collect every card's partials, then hand
    each card their sum."""
    parts = []
    for m in cards:
        m.all_reduce = lambda p, store=parts: store.append(p) or p
        m(x)
    total = sum(parts)
    outs = []
    for m in cards:
        m.all_reduce = lambda p: total
        outs.append(m(x))
    return outs, parts


@pytest.mark.parametrize("world,split,norm", [(8, 4, True), (8, 2, True), (8, 4, False)])
def test_ep_x_tp_cards_give_the_whole_layer(world, split, norm):
    c = _config(norm=norm)
    g = torch.Generator().manual_seed(world + split)
    ckpt = _checkpoint(c, g)
    whole = _card(c, ckpt, 0, 1, 1, g)
    cards = [_card(c, ckpt, r, world, split, g) for r in range(world)]
    ep = world // split
    assert [m.owned for m in cards[::split]] == [range(i * 8 // ep, (i + 1) * 8 // ep) for i in range(ep)]
    assert [(m.tp_rank, m.tp_split) for m in cards[:split]] == [(r, split) for r in range(split)]
    assert cards[0].w13.shape == (8 // ep, 2 * c.moe_intermediate_size // split, c.moe_latent_size // 2)
    assert cards[0].w2_scale.shape == (8 // ep, c.moe_latent_size, c.moe_intermediate_size // split // 32)
    x = torch.randn(5, c.hidden_size, generator=g)
    want = whole(x)
    outs, parts = _run_group(cards, x)
    assert parts[0].shape == (5 * c.num_experts_per_tok, c.moe_latent_size)  # per (token, slot), before the norm
    for out in outs:
        assert torch.allclose(out, want, atol=1e-5), (out - want).abs().max()


def test_bad_splits_are_refused():
    from muse_spark_open import env
    from muse_spark_open.model import MuseSparkLatentMoE, moe_split
    with pytest.raises(ValueError, match="must divide the tensor-parallel size"):
        moe_split(8, 0, 6, 4)
    with pytest.raises(ValueError, match="must divide the tensor-parallel size"):
        moe_split(8, 0, 1, 4)  # one card cannot hold a quarter of the experts' intermediate size
    assert moe_split(256, 5, 8, 4) == (range(128, 256), (1, 4))
    assert moe_split(256, 5, 8, 1) == (range(160, 192), (0, 1))
    with pytest.raises(ValueError, match="whole 32-element blocks"):
        MuseSparkLatentMoE(_config(intermediate=64), mxfp4=True, owned=range(8), tp_slice=(0, 4))
    assert env.read("MUSE_SPARK_MOE_TP_SPLIT", {}) == "1"
    assert env.read("MUSE_SPARK_MOE_TP_SPLIT", {"MUSE_SPARK_MOE_TP_SPLIT": "4"}) == "4"
    with pytest.raises(env.SwitchError, match="MUSE_SPARK_MOE_TP_SPLIT"):
        env.read("MUSE_SPARK_MOE_TP_SPLIT", {"MUSE_SPARK_MOE_TP_SPLIT": "3"})


@pytest.mark.skipif(not (KERNELS / "mxfp4_moe" / "glue.py").is_file(), reason="kernels/mxfp4-moe is not in this checkout")
def test_kernel_path_under_a_tp_split(monkeypatch):
    """The kernel path with a TP split: the port re-lays each card's slices out once through the glue, calls
    the kernel's partials and, after the all-reduce, its combine; the glue's GPU steps are stood in for by
    kernels/mxfp4-moe's reference (partials of the re-laid-out slices, the same combine the GPU kernel
    computes). The cards then give the stock path's whole layer."""
    monkeypatch.syspath_prepend(str(KERNELS))
    from mxfp4_moe import glue
    from mxfp4_moe import reference as kref

    from muse_spark_open import expert_backend as eb

    c = _config()
    g = torch.Generator().manual_seed(11)
    ckpt = _checkpoint(c, g)
    whole = _card(c, ckpt, 0, 1, 1, g)
    cards = [_card(c, ckpt, r, 8, 4, g) for r in range(8)]
    x = torch.randn(4, c.hidden_size, generator=g)
    want = whole(x)  # the stock path, one card, whole experts

    calls = []
    monkeypatch.setattr(glue, "_choice", glue.Choice(glue.KERNEL, True, "forced by the test"))
    monkeypatch.setattr(glue, "prepare_experts", lambda ex: calls.append(ex) or ex.to_mma_layout())
    monkeypatch.setattr(glue, "moe_expert_partials", lambda x, i, w, ex, eps: calls.append("partials")
                        or kref.moe_expert_partials_reference(x, i, w, ex))
    monkeypatch.setattr(glue, "combine_partials", lambda y, i, w, nw, expert_base, eps: calls.append("combine")
                        or kref.combine_partials(y, i, w, nw, expert_base=expert_base, eps=eps))
    run, why = eb._load_kernel("1")
    monkeypatch.setattr(eb, "_chosen", (eb.KERNEL, run, why))
    for m in cards:
        m.prepare_for_kernels()
        assert m.kernel_layout == ("mma", ())
    outs, _ = _run_group(cards, x)
    assert calls.count("partials") == 16 and calls.count("combine") == 16  # 8 cards, two passes each
    for out in outs:
        assert torch.allclose(out, want, atol=1e-5), (out - want).abs().max()
