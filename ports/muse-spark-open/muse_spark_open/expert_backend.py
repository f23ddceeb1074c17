"""Which path computes the MXFP4 experts: the fused kernels or the stock path.

``MUSE_SPARK_MXFP4_KERNELS`` (read through ``env``): ``1`` (default) takes the kernels of
kernels/mxfp4-moe (package ``mxfp4_moe``) where they can run, and the stock path otherwise, saying
why; ``0`` takes the stock path: dequantize each chosen expert, then matmul (``moe.combine_experts``).
The choice is made and logged once per process.

The kernels are reached through ``mxfp4_moe.glue`` (its ``init_backend`` decides where they can run,
its ``prepare_experts`` re-lays a layer's packed experts out once after loading, in place through the
kernel's ``prepare``, its ``moe_experts`` computes one card's share of the routed experts). The port hands it the switch's
value, so the variable is still read in one place (``env``). Where ``mxfp4_moe`` is not importable
(install.sh makes it importable when it is in the checkout), the stock path is taken.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from . import env

logger = logging.getLogger(__name__)

STOCK = "stock"
KERNEL = "kernel"
SWITCH = "MUSE_SPARK_MXFP4_KERNELS"

# kernel(h, ids, weights, w13, w13_scale, w2, w2_scale, output_norm, eps, first_expert, layout) -> f32 [T, L];
# kernel.prepare(w13, w13_scale, w2, w2_scale, output_norm, first_expert) -> layout (re-lays out in place);
# under a TP split (MUSE_SPARK_MOE_TP_SPLIT > 1, the experts being slices of the intermediate size):
# kernel.partials(<kernel's arguments>) -> f32 [T * k, L], each pair's output before the norm (zero for pairs
# whose expert is not on this card), and after the group's sum kernel.combine(y, ids, weights,
# output_norm of every expert, eps) -> f32 [T, L]
Kernel = Callable[..., Any]
_chosen: tuple[str, Kernel | None, str] | None = None


def _load_kernel(value: str) -> tuple[Kernel | None, str]:
    try:
        glue = importlib.import_module("mxfp4_moe.glue")
        ref = importlib.import_module("mxfp4_moe.reference")
    except Exception as e:  # ImportError, or a toolchain error raised at import
        return None, f"the kernels are not importable (mxfp4_moe: {type(e).__name__}: {e})"
    choice = glue.init_backend(environ={SWITCH: value})
    if choice.backend != glue.KERNEL:
        return None, choice.reason

    def run(h: Any, ids: Any, weights: Any, w13: Any, w13_scale: Any, w2: Any, w2_scale: Any,
            output_norm: Any, eps: float, first_expert: int, layout: tuple[str, tuple] = ("quark", ())) -> Any:
        experts = ref.ExpertWeights(w13, w13_scale, w2, w2_scale, output_norm, expert_base=first_expert,
                                    layout=layout[0], tiles=layout[1])
        return glue.moe_experts(h, ids, weights, experts, eps=eps)

    def prepare(w13: Any, w13_scale: Any, w2: Any, w2_scale: Any, output_norm: Any,
                first_expert: int) -> tuple[str, tuple]:
        """Once per layer after loading: glue.prepare_experts' re-layout (same shapes and dtypes), copied
        into the given tensors in place (no second copy of the experts is kept). Returns (layout, tiles)."""
        experts = ref.ExpertWeights(w13, w13_scale, w2, w2_scale, output_norm, expert_base=first_expert)
        prepared = glue.prepare_experts(experts)
        if prepared is not experts:
            for name in ("w13", "w13_scale", "w2", "w2_scale"):
                getattr(experts, name).copy_(getattr(prepared, name))
        return prepared.layout, tuple(prepared.tiles)

    def partials(h: Any, ids: Any, weights: Any, w13: Any, w13_scale: Any, w2: Any, w2_scale: Any,
                 output_norm: Any, eps: float, first_expert: int, layout: tuple[str, tuple] = ("quark", ())) -> Any:
        experts = ref.ExpertWeights(w13, w13_scale, w2, w2_scale, output_norm, expert_base=first_expert,
                                    layout=layout[0], tiles=layout[1])
        return glue.moe_expert_partials(h, ids, weights, experts, eps=eps)

    def combine(y: Any, ids: Any, weights: Any, output_norm: Any, eps: float) -> Any:
        return glue.combine_partials(y, ids, weights, output_norm, expert_base=0, eps=eps)

    run.prepare = prepare  # type: ignore[attr-defined]
    run.partials = partials  # type: ignore[attr-defined]
    run.combine = combine  # type: ignore[attr-defined]
    return run, choice.describe()


def choose(switch: str | None = None,
           loader: Callable[[str], tuple[Kernel | None, str]] = _load_kernel) -> tuple[str, Kernel | None, str]:
    """(path, kernel or None, why) for a switch value (read from the environment when None)."""
    value = env.read(SWITCH) if switch is None else switch
    if value not in env.SWITCHES[SWITCH].choices:
        raise env.SwitchError(f"{SWITCH}={value!r} is not valid: use 1 or 0")
    if value == "0":
        return STOCK, None, f"{SWITCH}=0: the stock path (dequantize, then matmul)"
    fn, why = loader(value)
    if fn is not None:
        return KERNEL, fn, why
    return STOCK, None, f"{SWITCH}=1 but the stock path: {why}"


def current() -> tuple[str, Kernel | None]:
    """The process-wide choice, made and logged once."""
    global _chosen
    if _chosen is None:
        _chosen = choose()
        logger.info("Muse Spark MXFP4 experts: %s path (%s)", _chosen[0], _chosen[2])
    return _chosen[0], _chosen[1]


def reset() -> None:
    """Forget the choice (tests)."""
    global _chosen
    _chosen = None
