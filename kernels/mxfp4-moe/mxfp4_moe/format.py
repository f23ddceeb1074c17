"""OCP MXFP4 as the OCP Microscaling (MX) specification v1.0 defines it, in plain PyTorch.

* Element: FP4 E2M1 (1 sign bit, 2 exponent bits with bias 1, 1 mantissa bit, no inf/NaN).
  Codes 0..7 are +0, 0.5, 1, 1.5, 2, 3, 4, 6; codes 8..15 are the same magnitudes negated.
* Scale: E8M0, one unsigned byte per block of 32 elements, value 2**(s - 127); s == 255 is NaN.
* Block: 32 consecutive elements along the reduction (input, K) dimension of a weight.
* Packing (the Quark checkpoint's order, also vLLM's and PyTorch's float4_e2m1fn_x2): two elements per
  byte along K, element 2*i in the low nibble and element 2*i + 1 in the high nibble.

A weight of shape [N, K] is stored as ``packed`` uint8 [N, K // 2] and ``scales`` uint8 [N, K // 32]; an
expert tensor adds a leading expert dimension ([E, N, K // 2] and [E, N, K // 32]), which is how vLLM's
``QuarkOCP_MX_MoEMethod`` lays out ``w13_weight`` / ``w13_weight_scale`` and ``w2_weight`` /
``w2_weight_scale``.

Everything here works on any torch device; it is the reference the Triton kernel is checked against.
"""

from __future__ import annotations

import torch

BLOCK_SIZE = 32  # elements per E8M0 scale (OCP MX)
E8M0_BIAS = 127
E8M0_NAN = 255
E2M1_EMAX = 2  # exponent of the largest E2M1 normal (6.0 = 1.5 * 2**2)
E2M1_MAX = 6.0

# code -> value, codes 0..15
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
               -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


_TABLES: dict[tuple[str, torch.dtype], torch.Tensor] = {}


def e2m1_table(device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The 16 E2M1 values; cached per device (so dequantization can be captured in a CUDA graph)."""
    key = (str(torch.device(device if device is not None else "cpu")), dtype)
    if key not in _TABLES:
        _TABLES[key] = torch.tensor(E2M1_VALUES, dtype=dtype, device=device)
    return _TABLES[key]


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., K // 2] -> codes uint8 [..., K] (low nibble first)."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed MXFP4 must be uint8, got {packed.dtype}")
    lo = packed & 0x0F
    hi = packed >> 4
    return torch.stack((lo, hi), dim=-1).flatten(-2)


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """codes uint8 [..., K] (each < 16, K even) -> uint8 [..., K // 2] (element 2i low, 2i+1 high)."""
    if codes.shape[-1] % 2:
        raise ValueError(f"the packed dimension must be even, got {codes.shape[-1]}")
    c = codes.to(torch.uint8)
    if bool((c > 15).any()):
        raise ValueError("E2M1 codes must be below 16")
    pairs = c.unflatten(-1, (-1, 2))
    return pairs[..., 0] | (pairs[..., 1] << 4)


def e2m1_to_float(codes: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return e2m1_table(codes.device, dtype)[codes.long()]


def e8m0_to_float(scales: torch.Tensor) -> torch.Tensor:
    """uint8 E8M0 -> float32 2**(s - 127); 255 -> NaN. s == 0 gives 2**-127 (an fp32 subnormal)."""
    if scales.dtype != torch.uint8:
        raise TypeError(f"E8M0 scales must be uint8, got {scales.dtype}")
    s = scales.to(torch.float32)
    out = torch.exp2(s - E8M0_BIAS)
    return torch.where(scales == E8M0_NAN, torch.full_like(out, float("nan")), out)


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """packed uint8 [..., K // 2] and scales uint8 [..., K // 32] -> dtype [..., K].

    The product is formed in float32 (exact: an E2M1 value times a power of two) and then cast.
    """
    k = packed.shape[-1] * 2
    if scales.shape[:-1] != packed.shape[:-1] or scales.shape[-1] * BLOCK_SIZE != k:
        raise ValueError(f"scales {tuple(scales.shape)} do not match packed {tuple(packed.shape)} "
                         f"(one scale per {BLOCK_SIZE} elements)")
    vals = e2m1_to_float(unpack_fp4(packed))  # [..., K]
    scale = e8m0_to_float(scales)  # [..., K // 32]
    out = (vals.unflatten(-1, (-1, BLOCK_SIZE)) * scale.unsqueeze(-1)).flatten(-2)
    return out.to(dtype)


# Rounding to E2M1: nearest, ties to the even code (OCP MX spec: roundTiesToEven), saturating at 6.
# Midpoints between consecutive magnitudes, and whether a tie goes up (the upper code is even).
_MIDPOINTS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))


def float_to_e2m1(x: torch.Tensor) -> torch.Tensor:
    """float tensor (already divided by its block scale) -> E2M1 codes uint8, RNE, saturating."""
    a = x.abs().to(torch.float32)
    mag = torch.zeros(a.shape, dtype=torch.int32, device=a.device)
    for mid, tie_up in _MIDPOINTS:
        mag += (a >= mid if tie_up else a > mid).to(torch.int32)
    mag = torch.where(torch.isnan(a), torch.full_like(mag, 7), mag)
    sign = torch.signbit(x).to(torch.int32) << 3
    return (mag | sign).to(torch.uint8)


def compute_e8m0_scales(w: torch.Tensor, scale_mode: str = "even") -> torch.Tensor:
    """One E8M0 scale per block of 32 along the last dimension of ``w``.

    ``floor``: the OCP MX spec's rule, X = floor(log2(amax)) - emax_elem (emax_elem = 2 for E2M1).
    ``even``: the amax is first rounded to the nearest power of two at its top two mantissa bits (so a
    block whose amax is within 1/8 below the next power of two takes the larger scale instead of clipping
    to 6); the rule of vLLM's ``downcast_to_mxfp`` / Quark's ``scale_calculation_mode="even"``.
    """
    if w.shape[-1] % BLOCK_SIZE:
        raise ValueError(f"the quantized dimension ({w.shape[-1]}) must be a multiple of {BLOCK_SIZE}")
    amax = w.to(torch.float32).unflatten(-1, (-1, BLOCK_SIZE)).abs().amax(dim=-1)
    bits = amax.view(torch.int32)
    if scale_mode == "even":
        exp_field = ((bits + 0x200000) & 0x7F800000) >> 23
    elif scale_mode == "floor":
        exp_field = (bits & 0x7F800000) >> 23
    else:
        raise ValueError(f"scale_mode must be 'even' or 'floor', got {scale_mode!r}")
    unbiased = (exp_field - E8M0_BIAS - E2M1_EMAX).clamp(-127, 127)
    return (unbiased + E8M0_BIAS).to(torch.uint8)


def quantize_mxfp4(w: torch.Tensor, scale_mode: str = "even") -> tuple[torch.Tensor, torch.Tensor]:
    """float [..., K] -> (packed uint8 [..., K // 2], scales uint8 [..., K // 32]), quantized along K."""
    scales = compute_e8m0_scales(w, scale_mode)
    inv = torch.exp2(E8M0_BIAS - scales.to(torch.float32))  # 1 / 2**(s - 127), exact power of two
    scaled = (w.to(torch.float32).unflatten(-1, (-1, BLOCK_SIZE)) * inv.unsqueeze(-1)).flatten(-2)
    return pack_fp4(float_to_e2m1(scaled)), scales


def random_mxfp4(rows: tuple[int, ...] | list[int], k: int, *, generator: torch.Generator | None = None,
                 scale_range: tuple[int, int] = (118, 124), device: torch.device | str | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Random weights in the checkpoint layout: every byte value equally likely (so all 16 codes, -0
    included) and E8M0 scales drawn from ``scale_range`` (inclusive; 118..124 is 2**-9..2**-3)."""
    if k % BLOCK_SIZE:
        raise ValueError(f"K ({k}) must be a multiple of {BLOCK_SIZE}")
    rows = tuple(rows)
    # draw where the generator lives (CPU unless one on the device is given), then move
    where = generator.device if generator is not None else device
    packed = torch.randint(0, 256, (*rows, k // 2), dtype=torch.uint8, generator=generator, device=where)
    lo, hi = scale_range
    scales = torch.randint(lo, hi + 1, (*rows, k // BLOCK_SIZE), dtype=torch.uint8, generator=generator,
                           device=where)
    return packed.to(device), scales.to(device)


def mxfp4_nbytes(rows: int, k: int) -> int:
    """Bytes of packed elements plus scales of an [rows, k] MXFP4 weight."""
    return rows * (k // 2) + rows * (k // BLOCK_SIZE)


# ----------------------------------------------------------------------------------------------------------
# The "mma" layout: a load-time bit permutation of the packed weights for the kernels' `mma` decode.
#
# Same tensor shape, dtype and bytes as the Quark layout ([..., K // 2] uint8; scales untouched, one E8M0
# byte per 32 elements), and every little-endian 32-bit word still holds the same 8 consecutive elements
# k = 8w .. 8w + 7 (4 words per scale block); only the order of their 32 bits changes. Element 2t + p of
# the word (t = 0..3, p = 0..1) has its 3 magnitude bits (e1 e0 m, in that order from the top) at bit
# 6 + 16p - MMA_MAG_SHIFT[t] and its sign bit at 15 + 16p - MMA_SIGN_SHIFT[t], so that the BF16 pair of
# elements 2t, 2t + 1 (bits s.0000000ee.m000000 each: the E2M1 value times 2**-126) is
#   r_t = ((w << MMA_MAG_SHIFT[t]) & 0x01C001C0) | ((w << MMA_SIGN_SHIFT[t]) & 0x80008000)
# (a negative shift is a right shift). The kernels build it in 10 operations a word (issue #18, sixth
# round; the earlier shifts (0, 3, 6, -4) / (0, 1, 6, 2) took 11): r_0 = w & 0x81C081C0 (one mask),
# r_1 = (w << 3) & 0x81C081C0 (one shift, one mask), r_2 = ((w & MMA_MUL_MASK) * MMA_MUL) & 0x81C081C0
# (the magnitudes shifted by 6 and the signs by 1 in one integer multiply: the two shifted copies of the
# masked bits never overlap, so the product has no carries), r_3 = the two shifts and masks. Four equal
# shifts cannot tile the 32 bits (the BF16 pair pattern repeats every 16 bits, and no rotation tiles it
# either), hence the split shifts of t = 2, 3.
# 8 consecutive elements per word is what one lane holds of Triton 3.6's tensor-core operand (mma.sync,
# kWidth 8), so the decoded registers feed the MMA as they are.
MMA_WORD = 8  # elements per permuted 32-bit word
MMA_MAG_SHIFT = (0, 3, 6, -3)
MMA_SIGN_SHIFT = (0, 3, 1, 2)
MMA_MUL_MASK = 0x40074007  # the bits of r_2: magnitudes at 0..2, 16..18, signs at 14, 30
MMA_MUL = (1 << 6) + (1 << 1)  # r_2's two shifts in one multiply


def _mma_bit_positions() -> tuple[list[list[int]], list[list[int]]]:
    mag = [[6 + 16 * p - MMA_MAG_SHIFT[t] for p in (0, 1)] for t in range(4)]
    sign = [[15 + 16 * p - MMA_SIGN_SHIFT[t] for p in (0, 1)] for t in range(4)]
    used = sorted([m + b for row in mag for m in row for b in range(3)] + [s for row in sign for s in row])
    assert used == list(range(32)), used  # every bit of the word, once
    return mag, sign


def _words(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., K // 2] -> int64 little-endian 32-bit words [..., K // 8]."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed MXFP4 must be uint8, got {packed.dtype}")
    if packed.shape[-1] % 4:
        raise ValueError(f"the packed dimension must be a multiple of 4 bytes, got {packed.shape[-1]}")
    by = packed.unflatten(-1, (-1, 4)).to(torch.int64)
    return by[..., 0] | (by[..., 1] << 8) | (by[..., 2] << 16) | (by[..., 3] << 24)


def _bytes(words: torch.Tensor) -> torch.Tensor:
    return torch.stack([(words >> (8 * i)) & 0xFF for i in range(4)], dim=-1).flatten(-2).to(torch.uint8)


def _per_slice(fn, packed: torch.Tensor) -> torch.Tensor:
    """fn over the leading dimension of a stacked expert tensor (bounds the int64 temporaries)."""
    if packed.dim() >= 3 and packed.numel() > (1 << 24):
        out = torch.empty_like(packed)
        for i in range(packed.shape[0]):
            out[i] = fn(packed[i])
        return out
    return fn(packed)


def to_mma_layout(packed: torch.Tensor) -> torch.Tensor:
    """Quark-layout packed uint8 [..., K // 2] -> the same codes in the mma layout (same shape).

    A load-time transform (once per weight, any device); ``from_mma_layout`` inverts it."""
    return _per_slice(_to_mma_layout, packed)


def _to_mma_layout(packed: torch.Tensor) -> torch.Tensor:
    mag, sign = _mma_bit_positions()
    codes = unpack_fp4(packed).unflatten(-1, (-1, MMA_WORD)).to(torch.int64)  # [..., words, 8]
    word = torch.zeros(codes.shape[:-1], dtype=torch.int64, device=packed.device)
    for t in range(4):
        for p in (0, 1):
            code = codes[..., 2 * t + p]
            word |= ((code & 7) << mag[t][p]) | ((code >> 3) << sign[t][p])
    return _bytes(word)


def from_mma_layout(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of ``to_mma_layout``: mma-layout packed [..., K // 2] -> the Quark layout."""
    return _per_slice(_from_mma_layout, packed)


def _from_mma_layout(packed: torch.Tensor) -> torch.Tensor:
    mag, sign = _mma_bit_positions()
    word = _words(packed)
    codes = torch.stack([((word >> mag[t][p]) & 7) | (((word >> sign[t][p]) & 1) << 3)
                         for t in range(4) for p in (0, 1)], dim=-1)  # [..., words, 8]
    return pack_fp4(codes.flatten(-2).to(torch.uint8))


MMA_SCALE_SHIFT = 32  # the kernels' `mma` decode works on weights times 2**-32 (see dequantize_mxfp4_mma)


def dequantize_mxfp4_mma(packed: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32,
                         scale_shift: int = MMA_SCALE_SHIFT) -> torch.Tensor:
    """Dequantize mma-layout weights the way the kernels' `mma` decode does, in PyTorch (its bit logic
    checked without a GPU): per word, r_t = shifted and masked bits = the BF16 pair of E2M1 * 2**-126, times
    the BF16 factor 2**(s - 1 - scale_shift) built as the bits (s + 126 - scale_shift) << 7 (BF16 product);
    the kernel multiplies its fp32 sums by 2**scale_shift, done here per element. Exact for scales
    27 <= s <= 128 + scale_shift (160): below, products fall under BF16's subnormals; above, the factor's
    exponent field overflows."""
    k = packed.shape[-1] * 2
    if scales.shape[:-1] != packed.shape[:-1] or scales.shape[-1] * BLOCK_SIZE != k:
        raise ValueError(f"scales {tuple(scales.shape)} do not match packed {tuple(packed.shape)}")
    w = _words(packed)  # [..., K // 8]
    m32 = 0xFFFFFFFF

    def sh(x, n):
        return ((x << n) if n >= 0 else (x >> -n)) & m32

    regs = [(sh(w, MMA_MAG_SHIFT[t]) & 0x01C001C0) | (sh(w, MMA_SIGN_SHIFT[t]) & 0x80008000) for t in range(4)]
    regs[2] = (((w & MMA_MUL_MASK) * MMA_MUL) & m32) & 0x81C081C0  # as the kernels build it (no carries)
    halves = torch.stack([h for r in regs for h in (r & 0xFFFF, r >> 16)], dim=-1)  # [..., words, 8]
    h16 = torch.where(halves >= 0x8000, halves - 0x10000, halves).to(torch.int16)
    raw = h16.view(torch.bfloat16).to(torch.float32)  # E2M1 * 2**-126 (BF16 subnormals kept)
    s = scales.to(torch.int32).repeat_interleave(BLOCK_SIZE // MMA_WORD, dim=-1).unsqueeze(-1)
    fac = ((((s + 126 - scale_shift) & 0xFF) << 7).to(torch.int16)).view(torch.bfloat16).to(torch.float32)
    v = (raw * fac).to(torch.bfloat16).to(torch.float32) * 2.0 ** scale_shift
    return v.flatten(-2).to(dtype)


# ----------------------------------------------------------------------------------------------------------
# The "tiled" layout: the mma layout regrouped for the gluon kernels (gluon_kernel.py). Same shapes as the
# Quark layout (packed [..., N, K // 2], scales [..., N, K // 32]); the bytes of each [tile_n rows x tile_k
# elements] tile form one contiguous block, tile (i, j) (rows i*tile_n.., elements j*tile_k..) at block
# index i * K / tile_k + j, so a program's whole K range is one run of memory. Inside a packed block the
# 16-byte pieces are ordered (row group q, piece h, row g, lane group c) for row r = 8q + g and row bytes
# 64h + 16c .. + 15: exactly what the 32 lanes (g, c) of a warp load with one 16-byte load each (512
# contiguous bytes; the elements of lane (g, c) are the mma operand's, see gluon_kernel). Inside a scale
# block the bytes are ordered (g, c, q, h) (scale 4h + c of row 8q + g): each lane's scales are contiguous.
# With gate_up (w13: rows 0..I-1 gate, I..2I-1 up) the rows are first interleaved by half tiles (tile i
# holds gate rows i*tile_n/2.. then the matching up rows), so one program has both halves of silu(gate)*up.
# Inside each scale block (32 elements, 4 words) the elements are first moved (issue #18, sixth round): word
# w, pair p (elements 2p, 2p + 1 of the word) holds the block's elements 8p + 2w, 8p + 2w + 1 (in the
# Quark layout a 4 x 4 transpose of the block's 16 bytes, then the mma bit permutation of every word).
# One mma.sync takes pair p of two neighbouring words (Triton's kWidth 8 operand order), so its two
# activation registers are then neighbouring BF16 pairs in memory, loaded as one vector into adjacent
# registers (the kernels' activation loads): no register moves before each mma.


def _pair_transpose(packed_mma: torch.Tensor) -> torch.Tensor:
    """The tiled layout's element move inside each 32-element scale block (an involution): mma-layout
    packed [..., K // 2] -> the same with word w, pair p and word p, pair w swapped."""
    quark = from_mma_layout(packed_mma)
    moved = quark.reshape(*quark.shape[:-1], -1, 4, 4).transpose(-1, -2).reshape(quark.shape)
    return to_mma_layout(moved.contiguous())

def _gate_up_rows(t: torch.Tensor, tile_n: int, inverse: bool) -> torch.Tensor:
    n = t.shape[-2]
    if n % tile_n or tile_n % 2:
        raise ValueError(f"{n} rows do not split into tiles of {tile_n}")
    lead = t.shape[:-2]
    if not inverse:  # [.., 2 (gate, up), n/tile_n, tile_n/2, K'] -> [.., n/tile_n, 2, tile_n/2, K']
        v = t.reshape(*lead, 2, n // tile_n, tile_n // 2, t.shape[-1]).transpose(-4, -3)
    else:
        v = t.reshape(*lead, n // tile_n, 2, tile_n // 2, t.shape[-1]).transpose(-4, -3)
    return v.reshape(t.shape).contiguous()


def _tile_dims(packed: torch.Tensor, scales: torch.Tensor, tile_n: int, tile_k: int) -> tuple[int, int, int]:
    """Checks packed uint8 [..., N, K // 2] and scales uint8 [..., N, K // 32] against the tiles."""
    if packed.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise TypeError(f"packed MXFP4 and its E8M0 scales must be uint8, got {packed.dtype} and {scales.dtype}")
    if packed.dim() < 2:
        raise ValueError(f"packed MXFP4 must be [..., N, K // 2], got shape {tuple(packed.shape)}")
    if scales.shape[:-1] != packed.shape[:-1] or scales.shape[-1] * BLOCK_SIZE != packed.shape[-1] * 2:
        raise ValueError(f"scales {tuple(scales.shape)} do not match packed {tuple(packed.shape)} (one E8M0 byte "
                         f"per {BLOCK_SIZE} elements, the same leading dimensions)")
    if not all(isinstance(t, int) and t > 0 for t in (tile_n, tile_k)):
        raise ValueError(f"tiles must be positive integers, got [{tile_n!r}, {tile_k!r}]")
    n, k = packed.shape[-2], packed.shape[-1] * 2
    if n % tile_n or tile_n % 8 or k % tile_k or tile_k % 128:
        raise ValueError(f"[{n}, {k}] does not split into tiles of [{tile_n}, {tile_k}] (tile_n a multiple of 8, "
                         "tile_k of 128)")
    return n // tile_n, k // tile_k, tile_k // 128  # row tiles, k tiles, pieces h per lane group


def to_tiled_layout(packed_mma: torch.Tensor, scales: torch.Tensor, tile_n: int, tile_k: int,
                    gate_up: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """mma-layout packed uint8 [..., N, K // 2] and scales [..., N, K // 32] -> the tiled layout (same
    shapes); ``from_tiled_layout`` inverts it. tile_n a multiple of 8, tile_k of 128, dividing N and K
    (the gluon kernels take tile_n 16, 32, 64.. and tile_k 128, 256, 512..). Raises TypeError for other
    dtypes, ValueError for shapes that do not tile or scales that do not match."""
    nt, kt, jh = _tile_dims(packed_mma, scales, tile_n, tile_k)
    packed_mma = _pair_transpose(packed_mma)
    if gate_up:
        packed_mma, scales = _gate_up_rows(packed_mma, tile_n, False), _gate_up_rows(scales, tile_n, False)
    lead = packed_mma.shape[:-2]
    q = tile_n // 8
    # packed: [.., nt, q, g, kt, h, c, 16] -> [.., nt, kt, q, h, g, c, 16]
    v = packed_mma.reshape(*lead, nt, q, 8, kt, jh, 4, 16).permute(*range(len(lead)), -7, -4, -6, -3, -5, -2, -1)
    # scales: [.., nt, q, g, kt, h, c] -> [.., nt, kt, g, c, q, h]
    sv = scales.reshape(*lead, nt, q, 8, kt, jh, 4).permute(*range(len(lead)), -6, -3, -4, -1, -5, -2)
    return v.reshape(packed_mma.shape).contiguous(), sv.reshape(scales.shape).contiguous()


def from_tiled_layout(packed: torch.Tensor, scales: torch.Tensor, tile_n: int, tile_k: int,
                      gate_up: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The inverse of ``to_tiled_layout``: back to the mma layout and the scales' order."""
    nt, kt, jh = _tile_dims(packed, scales, tile_n, tile_k)
    lead = packed.shape[:-2]
    q = tile_n // 8
    n_lead = len(lead)
    v = packed.reshape(*lead, nt, kt, q, jh, 8, 4, 16)  # [nt, kt, q, h, g, c, 16] -> [nt, q, g, kt, h, c, 16]
    v = v.permute(*range(n_lead), n_lead, n_lead + 2, n_lead + 4, n_lead + 1, n_lead + 3, n_lead + 5, n_lead + 6)
    sv = scales.reshape(*lead, nt, kt, 8, 4, q, jh)  # [nt, kt, g, c, q, h] -> [nt, q, g, kt, h, c]
    sv = sv.permute(*range(n_lead), n_lead, n_lead + 4, n_lead + 2, n_lead + 1, n_lead + 5, n_lead + 3)
    packed, scales = _pair_transpose(v.reshape(packed.shape).contiguous()), sv.reshape(scales.shape).contiguous()
    if gate_up:
        packed, scales = _gate_up_rows(packed, tile_n, True), _gate_up_rows(scales, tile_n, True)
    return packed, scales
