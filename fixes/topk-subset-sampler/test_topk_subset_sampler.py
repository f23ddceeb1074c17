# SPDX-License-Identifier: Apache-2.0
"""Proof test for the `topk-subset-sampler` fix.

Without Triton (CPU here, HPU on Gaudi) `apply_top_k_top_p` falls to
`apply_top_k_top_p_pytorch`, which sorts the whole vocabulary whenever top-p is
set (and, off CPU, for top-k alone). With the fix, when every row has a small
top-k, it works inside the top logits of each row (`logits.topk`) and must give
exactly the masked logits of the full sort; rows where it cannot are sorted on
their own, and batches it cannot handle at all take the full sort.

The tests spy on `torch.Tensor.sort` (test-side only, vLLM is not touched) to
see whether a full-vocabulary sort happened, and compare results with
`reference_top_k_top_p`, a restatement of the v0.30.0 full-sort algorithm.
"""

import os

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from vllm.v1.sample.ops import topk_topp_sampler as tts

NEG_INF = float("-inf")


def reference_top_k_top_p(logits, k, p):
    """The release's full-vocabulary sort path, restated."""
    logits = logits.clone()
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        top_k_mask = logits_sort < top_k_mask
        logits_sort.masked_fill_(top_k_mask, NEG_INF)
    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)
        probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        logits_sort.masked_fill_(top_p_mask, NEG_INF)
    return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)


class SortSpy:
    """Records the shapes of every Tensor.sort call (torch.sort included)."""

    def __init__(self, monkeypatch):
        self.shapes = []

        def spy(real):
            def sort(t, *args, **kwargs):
                self.shapes.append(tuple(t.shape))
                return real(t, *args, **kwargs)

            return sort

        monkeypatch.setattr(torch.Tensor, "sort", spy(torch.Tensor.sort))
        monkeypatch.setattr(torch, "sort", spy(torch.sort))

    def full_sorts(self, vocab_size):
        return [s for s in self.shapes if s and s[-1] == vocab_size]

    def reset(self):
        self.shapes.clear()


def same(a, b):
    # Bitwise equality, -inf included (no NaN is produced in these cases).
    return a.shape == b.shape and torch.equal(a, b)


def run_patched(logits, k, p, cpu_sync=True):
    """The function the sampler calls; cpu_sync=False is the HPU flavour."""
    x = logits.clone()
    if cpu_sync:
        return tts.apply_top_k_top_p(x, k, p)
    return tts.apply_top_k_top_p_pytorch(x, k, p, allow_cpu_sync=False)


def test_no_full_vocab_sort_when_every_row_has_top_k(monkeypatch):
    """The bug: top-k 50 + top-p 0.9 on a 202,048-token vocabulary sorts all
    202,048 logits of every row. Fixed: no full-vocabulary sort, same result."""
    assert not tts.HAS_TRITON  # the PyTorch path is the one under test
    torch.manual_seed(0)
    vocab = 202_048
    logits = torch.randn(4, vocab) * 3
    k = torch.full((4,), 50, dtype=torch.int32)
    p = torch.full((4,), 0.9)
    expected = reference_top_k_top_p(logits, k, p)

    spy = SortSpy(monkeypatch)
    out = run_patched(logits, k, p)
    assert spy.full_sorts(vocab) == [], "sorted the whole vocabulary"
    assert same(out, expected)
    assert int((out > NEG_INF).sum(dim=1).max()) <= 50

    # Top-k alone where no CPU sync is allowed (the HPU flavour) also sorted.
    spy.reset()
    out = run_patched(logits, k, None, cpu_sync=False)
    assert spy.full_sorts(vocab) == [], "sorted the whole vocabulary"
    assert same(out, reference_top_k_top_p(logits, k, None))


def _random_case(gen, batch, vocab):
    kind = int(torch.randint(0, 5, (), generator=gen))
    scale = float(torch.rand((), generator=gen)) * 8 + 0.1
    logits = torch.randn(batch, vocab, generator=gen) * scale
    if kind == 1:
        # Heavy ties: few distinct values.
        logits = torch.round(logits * 2) / 2
    elif kind == 2:
        # Rows with most of the vocabulary masked to -inf (grammar, bad words).
        keep = torch.rand(batch, vocab, generator=gen) < 0.001
        logits = logits.masked_fill(~keep, NEG_INF)
    elif kind == 3:
        # Ties built right at the top of each row.
        logits[:, :8] = logits.max(dim=1, keepdim=True).values
    elif kind == 4:
        # float32 logits computed in bf16, as from a bf16 model: many ties.
        logits = (logits + 10).to(torch.bfloat16).float()
    hi = max(2, min(vocab // 8, 300))
    k = torch.randint(1, hi, (batch,), generator=gen, dtype=torch.int32)
    p = torch.rand(batch, generator=gen) * 0.99 + 0.01
    # Some rows without top-p (p == 1), as the input batch encodes them.
    p = p.masked_fill(torch.rand(batch, generator=gen) < 0.2, 1.0)
    return kind, logits, k, p


@pytest.mark.parametrize("vocab", [1_000, 4_099, 32_003, 202_048])
def test_same_masked_logits_as_full_sort(monkeypatch, vocab):
    gen = torch.Generator().manual_seed(vocab)
    spy = SortSpy(monkeypatch)
    cases = 40 if vocab < 100_000 else 8
    rows_sorted = {kind: [0, 0] for kind in range(5)}
    for case in range(cases):
        batch = [1, 3, 8][case % 3]
        kind, logits, k, p = _random_case(gen, batch, vocab)
        for kk, pp, cpu_sync in ((k, p, True), (k, None, False)):
            expected = reference_top_k_top_p(logits, kk, pp)
            spy.reset()
            out = run_patched(logits, kk, pp, cpu_sync=cpu_sync)
            assert same(out, expected), (vocab, case, kind, pp is None)
            rows_sorted[kind][0] += sum(s[0] for s in spy.full_sorts(vocab))
            rows_sorted[kind][1] += batch
    # Without ties, no row may need the full sort.
    assert rows_sorted[0][0] == 0 and rows_sorted[2][0] == 0, rows_sorted
    # Rows with ties mostly stay on the subset path too.
    for kind in (1, 3, 4):
        assert rows_sorted[kind][0] <= rows_sorted[kind][1] // 2, rows_sorted


def test_same_tokens_with_per_request_generators(monkeypatch):
    """The sampler (CPU forward and native forward) draws the same tokens as
    the full sort would, with per-request generators for every row."""
    torch.manual_seed(1)
    vocab, batch = 32_000, 6
    logits = torch.randn(batch, vocab) * 4
    k = torch.tensor([5, 50, 1, 20, 100, 3], dtype=torch.int32)
    p = torch.tensor([0.9, 0.5, 1.0, 0.99, 0.3, 0.7])

    def gens():
        return {i: torch.Generator().manual_seed(100 + i) for i in range(batch)}

    masked = reference_top_k_top_p(logits, k, p)
    probs = masked.softmax(dim=-1, dtype=torch.float32)
    q = torch.empty_like(probs)
    for i, g in gens().items():
        q[i].exponential_(generator=g)
    expected = probs.div(q).argmax(dim=-1)

    # From v0.32.0 forward_cpu draws its tokens with the compiled CPU op
    # fused_gumbel_argmax (per-token SplitMix64 noise seeded from each
    # generator, not its exponential noise). This image's vLLM has no CPU build
    # of that op: stand in for it and check that it gets the masked logits;
    # the tokens then are upstream's kernel's business, not this fix's.
    fused_inputs = []
    if not hasattr(torch.ops._C, "fused_gumbel_argmax"):

        def fused_gumbel_argmax(logits_f32, seeds):
            fused_inputs.append(logits_f32.clone())
            return logits_f32.argmax(dim=-1)

        monkeypatch.setattr(
            torch.ops._C, "fused_gumbel_argmax", fused_gumbel_argmax, raising=False
        )

    spy = SortSpy(monkeypatch)
    sampler = tts.TopKTopPSampler("processed_logits")
    for forward in (sampler.forward_native, sampler.forward_cpu):
        spy.reset()
        fused_inputs.clear()
        tokens, processed = forward(logits.clone(), gens(), k, p)
        assert spy.full_sorts(vocab) == []
        assert same(processed, masked)
        if fused_inputs:
            assert forward == sampler.forward_cpu
            assert same(fused_inputs[0], masked)
        else:
            assert torch.equal(tokens, expected)


def _batch_fallback_cases():
    torch.manual_seed(2)
    vocab = 4_096
    x = torch.randn(4, vocab) * 3
    k = torch.tensor([10, 20, 5, 40], dtype=torch.int32)
    p = torch.tensor([0.9, 0.8, 0.95, 0.5])
    k_mixed = k.clone()
    k_mixed[2] = vocab  # a row without top-k
    return {
        "top_p_only": (x, None, p),
        "row_without_top_k": (x, k_mixed, p),
        "k_too_large": (x, torch.full((4,), vocab // 2, dtype=torch.int32), p),
        "bfloat16": (x.to(torch.bfloat16), k, p),
    }


@pytest.mark.parametrize("name", list(_batch_fallback_cases()))
def test_batch_falls_back_to_full_sort(monkeypatch, name):
    logits, k, p = _batch_fallback_cases()[name]
    expected = reference_top_k_top_p(logits, k, p)
    spy = SortSpy(monkeypatch)
    out = run_patched(logits, k, p)
    assert spy.full_sorts(logits.shape[1]) == [tuple(logits.shape)]
    assert same(out, expected)


def _row_fallback_cases():
    torch.manual_seed(3)
    vocab = 4_096
    x = torch.randn(4, vocab) * 3
    k = torch.tensor([10, 20, 5, 40], dtype=torch.int32)
    p = torch.tensor([0.9, 0.8, 0.95, 0.5])
    cases = {}
    nan = x.clone()
    nan[1, 7] = float("nan")
    cases["nan_logit"] = (nan, k, p)
    posinf = x.clone()
    posinf[1, 7] = float("inf")
    cases["posinf_logit"] = (posinf, k, p)
    # Row 1 constant: every logit ties with its 20th largest.
    flat = x.clone()
    flat[1] = 0.5
    cases["ties_past_limit"] = (flat, k, p)
    # Row 1: the top-p cut falls between ten equal logits.
    cut = x.clone()
    cut[1] = -5.0 - torch.arange(vocab) / vocab
    cut[1, :10] = 1.0
    cases["top_p_cut_in_tie"] = (cut, k, torch.tensor([0.9, 0.55, 0.95, 0.5]))
    return cases


@pytest.mark.parametrize("name", list(_row_fallback_cases()))
def test_row_falls_back_to_full_sort(monkeypatch, name):
    """Only the row that the subset cannot handle exactly is sorted."""
    logits, k, p = _row_fallback_cases()[name]
    vocab = logits.shape[1]
    expected = reference_top_k_top_p(logits, k, p)
    spy = SortSpy(monkeypatch)
    out = run_patched(logits, k, p)
    assert spy.full_sorts(vocab) == [(1, vocab)]
    if name == "nan_logit" or name == "posinf_logit":
        assert torch.equal(out.isnan(), expected.isnan())
        out, expected = out.nan_to_num(), expected.nan_to_num()
    assert same(out, expected)


def test_ties_handled_inside_subset(monkeypatch):
    """Ties at the k-th largest logit (the full sort keeps them all) and ties
    on one side of the top-p cut need no full sort and match it."""
    vocab = 4_096
    # Distinct low logits, so that no tie runs past the subset.
    logits = -10.0 - torch.arange(vocab, dtype=torch.float32).repeat(2, 1) / 64
    # Row 0: five logits tied at the 3rd largest value, k = 3 keeps all five.
    logits[0, :2] = 2.0
    logits[0, 2:7] = 1.0
    # Row 1: three tied top logits kept by top-p 0.9, six tied ones below
    # them all cut off.
    logits[1, 100:103] = 5.0
    logits[1, 200:206] = 0.0
    # Row 2: 60 logits tied with the 10th largest one, all kept by top-k.
    logits = torch.cat([logits, logits[1:] - 20])
    logits[2, 300:360] = -1.0
    logits[2, 400:409] = 3.0
    k = torch.tensor([3, 30, 10], dtype=torch.int32)
    p = torch.tensor([1.0, 0.9, 1.0])
    spy = SortSpy(monkeypatch)
    out = run_patched(logits, k, p)
    assert spy.full_sorts(vocab) == []
    assert same(out, reference_top_k_top_p(logits, k, p))
    assert int((out[0] > NEG_INF).sum()) == 7
    assert int((out[1] > NEG_INF).sum()) == 3
    assert int((out[2] > NEG_INF).sum()) == 69
