"""The start-up refusal: Muse Spark Open is served text-only, with ``--language-model-only``.

The checkpoint carries vision and audio towers. This port serves the text decoder only: it has no
multimodal processor for the family's image and audio inputs and no tower kernels for Gaudi 2, and
the recipe's memory budget (KV pool, captured graphs) leaves no room for the towers. Without the
flag vLLM would treat the model as multimodal and accept image and audio inputs it cannot run, so
the server refuses to start instead.

The check runs in the API server when vLLM builds its config (a ``VerifyAndUpdateConfig`` hook the
plugin registers for the architecture) and again in each worker when the model is built.
"""

from __future__ import annotations

from typing import Any

ARCH = "MuseSparkForConditionalGeneration"

REFUSAL = (
    "Muse Spark Open is served text-only: start vLLM with --language-model-only. The checkpoint "
    "carries vision and audio towers that this port does not serve (no multimodal processor, no "
    "tower kernels on Gaudi 2, no memory for them in the recipe's budget); without the flag vLLM "
    "would accept image and audio inputs that it cannot run."
)


class LanguageModelOnlyRequired(ValueError):
    pass


def language_model_only(model_config: Any) -> bool:
    mm = getattr(model_config, "multimodal_config", None)
    return bool(mm is not None and getattr(mm, "language_model_only", False))


def require_language_model_only(model_config: Any) -> None:
    if not language_model_only(model_config):
        raise LanguageModelOnlyRequired(REFUSAL)


def verify_hook_class() -> type:
    """A VerifyAndUpdateConfig subclass for vLLM's MODELS_CONFIG_MAP (built lazily: imports vLLM)."""
    from vllm.model_executor.models.config import VerifyAndUpdateConfig

    class MuseSparkVerifyConfig(VerifyAndUpdateConfig):
        @staticmethod
        def verify_and_update_config(vllm_config: Any) -> None:
            require_language_model_only(vllm_config.model_config)

    return MuseSparkVerifyConfig
