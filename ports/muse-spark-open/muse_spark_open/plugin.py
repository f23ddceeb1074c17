"""The ``vllm.general_plugins`` entry point: ``muse_spark = muse_spark_open.plugin:register``.

vLLM calls :func:`register` in every process it starts (API server, engine core, workers), once
per process, before it parses a model config. It must be cheap and idempotent, and it must not
import torch-heavy modules: the model is registered by name and imported by vLLM when needed.

What it registers:
* config: ``model_type`` ``muse_spark`` (and ``muse_spark_text``) -> :mod:`muse_spark_open.config`,
  in vLLM's config registry and transformers' ``AutoConfig``;
* model: architecture ``MuseSparkForConditionalGeneration`` -> :mod:`muse_spark_open.model`;
* a config hook for that architecture that refuses to start without ``--language-model-only``;
* parsers: reasoning parser ``muse`` and tool parser ``muse`` (:mod:`muse_spark_open.parsers`).
  When a later vLLM ships its own ``muse`` parsers, those are left in place.
"""

from __future__ import annotations

import logging

from . import env, guard

logger = logging.getLogger(__name__)

ARCH = guard.ARCH
MODEL_REF = "muse_spark_open.model:MuseSparkForConditionalGeneration"
PARSER_NAME = "muse"
REASONING_PARSER = ("muse_spark_open.parsers.reasoning", "MuseReasoningParser")
TOOL_PARSER = ("muse_spark_open.parsers.tool", "MuseToolParser")


def register_config() -> None:
    from transformers import AutoConfig
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    from .config import MuseSparkConfig, MuseSparkTextConfig

    for cls in (MuseSparkConfig, MuseSparkTextConfig):
        _CONFIG_REGISTRY[cls.model_type] = cls
        AutoConfig.register(cls.model_type, cls, exist_ok=True)


def register_model() -> None:
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.config import MODELS_CONFIG_MAP

    if ARCH not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(ARCH, MODEL_REF)
    MODELS_CONFIG_MAP[ARCH] = guard.verify_hook_class()


def register_parsers() -> None:
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    for manager, (module, cls), kind in (
        (ReasoningParserManager, REASONING_PARSER, "reasoning"),
        (ToolParserManager, TOOL_PARSER, "tool"),
    ):
        if PARSER_NAME in manager.list_registered():
            lazy = getattr(manager, "lazy_parsers", {}).get(PARSER_NAME)
            if lazy is None or lazy[0] != module:
                logger.info("vLLM already has a %s parser %r; leaving it in place", kind, PARSER_NAME)
                continue
        manager.register_lazy_module(PARSER_NAME, module, cls)


def register() -> None:
    """The entry point. A bad MUSE_SPARK_* value stops the process here, naming the variable."""
    env.read_all()
    register_config()
    register_model()
    register_parsers()
