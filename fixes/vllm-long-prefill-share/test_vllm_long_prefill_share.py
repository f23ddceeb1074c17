# SPDX-License-Identifier: Apache-2.0
"""Proof for fix vllm-long-prefill-share.

Drives vLLM's own v1 Scheduler on CPU (no model is run: ModelRunnerOutput is
simulated as vLLM's scheduler tests do) with a 256K-token (262,144) prompt
beside three decoding requests and records num_scheduled_tokens per request
per step.

Upstream, `long_prefill_token_threshold` is one flat cap: with 0 the prompt
takes the whole remaining budget (8,189 of 8,192 when it runs behind the
decodes, all 8,192 -- decodes starved -- when it runs ahead of them), with
1,024 it crawls for 256 steps. With VLLM_LONG_PREFILL_SHARE=0.25 it reads in
2,048 tokens (a quarter of the budget) each step, the three decodes get their
token every step, and the prompt completes after exactly 128 steps.
"""

import json
import os

import pytest

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from vllm.config import (  # noqa: E402
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.core.single_type_kv_cache_manager import (  # noqa: E402
    register_all_kvcache_specs,
)
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
)
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

BUDGET = 8192  # max_num_batched_tokens: the step's token budget
LONG = 262_144  # 256K-token prompt
SHARE = 0.25
SHARE_TOKENS = int(SHARE * BUDGET)  # 2048
MIN_TOKENS = 32_768
BLOCK = 256
MAX_MODEL_LEN = LONG + 4096
ENV_VARS = (
    "VLLM_LONG_PREFILL_SHARE",
    "VLLM_LONG_PREFILL_SHARE_ASYNC",
    "VLLM_LONG_PREFILL_MIN_TOKENS",
)
RECIPE = {
    "VLLM_LONG_PREFILL_SHARE": str(SHARE),
    "VLLM_LONG_PREFILL_SHARE_ASYNC": "1",
    "VLLM_LONG_PREFILL_MIN_TOKENS": str(MIN_TOKENS),
}


def _tiny_model_dir(tmp_path) -> str:
    model_dir = tmp_path / "tiny-opt"
    model_dir.mkdir(exist_ok=True)
    config = {
        "architectures": ["OPTForCausalLM"],
        "model_type": "opt",
        "vocab_size": 50272,
        "hidden_size": 16,
        "ffn_dim": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "max_position_embeddings": MAX_MODEL_LEN,
        "word_embed_proj_dim": 16,
        "do_layer_norm_before": True,
        "pad_token_id": 1,
        "bos_token_id": 2,
        "eos_token_id": 2,
        "torch_dtype": "float16",
    }
    (model_dir / "config.json").write_text(json.dumps(config))
    return str(model_dir)


def _make_scheduler(
    tmp_path,
    long_prefill_token_threshold: int,
    async_scheduling: bool = False,
    budget: int = BUDGET,
    max_num_seqs: int = 16,
    config: dict | None = None,
) -> Scheduler:
    # Minimal copy of vLLM's tests/v1/core/utils.py::create_scheduler.
    model_config = ModelConfig(
        model=_tiny_model_dir(tmp_path),
        dtype="float16",
        seed=42,
        skip_tokenizer_init=True,
        max_model_len=MAX_MODEL_LEN,
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        max_model_len=MAX_MODEL_LEN,
        long_prefill_token_threshold=long_prefill_token_threshold,
        enable_chunked_prefill=True,
        async_scheduling=async_scheduling,
        is_encoder_decoder=False,
        watermark=0.0,
        **(config or {}),
    )
    cache_config = CacheConfig(
        block_size=BLOCK,
        gpu_memory_utilization=0.9,
        cache_dtype="auto",
        enable_prefix_caching=False,
    )
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config,
        model_config=model_config,
        cache_config=cache_config,
    )
    # The CPU platform switches async scheduling off in VllmConfig; restore
    # it as an accelerator platform keeps it (the engine builds the
    # AsyncScheduler exactly when this flag is set).
    vllm_config.scheduler_config.async_scheduling = async_scheduling
    num_blocks = MAX_MODEL_LEN // BLOCK + 64
    kv_cache_config = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(
                ["layer"],
                FullAttentionSpec(
                    block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32
                ),
            )
        ],
    )
    cache_config.num_gpu_blocks = num_blocks
    register_all_kvcache_specs(vllm_config)
    scheduler_cls = AsyncScheduler if async_scheduling else Scheduler
    return scheduler_cls(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        block_size=BLOCK,
        log_stats=False,
        structured_output_manager=StructuredOutputManager(vllm_config),
    )


def _request(req_id: str, num_tokens: int) -> Request:
    params = SamplingParams(ignore_eos=True, max_tokens=2000)
    params.update_from_generation_config({}, 2)
    return Request(
        request_id=req_id,
        prompt_token_ids=[7] * num_tokens,
        sampling_params=params,
        pooling_params=None,
    )


def _step(scheduler: Scheduler) -> dict[str, int]:
    """One schedule() plus a simulated model step; returns the split."""
    out = scheduler.schedule()
    req_ids = list(out.num_scheduled_tokens)
    sampled = [
        [] if scheduler.requests[r].is_prefill_chunk else [0] for r in req_ids
    ]
    scheduler.update_from_output(
        out,
        ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            sampled_token_ids=sampled,
            logprobs=None,
            prompt_logprobs_dict={},
            pooler_output=[],
        ),
    )
    return dict(out.num_scheduled_tokens)


def _run(
    tmp_path,
    monkeypatch,
    env: dict[str, str],
    threshold: int,
    order: str,
    async_scheduling: bool = False,
    num_decodes: int = 3,
    long_tokens: int = LONG,
    **scheduler_kwargs,
) -> list[dict[str, int]]:
    """Per-step splits from the step the long prompt is first scheduled
    until the step its last prompt token is computed."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    scheduler = _make_scheduler(
        tmp_path, threshold, async_scheduling, **scheduler_kwargs
    )
    long_req = _request("long", long_tokens)
    decodes = [_request(f"dec{i}", 4) for i in range(num_decodes)]
    if order == "decodes_first":
        # Three requests already decoding when the long prompt arrives.
        for req in decodes:
            scheduler.add_request(req)
        _step(scheduler)
        _step(scheduler)
        assert all(r.num_output_tokens == 2 for r in decodes)
        scheduler.add_request(long_req)
    else:
        # The long prompt is ahead of the others in the running order.
        scheduler.add_request(long_req)
        for req in decodes:
            scheduler.add_request(req)
    splits = []
    while long_req.num_computed_tokens < long_req.num_prompt_tokens:
        splits.append(_step(scheduler))
        assert len(splits) <= 300, "long prompt does not finish"
    return splits


def _long(splits) -> list[int]:
    return [s.get("long", 0) for s in splits]


def _starved_decode_steps(splits, num_decodes: int = 3) -> int:
    """Steps in which some decoding request got no token (or, once every
    short request prefilled, more than its one token)."""
    return sum(
        1
        for s in splits[1:]
        if any(s.get(f"dec{i}", 0) != 1 for i in range(num_decodes))
    )


def _summary(splits) -> str:
    long_chunks = _long(splits)
    return (
        f"steps={len(splits)} long_chunks(first 3)={long_chunks[:3]} "
        f"last={long_chunks[-1]} split(step 2)={splits[1]} "
        f"decode-starved steps={_starved_decode_steps(splits)}"
    )


@pytest.mark.parametrize("order", ["decodes_first", "long_first"])
@pytest.mark.parametrize("threshold", [0, 1024])
def test_long_prompt_takes_its_share_beside_decodes(
    tmp_path, monkeypatch, threshold, order
):
    splits = _run(tmp_path, monkeypatch, RECIPE, threshold, order)
    print(f"\n[threshold={threshold} {order}] {_summary(splits)}")
    # The share, not the whole budget nor the flat 1,024 cap.
    assert _long(splits) == [SHARE_TOKENS] * (LONG // SHARE_TOKENS)
    # Each decode gets its token in every step the prompt prefills (the first
    # step is the short prompts' own prefill when they start beside it).
    assert _starved_decode_steps(splits) == 0
    # Decodes only ever get their one token; the rest of the budget is idle.
    assert all(sum(s.values()) <= BUDGET for s in splits)


def test_share_applies_under_async_scheduling_when_asked(tmp_path, monkeypatch):
    splits = _run(
        tmp_path, monkeypatch, RECIPE, 0, "long_first", async_scheduling=True
    )
    print(f"\n[async, share_async=1] {_summary(splits)}")
    assert _long(splits) == [SHARE_TOKENS] * (LONG // SHARE_TOKENS)
    assert _starved_decode_steps(splits) == 0


def test_share_leaves_a_token_for_each_decode_behind_it(tmp_path, monkeypatch):
    # Small budget, many decodes: 40 requests decode in a 64-token step, and
    # the long prompt runs ahead of them in running order (as after a
    # preemption or under priority ordering). Its half share (32) shrinks to
    # 64 - 40 = 24 so every decode behind it still gets its token.
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VLLM_LONG_PREFILL_SHARE", "0.5")
    scheduler = _make_scheduler(tmp_path, 0, budget=64, max_num_seqs=48)
    decodes = [_request(f"dec{i}", 4) for i in range(40)]
    for req in decodes:
        scheduler.add_request(req)
    while not all(r.num_output_tokens >= 1 for r in decodes):
        _step(scheduler)
    long_req = _request("long", 4096)
    scheduler.add_request(long_req)
    _step(scheduler)
    assert scheduler.running[-1] is long_req
    scheduler.running.insert(0, scheduler.running.pop())
    splits = []
    while long_req.num_computed_tokens < long_req.num_prompt_tokens:
        splits.append(_step(scheduler))
        assert len(splits) <= 300, "long prompt does not finish"
    print(
        f"\n[40 decodes behind the prompt] steps={len(splits)} "
        f"long={_long(splits)[:3]} "
        f"decode tokens={sorted({n for r, n in splits[0].items() if r != 'long'})}"
    )
    assert all(s.get("long") == 24 for s in splits[:-1])
    assert all(all(s.get(f"dec{i}") == 1 for i in range(40)) for s in splits)


def test_lone_long_prompt_uses_whole_budget(tmp_path, monkeypatch):
    # Nothing to share the step with: the share neither slows it down nor
    # does the flat 1,024 cap apply to it.
    splits = _run(tmp_path, monkeypatch, RECIPE, 1024, "long_first", num_decodes=0)
    assert _long(splits) == [BUDGET] * (LONG // BUDGET)


# --- switches unset / not applicable: upstream behaviour (pass on clean) ---


def _upstream_expected(threshold: int, order: str) -> list[int]:
    if threshold:
        return [threshold] * (LONG // threshold)
    if order == "long_first":
        return [BUDGET] * (LONG // BUDGET)
    chunk = BUDGET - 3  # the three decodes' tokens come first
    return [chunk] * (LONG // chunk) + [LONG % chunk]


@pytest.mark.parametrize("order", ["decodes_first", "long_first"])
@pytest.mark.parametrize("threshold", [0, 1024])
def test_switches_unset_keep_upstream_schedule(tmp_path, monkeypatch, threshold, order):
    splits = _run(tmp_path, monkeypatch, {}, threshold, order)
    print(f"\n[unset threshold={threshold} {order}] {_summary(splits)}")
    assert _long(splits) == _upstream_expected(threshold, order)
    if order == "long_first" and threshold == 0:
        # Upstream: the long prompt takes every token; the others only start
        # after it has read in.
        assert all(set(s) == {"long"} for s in splits)
    else:
        assert _starved_decode_steps(splits) == 0


def test_async_scheduling_keeps_upstream_without_share_async(tmp_path, monkeypatch):
    env = dict(RECIPE)
    del env["VLLM_LONG_PREFILL_SHARE_ASYNC"]
    splits = _run(tmp_path, monkeypatch, env, 0, "long_first", async_scheduling=True)
    assert _long(splits) == [BUDGET] * (LONG // BUDGET)
    assert all(set(s) == {"long"} for s in splits)


def test_prompt_below_min_tokens_keeps_flat_threshold(tmp_path, monkeypatch):
    splits = _run(
        tmp_path, monkeypatch, RECIPE, 1024, "long_first", long_tokens=20_480
    )
    assert _long(splits) == [1024] * 20


@pytest.mark.parametrize(
    "name,value",
    [
        ("VLLM_LONG_PREFILL_SHARE", "0"),
        ("VLLM_LONG_PREFILL_SHARE", "1.5"),
        ("VLLM_LONG_PREFILL_SHARE", "-0.25"),
        ("VLLM_LONG_PREFILL_SHARE", "quarter"),
        ("VLLM_LONG_PREFILL_SHARE", "nan"),
        ("VLLM_LONG_PREFILL_SHARE_ASYNC", "yes"),
        ("VLLM_LONG_PREFILL_MIN_TOKENS", "-1"),
        ("VLLM_LONG_PREFILL_MIN_TOKENS", "32k"),
    ],
)
def test_invalid_switch_values_raise(tmp_path, monkeypatch, name, value):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("VLLM_LONG_PREFILL_SHARE", "0.25")
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        _make_scheduler(tmp_path, 1024)


# --- upstream's own options (0.31.0+, 0.33.0+): what they cover, what they do not ---


def _needs_config(field: str) -> None:
    if field not in SchedulerConfig.__dataclass_fields__:
        pytest.skip(f"this vLLM has no SchedulerConfig.{field}")


@pytest.mark.parametrize(
    "num_decodes,adaptive_chunk", [(1, 4096), (3, 2048), (12, 1024)]
)
def test_upstream_adaptive_threshold_scales_with_request_count(
    tmp_path, monkeypatch, num_decodes, adaptive_chunk
):
    # vLLM 0.31.0's long_prefill_token_threshold_adaptive (default off) floors
    # the flat cap at max_num_batched_tokens // (running + waiting requests):
    # with the recipe's 1,024 a 256K prompt reads in 4,096 a step beside one
    # decode, 2,048 beside three, 1,024 beside twelve. The chunk follows the
    # request count, not the prompt (a share of the step for long prompts
    # only). Upstream behaviour with the switches unset: passes on clean.
    _needs_config("long_prefill_token_threshold_adaptive")
    adaptive = {"long_prefill_token_threshold_adaptive": True}
    splits = _run(tmp_path, monkeypatch, {}, 1024, "decodes_first",
                  num_decodes=num_decodes, config=adaptive)
    print(f"\n[adaptive, {num_decodes} decodes] long chunks={_long(splits)[:3]}")
    assert set(_long(splits)[:-1]) == {adaptive_chunk}


def test_upstream_adaptive_threshold_does_not_cap_threshold_0(tmp_path, monkeypatch):
    # The adaptive floor only applies when the threshold is nonzero: with 0 a
    # long prompt ahead of the decodes still takes the whole budget and they
    # get no token until it has read in (passes on clean).
    _needs_config("long_prefill_token_threshold_adaptive")
    adaptive = {"long_prefill_token_threshold_adaptive": True}
    splits = _run(tmp_path, monkeypatch, {}, 0, "long_first", config=adaptive)
    assert _long(splits) == [BUDGET] * (LONG // BUDGET)
    assert all(set(s) == {"long"} for s in splits)


@pytest.mark.parametrize("num_decodes", [1, 12])
def test_share_holds_beside_upstream_adaptive_threshold(
    tmp_path, monkeypatch, num_decodes
):
    # The fix beside the adaptive option: the long prompt reads in its share
    # (2,048) whatever the number of other requests. Clean: 4,096 beside one
    # decode, 1,024 beside twelve.
    _needs_config("long_prefill_token_threshold_adaptive")
    adaptive = {"long_prefill_token_threshold_adaptive": True}
    splits = _run(tmp_path, monkeypatch, RECIPE, 1024, "decodes_first",
                  num_decodes=num_decodes, config=adaptive)
    assert _long(splits) == [SHARE_TOKENS] * (LONG // SHARE_TOKENS)
    assert _starved_decode_steps(splits, num_decodes) == 0


def test_upstream_prefill_cadence_is_no_per_step_cap(tmp_path, monkeypatch):
    # vLLM 0.33.0 applies prefill_schedule_interval (default 1: off) outside
    # data parallelism: prefill runs on one step in N and decodes run alone in
    # between. With threshold 0 the prompt still takes the whole rest of the
    # budget (8,189 beside three decodes) on each prefill step: the steps are
    # time-shared, not capped, and every prompt, short or long, waits for the
    # next prefill step (passes on clean).
    _needs_config("prefill_schedule_interval")
    cadence = {"prefill_schedule_interval": 4}
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    scheduler = _make_scheduler(tmp_path, 0, config=cadence)
    if getattr(scheduler, "local_prefill_interval", 1) == 1:  # before 0.33.0
        pytest.skip("prefill_schedule_interval applies only under data parallelism")
    splits = _run(tmp_path, monkeypatch, {}, 0, "decodes_first", config=cadence)
    chunks = [n for n in _long(splits) if n]
    print(f"\n[cadence 4] steps={len(splits)} long chunks={chunks[:3]}")
    assert chunks[:-1] == [BUDGET - 3] * (len(chunks) - 1)
    assert len(splits) > 3 * len(chunks)
