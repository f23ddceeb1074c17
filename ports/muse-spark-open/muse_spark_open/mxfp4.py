"""OCP MXFP4 as the OCP Microscaling (MX) specification v1.0 defines it, in plain PyTorch.

* Elements are FP4 E2M1: 1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit. The 16 codes are
  0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (code 8 is -0). No inf, no NaN.
* A block of 32 consecutive elements along the reduction (input) axis shares one E8M0 scale: an
  unsigned byte ``e`` meaning 2 ** (e - 127); 255 is NaN.
* Quark's checkpoints pack two elements a byte, element 2i in the low nibble and element 2i+1 in
  the high nibble; a weight of logical shape [out, in] is stored as uint8 [out, in / 2] with a
  uint8 scale tensor [out, in / 32].
* Quantization (used here only to build test checkpoints) follows the spec: the shared exponent is
  floor(log2(max |v|)) - 2 (2 is E2M1's largest exponent), elements are rounded to the nearest
  E2M1 value, ties to even, and clamped to +-6.

vLLM 0.30.0's own MXFP4 helpers need amd-quark or Triton at import; the tests check this module
against the pure-PyTorch dequantizer vLLM ships in ``vllm/utils/flashinfer_moe_ep.py``.
"""

from __future__ import annotations

import torch

BLOCK = 32
E8M0_BIAS = 127
E8M0_NAN = 255
E2M1_MAX = 6.0

# index = 4-bit code
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _lut(device: torch.device) -> torch.Tensor:
    return torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., n/2] -> float32 [..., n]: low nibble first."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed MXFP4 elements must be uint8, got {packed.dtype}")
    lut = _lut(packed.device)
    low = lut[(packed & 0x0F).long()]
    high = lut[(packed >> 4).long()]
    return torch.stack((low, high), dim=-1).flatten(-2)


def e8m0_to_float(scale: torch.Tensor) -> torch.Tensor:
    """uint8 E8M0 -> float32 2 ** (e - 127); 255 -> NaN."""
    if scale.dtype != torch.uint8:
        raise TypeError(f"E8M0 scales must be uint8, got {scale.dtype}")
    exp = scale.to(torch.float32) - E8M0_BIAS
    out = torch.exp2(exp)
    return torch.where(scale == E8M0_NAN, torch.full_like(out, float("nan")), out)


def dequantize(packed: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Packed weight uint8 [..., K/2] and scales uint8 [..., K/32] -> dtype [..., K]."""
    values = unpack_e2m1(packed)
    k = values.shape[-1]
    if scale.shape[:-1] != packed.shape[:-1] or scale.shape[-1] * BLOCK != k:
        raise ValueError(
            f"MXFP4 shapes do not agree: elements {tuple(packed.shape)} (K={k}) with scales "
            f"{tuple(scale.shape)}; expected scales [..., {k // BLOCK}]"
        )
    factors = e8m0_to_float(scale).repeat_interleave(BLOCK, dim=-1)
    return (values * factors).to(dtype)


def _round_to_e2m1_codes(x: torch.Tensor) -> torch.Tensor:
    """float32 values already divided by the block scale -> 4-bit codes (nearest, ties to even)."""
    mags = torch.tensor(E2M1_VALUES[:8], dtype=torch.float32, device=x.device)
    a = x.abs().clamp(max=E2M1_MAX)
    dist = (a.unsqueeze(-1) - mags).abs()
    best = dist.min(dim=-1, keepdim=True).values
    ties = dist == best
    # among equally near magnitudes prefer the even code (mantissa bit 0): codes 0, 2, 4, 6
    even = (torch.arange(8, device=x.device) % 2 == 0)
    rank = torch.where(ties, torch.where(even, 0, 1), 2)
    code = rank.argmin(dim=-1)  # first nearest even code, else the nearest one
    sign = (x < 0) & (code > 0)
    return (code + sign.long() * 8).to(torch.uint8)


def quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float [..., K] -> (uint8 [..., K/2] elements, uint8 [..., K/32] E8M0 scales)."""
    k = w.shape[-1]
    if k % BLOCK:
        raise ValueError(f"the quantized axis ({k}) must be a multiple of {BLOCK}")
    x = w.to(torch.float32).reshape(*w.shape[:-1], k // BLOCK, BLOCK)
    amax = x.abs().amax(dim=-1, keepdim=True)
    # floor(log2(amax)) - 2, computed exactly from the float's exponent bits
    exp = torch.frexp(amax.clamp(min=2.0**-126)).exponent.to(torch.int32) - 1
    shared = (exp - 2).clamp(min=-E8M0_BIAS, max=E8M0_BIAS)
    shared = torch.where(amax == 0, torch.full_like(shared, -E8M0_BIAS), shared)
    codes = _round_to_e2m1_codes(x / torch.exp2(shared.to(torch.float32)))
    codes = codes.reshape(*w.shape[:-1], k)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    scale = (shared.squeeze(-1) + E8M0_BIAS).to(torch.uint8)
    return packed.contiguous(), scale.contiguous()
