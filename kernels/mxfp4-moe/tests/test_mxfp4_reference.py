"""The reference MoE computation (CPU): against a plain per-(token, slot) float64 loop, vLLM's SiluAndMul,
EP partial sums, and the variant files."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import has_module  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from mxfp4_moe import format as F  # noqa: E402
from mxfp4_moe import reference as R  # noqa: E402
from mxfp4_moe.variants import load_variant, parse_variant  # noqa: E402


def naive_experts_f64(x_lat, ids, wts, ex, eps=R.DEFAULT_EPS):
    """One (token, slot) at a time, float64, written independently of reference.py."""
    T = x_lat.shape[0]
    out = torch.zeros(T, ex.latent_size, dtype=torch.float64)
    for t in range(T):
        for j in range(ids.shape[1]):
            e = int(ids[t, j]) - ex.expert_base
            if not 0 <= e < ex.num_local:
                continue
            w13 = F.dequantize_mxfp4(ex.w13[e], ex.w13_scale[e]).double()
            w2 = F.dequantize_mxfp4(ex.w2[e], ex.w2_scale[e]).double()
            h = w13 @ x_lat[t].double()
            i = h.shape[0] // 2
            a = h[:i] / (1 + torch.exp(-h[:i])) * h[i:]
            y = w2 @ a
            y = y / torch.sqrt((y * y).mean() + eps) * ex.norm_weight[e].double()
            out[t] += float(wts[t, j]) * y
    return out


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("tokens", [1, 3, 8])
def test_reference_matches_naive_loop(tokens):
    g = torch.Generator().manual_seed(10 + tokens)
    v = load_variant("tiny")
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                 generator=g)
    ids, w = R.route(torch.randn(tokens, v.experts, generator=g), v.top_k)
    x = torch.randn(tokens, v.latent_size, generator=g).to(torch.bfloat16)
    got = R.moe_experts_reference(x, ids, w, ex)
    want = naive_experts_f64(x, ids, w, ex)
    assert got.dtype == torch.float32
    assert rel(got, want) < 1e-5
    stock = R.moe_experts_reference(x, ids, w, ex, dtype=torch.bfloat16)  # the stock op: BF16 matmuls
    assert rel(stock, want) < 3e-2


def test_route_softmax_topk_renormalized():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    ids, w = R.route(logits, 2)
    assert ids.tolist() == [[1, 3]]
    p = torch.softmax(logits, -1)[0]
    assert torch.allclose(w[0], torch.stack([p[1], p[3]]) / (p[1] + p[3]))


@pytest.mark.skipif(not has_module("vllm"), reason="vllm is not installed")
def test_activation_matches_vllm_silu_and_mul():
    from vllm.model_executor.layers.activation import SiluAndMul
    h = torch.randn(5, 64, generator=torch.Generator().manual_seed(11))
    assert torch.equal(R.silu_and_mul(h), SiluAndMul.forward_native(h))


def test_ep_partials_sum_to_the_whole():
    g = torch.Generator().manual_seed(12)
    lat, inter, n_all, cards = 64, 64, 8, 4
    whole = R.random_expert_weights(n_all, lat, inter, generator=g)
    ids, w = R.route(torch.randn(6, n_all, generator=g), 3)
    x = torch.randn(6, lat, generator=g).to(torch.bfloat16)
    per = n_all // cards
    parts = []
    for r in range(cards):
        sl = slice(r * per, (r + 1) * per)
        card = R.ExpertWeights(whole.w13[sl], whole.w13_scale[sl], whole.w2[sl], whole.w2_scale[sl],
                               whole.norm_weight[sl], expert_base=r * per)
        card.validate()
        parts.append(R.moe_experts_reference(x, ids, w, card))
    assert rel(sum(parts), R.moe_experts_reference(x, ids, w, whole)) < 1e-6


def test_all_tokens_to_one_expert():
    g = torch.Generator().manual_seed(13)
    ex = R.random_expert_weights(4, 64, 64, generator=g)
    ids = torch.full((5, 1), 2)
    w = torch.ones(5, 1)
    x = torch.randn(5, 64, generator=g).to(torch.bfloat16)
    assert rel(R.moe_experts_reference(x, ids, w, ex), naive_experts_f64(x, ids, w, ex)) < 1e-5


def test_tokens_with_no_local_expert_get_zero():
    ex = R.random_expert_weights(2, 64, 64, expert_base=2, generator=torch.Generator().manual_seed(14))
    ids = torch.tensor([[0, 1], [2, 0]])
    out = R.moe_experts_reference(torch.randn(2, 64).to(torch.bfloat16), ids, torch.ones(2, 2) / 2, ex)
    assert torch.all(out[0] == 0) and torch.any(out[1] != 0)


def test_latent_block_end_to_end():
    g = torch.Generator().manual_seed(15)
    v = load_variant("tiny")
    weights = R.random_latent_moe(v, rank=0, num_local=v.experts, generator=g)  # one card holding all
    x = torch.randn(4, v.hidden_size, generator=g).to(torch.bfloat16)
    out = R.latent_moe_reference(x, weights)
    assert out.shape == (4, v.hidden_size) and torch.isfinite(out).all()

    def naive(x_lat, ids, w, ex, eps):
        return naive_experts_f64(x_lat, ids, w, ex, eps).float()
    assert rel(out, R.latent_moe_reference(x, weights, experts_fn=naive)) < 1e-5


def test_variants_parse():
    muse = load_variant("muse")
    assert (muse.experts, muse.local_experts, muse.first_mxfp4_layer, muse.last_mxfp4_layer) == (256, 32, 1, 60)
    assert muse.latent_size % 32 == 0 and muse.expert_size % 32 == 0
    assert muse.expert_bytes == (2 * muse.expert_size * muse.latent_size * 17 // 32
                                 + muse.latent_size * muse.expert_size * 17 // 32)
    tiny = load_variant("tiny")
    assert tiny.experts == 16 and tiny.local_experts == 8
    with pytest.raises(ValueError, match="missing"):
        parse_variant("hidden_size = 64\n")
    with pytest.raises(ValueError, match="unknown key"):
        parse_variant("hidden_size = 64\nbogus = 1\n")
    with pytest.raises(ValueError, match="multiple of 32"):
        parse_variant("hidden_size=64\nlatent_size=48\nexpert_size=64\nexperts=4\ntop_k=2\n")
    with pytest.raises(FileNotFoundError):
        load_variant("no-such-variant")


@pytest.mark.parametrize("split", [2, 4])
def test_tp_slices_sum_to_the_unsplit_expert(split):
    """EP x TP: each card holds a slice of every expert's intermediate size; the slices' pre-norm outputs add
    up to the unsplit expert's, and the norm-combine of that sum is the whole block's share."""
    g = torch.Generator().manual_seed(40 + split)
    v = load_variant("tiny")
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                 generator=g)
    ids, w = R.route(torch.randn(5, v.experts, generator=g), v.top_k)
    x = torch.randn(5, v.latent_size, generator=g).to(torch.bfloat16)
    parts = [R.moe_expert_partials_reference(x, ids, w, ex.tp_slice(r, split)) for r in range(split)]
    for r, p in enumerate(parts):
        sl = ex.tp_slice(r, split)
        assert sl.expert_size == v.expert_size // split and sl.layout == "quark"
        assert p.shape == (5 * v.top_k, v.latent_size)
    whole = R.moe_expert_partials_reference(x, ids, w, ex)
    assert rel(sum(parts), whole) < 1e-5
    mine = ((ids - ex.expert_base >= 0) & (ids - ex.expert_base < ex.num_local)).reshape(-1)
    assert (whole[~mine] == 0).all() and mine.any() and (~mine).any()
    block = R.combine_partials(sum(parts), ids, w, ex.norm_weight, expert_base=ex.expert_base)
    assert rel(block, naive_experts_f64(x, ids, w, ex)) < 1e-5
    assert rel(block, R.moe_experts_reference(x, ids, w, ex)) < 1e-5
    # one norm over the whole expert, not per slice: the slices' normed outputs do not add up to it
    per_slice = sum(R.moe_experts_reference(x, ids, w, ex.tp_slice(r, split)) for r in range(split))
    assert rel(per_slice, block) > 1e-2


def test_tp_slice_of_any_layout_and_bad_splits():
    g = torch.Generator().manual_seed(5)
    v = load_variant("tiny")
    ex = R.random_expert_weights(2, v.latent_size, v.expert_size, generator=g)
    s = ex.tp_slice(1, 2)
    for other in (ex.to_mma_layout(), ex.to_tiled_layout(((32, 128), (32, 128)))):
        t = other.tp_slice(1, 2)
        assert all(torch.equal(getattr(t, n), getattr(s, n)) for n in ("w13", "w13_scale", "w2", "w2_scale"))
    # the slice's gate rows and up rows are the unsplit expert's, its down columns the matching ones
    n = v.expert_size // 2
    d13 = F.dequantize_mxfp4(ex.w13[0], ex.w13_scale[0])
    assert torch.equal(F.dequantize_mxfp4(s.w13[0], s.w13_scale[0]), torch.cat([d13[n:2 * n], d13[3 * n:]]))
    assert torch.equal(F.dequantize_mxfp4(s.w2[0], s.w2_scale[0]), F.dequantize_mxfp4(ex.w2[0], ex.w2_scale[0])[:, n:])
    assert ex.tp_slice(0, 1) is ex
    for rank, split in ((2, 2), (-1, 2), (0, 0), (0, 8)):  # 128 / 8 = 16: not whole 32-element blocks
        with pytest.raises(ValueError):
            ex.tp_slice(rank, split)


def test_served_split_of_the_muse_variant():
    from mxfp4_moe.variants import split_routing
    v = load_variant("muse")
    assert (v.cards, v.tp_split, v.served_routing) == (8, 4, "ep2tp4")
    assert split_routing("ep2tp4") == (2, 4) and split_routing("ep8") == (8, 1) and split_routing("local") is None
    assert load_variant("tiny").served_routing == "ep2"
    with pytest.raises(ValueError):
        parse_variant("hidden_size=256\nlatent_size=128\nexpert_size=128\nexperts=16\ntop_k=4\ntp_split=3\n")
