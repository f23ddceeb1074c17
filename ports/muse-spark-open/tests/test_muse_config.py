"""MuseSparkConfig: the seed's numbers as defaults, everything read from config.json."""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import json

import pytest

from muse_spark_open.config import GLOBAL, SLIDING, MuseSparkConfig, MuseSparkTextConfig, default_no_rope_layers


def test_defaults_are_the_seeds_numbers():
    c = MuseSparkTextConfig()
    assert c.num_hidden_layers == 62 and c.num_global_layers == 16
    assert len(c.layer_types) - c.num_global_layers == 46
    assert c.num_experts == 256 and c.vocab_size == 202_048 and c.max_position_embeddings == 1_048_576
    # 62 / 16 = 3.875: what window-sized KV saves
    assert c.num_hidden_layers / c.num_global_layers == 3.875


def test_global_layers_follow_the_family_pattern():
    c = MuseSparkTextConfig()
    assert c.global_layers == list(range(1, 62, 4))  # every 4th counted back from layer 61
    assert c.is_global(61) and not c.is_global(0) and not c.is_global(60)
    assert default_no_rope_layers(4) == [1, 1, 1, 0]


def test_everything_comes_from_config_json(tmp_path):
    text = dict(hidden_size=96, num_hidden_layers=3, layer_types=[GLOBAL, SLIDING, GLOBAL],
                no_rope_layers=[0, 1, 0], num_experts=4, num_experts_per_tok=2, vocab_size=64,
                max_position_embeddings=4096, moe_latent_size=64, moe_intermediate_size=32, sliding_window=16,
                rope_parameters={"rope_type": "default", "rope_theta": 1234.0})
    raw = {"model_type": "muse_spark", "architectures": ["MuseSparkForConditionalGeneration"], "text_config": text,
           "vision_config": {"patch_size": 14}, "audio_config": {"n_mels": 128}}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    c = MuseSparkConfig.from_pretrained(tmp_path)
    t = c.get_text_config()
    for k, v in text.items():
        assert getattr(t, k) == v, k
    assert t.rope_theta == 1234.0 and t.global_layers == [0, 2]
    assert c.vision_config == {"patch_size": 14} and c.audio_config == {"n_mels": 128} and c.has_towers
    c.save_pretrained(tmp_path / "again")
    back = json.loads((tmp_path / "again" / "config.json").read_text())
    assert back["text_config"]["layer_types"] == text["layer_types"] and back["audio_config"] == {"n_mels": 128}


@pytest.mark.parametrize("bad,match", [
    (dict(num_hidden_layers=4, no_rope_layers=[1, 0, 1]), "no_rope_layers has 3 entries"),
    (dict(layer_types=["chunked_attention"] * 62), "unknown kinds"),
    (dict(hidden_activation="gelu"), "silu"),
    (dict(num_experts_per_tok=300), "num_experts_per_tok"),
    (dict(moe_latent_size=100), "multiple of 32"),
    (dict(router_scoring="top1"), "router_scoring"),
])
def test_invalid_configs_are_refused_naming_the_field(bad, match):
    with pytest.raises(ValueError, match=match):
        MuseSparkTextConfig(**bad)


@pytest.mark.parametrize("kw,want", [
    (dict(qk_scale_factor=43.7840518911, head_dim=128), 43.7840518911 / 128**0.5),   # raw form
    (dict(qk_scale_factor=3.87, head_dim=128), 3.87),                                 # folded form
    (dict(scale_query_by=2.5), 2.5),
    (dict(qk_scale_factor=None), 1.0),
])
def test_query_prescale_accepts_both_forms(kw, want):
    assert MuseSparkTextConfig(**kw).query_prescale() == pytest.approx(want)


def test_vllm_reads_the_config_through_the_plugin(tmp_path):
    pytest.importorskip("vllm")
    from vllm.transformers_utils.config import get_config

    from muse_spark_open.plugin import register
    from muse_spark_open.tiny import tiny_text_config

    register()
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "muse_spark", "text_config": tiny_text_config(),
                                                       "architectures": ["MuseSparkForConditionalGeneration"]}))
    cfg = get_config(str(tmp_path), trust_remote_code=False)
    assert isinstance(cfg, MuseSparkConfig)
    assert cfg.get_text_config().num_experts == tiny_text_config()["num_experts"]
