"""Build gates: what can be checked in the image without a server or an accelerator.

    python -m muse_spark_open.buildcheck [--json]

Run by install.sh (after installing) and by ``install.sh --check``. Each gate prints ``ok`` or
``FAIL`` with what it saw; the exit status is 0 when every gate passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENTRY_GROUP = "vllm.general_plugins"
ENTRY_NAME = "muse_spark"
ENTRY_VALUE = "muse_spark_open.plugin:register"


def gate_switches() -> str:
    from . import env

    values = env.read_all()
    return ", ".join(f"{k}={v}" for k, v in values.items())


def gate_vllm() -> str:
    import vllm

    from .upstream import SUPPORTED_VLLM

    version = str(getattr(vllm, "__version__", "?"))
    if not any(version == v or version.startswith(v + "+") for v in SUPPORTED_VLLM):
        raise AssertionError(f"vLLM {version}: the port supports vLLM {', '.join(SUPPORTED_VLLM)} (README)")
    return f"vLLM {version} at {Path(vllm.__file__).parent}"


def gate_entry_point() -> str:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=ENTRY_GROUP) if ep.name == ENTRY_NAME]
    if not found:
        raise AssertionError(
            f"no {ENTRY_GROUP} entry point named {ENTRY_NAME!r}: the plugin is not installed in this Python "
            "(install.sh installs it; for a side folder put it on PYTHONPATH)"
        )
    if found[0].value != ENTRY_VALUE:
        raise AssertionError(f"entry point {ENTRY_NAME} -> {found[0].value}, expected {ENTRY_VALUE}")
    return f"{ENTRY_NAME} -> {found[0].value}"


def gate_registration() -> str:
    """vLLM's own plugin loader runs the entry point; the registries then hold what the choice says
    (muse_spark_open.upstream): the port's model and config, or vLLM's own; the port's parsers or vLLM's."""
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.config import MODELS_CONFIG_MAP
    from vllm.plugins import load_general_plugins
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    from . import guard, upstream
    from .config import MuseSparkConfig

    load_general_plugins()
    choice = upstream.current()
    problems = []
    if guard.ARCH not in ModelRegistry.get_supported_archs():
        problems.append(f"architecture {guard.ARCH} not in vLLM's model registry")
    if choice.model == upstream.PORT:
        if upstream.registered_model() is not None:
            problems.append(f"architecture {guard.ARCH} is vLLM's ({upstream.registered_model()}), not the port's")
        if guard.ARCH not in MODELS_CONFIG_MAP:
            problems.append("no --language-model-only hook for the architecture")
        if _CONFIG_REGISTRY.get("muse_spark") is not MuseSparkConfig:
            problems.append("model_type muse_spark is not mapped to MuseSparkConfig")
    rp = ReasoningParserManager.get_reasoning_parser("muse")
    tp = ToolParserManager.get_tool_parser("muse")
    for kind, cls, side in (("reasoning", rp, choice.reasoning_parser), ("tool", tp, choice.tool_parser)):
        if cls.__module__.startswith(upstream.PORT_PACKAGE) != (side == upstream.PORT):
            problems.append(f"{kind} parser muse is {cls.__module__}, the choice is {side}'s")
    if problems:
        raise AssertionError("; ".join(problems))
    return f"{guard.ARCH}; {choice.describe()}; parsers muse: {rp.__module__}, {tp.__module__}"


def gate_config() -> str:
    from vllm.transformers_utils.config import get_config

    from .config import (
        SEED_NATIVE_CONTEXT,
        SEED_NUM_EXPERTS,
        SEED_NUM_GLOBAL_LAYERS,
        SEED_NUM_LAYERS,
        SEED_VOCAB_SIZE,
        MuseSparkConfig,
        MuseSparkTextConfig,
    )
    from . import upstream
    from .guard import ARCH
    from .tiny import tiny_text_config

    choice = upstream.current()
    if choice.model == upstream.UPSTREAM:
        return f"config.json is read by vLLM's own config ({choice.why_model}): not the port's to check"

    d = MuseSparkTextConfig()
    seed = (d.num_hidden_layers, d.num_global_layers, d.num_experts, d.vocab_size, d.max_position_embeddings)
    want = (SEED_NUM_LAYERS, SEED_NUM_GLOBAL_LAYERS, SEED_NUM_EXPERTS, SEED_VOCAB_SIZE, SEED_NATIVE_CONTEXT)
    if seed != want:
        raise AssertionError(f"defaults {seed} differ from the seed's {want}")
    with tempfile.TemporaryDirectory() as tmp:
        raw = {"architectures": [ARCH], "model_type": "muse_spark",
               "text_config": tiny_text_config(), "vision_config": {"hidden_size": 8}}
        (Path(tmp) / "config.json").write_text(json.dumps(raw))
        cfg = get_config(tmp, trust_remote_code=False)
    if not isinstance(cfg, MuseSparkConfig) or cfg.text_config.hidden_size != raw["text_config"]["hidden_size"]:
        raise AssertionError(f"vLLM parsed config.json as {type(cfg).__name__}")
    return (f"vLLM reads config.json as MuseSparkConfig; defaults: {seed[0]} layers, {seed[1]} global, "
            f"{seed[2]} experts, vocab {seed[3]}, context {seed[4]}")


def gate_language_model_only() -> str:
    from types import SimpleNamespace

    from . import guard

    hook = guard.verify_hook_class()
    without = SimpleNamespace(model_config=SimpleNamespace(multimodal_config=SimpleNamespace(language_model_only=False)))
    with_flag = SimpleNamespace(model_config=SimpleNamespace(multimodal_config=SimpleNamespace(language_model_only=True)))
    try:
        hook.verify_and_update_config(without)
    except guard.LanguageModelOnlyRequired:
        pass
    else:
        raise AssertionError("the server would start without --language-model-only")
    hook.verify_and_update_config(with_flag)
    return "refuses to start without --language-model-only"


SMOKE = (
    ' to=self<|message|>The user wants the weather.<|eom|><|start|>assistant to=get_weather<|message|>'
    '<atem:function_calls><atem:invoke name="get_weather"><atem:parameter name="city">Paris</atem:parameter>'
    "</atem:invoke></atem:function_calls><|eom|>"
)


def gate_parsers() -> str:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser.parser_manager import ParserManager

    cls = ParserManager.get_parser(tool_parser_name="muse", reasoning_parser_name="muse", enable_auto_tools=True)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools)

    class _Tok:
        def decode(self, ids: Any, **kw: Any) -> str:
            return ""

        def get_vocab(self) -> dict[str, int]:
            return {}

    parser = cls(_Tok(), req.tools)
    req = parser.adjust_request(req)
    reasoning, content, calls = parser.parse(SMOKE, req, enable_auto_tools=True)
    got = [(c.name, json.loads(c.arguments)) for c in calls or []]
    if reasoning != "The user wants the weather." or got != [("get_weather", {"city": "Paris"})] or req.skip_special_tokens:
        raise AssertionError(f"parsed reasoning={reasoning!r} content={content!r} calls={got}")
    return "reasoning and one tool call parsed from a sample turn"


def gate_model_module() -> str:
    from . import expert_backend, model

    path, _fn, why = expert_backend.choose()
    return f"{model.MuseSparkForConditionalGeneration.__name__} imports; MXFP4 experts: {path} path ({why})"


GATES: list[tuple[str, Callable[[], str]]] = [
    ("switches", gate_switches),
    ("vllm", gate_vllm),
    ("entry-point", gate_entry_point),
    ("registration", gate_registration),
    ("config", gate_config),
    ("language-model-only", gate_language_model_only),
    ("parsers", gate_parsers),
    ("model-module", gate_model_module),
]


def run(json_out: bool = False) -> int:
    results = []
    for name, fn in GATES:
        try:
            detail, ok = fn(), True
        except Exception as e:  # a gate reports, it does not crash the others
            detail, ok = f"{type(e).__name__}: {e}", False
            if not isinstance(e, AssertionError):
                detail += "\n" + "".join(traceback.format_exception_only(type(e), e)).strip()
        results.append({"gate": name, "ok": ok, "detail": detail})
        if not json_out:
            print(f"{'ok  ' if ok else 'FAIL'}  {name:<20} {detail}", flush=True)
    if json_out:
        print(json.dumps(results, indent=2))
    failed = [r["gate"] for r in results if not r["ok"]]
    if not json_out:
        print(f"build gates: {len(results) - len(failed)}/{len(results)} passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Muse Spark Open build gates (no server, no accelerator).")
    p.add_argument("--json", action="store_true")
    return run(p.parse_args(argv).json)


if __name__ == "__main__":
    sys.exit(main())
