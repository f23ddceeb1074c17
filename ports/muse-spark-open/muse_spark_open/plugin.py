"""The ``vllm.general_plugins`` entry point: ``muse_spark = muse_spark_open.plugin:register``.

vLLM calls :func:`register` in every process it starts (API server, engine core, workers), once
per process or more, before it parses a model config. It must be cheap and idempotent, and it must not
import torch-heavy modules: the model is registered by name and imported by vLLM when needed.

What it registers, where :mod:`muse_spark_open.upstream` says the port serves that part (always on vLLM
0.30.0 to 0.32.0; on 0.33.0, which ships Muse Spark, the model everywhere but CUDA and ROCm, and never the
parsers):
* config: ``model_type`` ``muse_spark`` (and ``muse_spark_text``) -> :mod:`muse_spark_open.config`,
  in vLLM's config registry and transformers' ``AutoConfig``;
* model: architecture ``MuseSparkForConditionalGeneration`` -> :mod:`muse_spark_open.model`;
* a config hook for that architecture that refuses to start without ``--language-model-only``;
* parsers: reasoning parser ``muse`` and tool parser ``muse`` (:mod:`muse_spark_open.parsers`).
"""

from __future__ import annotations

from . import env, guard, upstream

ARCH = guard.ARCH
MODEL_REF = "muse_spark_open.model:MuseSparkForConditionalGeneration"
PARSER_NAME = upstream.PARSER_NAME
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
    """The port's model under the architecture's name (over vLLM's own, where the choice says so)."""
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.config import MODELS_CONFIG_MAP

    ModelRegistry.register_model(ARCH, MODEL_REF)
    MODELS_CONFIG_MAP[ARCH] = guard.verify_hook_class()


def register_parsers(choice: upstream.Choice) -> None:
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    for manager, (module, cls), side in (
        (ReasoningParserManager, REASONING_PARSER, choice.reasoning_parser),
        (ToolParserManager, TOOL_PARSER, choice.tool_parser),
    ):
        if side == upstream.PORT:
            manager.register_lazy_module(PARSER_NAME, module, cls)


def register() -> None:
    """The entry point. A bad MUSE_SPARK_* value stops the process here, naming the variable."""
    env.read_all()
    choice = upstream.current()  # before anything of the port is registered; logged once
    if choice.model == upstream.PORT:
        register_config()
        register_model()
    register_parsers(choice)
