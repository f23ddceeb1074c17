"""The kernels on the GPU against the fp32 reference: every batch 1..32, uneven routing, EP, the muse shapes.
Skipped without a GPU and Triton (CPU CI); run on the H200 through the device tool (README)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _helpers import has_module  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from mxfp4_moe import reference as R  # noqa: E402
from mxfp4_moe.variants import load_variant  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (run through the device tool)"),
    pytest.mark.skipif(not has_module("triton"), reason="triton is not installed"),
]

PATHS = ["mma", "asm2", "asm", "explicit", "dot_scaled"]


@pytest.fixture(scope="module")
def tiny():
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("tiny")
    ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                 generator=torch.Generator().manual_seed(1))
    return v, ex, ex.to("cuda")


@pytest.mark.parametrize("decode", PATHS)
def test_every_batch_size_1_to_32(tiny, decode):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    for tokens in range(1, 33):
        res = check_case(ex, ex_dev, tokens, "random", v.experts, v.top_k, 1000 + tokens, "cuda", decode)
        assert_ok(res, f"batch {tokens}")


@pytest.mark.parametrize("decode", PATHS)
@pytest.mark.parametrize("tokens", [1, 16, 17, 32])
def test_all_tokens_to_one_expert(tiny, decode, tokens):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    assert_ok(check_case(ex, ex_dev, tokens, "one-expert", v.experts, v.top_k, 2000 + tokens, "cuda", decode),
              f"one-expert batch {tokens}")
    assert_ok(check_case(ex, ex_dev, tokens, "top1-one-expert", v.experts, 1, 3000 + tokens, "cuda", decode),
              f"top-1 one-expert batch {tokens}")


@pytest.mark.parametrize("decode", PATHS)
def test_more_than_32_tokens_run_in_chunks(tiny, decode):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    assert_ok(check_case(ex, ex_dev, 45, "random", v.experts, v.top_k, 4000, "cuda", decode), "batch 45")


@pytest.mark.parametrize("decode", PATHS)
def test_muse_shapes(decode):
    """The muse variant's shapes (32 local experts, EP rank 1), batches 1, 4 and 32."""
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex_dev = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                     generator=torch.Generator(device="cuda").manual_seed(5), device="cuda")
    for tokens, kind in [(1, "random"), (4, "random"), (32, "random"), (32, "one-expert")]:
        res = check_case(ex_dev, ex_dev, tokens, kind, v.experts, v.top_k, 5000 + tokens, "cuda", decode)
        assert_ok(res, f"muse batch {tokens} {kind}")


@pytest.mark.parametrize("decode", ["explicit", "asm", "asm2", "mma", "mma_portable"])
def test_decodes_are_exact_for_every_code_and_scale(decode):
    """All 256 byte values under every E8M0 scale 1..254 (2**-126 .. 2**127), bit for bit. Scale 0
    (2**-127) decodes to zero in the PTX paths, 255 is NaN; the explicit path's fp32 scale factor
    (2**(s-127+14)) overflows above s = 240, so it is checked up to there; the mma decodes (weights times
    2**-32 in BF16, format.dequantize_mxfp4_mma) are exact for scales 27..160."""
    from mxfp4_moe.format import dequantize_mxfp4, to_mma_layout
    from mxfp4_moe.kernel import dequantize_mxfp4_triton
    lo, top = (27, 160) if decode.startswith("mma") else (1, 240 if decode == "explicit" else 254)
    q = torch.arange(256, dtype=torch.uint8).repeat(top - lo + 1, 1)  # [rows, 256] -> K = 512
    s = torch.arange(lo, top + 1, dtype=torch.uint8)[:, None].repeat(1, 16)
    qk = to_mma_layout(q) if decode.startswith("mma") else q
    got = dequantize_mxfp4_triton(qk.cuda(), s.cuda(), decode=decode).cpu()
    want = dequantize_mxfp4(q, s, torch.bfloat16)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_dequant_kernel_matches_reference():
    from mxfp4_moe.format import dequantize_mxfp4, random_mxfp4
    from mxfp4_moe.kernel import dequantize_mxfp4_triton
    q, s = random_mxfp4((200,), 512, generator=torch.Generator().manual_seed(6), scale_range=(100, 150))
    got = dequantize_mxfp4_triton(q.cuda(), s.cuda()).cpu()
    assert torch.equal(got, dequantize_mxfp4(q, s, torch.bfloat16))


@pytest.mark.parametrize("decode", ["asm2", "mma"])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("split", [1, 2])
def test_swapped_operands_split_k_and_other_tiles(tiny, swap, split, decode):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    cfg = {"gate_up": (32, 32, 4, 2, swap), "down": (128, 32, 8, 3, swap), "split_gate_up": split,
           "split_down": 2 * split}
    for tokens in (1, 5, 16, 17, 32):
        res = check_case(ex, ex_dev, tokens, "random", v.experts, v.top_k, 6000 + tokens, "cuda", decode, cfg)
        assert_ok(res, f"swap={swap} batch {tokens}")


@pytest.mark.parametrize("decode", ["asm2", "mma"])
@pytest.mark.parametrize("tokens", [1, 4, 17, 32])
def test_separate_gate_up_gemm(tiny, tokens, decode):
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    cfg = {"gate_up": (64, 64, 4, 3), "down": (64, 64, 4, 3), "separate_gate_up": True}
    assert_ok(check_case(ex, ex_dev, tokens, "random", v.experts, v.top_k, 8000 + tokens, "cuda", decode, cfg),
              f"separate gate/up batch {tokens}")


@pytest.mark.parametrize("decode", ["asm2", "mma"])
def test_muse_shapes_separate_gate_up_split(decode):
    from _kernel_cases import assert_ok, check_case
    from mxfp4_moe.kernel import default_config
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex_dev = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=0,
                                     generator=torch.Generator(device="cuda").manual_seed(8), device="cuda")
    ex_k = ex_dev.to_mma_layout() if decode == "mma" else ex_dev
    for sep in (False, True):
        cfg = dict(default_config(decode), separate_gate_up=sep, split_gate_up=2, split_down=2)
        for tokens in (1, 32):
            res = check_case(ex_dev, ex_k, tokens, "random", v.experts, v.top_k, 9000 + tokens, "cuda", decode, cfg)
            assert_ok(res, f"muse separate={sep} split 2 batch {tokens}")


def test_glue_chooses_the_kernel_here(monkeypatch):
    from mxfp4_moe import glue
    glue.reset_backend()
    monkeypatch.setenv(glue.ENV_VAR, "1")
    try:
        assert glue.init_backend().backend == glue.KERNEL
    finally:
        glue.reset_backend()


def test_glue_prepares_the_mma_layout_here(monkeypatch):
    from _kernel_cases import assert_ok, check_case
    from mxfp4_moe import glue
    glue.reset_backend()
    monkeypatch.setenv(glue.ENV_VAR, "1")
    try:
        v = load_variant("tiny")
        ex = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=0,
                                     generator=torch.Generator().manual_seed(11))
        prepared = glue.prepare_experts(ex.to("cuda"))
        assert prepared.layout == "mma"
        assert_ok(check_case(ex, prepared, 3, "random", v.experts, v.top_k, 10000, "cuda", "auto"), "prepared")
    finally:
        glue.reset_backend()


@pytest.mark.parametrize("decode", ["mma", "asm2"])
def test_stream_k_every_batch_size(tiny, decode):
    """The persistent stream-K launch (config stream_k) at every batch 1..32 and a small tile."""
    from _kernel_cases import assert_ok, check_case
    v, ex, ex_dev = tiny
    cfg = {"gate_up": (32, 64, 4, 3), "down": (64, 32, 4, 3), "stream_k": True, "programs_per_sm": 2}
    for tokens in range(1, 33):
        res = check_case(ex, ex_dev, tokens, "random", v.experts, v.top_k, 11000 + tokens, "cuda", decode, cfg)
        assert_ok(res, f"stream-K batch {tokens}")
    assert_ok(check_case(ex, ex_dev, 32, "one-expert", v.experts, v.top_k, 11100, "cuda", decode, cfg), "one expert")


def test_stream_k_muse_shapes():
    from _kernel_cases import assert_ok, check_case
    torch.backends.cuda.matmul.allow_tf32 = False
    v = load_variant("muse")
    ex_dev = R.random_expert_weights(v.local_experts, v.latent_size, v.expert_size, expert_base=v.local_experts,
                                     generator=torch.Generator(device="cuda").manual_seed(12), device="cuda")
    ex_k = ex_dev.to_mma_layout()
    cfg = {"gate_up": (64, 256, 4, 3), "down": (64, 256, 4, 3), "stream_k": True, "programs_per_sm": 4}
    for tokens, kind in [(1, "random"), (4, "random"), (32, "random")]:
        res = check_case(ex_dev, ex_k, tokens, kind, v.experts, v.top_k, 12000 + tokens, "cuda", "mma", cfg)
        assert_ok(res, f"muse stream-K batch {tokens}")
