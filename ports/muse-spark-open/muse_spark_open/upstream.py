"""What the installed vLLM already ships of Muse Spark, and which side serves each part: the port or upstream.

vLLM 0.33.0 ships Muse Spark itself (``vllm/models/muse_spark``: the architecture
``MuseSparkForConditionalGeneration`` with its configs ``muse_spark``, ``muse_spark_text`` and others,
parsers ``muse`` with the alias ``musespark1x``, and the DSpark drafter ``MuseSparkDSparkModel``);
0.30.0 to 0.32.0 ship none of it. The choice is made from what the installed vLLM registers (its model
registry, its parser managers: feature detection, no version string), once per process, and logged once.

* **model** (the architecture, the configs ``muse_spark`` / ``muse_spark_text`` and the
  ``--language-model-only`` hook, one decision: the port's model reads the port's config fields):

  - vLLM registers no ``MuseSparkForConditionalGeneration`` (0.30.0 to 0.32.0): the port's.
  - vLLM registers one and the platform is CUDA or ROCm: upstream's (the port steps aside). Upstream's
    package picks its ROCm stack on ROCm and its NVIDIA stack elsewhere; these are where it runs.
  - vLLM registers one on any other platform (Gaudi's HPU through vllm-gaudi, CPU): the port's, registered
    over upstream's. Upstream's package picks its NVIDIA stack there, which takes BF16 and NVFP4 checkpoints
    only (``ModelOptNvFp4Config``: the recipe's Quark MXFP4 checkpoint is refused) and CUDA (``torch.cuda.Event``
    when a layer is built, FlashInfer and CuTe kernels); its MXFP4 experts are the ROCm stack's AITER W4A4
    kernels for gfx950. The port's W4A16 MXFP4 experts (kernels/mxfp4-moe), ``MUSE_SPARK_MOE_TP_SPLIT``
    and its plain-PyTorch paths are not in upstream's.
* **parsers** ``muse`` (reasoning, tool; each on its own): upstream's when vLLM registers a ``muse``
  parser of its own (0.33.0), the port's otherwise. Upstream's is vllm#61879 itself, the same channel
  grammar (segmented once, a body ends at its end marker or the next header, tool calls only from tool
  channels), and 0.33.0's Rust front end parses with upstream's grammar whatever Python registers.
* **drafter**: the port has none. Upstream's ``MuseSparkDSparkModel`` and config ``muse_spark_dspark`` are
  left alone; they build upstream's CUDA/ROCm decoder layers and read the target's residual stream, which
  the port's model does not hand out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

# under vLLM's "vllm" logger, whose handler vLLM configures: the choice shows in the server's log
logger = logging.getLogger("vllm.muse_spark_open.upstream")

ARCH = "MuseSparkForConditionalGeneration"
PARSER_NAME = "muse"
PORT_PACKAGE = "muse_spark_open"
PORT = "port"
UPSTREAM = "upstream"
UPSTREAM_PLATFORMS = ("cuda", "rocm")  # where upstream's package has a stack that runs
# the releases the port is tested on (README "vLLM releases"); the build gate refuses others
SUPPORTED_VLLM = ("0.30.0", "0.31.0", "0.32.0", "0.33.0")


@dataclass(frozen=True)
class Choice:
    """Which side serves each part, with the reason (one line each)."""

    model: str  # PORT or UPSTREAM
    reasoning_parser: str
    tool_parser: str
    why_model: str
    why_parsers: str

    def describe(self) -> str:
        return (f"model and configs: {self.model} ({self.why_model}); parsers {PARSER_NAME!r}: reasoning "
                f"{self.reasoning_parser}, tool {self.tool_parser} ({self.why_parsers})")


def choose(upstream_model: str | None, platform: str, upstream_reasoning: bool, upstream_tool: bool) -> Choice:
    """The rule, from facts: the module vLLM registers the architecture to (None: not registered, or the
    port's), the platform's name (``cuda``, ``rocm``, ``hpu``, ``cpu``, ...), and whether vLLM has a
    reasoning / tool parser ``muse`` of its own."""
    if upstream_model is None:
        model, why = PORT, f"vLLM registers no {ARCH}"
    elif platform in UPSTREAM_PLATFORMS:
        model, why = UPSTREAM, f"vLLM's own {upstream_model} runs on {platform}"
    else:
        model, why = PORT, (f"vLLM's {upstream_model} has no path on platform {platform or 'unspecified'!r}: "
                            "its NVIDIA stack takes BF16/NVFP4 checkpoints on CUDA only, its MXFP4 stack is ROCm's")
    side = {True: UPSTREAM, False: PORT}
    if upstream_reasoning or upstream_tool:
        why_parsers = "vLLM ships its own muse parsers; the port's are not registered over them"
    else:
        why_parsers = "vLLM has no muse parsers"
    return Choice(model, side[upstream_reasoning], side[upstream_tool], why, why_parsers)


def _module_of(entry: Any) -> str | None:
    """The module a model registry entry or a parser manager entry names (lazy or a class)."""
    if entry is None:
        return None
    if isinstance(entry, tuple):  # a lazy parser: (module path, class name)
        return str(entry[0])
    name = getattr(entry, "module_name", None)  # a lazy model entry
    if name is None:
        cls = getattr(entry, "model_cls", entry)
        name = getattr(cls, "__module__", None)
    return str(name) if name else None


def _upstream(module: str | None) -> str | None:
    return module if module and not module.startswith(PORT_PACKAGE) else None


def registered_model() -> str | None:
    """The module vLLM's model registry maps the architecture to, unless it is the port's."""
    from vllm.model_executor.models import ModelRegistry

    return _upstream(_module_of(ModelRegistry.models.get(ARCH)))


def registered_parser(manager: Any) -> str | None:
    """The module of the parser ``muse`` a parser manager holds, unless it is the port's."""
    for table in ("tool_parsers", "reasoning_parsers", "lazy_parsers"):  # classes loaded, then lazy entries
        entry = (getattr(manager, table, None) or {}).get(PARSER_NAME)
        if entry is not None:
            return _upstream(_module_of(entry))
    return None


def platform_name() -> str:
    """``cuda``, ``rocm``, or the platform's device type (``hpu`` under vllm-gaudi, ``cpu``; empty when none)."""
    from vllm.platforms import current_platform

    if current_platform.is_cuda():
        return "cuda"
    if current_platform.is_rocm():
        return "rocm"
    return str(getattr(current_platform, "device_type", "") or "")


def detect() -> Choice:
    """The choice for the installed vLLM and the current platform (reads vLLM's registries)."""
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    return choose(registered_model(), platform_name(), registered_parser(ReasoningParserManager) is not None,
                  registered_parser(ToolParserManager) is not None)


_current: Choice | None = None


def current() -> Choice:
    """The process-wide choice: made before the port registers anything (so that the port's own entries are
    not mistaken for vLLM's), then kept, and logged once."""
    global _current
    if _current is None:
        _current = detect()
        logger.info("Muse Spark port on this vLLM: %s", _current.describe())
    return _current
