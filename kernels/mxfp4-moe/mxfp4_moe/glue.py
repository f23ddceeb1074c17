"""The switch ``MUSE_SPARK_MXFP4_KERNELS`` as the Muse Spark port reads it.

* ``1`` (also the default when unset or empty): the Triton kernels where a GPU and Triton are present,
  otherwise the reference path (the stock op), with the reason said.
* ``0``: the reference path (the stock op: dequantize each routed expert to BF16, then matmul).
* anything else: an error (``SwitchError``), raised when the port asks for the backend at start.

The port calls ``init_backend()`` once at model start; that decides and logs the choice once (logger
``vllm.muse_spark.mxfp4``, so it shows in vLLM's log) and ``moe_experts`` dispatches on it afterwards.
``prepare_experts(experts)``, once per layer after loading, re-lays the packed weights out for the
kernels' fastest path where they run (the tiled layout of the gluon kernels, else the mma layout: a
permutation of the same bytes; ``moe_experts`` accepts every layout).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from . import reference as _ref
from .reference import DEFAULT_EPS, ExpertWeights, moe_experts_reference

ENV_VAR = "MUSE_SPARK_MXFP4_KERNELS"
KERNEL = "triton"
REFERENCE = "reference"

logger = logging.getLogger("vllm.muse_spark.mxfp4")


class SwitchError(ValueError):
    """A value of MUSE_SPARK_MXFP4_KERNELS that is neither 0 nor 1."""


def parse_switch(value: str | None) -> bool:
    """True: use the kernels where possible. Unset or empty means 1."""
    if value is None or value.strip() == "":
        return True
    v = value.strip()
    if v == "1":
        return True
    if v == "0":
        return False
    raise SwitchError(f"{ENV_VAR} must be 0 (the stock op, the reference path) or 1 (the MXFP4 kernels), "
                      f"got {value!r}")


def detect_toolchain() -> tuple[bool, str]:
    """(present, description or reason): a GPU visible to torch and Triton with an active GPU driver."""
    if not torch.cuda.is_available():
        return False, "no GPU visible to torch (torch.cuda.is_available() is False)"
    try:
        import triton
    except ImportError:
        return False, "Triton is not installed"
    try:
        from triton.runtime import driver
        target = driver.active.get_current_target()
    except Exception as exc:  # noqa: BLE001 - any driver failure means "not usable"
        return False, f"Triton has no usable GPU driver ({type(exc).__name__}: {exc})"
    api = "ROCm" if getattr(torch.version, "hip", None) else "CUDA"
    return True, (f"{torch.cuda.get_device_name()} ({api}, {target.backend} {target.arch}), "
                  f"Triton {triton.__version__}")


@dataclass(frozen=True)
class Choice:
    backend: str  # KERNEL or REFERENCE
    requested: bool  # the switch's value
    reason: str

    def describe(self) -> str:
        what = ("Triton MXFP4 expert kernels" if self.backend == KERNEL
                else "reference path (stock op: dequantize to BF16, then matmul)")
        return f"{ENV_VAR}={int(self.requested)}: MoE experts of layers 1-60 use the {what}; {self.reason}"


def choose(environ: Mapping[str, str] | None = None, toolchain: tuple[bool, str] | None = None) -> Choice:
    """Decide without side effects (tests pass their own environ and toolchain)."""
    environ = os.environ if environ is None else environ
    requested = parse_switch(environ.get(ENV_VAR))
    if not requested:
        return Choice(REFERENCE, False, "switched off")
    present, info = detect_toolchain() if toolchain is None else toolchain
    if present:
        return Choice(KERNEL, True, f"on {info}")
    return Choice(REFERENCE, True, f"kernels unavailable: {info}")


_choice: Choice | None = None


def init_backend(environ: Mapping[str, str] | None = None,
                 toolchain: tuple[bool, str] | None = None) -> Choice:
    """Decide once (at start) and say so once; later calls return the same choice."""
    global _choice
    if _choice is None:
        _choice = choose(environ, toolchain)
        logger.info("%s", _choice.describe())
    return _choice


def reset_backend() -> None:
    """Forget the choice (tests; a process that changes the environment on purpose)."""
    global _choice
    _choice = None


def prepare_experts(experts: ExpertWeights) -> ExpertWeights:
    """Load-time step for one layer's experts (the port calls it once per layer, after loading): with the
    kernels chosen on an NVIDIA GPU, the packed weights and scales are re-laid out for the gluon kernels
    (``ExpertWeights.to_tiled_layout``: the `mma` bit permutation within each 32-bit word, then tiles of
    32 rows x 256 elements as contiguous blocks, w13's gate and up rows interleaved; same shapes and bytes)
    or, where those do not run, for the `mma` decode (``to_mma_layout``); otherwise they stay in the
    checkpoint's layout. ``moe_experts`` takes any of them."""
    choice = init_backend()
    if choice.backend == KERNEL and experts.w13.is_cuda and not getattr(torch.version, "hip", None):
        return kernel_layout(experts)
    return experts


def kernel_layout(experts: ExpertWeights) -> ExpertWeights:
    """The experts (on an NVIDIA GPU) in the kernels' fastest layout here: tiled where the gluon kernels
    run, else mma (the reason logged)."""
    ok, why = gluon_supported(experts)
    if ok:
        return experts.to_tiled_layout()
    logger.info("MXFP4 experts: the gluon kernels do not run here (%s); using the mma layout", why)
    return experts.to_mma_layout()


def gluon_supported(experts: ExpertWeights) -> tuple[bool, str]:
    """(True, "ok") where gluon_kernel's kernels run for these experts, else (False, the reason): Triton with
    Gluon (3.6+), an NVIDIA GPU of compute capability 8.0+, latent and expert sizes multiples of 128."""
    try:
        from . import gluon_kernel
    except Exception as exc:  # noqa: BLE001 - an older Triton without Gluon, or another import failure
        return False, f"Gluon is not importable ({type(exc).__name__}: {exc})"
    return gluon_kernel.supported(experts.w13.device, experts.latent_size, experts.expert_size)


def moe_experts(x_lat: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                experts: ExpertWeights, *, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """This card's share of the routed experts' weighted sum, out_lat fp32 [T, latent]."""
    choice = init_backend()
    if choice.backend == KERNEL:
        if not x_lat.is_cuda:
            raise ValueError("the MXFP4 kernels run on the GPU; x_lat is on " + str(x_lat.device))
        from .kernel import mxfp4_moe_experts
        return mxfp4_moe_experts(x_lat, topk_ids, topk_weights, experts, eps=eps)
    return moe_experts_reference(x_lat, topk_ids, topk_weights, experts, eps=eps, dtype=torch.bfloat16)


def moe_expert_partials(x_lat: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                        experts: ExpertWeights, *, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """The TP-split card's share (its experts hold a slice of the intermediate size, ExpertWeights.tp_slice):
    each (token, slot) pair's output before the norm, fp32 [T * k, latent], zero for pairs whose expert is
    not on this card. The TP group adds these (the norm is not linear), then ``combine_partials``."""
    choice = init_backend()
    if choice.backend == KERNEL:
        if not x_lat.is_cuda:
            raise ValueError("the MXFP4 kernels run on the GPU; x_lat is on " + str(x_lat.device))
        from .kernel import mxfp4_moe_experts
        return mxfp4_moe_experts(x_lat, topk_ids, topk_weights, experts, eps=eps, partials=True)
    return _ref.moe_expert_partials_reference(x_lat, topk_ids, topk_weights, experts, dtype=torch.bfloat16)


def combine_partials(y: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                     norm_weight: torch.Tensor, *, expert_base: int = 0, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """After the TP group's sum of ``moe_expert_partials``: out_lat fp32 [T, latent] = the sum over the pairs
    whose expert has a row in norm_weight (global ids expert_base ..) of weight * rmsnorm(y) * norm weight."""
    choice = init_backend()
    if choice.backend == KERNEL and y.is_cuda:
        from .kernel import combine_partials as _combine
        return _combine(y.float().contiguous(), topk_ids, topk_weights, norm_weight, expert_base=expert_base,
                        eps=eps)
    return _ref.combine_partials(y, topk_ids, topk_weights, norm_weight, expert_base=expert_base, eps=eps)
