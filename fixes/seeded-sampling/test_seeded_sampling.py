# SPDX-License-Identifier: Apache-2.0
"""Proof test for the `seeded-sampling` fix.

`random_sample` in vllm/v1/sample/ops/topk_topp_sampler.py fills the noise of
each seeded row with `q[i].exponential_(generator=generator)`, which needs the
per-request generator to live on the probs' device. The Gaudi runner keeps
generators on the CPU while the logits are on the HPU, where that call fails.

No second accelerator exists here, so two devices that CPU-only torch really
has stand in for the HPU, with the per-request generators on the CPU:
- "meta": its exponential_ refuses any generator (AssertionError "generator is
  not supported in refs"), as the HPU kernel refuses a CPU generator. It shows
  the failure and that the fixed code draws from the CPU generator.
- "lazy" (torch's TorchScript lazy-tensor backend, part of the CPU wheel): a
  device that holds values and refuses a CPU generator the same way, so the
  sampled tokens can be checked against a reference computed on the CPU.
And with probs and generators on the same device, the samples must stay
bit-identical to the release's algorithm for fixed seeds.
"""

import os

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler, random_sample

VOCAB = 257


def make_generators(rows, seed=1234):
    return {i: torch.Generator(device="cpu").manual_seed(seed + i) for i in rows}


def reference_tokens(probs_cpu, generators, use_fp64_gumbel=False):
    """Release algorithm, everything on the CPU: per-row exponential noise from
    the row's generator on the noise tensor's own device, then argmax(p / q)."""
    dtype = torch.float64 if use_fp64_gumbel else probs_cpu.dtype
    q = torch.empty(probs_cpu.shape, dtype=dtype)
    for i, generator in generators.items():
        q[i].exponential_(generator=generator)
    if q.dtype == probs_cpu.dtype:
        scores = probs_cpu.div(q)
    else:
        scores = q.reciprocal().mul(probs_cpu)
    return scores.argmax(dim=-1).view(-1)


def random_probs(batch, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, VOCAB, generator=gen) * 2).softmax(dim=-1)


def generator_after_one_row(seed, use_fp64_gumbel):
    """State of a CPU generator that drew the noise for one row."""
    gen = torch.Generator().manual_seed(seed)
    dtype = torch.float64 if use_fp64_gumbel else torch.float32
    torch.empty(VOCAB, dtype=dtype).exponential_(generator=gen)
    return gen.get_state()


@pytest.mark.parametrize("use_fp64_gumbel", [False, True])
def test_cpu_generators_with_probs_on_meta(use_fp64_gumbel):
    probs = torch.empty(4, VOCAB, device="meta")
    generators = make_generators([0, 2])
    # Clean v0.30.0: AssertionError "generator is not supported in refs".
    out = random_sample(probs, generators, use_fp64_gumbel)
    assert out.device.type == "meta" and out.shape == (4,)
    # The seeded rows' noise was drawn from the CPU generators: each advanced
    # exactly as by drawing one row of noise on the CPU.
    for i, generator in generators.items():
        expected = generator_after_one_row(1234 + i, use_fp64_gumbel)
        assert torch.equal(generator.get_state(), expected)


@pytest.fixture(scope="module")
def lazy_device():
    try:
        import torch._lazy
        import torch._lazy.ts_backend

        torch._lazy.ts_backend.init()
        torch.empty(1, device="lazy").cpu()
    except (ImportError, RuntimeError) as e:  # depends on the torch build
        pytest.skip(f"torch lazy-tensor backend unavailable: {e}")
    return torch.device("lazy")


@pytest.mark.parametrize("use_fp64_gumbel", [False, True])
def test_cpu_generators_with_probs_on_lazy_device(lazy_device, use_fp64_gumbel):
    batch = 5
    probs_cpu = random_probs(batch)
    probs = probs_cpu.to(lazy_device)
    # Clean v0.30.0: exponential_ on the lazy device refuses the CPU generator.
    out = random_sample(probs, make_generators(range(batch)), use_fp64_gumbel)
    assert out.device.type == "lazy"
    expected = reference_tokens(
        probs_cpu, make_generators(range(batch)), use_fp64_gumbel
    )
    assert torch.equal(out.cpu(), expected)

    # Only some rows seeded: those rows still get their seeded tokens.
    seeded = [1, 3]
    out = random_sample(probs_cpu.to(lazy_device), make_generators(seeded))
    expected = reference_tokens(probs_cpu, make_generators(range(batch)))
    assert torch.equal(out.cpu()[seeded], expected[seeded])


def test_sampler_forward_native_on_lazy_device(lazy_device):
    """The path the Gaudi runner takes: TopKTopPSampler.forward_native."""
    batch = 3
    gen = torch.Generator().manual_seed(5)
    logits_cpu = torch.randn(batch, VOCAB, generator=gen) * 3
    sampler = TopKTopPSampler("raw_logprobs")
    tokens, _ = sampler.forward_native(
        logits_cpu.to(lazy_device), make_generators(range(batch)), None, None
    )
    probs_cpu = logits_cpu.softmax(dim=-1, dtype=torch.float32)
    expected = reference_tokens(probs_cpu, make_generators(range(batch)))
    assert torch.equal(tokens.cpu(), expected)


@pytest.mark.parametrize("use_fp64_gumbel", [False, True])
def test_same_device_samples_unchanged(use_fp64_gumbel):
    """Generators on the probs' device: bit-identical to the release."""
    for seed in range(5):
        probs = random_probs(6, seed)
        out = random_sample(
            probs.clone(), make_generators(range(6), seed), use_fp64_gumbel
        )
        expected = reference_tokens(
            probs, make_generators(range(6), seed), use_fp64_gumbel
        )
        assert torch.equal(out, expected)
        # The generators end where the release leaves them.
        gens = make_generators([0, 4], seed)
        random_sample(probs.clone(), gens, use_fp64_gumbel)
        for i, generator in gens.items():
            assert torch.equal(
                generator.get_state(),
                generator_after_one_row(seed + i, use_fp64_gumbel),
            )
