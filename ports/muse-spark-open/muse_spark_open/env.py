"""The port's switches: every ``MUSE_SPARK_*`` variable is read here and nowhere else.

Each switch has a closed set of values. A bad value, or a ``MUSE_SPARK_*`` variable that is not a
switch (a typo would otherwise be ignored in silence), is a :class:`SwitchError` that names the
variable, the value and the values it takes. The plugin validates all of them when vLLM loads it,
so a bad value stops the server at start, not at the first request. The README describes them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "MUSE_SPARK_"


class SwitchError(ValueError):
    """A MUSE_SPARK_* variable with a value it does not take, or an unknown one."""


@dataclass(frozen=True)
class Switch:
    name: str
    choices: tuple[str, ...]
    default: str
    meaning: str


SWITCHES: dict[str, Switch] = {
    s.name: s
    for s in (
        Switch(
            "MUSE_SPARK_MXFP4_KERNELS",
            ("1", "0"),
            "1",
            "MXFP4 experts of layers 1-60. 1: the fused MXFP4 expert kernels (kernels/mxfp4-moe) where "
            "they can run, otherwise the stock path, with the reason. 0: the stock path (dequantize "
            "each chosen expert to BF16, then matmul), the reference path. The choice is logged once "
            "at start.",
        ),
        Switch(
            "MUSE_SPARK_MOE_TP_SPLIT",
            ("1", "2", "4", "8"),
            "1",
            "How the MoE experts of every layer spread over the tensor-parallel group. 1: expert "
            "parallelism alone (EP8 at TP8: 32 whole experts a card). N: EP (TP/N) x TP N: each card "
            "holds the experts of its EP group (128 at EP2), each sliced to 1/N of its intermediate "
            "size; each (token, expert) pair's output slices are summed over the group before the "
            "norm on each expert's output. Must divide the tensor-parallel size.",
        ),
        Switch(
            "MUSE_SPARK_REFERENCE_DTYPE",
            ("float32", "bfloat16"),
            "float32",
            "Compute dtype of the CPU reference model (muse_spark_open.reference). float32 is the "
            "one the perplexity gate is calibrated on.",
        ),
        Switch(
            "MUSE_SPARK_STRICT_LOAD",
            ("1", "0"),
            "1",
            "1: a checkpoint tensor of the text path that the model does not know, or a parameter "
            "the checkpoint does not have, stops the load with the names. 0: log them and go on "
            "(only for inspecting a checkpoint of another layout; never for serving).",
        ),
    )
}


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def read(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The validated value of one switch (its default when unset or empty)."""
    switch = SWITCHES.get(name)
    if switch is None:
        raise SwitchError(f"{name} is not a switch of the Muse Spark port (known: {', '.join(SWITCHES)})")
    raw = _environ(environ).get(name, "").strip()
    if raw == "":
        return switch.default
    if raw not in switch.choices:
        raise SwitchError(
            f"{name}={raw!r} is not valid: use one of {', '.join(switch.choices)} "
            f"(default {switch.default}). {switch.meaning}"
        )
    return raw


def read_all(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Validate every MUSE_SPARK_* variable; return each switch's value."""
    env = _environ(environ)
    unknown = sorted(k for k in env if k.startswith(PREFIX) and k not in SWITCHES)
    if unknown:
        raise SwitchError(
            f"unknown variable(s) {', '.join(unknown)}: not a switch of the Muse Spark port "
            f"(known: {', '.join(SWITCHES)}); unset it or fix the name"
        )
    return {name: read(name, env) for name in SWITCHES}


def describe() -> str:
    """One paragraph a switch, for --help texts and the build gates."""
    return "\n".join(
        f"{s.name} = {'|'.join(s.choices)} (default {s.default}): {s.meaning}" for s in SWITCHES.values()
    )
