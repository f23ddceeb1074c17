# SPDX-License-Identifier: Apache-2.0
"""Proof test for fix `logprobs-decode-guard`.

Logprob token ids that lie outside the tokenizer's range (negative, past the
vocab, or past what the fast tokenizer's integer type holds) must be decoded
to "" and logged once, instead of raising out of the API server's output
handler (which fails every request in flight).
"""

import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

import vllm.logger as vllm_logger
from vllm.sampling_params import SamplingParams
from vllm.tokenizers.detokenizer_utils import convert_ids_list_to_tokens
from vllm.v1.engine import EngineCoreOutput
from vllm.v1.engine.logprobs import LogprobsProcessor
from vllm.v1.outputs import LogprobsLists, LogprobsTensors

VOCAB = {"<unk>": 0, "hello": 1, "world": 2, "<0xE2>": 3, "<0x82>": 4, "<0xAC>": 5}
VOCAB_LEN = len(VOCAB)

# Negative, just past the vocab, past 2**31, past 2**32 (the point where
# tokenizers' u32 conversion overflows) and past int64.
BAD_IDS = [-1, VOCAB_LEN, 2**31, 2**32, 2**63]


def _make_tokenizer(metaspace: bool = False) -> PreTrainedTokenizerFast:
    """A tiny in-memory fast tokenizer; no files, no network."""
    tok = Tokenizer(models.WordLevel(vocab=VOCAB, unk_token="<unk>"))
    # Metaspace takes convert_ids_list_to_tokens' leading-space branch.
    tok.pre_tokenizer = (
        pre_tokenizers.Metaspace() if metaspace else pre_tokenizers.Whitespace()
    )
    # Byte-fallback pieces decode to U+FFFD alone, which sends
    # LogprobsProcessor into its UTF-8 correction path.
    tok.decoder = decoders.ByteFallback()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


@pytest.fixture
def warnings_seen():
    """Collect warnings from the detokenizer module; reset the once-cache."""
    vllm_logger._print_warning_once.cache_clear()
    records: list[logging.LogRecord] = []
    handler = logging.Handler(level=logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    log = logging.getLogger("vllm.tokenizers.detokenizer_utils")
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)
        vllm_logger._print_warning_once.cache_clear()


@pytest.mark.parametrize("metaspace", [False, True], ids=["plain", "metaspace"])
@pytest.mark.parametrize("bad_id", BAD_IDS)
def test_convert_ids_list_to_tokens_out_of_range(metaspace, bad_id):
    tok = _make_tokenizer(metaspace)
    # Same placeholder for every out-of-range id: "" is what clean vLLM
    # already gives for an id just past the vocab (plain tokenizer) and what
    # detokenize_incrementally gives for any out-of-range id.
    assert convert_ids_list_to_tokens(tok, [1, bad_id, 2]) == ["hello", "", "world"]


def test_out_of_range_warning_logged_once(warnings_seen):
    tok = _make_tokenizer()
    assert convert_ids_list_to_tokens(tok, [1, 2]) == ["hello", "world"]
    assert warnings_seen == []  # in-range ids: silent
    for _ in range(3):
        assert convert_ids_list_to_tokens(tok, [-1, 1, 2**32, -7]) == [
            "",
            "hello",
            "",
            "",
        ]
    assert len(warnings_seen) == 1, [r.getMessage() for r in warnings_seen]
    assert "out-of-range" in warnings_seen[0].getMessage().lower()


def _processor(tok, num_logprobs=None, num_prompt_logprobs=None):
    # Built the way the output processor builds it: from the request's
    # sampling params (from_new_request only reads request.sampling_params).
    params = SamplingParams(
        max_tokens=8, logprobs=num_logprobs, prompt_logprobs=num_prompt_logprobs
    )
    return LogprobsProcessor.from_new_request(
        tok, SimpleNamespace(sampling_params=params)
    )


def _decoded(position: dict) -> dict:
    return {tid: lp.decoded_token for tid, lp in position.items()}


def test_sample_logprobs_out_of_range(warnings_seen):
    tok = _make_tokenizer()
    proc = _processor(tok, num_logprobs=2)
    # One decode step per row: [sampled, top1, top2].
    token_ids = np.array([[1, -1, 2], [2**32, 2, 1], [1, 2**31, -5]], dtype=np.int64)
    logprobs = np.full(token_ids.shape, -1.0, dtype=np.float32)
    ranks = np.array([1, 1, 1], dtype=np.int64)
    for row in range(token_ids.shape[0]):
        out = EngineCoreOutput(
            request_id="r",
            new_token_ids=[int(token_ids[row, 0])],
            new_logprobs=LogprobsLists(
                token_ids[row : row + 1], logprobs[row : row + 1], ranks[row : row + 1]
            ),
        )
        proc.update_from_output(out)

    assert [_decoded(p) for p in proc.logprobs] == [
        {1: "hello", -1: "", 2: "world"},
        {2**32: "", 2: "world", 1: "hello"},
        {1: "hello", 2**31: "", -5: ""},
    ]
    assert proc.cumulative_logprob == pytest.approx(-3.0)
    assert len(warnings_seen) == 1


def test_sample_logprobs_byte_fallback_after_out_of_range(warnings_seen):
    """A sampled out-of-range id becomes UTF-8 correction context for the
    next step; decoding that context must not raise either."""
    tok = _make_tokenizer()
    proc = _processor(tok, num_logprobs=1)
    steps = [[-1, 1], [3, 2]]  # second sampled token is a lone 0xE2 byte
    for ids in steps:
        proc.update_from_output(
            EngineCoreOutput(
                request_id="r",
                new_token_ids=[ids[0]],
                new_logprobs=LogprobsLists(
                    np.array([ids], dtype=np.int64),
                    np.array([[-0.5, -1.5]], dtype=np.float32),
                    np.array([1], dtype=np.int64),
                ),
            )
        )
    assert _decoded(proc.logprobs[0]) == {-1: "", 1: "hello"}
    # An incomplete byte sequence is reported as "", as upstream does.
    assert _decoded(proc.logprobs[1]) == {3: "", 2: "world"}


def test_prompt_logprobs_out_of_range(warnings_seen):
    tok = _make_tokenizer()
    proc = _processor(tok, num_logprobs=0, num_prompt_logprobs=1)
    # [num_prompt_tokens, 1 + num_prompt_logprobs]: [prompt token, top1].
    token_ids = torch.tensor([[1, -1], [2, 2**32], [1, VOCAB_LEN]], dtype=torch.int64)
    logprobs = torch.full(token_ids.shape, -2.0)
    ranks = torch.tensor([1, 1, 1], dtype=torch.int64)
    proc.update_from_output(
        EngineCoreOutput(
            request_id="r",
            new_token_ids=[],
            new_prompt_logprobs_tensors=LogprobsTensors(token_ids, logprobs, ranks),
        )
    )
    prompt_logprobs = proc.pop_prompt_logprobs()
    # The first prompt token has no logprobs: a leading None placeholder.
    assert prompt_logprobs[0] is None
    assert [_decoded(p) for p in prompt_logprobs[1:]] == [
        {1: "hello", -1: ""},
        {2: "world", 2**32: ""},
        {1: "hello", VOCAB_LEN: ""},
    ]
    assert len(warnings_seen) == 1
