"""Configuration of Muse Spark Open (``model_type`` ``muse_spark``).

The checkpoint's ``config.json`` nests the text decoder under ``text_config`` and carries
``vision_config`` and ``audio_config`` for towers this port does not serve (they are kept as plain
dicts so the file round-trips). Every field is read from ``config.json``; a default only fills a
field the file leaves out.

Defaults that come from the seed's numbers: 62 decoder layers of which 16 are global (full-length
KV), 256 routed experts, a vocabulary of 202,048 tokens, a native context of 1,048,576 tokens. The
global layers follow the Muse family's pattern (every fourth layer counted back from the last is a
global, NoPE layer; the others are sliding-window RoPE layers), which gives exactly 16 of 62. The
other defaults (widths, heads, top-k, window) are placeholders of the right shape for the family:
the published ``config.json`` always carries them.
"""

from __future__ import annotations

from typing import Any

from transformers.configuration_utils import PretrainedConfig

SEED_NUM_LAYERS = 62
SEED_NUM_GLOBAL_LAYERS = 16
SEED_NUM_EXPERTS = 256
SEED_VOCAB_SIZE = 202_048
SEED_NATIVE_CONTEXT = 1_048_576

GLOBAL = "full_attention"
SLIDING = "sliding_attention"


def default_no_rope_layers(num_hidden_layers: int, stride: int = 4) -> list[int]:
    """1 for a RoPE (sliding) layer, 0 for a NoPE (global) layer: every ``stride``-th from the last."""
    return [0 if (num_hidden_layers - 1 - i) % stride == 0 else 1 for i in range(num_hidden_layers)]


class MuseSparkTextConfig(PretrainedConfig):
    model_type = "muse_spark_text"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(
        self,
        vocab_size: int = SEED_VOCAB_SIZE,
        hidden_size: int = 8192,
        num_hidden_layers: int = SEED_NUM_LAYERS,
        num_attention_heads: int = 64,
        num_key_value_heads: int = 8,
        head_dim: int = 128,
        hidden_activation: str = "silu",
        max_position_embeddings: int = SEED_NATIVE_CONTEXT,
        initializer_range: float = 0.02,
        rms_norm_eps: float = 1e-5,
        post_norm_eps: float = 1e-8,
        use_cache: bool = True,
        pad_token_id: int | None = None,
        bos_token_id: int | None = 200_000,
        eos_token_id: int | list[int] | None = 200_001,
        tie_word_embeddings: bool = False,
        rope_parameters: dict[str, Any] | None = None,
        rope_theta: float | None = None,
        attention_bias: bool = False,
        attention_dropout: float = 0.0,
        sliding_window: int = 2048,
        layer_types: list[str] | None = None,
        no_rope_layers: list[int] | None = None,
        final_logit_softcapping: float | None = 20.0,
        qk_scale_factor: float | None = 43.7840518911,
        scale_query_by: float | None = None,
        use_qk_norm: bool = True,
        use_attn_output_gate: bool = True,
        output_multiplier: float = 1.0,
        normalize_tok_embeddings: bool = True,
        # latent MoE
        num_experts: int = SEED_NUM_EXPERTS,
        num_experts_per_tok: int = 8,
        moe_latent_size: int = 4096,
        moe_intermediate_size: int = 4096,
        norm_topk_prob: bool = True,
        router_scoring: str = "softmax",
        expert_output_norm: bool = True,
        **kwargs: Any,
    ) -> None:
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.hidden_activation = hidden_activation
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.post_norm_eps = post_norm_eps
        self.use_cache = use_cache
        if rope_parameters is None:
            theta = rope_theta if rope_theta is not None else 500_000.0
            rope_parameters = {"rope_type": "default", "rope_theta": theta}
        self.rope_parameters = dict(rope_parameters)
        self.rope_theta = float(self.rope_parameters.get("rope_theta", 500_000.0))
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        self.sliding_window = sliding_window
        self.no_rope_layers = (
            list(no_rope_layers) if no_rope_layers is not None else default_no_rope_layers(num_hidden_layers)
        )
        if layer_types is None:
            layer_types = [GLOBAL if nr == 0 else SLIDING for nr in self.no_rope_layers]
        self.layer_types = list(layer_types)
        self.final_logit_softcapping = final_logit_softcapping
        self.qk_scale_factor = qk_scale_factor
        self.scale_query_by = scale_query_by
        self.use_qk_norm = use_qk_norm
        self.use_attn_output_gate = use_attn_output_gate
        self.output_multiplier = output_multiplier
        self.normalize_tok_embeddings = normalize_tok_embeddings
        self.num_experts = num_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.moe_latent_size = moe_latent_size
        self.moe_intermediate_size = moe_intermediate_size
        self.norm_topk_prob = norm_topk_prob
        self.router_scoring = router_scoring
        self.expert_output_norm = expert_output_norm
        self.validate_muse()  # before transformers' own checks, so that the message names our fields
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )

    # -- derived values --------------------------------------------------------------------------

    @property
    def global_layers(self) -> list[int]:
        return [i for i, t in enumerate(self.layer_types) if t == GLOBAL]

    @property
    def num_global_layers(self) -> int:
        return len(self.global_layers)

    def is_global(self, layer: int) -> bool:
        return self.layer_types[layer] == GLOBAL

    def query_prescale(self) -> float:
        """Factor applied to q after the QK norm; softmax then scales by head_dim ** -0.5.

        ``scale_query_by`` is the factor itself. ``qk_scale_factor`` comes in two forms in the
        family: the raw value (about 43.78 for head_dim 128) and the value with 1/sqrt(head_dim)
        already folded in (about 3.87); a value at or above sqrt(head_dim) is the raw form.
        """
        if self.scale_query_by is not None:
            return float(self.scale_query_by)
        if self.qk_scale_factor is None:
            return 1.0
        q = float(self.qk_scale_factor)
        root = self.head_dim**0.5
        return q / root if q >= root else q

    def validate_muse(self) -> None:
        """Refuse a config the port cannot serve, naming the field."""
        problems: list[str] = []
        n = self.num_hidden_layers
        if len(self.layer_types) != n:
            problems.append(f"layer_types has {len(self.layer_types)} entries for {n} layers")
        bad = sorted({t for t in self.layer_types if t not in (GLOBAL, SLIDING)})
        if bad:
            problems.append(f"layer_types has unknown kinds {bad} (use {GLOBAL!r} or {SLIDING!r})")
        if len(self.no_rope_layers) != n:
            problems.append(f"no_rope_layers has {len(self.no_rope_layers)} entries for {n} layers")
        if self.hidden_activation != "silu":
            problems.append(f"hidden_activation {self.hidden_activation!r}: the experts are SwiGLU (silu)")
        if self.num_attention_heads % max(self.num_key_value_heads, 1):
            problems.append("num_attention_heads is not a multiple of num_key_value_heads")
        if not 0 < self.num_experts_per_tok <= self.num_experts:
            problems.append(f"num_experts_per_tok {self.num_experts_per_tok} not in 1..num_experts")
        if self.router_scoring not in ("softmax", "sigmoid"):
            problems.append(f"router_scoring {self.router_scoring!r} (softmax or sigmoid)")
        for field in ("moe_latent_size", "moe_intermediate_size"):
            if getattr(self, field) % 32:
                problems.append(f"{field} {getattr(self, field)} is not a multiple of 32 (the MX block)")
        if self.sliding_window is None or self.sliding_window <= 0:
            problems.append("sliding_window must be a positive number of tokens")
        if problems:
            raise ValueError("muse_spark text config: " + "; ".join(problems))


class MuseSparkConfig(PretrainedConfig):
    """The checkpoint's top-level config: text decoder, plus towers that are not served."""

    model_type = "muse_spark"
    sub_configs = {"text_config": MuseSparkTextConfig}

    def __init__(
        self,
        text_config: dict[str, Any] | MuseSparkTextConfig | None = None,
        vision_config: dict[str, Any] | None = None,
        audio_config: dict[str, Any] | None = None,
        image_token_id: int | None = None,
        audio_token_id: int | None = None,
        **kwargs: Any,
    ) -> None:
        if text_config is None:
            self.text_config = MuseSparkTextConfig()
        elif isinstance(text_config, dict):
            self.text_config = MuseSparkTextConfig(**text_config)
        else:
            self.text_config = text_config
        # The towers are not served (the server runs with --language-model-only); their configs
        # are kept verbatim so that save_pretrained writes back what it read.
        self.vision_config = vision_config
        self.audio_config = audio_config
        self.image_token_id = image_token_id
        self.audio_token_id = audio_token_id
        super().__init__(**kwargs)

    @property
    def has_towers(self) -> bool:
        return bool(self.vision_config) or bool(self.audio_config)

    def get_text_config(self, *args: Any, **kwargs: Any) -> MuseSparkTextConfig:  # noqa: D401
        return self.text_config


def text_config_of(config: Any) -> MuseSparkTextConfig:
    """The text config of a MuseSparkConfig, or the object itself when it is a text config."""
    return getattr(config, "text_config", config)
