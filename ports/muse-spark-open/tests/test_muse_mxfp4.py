"""OCP MXFP4 (E2M1 elements, E8M0 scales, 32 a block, low nibble first) against the spec and vLLM."""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import math

import pytest
import torch

from muse_spark_open import mxfp4


def e2m1_by_bits(code: int) -> float:
    """The spec's formula, not a table: sign, 2-bit exponent (bias 1), 1-bit mantissa."""
    s, e, m = code >> 3, (code >> 1) & 3, code & 1
    mag = (m * 0.5) if e == 0 else (2.0 ** (e - 1)) * (1 + m * 0.5)
    return -mag if s else mag


def test_lut_is_the_spec():
    assert [e2m1_by_bits(c) for c in range(16)] == list(mxfp4.E2M1_VALUES)


def test_nibble_order_and_scale():
    packed = torch.tensor([[0x21, 0xF7] + [0] * 14], dtype=torch.uint8)  # 32 elements
    out = mxfp4.dequantize(packed, torch.tensor([[128]], dtype=torch.uint8))  # scale 2
    assert out[0, :4].tolist() == [1.0, 2.0, 12.0, -12.0]  # low nibble is the even element
    assert math.isnan(mxfp4.e8m0_to_float(torch.tensor([255], dtype=torch.uint8)).item())
    assert mxfp4.e8m0_to_float(torch.tensor([0, 127, 254], dtype=torch.uint8)).tolist() == [2.0**-127, 1.0, 2.0**127]


def test_matches_vllm_pure_torch_dequantizer():
    vllm_dq = pytest.importorskip("vllm.utils.flashinfer_moe_ep")._dequant_fp4_ue8m0_gran32
    g = torch.Generator().manual_seed(1)
    packed = torch.randint(0, 256, (8, 64), dtype=torch.uint8, generator=g)
    scale = torch.randint(100, 150, (8, 4), dtype=torch.uint8, generator=g)
    assert torch.equal(vllm_dq(packed, scale).float(), mxfp4.dequantize(packed, scale))


def test_quantize_follows_the_spec():
    x = torch.tensor([[0.25, 0.75, 1.75, 2.5, 3.5, 5.0, -5.0, 7.0] + [0.0] * 23 + [6.0]])
    packed, scale = mxfp4.quantize(x)
    assert scale.item() == 127  # floor(log2(7)) - 2 = 0
    got = mxfp4.dequantize(packed, scale)[0, :8].tolist()
    # ties go to the even code (0.25->0, 0.75->1, 1.75->2, 2.5->2, 3.5->4, 5->4), beyond 6 clamps
    assert got == [0.0, 1.0, 2.0, 2.0, 4.0, 4.0, -4.0, 6.0]


def test_round_trip_error_is_bounded_and_exact_values_survive():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 128, generator=g)
    packed, scale = mxfp4.quantize(w)
    assert packed.shape == (16, 64) and scale.shape == (16, 4)
    back = mxfp4.dequantize(packed, scale)
    blocks_max = w.abs().reshape(16, 4, 32).amax(-1).repeat_interleave(32, -1)
    assert ((back - w).abs() <= blocks_max / 4 + 1e-7).all()  # half a step of the coarsest interval
    again = mxfp4.quantize(back)
    assert torch.equal(again[0], packed) and torch.equal(again[1], scale)


def test_shape_and_dtype_errors():
    with pytest.raises(ValueError, match="do not agree"):
        mxfp4.dequantize(torch.zeros(2, 16, dtype=torch.uint8), torch.zeros(2, 2, dtype=torch.uint8))
    with pytest.raises(TypeError):
        mxfp4.dequantize(torch.zeros(2, 16), torch.zeros(2, 1, dtype=torch.uint8))
    with pytest.raises(ValueError, match="multiple of 32"):
        mxfp4.quantize(torch.zeros(2, 48))
