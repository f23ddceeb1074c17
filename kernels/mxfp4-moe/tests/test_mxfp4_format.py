"""OCP MXFP4 format (CPU): the spec's values, and agreement with vLLM v0.30.0's own MXFP4 helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import has_module, run_interpreted  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from mxfp4_moe import format as F  # noqa: E402

needs_vllm = pytest.mark.skipif(not has_module("vllm"), reason="vllm is not installed")


# --- the spec itself -------------------------------------------------------------------------------------

def test_e2m1_code_points_follow_the_bit_layout():
    # s.ee.m with exponent bias 1; e == 0 is subnormal (m * 0.5)
    for code in range(16):
        s, e, m = code >> 3, (code >> 1) & 3, code & 1
        mag = m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
        want = -mag if s else mag
        got = F.E2M1_VALUES[code]
        assert got == want and (str(got).startswith("-") == bool(s)), code


def test_e8m0_scale_values():
    s = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    v = F.e8m0_to_float(s)
    assert v[3] == 1.0 and v[2] == 0.5 and v[4] == 2.0 and v[5] == 2.0 ** 127 and v[1] == 2.0 ** -126
    assert v[0] == 2.0 ** -127  # a float32 subnormal, still exact
    assert torch.isnan(v[6])


def test_pack_order_low_nibble_first():
    codes = torch.tensor([[1, 2, 3, 4, 15, 0]], dtype=torch.uint8)
    packed = F.pack_fp4(codes)
    assert packed.tolist() == [[0x21, 0x43, 0x0F]]
    assert torch.equal(F.unpack_fp4(packed), codes)


def test_pack_unpack_roundtrip_random():
    g = torch.Generator().manual_seed(1)
    packed = torch.randint(0, 256, (3, 5, 64), dtype=torch.uint8, generator=g)
    assert torch.equal(F.pack_fp4(F.unpack_fp4(packed)), packed)


def test_dequantize_block_scaling():
    # one row of 64 elements: two blocks with scales 2**-2 and 2**3
    codes = torch.arange(64, dtype=torch.uint8) % 16
    packed = F.pack_fp4(codes[None])
    scales = torch.tensor([[125, 130]], dtype=torch.uint8)
    out = F.dequantize_mxfp4(packed, scales)
    table = torch.tensor(F.E2M1_VALUES)
    want = torch.cat([table[codes[:32].long()] * 0.25, table[codes[32:].long()] * 8.0])
    assert torch.equal(out[0], want)
    assert F.dequantize_mxfp4(packed, scales, torch.bfloat16).dtype == torch.bfloat16


def test_dequantize_rejects_mismatched_scales():
    with pytest.raises(ValueError):
        F.dequantize_mxfp4(torch.zeros(2, 32, dtype=torch.uint8), torch.zeros(2, 3, dtype=torch.uint8))


def test_rounding_ties_to_even_and_saturation():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 100.0, -0.1, -0.25, 0.26, 4.9, 5.1])
    got = F.e2m1_to_float(F.float_to_e2m1(x))
    want = torch.tensor([0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, -0.0, -0.0, 0.5, 4.0, 6.0])
    assert torch.equal(got, want)
    assert torch.signbit(got[9]) and torch.signbit(got[10])


def test_quantize_represents_exact_values_exactly():
    g = torch.Generator().manual_seed(2)
    packed, scales = F.random_mxfp4((8,), 128, generator=g)
    w = F.dequantize_mxfp4(packed, scales)
    # any block holding a 4 or 6 (amax >= 4) keeps its scale under both rules; requantize must reproduce it
    p2, s2 = F.quantize_mxfp4(w, "floor")
    assert torch.equal(F.dequantize_mxfp4(p2, s2), w)


def test_floor_scale_is_the_spec_rule():
    w = torch.zeros(1, 32)
    w[0, 0] = 7.9  # floor(log2(7.9)) - 2 = 0 -> scale 2**0, 7.9 saturates to 6
    assert F.compute_e8m0_scales(w, "floor").item() == 127
    assert F.compute_e8m0_scales(w, "even").item() == 128  # 7.9 rounds up to 8 first
    w[0, 0] = 6.5
    assert F.compute_e8m0_scales(w, "floor").item() == 127
    assert F.compute_e8m0_scales(w, "even").item() == 127


def test_quantization_error_is_bounded():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(64, 256, generator=g)
    p, s = F.quantize_mxfp4(w)
    err = (F.dequantize_mxfp4(p, s) - w).norm() / w.norm()
    assert err < 0.15  # 4-bit elements: about 0.09 on Gaussian data


# --- against vLLM v0.30.0's helpers --------------------------------------------------------------------

# --- the mma layout (a load-time bit permutation for the kernels' `mma` decode) --------------------------

def test_mma_layout_round_trip_and_word_contents():
    g = torch.Generator().manual_seed(30)
    q, _ = F.random_mxfp4((3, 5), 256, generator=g)
    m = F.to_mma_layout(q)
    assert m.shape == q.shape and m.dtype == torch.uint8
    assert torch.equal(F.from_mma_layout(m), q)
    # a permutation of the bits inside each 32-bit word: same population count per word
    ones = lambda t: F.unpack_fp4(t).view(*t.shape[:-1], -1, 8).to(torch.int64)  # noqa: E731
    bits = lambda c: sum(((c >> b) & 1) for b in range(4)).sum(-1)  # noqa: E731
    assert torch.equal(bits(ones(m)), bits(ones(q)))
    # stacked expert tensors go slice by slice (same result)
    big, _ = F.random_mxfp4((2, 2048), 8192, generator=g)
    assert torch.equal(F.to_mma_layout(big)[1], F.to_mma_layout(big[1]))


def test_mma_layout_bit_positions_cover_the_word_once():
    mag, sign = F._mma_bit_positions()
    # element 2t + p of a word: r_t = ((w << MAG_SHIFT[t]) & 0x01C001C0) | ((w << SIGN_SHIFT[t]) & 0x80008000)
    for t in range(4):
        for p in (0, 1):
            assert mag[t][p] + F.MMA_MAG_SHIFT[t] == 6 + 16 * p
            assert sign[t][p] + F.MMA_SIGN_SHIFT[t] == 15 + 16 * p
    # r_2 in one multiply: its mask holds exactly its bits, and the two shifted copies never overlap (no carry)
    bits2 = sum(1 << (m + b) for m in mag[2] for b in range(3)) | sum(1 << s for s in sign[2])
    assert bits2 == F.MMA_MUL_MASK and F.MMA_MUL == (1 << F.MMA_MAG_SHIFT[2]) + (1 << F.MMA_SIGN_SHIFT[2])
    assert (F.MMA_MUL_MASK << F.MMA_MAG_SHIFT[2]) & (F.MMA_MUL_MASK << F.MMA_SIGN_SHIFT[2]) == 0


def test_mma_decode_emulation_is_exact_for_every_code_and_scale_in_range():
    """The kernels' `mma` bit logic (shifts, masks, BF16 factor, fp32 rescale), emulated in PyTorch, equals
    the reference for all 256 byte values under every E8M0 scale 27..160; outside that range it is not
    exact (underflow / overflow of the BF16 factor), as its docstring says."""
    q = torch.arange(256, dtype=torch.uint8).repeat(254, 1)
    s = torch.arange(1, 255, dtype=torch.uint8)[:, None].repeat(1, 16)
    got = F.dequantize_mxfp4_mma(F.to_mma_layout(q), s, torch.bfloat16)
    want = F.dequantize_mxfp4(q, s, torch.bfloat16)
    exact = (got.view(torch.int16) == want.view(torch.int16)).all(1)
    assert exact[26:160].all()  # scales 27..160
    assert not exact[:26].any() and not exact[160:].any()


@needs_vllm
def test_e2m1_table_matches_vllm():
    from vllm.model_executor.layers.quantization.utils.nvfp4_emulation_utils import kE2M1ToFloat_handle
    assert torch.equal(kE2M1ToFloat_handle.val, F.e2m1_table()[:8])


@needs_vllm
def test_block_size_matches_vllm():
    from vllm.model_executor.layers.quantization.utils.ocp_mx_utils import OCP_MX_BLOCK_SIZE
    assert OCP_MX_BLOCK_SIZE == F.BLOCK_SIZE


@needs_vllm
def test_unpack_matches_vllm_break_fp4_bytes():
    from vllm.model_executor.layers.quantization.utils.nvfp4_emulation_utils import break_fp4_bytes
    g = torch.Generator().manual_seed(4)
    packed = torch.randint(0, 256, (16, 48), dtype=torch.uint8, generator=g)
    ours = F.e2m1_to_float(F.unpack_fp4(packed))
    theirs = break_fp4_bytes(packed, torch.float32)
    assert torch.equal(ours, theirs)
    assert torch.equal(torch.signbit(ours), torch.signbit(theirs))


@needs_vllm
def test_expert_layout_matches_quark_ocp_mx_moe():
    from types import SimpleNamespace

    from vllm.model_executor.layers.quantization.quark.quark_moe import QuarkOCP_MX_MoEMethod
    method = QuarkOCP_MX_MoEMethod.__new__(QuarkOCP_MX_MoEMethod)  # only create_weights is exercised
    method.moe = SimpleNamespace(w13_num_shards=2, has_bias=False)
    method.has_bias = False
    method.weight_dtype = "mxfp4"
    method.static_input_scales = False
    layer = torch.nn.Module()
    e, lat, inter = 4, 128, 64
    method.create_weights(layer, num_experts=e, hidden_size=lat, intermediate_size_per_partition=inter,
                          params_dtype=torch.bfloat16)
    from mxfp4_moe.reference import random_expert_weights
    ours = random_expert_weights(e, lat, inter)
    for name in ("w13", "w13_scale", "w2", "w2_scale"):
        theirs = getattr(layer, name.replace("_scale", "_weight_scale") if "scale" in name else name + "_weight")
        assert tuple(theirs.shape) == tuple(getattr(ours, name).shape), name
        assert theirs.dtype == getattr(ours, name).dtype == torch.uint8


_VLLM_QUANTIZE = r"""
import sys, types
import torch, triton, triton.language as tl
from vllm.model_executor.layers.quantization.utils import mxfp4_utils as mu
# vLLM disables Triton without a GPU driver; rebind its own quantizer's code to the real triton so the
# interpreter runs it unchanged.
g = dict(mu.__dict__, tl=tl, triton=triton)
def rejit(fn):
    return triton.jit(types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__))
g["_compute_quant_and_scale"] = rejit(mu._compute_quant_and_scale)
g["_downcast_to_mxfp"] = rejit(mu._downcast_to_mxfp)
downcast = types.FunctionType(mu.downcast_to_mxfp.__code__, g, "downcast_to_mxfp", mu.downcast_to_mxfp.__defaults__)
x = torch.load(sys.argv[1])
q, s, _ = downcast(x, axis=-1)
torch.save((q.contiguous(), s.contiguous()), sys.argv[2])
"""


@needs_vllm
@pytest.mark.skipif(not has_module("triton"), reason="triton is not installed (needed to interpret vLLM's quantizer)")
def test_quantize_matches_vllm_downcast_to_mxfp_bit_exactly(tmp_path):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(96, 256, generator=g) * torch.exp2(torch.randint(-8, 8, (96, 1), generator=g).float())
    x[0, :32] = 0.0  # an all-zero block
    x[1, :32] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25] * 4)  # ties
    x[2, :32] = 7.0  # amax rounds up to the next power of two under "even"
    x[3, :32] = -0.0
    x[4, 32:64] = 1e-30  # tiny
    x = x.to(torch.bfloat16)
    src, dst = tmp_path / "x.pt", tmp_path / "q.pt"
    torch.save(x, src)
    r = run_interpreted(_VLLM_QUANTIZE, str(src), str(dst))
    assert r.returncode == 0, r.stderr[-3000:]
    q_vllm, s_vllm = torch.load(dst)
    q_ours, s_ours = F.quantize_mxfp4(x, "even")
    assert torch.equal(s_ours, s_vllm)
    assert torch.equal(q_ours, q_vllm)


# --- the tiled layout (the gluon kernels') ----------------------------------------------------------------

@pytest.mark.parametrize("tiles", [(32, 256), (16, 128), (64, 512), (8, 1024)])
@pytest.mark.parametrize("gate_up", [False, True])
def test_tiled_layout_round_trip(tiles, gate_up):
    g = torch.Generator().manual_seed(40)
    q = torch.randint(0, 256, (3, 128, 512), dtype=torch.uint8, generator=g)  # [E, N, K/2], K = 1024
    s = torch.randint(0, 256, (3, 128, 32), dtype=torch.uint8, generator=g)
    tq, ts = F.to_tiled_layout(q, s, *tiles, gate_up=gate_up)
    assert tq.shape == q.shape and ts.shape == s.shape
    # the same E2M1 codes, moved (whole words of the mma bit layout, after the pair move inside scale blocks)
    codes = lambda t: torch.bincount(F.unpack_fp4(F.from_mma_layout(t)).flatten().long(), minlength=16)  # noqa: E731
    assert torch.equal(codes(tq), codes(q))
    bq, bs = F.from_tiled_layout(tq, ts, *tiles, gate_up=gate_up)
    assert torch.equal(bq, q) and torch.equal(bs, s)


def test_tiled_layout_block_order():
    """Tile (i, j) is one contiguous block at i * K / tile_k + j; in it the 16-byte pieces are ordered
    (row group q, piece h, row g, lane group c) for row 8q + g, row bytes 64h + 16c, and in a piece (one
    scale block) word w, pair p holds the block's elements 8p + 2w, 8p + 2w + 1 (Quark bytes 4p + w
    <- 4w + p, then the mma bit permutation); the scale block is ordered (g, c, q, h) for scale 4h + c of
    row 8q + g."""
    tn, tk = 32, 256
    g = torch.Generator().manual_seed(41)
    q = torch.randint(0, 256, (64, 256), dtype=torch.uint8, generator=g)  # N 64, K 512: 2 x 2 tiles
    s = torch.randint(0, 256, (64, 16), dtype=torch.uint8, generator=g)
    tq, ts = F.to_tiled_layout(q, s, tn, tk)
    flat, sflat = tq.flatten(), ts.flatten()
    for i in range(2):
        for j in range(2):
            blk = flat[(i * 2 + j) * tn * tk // 2:][: tn * tk // 2].view(-1, 16)
            sblk = sflat[(i * 2 + j) * tn * tk // 32:][: tn * tk // 32]
            for qq in range(4):
                for h in range(2):
                    for gg in range(8):
                        for c in range(4):
                            r, k0 = i * tn + 8 * qq + gg, j * tk // 2 + 64 * h + 16 * c
                            quark = F.from_mma_layout(q[r, k0:k0 + 16])
                            moved = torch.stack([quark[4 * (b % 4) + b // 4] for b in range(16)])
                            assert torch.equal(blk[((qq * 2 + h) * 8 + gg) * 4 + c], F.to_mma_layout(moved))
                            assert sblk[((gg * 4 + c) * 4 + qq) * 2 + h] == s[r, j * tk // 32 + 4 * h + c]


def test_tiled_layout_interleaves_gate_and_up_by_half_tiles():
    """w13 rows 0..I-1 are gate, I..2I-1 up: tile i holds gate rows i*tn/2.. then the matching up rows."""
    tn, tk, i_size = 32, 128, 64
    q = torch.arange(2 * i_size, dtype=torch.int64)[:, None].repeat(1, 64).to(torch.uint8)  # Quark byte = row
    s = torch.arange(2 * i_size, dtype=torch.int64)[:, None].repeat(1, 4).to(torch.uint8)
    tq, ts = F.to_tiled_layout(F.to_mma_layout(q), s, tn, tk, gate_up=True)
    tq = F.from_mma_layout(tq)  # whole words moved: the Quark bytes of a row are the row again
    rows_of_tile = [sorted(set(tq.flatten()[t * tn * tk // 2:][: tn * tk // 2].tolist())) for t in range(4)]
    for t in range(4):
        assert rows_of_tile[t] == list(range(16 * t, 16 * t + 16)) + list(range(i_size + 16 * t, i_size + 16 * t + 16))
        assert sorted(set(ts.flatten()[t * tn * tk // 32:][: tn * tk // 32].tolist())) == rows_of_tile[t]


def test_tiled_layout_rejects_shapes_that_do_not_tile():
    q = torch.zeros(48, 64, dtype=torch.uint8)
    s = torch.zeros(48, 4, dtype=torch.uint8)
    with pytest.raises(ValueError, match="tiles"):
        F.to_tiled_layout(q, s, 32, 128)  # 48 rows
    with pytest.raises(ValueError, match="tiles"):
        F.to_tiled_layout(q, s, 16, 96)  # tile_k not a multiple of 128


def test_tiled_layout_refuses_bad_input_with_the_reason():
    q = torch.zeros(64, 128, dtype=torch.uint8)
    s = torch.zeros(64, 8, dtype=torch.uint8)
    with pytest.raises(TypeError, match="uint8"):
        F.to_tiled_layout(q.float(), s, 32, 256)
    with pytest.raises(ValueError, match="do not match"):
        F.to_tiled_layout(q, s.reshape(16, 32), 32, 256)
    with pytest.raises(ValueError, match="do not match"):
        F.from_tiled_layout(q, torch.zeros(64, 4, dtype=torch.uint8), 32, 256)
    for bad in ((0, 256), (-32, 256), (32, 256.0)):
        with pytest.raises(ValueError, match="positive integers"):
            F.to_tiled_layout(q, s, *bad)
    with pytest.raises(ValueError, match=r"N, K // 2"):
        F.to_tiled_layout(q[0], s[0], 32, 256)
