"""The CPU reference: loads a tiny random checkpoint in the Quark MXFP4 layout and agrees with a
direct computation of the architecture written out here, loop by loop."""

from muse_testutil import _no_stray_switches, tiny_ckpt  # noqa: F401  (fixtures)

import json
import math

import pytest
import torch

from muse_spark_open import layout
from muse_spark_open.config import MuseSparkConfig
from muse_spark_open.reference import CheckpointError, MuseSparkReference, _open_tensors
from muse_spark_open.tiny import write_tiny_checkpoint

IDS = [1, 5, 9, 33, 2, 7, 70, 11, 12, 40, 41, 3, 17, 88]


def load_raw(path):
    raw = json.loads((path / "config.json").read_text())
    cfg = MuseSparkConfig(**{k: v for k, v in raw.items() if k != "model_type"}).text_config
    return cfg, _open_tensors(path), raw["quantization_config"]


# -- the direct computation -----------------------------------------------------------------


def dequant_direct(packed, scale):
    """Element by element from the bit fields: low nibble first, 2 ** (e - 127) a block of 32."""
    rows, half = packed.shape
    out = torch.empty(rows, half * 2, dtype=torch.float64)
    for r in range(rows):
        for b in range(half):
            for slot, code in ((0, int(packed[r, b]) & 0xF), (1, int(packed[r, b]) >> 4)):
                s, e, m = code >> 3, (code >> 1) & 3, code & 1
                mag = m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
                k = 2 * b + slot
                out[r, k] = (-mag if s else mag) * 2.0 ** (int(scale[r, k // 32]) - 127)
    return out


def norm(v, w=None, eps=1e-5, offset=0.0):
    v = v / math.sqrt(float((v * v).mean()) + eps)
    return v if w is None else v * (w + offset)


def direct_logits(cfg, t, ids):
    f = {k: v.double() for k, v in t.items() if v.dtype != torch.uint8}
    P = "model.language_model."
    T, nh, nkv, d = len(ids), cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    xs = [norm(f[P + "embed_tokens.weight"][i], eps=cfg.rms_norm_eps) for i in ids]
    for li in range(cfg.num_hidden_layers):
        L = f"{P}layers.{li}."
        h_in = [norm(x, f[L + "input_layernorm.weight"], cfg.rms_norm_eps, 1.0) for x in xs]
        q = [(f[L + "self_attn.q_proj.weight"] @ h).view(nh, d) for h in h_in]
        k = [(f[L + "self_attn.k_proj.weight"] @ h).view(nkv, d) for h in h_in]
        v = [(f[L + "self_attn.v_proj.weight"] @ h).view(nkv, d) for h in h_in]
        q = [torch.stack([norm(qq[a], eps=cfg.rms_norm_eps) * cfg.query_prescale() for a in range(nh)]) for qq in q]
        k = [torch.stack([norm(kk[a], eps=cfg.rms_norm_eps) for a in range(nkv)]) for kk in k]
        sliding = not cfg.is_global(li)
        if sliding:  # rotate the pair (i, i + d/2) by pos * theta ** (-2i/d)
            def rot(vec, pos):
                out = vec.clone()
                for i in range(d // 2):
                    ang = pos * cfg.rope_theta ** (-2 * i / d)
                    a, b = vec[i], vec[i + d // 2]
                    out[i], out[i + d // 2] = a * math.cos(ang) - b * math.sin(ang), b * math.cos(ang) + a * math.sin(ang)
                return out
            q = [torch.stack([rot(qq[a], p) for a in range(nh)]) for p, qq in enumerate(q)]
            k = [torch.stack([rot(kk[a], p) for a in range(nkv)]) for p, kk in enumerate(k)]
        new = []
        for i in range(T):
            heads = []
            for a in range(nh):
                g = a // (nh // nkv)
                js = [j for j in range(i + 1) if not sliding or i - j < cfg.sliding_window]
                sc = torch.tensor([float(q[i][a] @ k[j][g]) / math.sqrt(d) for j in js], dtype=torch.float64)
                w = torch.softmax(sc, 0)
                heads.append(sum(w[n] * v[j][g] for n, j in enumerate(js)))
            att = torch.cat(heads) * torch.sigmoid(f[L + "self_attn.gate_proj.weight"] @ h_in[i])
            x = xs[i] + norm(f[L + "self_attn.o_proj.weight"] @ att, f[L + "post_attention_layernorm.weight"], cfg.post_norm_eps, 1.0)
            hm = norm(x, f[L + "pre_feedforward_layernorm.weight"], cfg.rms_norm_eps, 1.0)
            probs = torch.softmax(f[L + "mlp.router.weight"] @ hm, 0)
            top = sorted(range(cfg.num_experts), key=lambda e: -float(probs[e]))[: cfg.num_experts_per_tok]
            wsum = sum(float(probs[e]) for e in top)
            lat = f[L + "mlp.pre_expert_proj.weight"] @ hm
            mix = torch.zeros(cfg.moe_latent_size, dtype=torch.float64)
            for e in top:
                E = f"{L}mlp.experts.{e}."
                def W(p):
                    return dequant_direct(t[E + p + ".weight"], t[E + p + ".weight_scale"]) if (E + p + ".weight_scale") in t else f[E + p + ".weight"]
                gate = W("gate_proj") @ lat
                y = W("down_proj") @ (gate * torch.sigmoid(gate) * (W("up_proj") @ lat))
                mix += float(probs[e]) / wsum * norm(y, f[E + "output_norm.weight"], cfg.rms_norm_eps)
            m = f[L + "mlp.post_expert_proj.weight"] @ mix
            new.append(x + norm(m, f[L + "post_feedforward_layernorm.weight"], cfg.post_norm_eps, 1.0))
        xs = new
    out = []
    for x in xs:
        lg = f["lm_head.weight"] @ norm(x, f[P + "norm.weight"], cfg.rms_norm_eps) * cfg.output_multiplier
        out.append(cfg.final_logit_softcapping * torch.tanh(lg / cfg.final_logit_softcapping))
    return torch.stack(out)


# -- tests ----------------------------------------------------------------------------------


def test_loads_the_quark_layout_as_published(tiny_ckpt):
    ref = MuseSparkReference.from_checkpoint(tiny_ckpt)
    n = ref.config.num_hidden_layers
    assert [ref.layer_is_mxfp4(i) for i in range(n)] == [False] + [True] * (n - 2) + [False]
    assert ref.skipped_tower_tensors == 3  # vision, vision projection, audio: not served
    e = ref.expert(1, 0)
    assert e.gate.dtype == torch.uint8 and e.gate.shape == (64, 16) and e.gate_scale.shape == (64, 1)


def test_reference_matches_the_direct_computation(tiny_ckpt):
    cfg, tensors, _ = load_raw(tiny_ckpt)
    ref = MuseSparkReference.from_checkpoint(tiny_ckpt, dtype=torch.float32)
    got = ref.forward(IDS)
    want = direct_logits(cfg, tensors, IDS).float()
    assert got.shape == (len(IDS), cfg.vocab_size)
    assert torch.allclose(got, want, atol=2e-4, rtol=1e-4), (got - want).abs().max()


def test_logprobs_and_perplexity(tiny_ckpt):
    ref = MuseSparkReference.from_checkpoint(tiny_ckpt)
    lp = ref.logprobs(IDS)
    logits = ref.forward(IDS)
    assert len(lp) == len(IDS) - 1
    assert lp[3] == pytest.approx(torch.log_softmax(logits[3], -1)[IDS[4]].item(), abs=1e-6)
    assert ref.perplexity(lp) == pytest.approx(math.exp(-sum(lp) / len(lp)))


def test_sliding_window_bounds_what_a_position_sees(tmp_path):
    """Two sliding layers with a window of 3: position p sees back to p - 4, no further."""
    path = write_tiny_checkpoint(tmp_path, seed=3, text_overrides=dict(
        num_hidden_layers=2, sliding_window=3, layer_types=["sliding_attention"] * 2, no_rope_layers=[1, 1]))
    ref = MuseSparkReference.from_checkpoint(path)
    a, b = ref.forward(IDS[:10]), ref.forward([IDS[1]] + IDS[1:10])
    # equal up to float rounding (expert matmuls run on other row sets); the first five differ
    assert torch.allclose(a[5:], b[5:], atol=1e-5) and (a[:5] - b[:5]).abs().amax(-1).min() > 1e-3
    glob = write_tiny_checkpoint(tmp_path / "g", seed=3, text_overrides=dict(
        num_hidden_layers=2, sliding_window=3, layer_types=["sliding_attention", "full_attention"], no_rope_layers=[1, 0]))
    g = MuseSparkReference.from_checkpoint(glob)
    assert (g.forward(IDS[:10])[9] - g.forward([IDS[1]] + IDS[1:10])[9]).abs().max() > 1e-3


def test_strict_load_names_missing_and_unknown_tensors(tiny_ckpt, monkeypatch):
    cfg, tensors, quant = load_raw(tiny_ckpt)
    t = dict(tensors)
    del t["model.language_model.layers.2.mlp.experts.5.down_proj.weight_scale"]
    with pytest.raises(CheckpointError, match="down_proj.weight_scale"):
        MuseSparkReference(cfg, t, quant)
    t = dict(tensors)
    del t["model.language_model.layers.1.self_attn.k_proj.weight"]
    t["model.language_model.layers.1.mlp.shared_expert.weight"] = torch.zeros(2)
    with pytest.raises(CheckpointError, match="shared_expert.*layers.1.self_attn.k_proj"):
        MuseSparkReference(cfg, t, quant)
    monkeypatch.setenv("MUSE_SPARK_STRICT_LOAD", "0")
    MuseSparkReference(cfg, {k: v for k, v in t.items() if "shared_expert" in k or "k_proj" not in k}, quant)


def test_expert_format_must_agree_with_the_quark_config(tiny_ckpt):
    cfg, tensors, quant = load_raw(tiny_ckpt)
    q = json.loads(json.dumps(quant))
    q["exclude"].append("re:model\\.language_model\\.layers\\.1\\.mlp\\.experts\\.")
    with pytest.raises(CheckpointError, match="layer 1 expert 0: weights are MXFP4"):
        MuseSparkReference(cfg, tensors, q)
    bad = dict(quant, global_quant_config={"weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}})
    with pytest.raises(layout.QuarkLayoutError, match="OCP MXFP4"):
        MuseSparkReference(cfg, tensors, bad)


def test_checkpoint_names_map_both_ways():
    rel = "layers.3.mlp.experts.7.up_proj.weight_scale"
    assert layout.text_name(layout.checkpoint_name(rel)) == rel
    assert layout.parse_expert(rel) == (3, 7, "up_proj", "weight_scale")
    assert layout.text_name("model.layers.0.input_layernorm.weight") == "layers.0.input_layernorm.weight"
    assert layout.text_name("model.vision_tower.blocks.0.attn.qkv.weight") is None
    assert layout.quark_excluded("model.language_model.layers.0.mlp.experts.3.gate_proj",
                                 ["re:model\\.language_model\\.layers\\.0\\.mlp\\.experts\\."])
