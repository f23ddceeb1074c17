"""Proof test for the `prompt-order` fix.

With prefix caching, vLLM's scheduler caches a request's blocks when it
schedules the tokens that fill them, so a request admitted later in the same
step can get a prefix hit on blocks whose KV that step is only writing. That
is safe when the whole step is one forward pass, but not on a runner that runs
a step as several (reordered) forward passes, e.g. one per prefill batch on
Gaudi. Upstream v0.30.0 schedules three identical 40-token prompts in one step
as {'0': 40, '1': 8, '2': 8}: requests 1 and 2 start at token 32 on blocks
[1, 2], which request 0 writes in that very step.

The scheduler helpers below are a trimmed copy of vLLM's own
tests/v1/core/utils.py (tests/ is not installed with the package).
"""

import json
import os

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from vllm.config import (  # noqa: E402
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    get_request_block_hasher,
    init_none_hash,
)
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

BLOCK_SIZE = 16
EOS_TOKEN_ID = 50256
SWITCH = "VLLM_PROMPT_ORDER"

TINY_OPT_CONFIG = {
    "architectures": ["OPTForCausalLM"],
    "model_type": "opt",
    "vocab_size": 50272,
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "ffn_dim": 32,
    "max_position_embeddings": 2048,
    "word_embed_proj_dim": 16,
    "do_layer_norm_before": True,
    "torch_dtype": "float16",
    "bos_token_id": 2,
    "eos_token_id": 2,
    "pad_token_id": 1,
}


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_OPT_CONFIG))
    return str(tmp_path)


def create_scheduler(
    model: str,
    long_prefill_token_threshold: int = 0,
    num_blocks: int = 10000,
    max_num_seqs: int = 16,
    max_num_batched_tokens: int = 8192,
) -> Scheduler:
    # Trimmed from vLLM's tests/v1/core/utils.py::create_scheduler.
    model_config = ModelConfig(
        model=model,
        trust_remote_code=True,
        dtype="float16",
        seed=42,
        skip_tokenizer_init=True,
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=8192,
        long_prefill_token_threshold=long_prefill_token_threshold,
        enable_chunked_prefill=True,
        is_encoder_decoder=model_config.is_encoder_decoder,
        watermark=0.0,
        policy="fcfs",
    )
    cache_config = CacheConfig(
        block_size=BLOCK_SIZE,
        gpu_memory_utilization=0.9,
        cache_dtype="auto",
        enable_prefix_caching=True,
    )
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config,
        model_config=model_config,
        cache_config=cache_config,
    )
    kv_cache_config = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(
                ["layer"],
                FullAttentionSpec(
                    block_size=BLOCK_SIZE,
                    num_kv_heads=1,
                    head_size=1,
                    dtype=torch.float32,
                ),
            )
        ],
    )
    cache_config.num_gpu_blocks = num_blocks
    register_all_kvcache_specs(vllm_config)
    return Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        block_size=BLOCK_SIZE,
        log_stats=True,
        structured_output_manager=StructuredOutputManager(vllm_config),
    )


def create_request(req_id: str, prompt: list[int], max_tokens: int = 3) -> Request:
    # Trimmed from vLLM's tests/v1/core/utils.py::create_requests.
    init_none_hash(sha256)
    sampling_params = SamplingParams(ignore_eos=True, max_tokens=max_tokens)
    sampling_params.update_from_generation_config({}, EOS_TOKEN_ID)
    return Request(
        request_id=req_id,
        prompt_token_ids=prompt,
        sampling_params=sampling_params,
        pooling_params=None,
        block_hasher=get_request_block_hasher(BLOCK_SIZE, sha256),
    )


def schedule_step(scheduler: Scheduler):
    """Schedule one step and check that no request of the step reads a block
    (one holding tokens before its start position) that another request of
    the same step writes. Returns the step's output and its record
    {req_id: (start position, scheduled tokens, block ids)}."""
    output = scheduler.schedule()
    starts = {r.req_id: r.num_computed_tokens for r in output.scheduled_new_reqs}
    cached = output.scheduled_cached_reqs
    starts.update(zip(cached.req_ids, cached.num_computed_tokens))
    record = {}
    for req_id, num_tokens in output.num_scheduled_tokens.items():
        block_ids = scheduler.kv_cache_manager.get_block_ids(req_id)[0]
        record[req_id] = (starts[req_id], num_tokens, list(block_ids))
    for reader, (start, _, reader_ids) in record.items():
        read = set(reader_ids[: -(-start // BLOCK_SIZE)])
        for writer, (w_start, w_num, writer_ids) in record.items():
            if writer == reader:
                continue
            end = w_start + w_num
            written = set(writer_ids[w_start // BLOCK_SIZE : -(-end // BLOCK_SIZE)])
            assert not read & written, (
                f"request {reader} starts at token {start} on blocks "
                f"{sorted(read & written)} that request {writer} writes in the "
                f"same step; schedule {output.num_scheduled_tokens}"
            )
    return output, record


def fake_model_output(scheduler: Scheduler, output) -> ModelRunnerOutput:
    """A fake model output for a scheduled step, as vLLM's scheduler tests
    make it: a request that reached the end of its tokens samples one token."""
    req_ids = list(output.num_scheduled_tokens)
    sampled = []
    for req_id in req_ids:
        request = scheduler.requests[req_id]
        done = request.num_computed_tokens >= request.num_tokens
        sampled.append([7] if done else [])
    return ModelRunnerOutput(
        req_ids=req_ids,
        req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
        sampled_token_ids=sampled,
        logprobs=None,
        prompt_logprobs_dict={},
        pooler_output=[],
    )


def finish_step(scheduler: Scheduler, output) -> set[str]:
    """Feed a fake model output back (fake_model_output); returns the ids of
    the requests that finished."""
    runner_output = fake_model_output(scheduler, output)
    finished = set()
    for eco in scheduler.update_from_output(output, runner_output).values():
        finished |= {o.request_id for o in eco.outputs if o.finish_reason}
    return finished


def run_to_completion(scheduler: Scheduler, max_steps: int = 50):
    steps, finished = [], set()
    for _ in range(max_steps):
        if not scheduler.has_requests():
            break
        output, record = schedule_step(scheduler)
        steps.append(record)
        finished |= finish_step(scheduler, output)
    assert not scheduler.has_requests(), "requests left unfinished"
    return steps, finished


def test_same_step_prefix_hit_is_deferred(model_dir, monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    scheduler = create_scheduler(model_dir)
    for i in range(3):
        scheduler.add_request(create_request(str(i), [0] * 40))

    steps, finished = run_to_completion(scheduler)

    first = {req_id: n for req_id, (_, n, _) in steps[0].items()}
    # Upstream: {'0': 40, '1': 8, '2': 8}, with 1 and 2 reading blocks [1, 2].
    assert first == {"0": 40}
    blocks_of_0 = steps[0]["0"][2][:2]
    # One step later the blocks are computed: both reuse them (32 tokens).
    second = steps[1]
    assert second["1"][:2] == (32, 8) and second["2"][:2] == (32, 8)
    assert second["1"][2][:2] == blocks_of_0 == second["2"][2][:2]
    assert finished == {"0", "1", "2"}


def test_hit_from_running_chunk_is_deferred(model_dir, monkeypatch):
    # The writer can also be a running request: with 32-token prefill chunks,
    # request 0 writes (and caches) blocks 3-4 in step 2, where upstream lets
    # request 1, arriving then, start at token 48 on block 3. The short,
    # unrelated request "x" (no full block, so no shared prefix) keeps request
    # 0 from being alone in step 1: since v0.31.0 upstream does not apply
    # long_prefill_token_threshold to a request that is alone in the scheduler.
    monkeypatch.delenv(SWITCH, raising=False)
    scheduler = create_scheduler(model_dir, long_prefill_token_threshold=32)
    prompt = list(range(100, 164))
    scheduler.add_request(create_request("0", prompt))
    scheduler.add_request(create_request("x", [5] * 8))
    output, record = schedule_step(scheduler)
    assert output.num_scheduled_tokens == {"0": 32, "x": 8}
    finished = finish_step(scheduler, output)
    scheduler.add_request(create_request("1", prompt))

    steps, finished_later = run_to_completion(scheduler)

    # Request 1 is held back while request 0 writes its second chunk.
    assert {req_id: n for req_id, (_, n, _) in steps[0].items()} == {
        "0": 32,
        "x": 1,
    }
    # Next step: the full hit (all but the last block), on request 0's blocks.
    assert steps[1]["1"][:2] == (48, 16)
    assert steps[1]["1"][2][:3] == steps[0]["0"][2][:3]
    assert finished | finished_later == {"0", "1", "x"}


def test_unrelated_requests_are_not_held_back(model_dir, monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    scheduler = create_scheduler(model_dir)
    scheduler.add_request(create_request("0", [0] * 40))
    scheduler.add_request(create_request("1", [0] * 40))
    scheduler.add_request(create_request("x", [5] * 40))

    output, record = schedule_step(scheduler)
    assert output.num_scheduled_tokens == {"0": 40, "x": 40}
    finish_step(scheduler, output)
    # A request hitting blocks computed in an earlier step is not deferred.
    scheduler.add_request(create_request("2", [0] * 40))
    output, record = schedule_step(scheduler)
    assert record["1"][:2] == (32, 8) and record["2"][:2] == (32, 8)


def test_switch_off_matches_upstream(model_dir, monkeypatch):
    monkeypatch.setenv(SWITCH, "0")
    scheduler = create_scheduler(model_dir)
    for i in range(3):
        scheduler.add_request(create_request(str(i), [0] * 40))
    output = scheduler.schedule()
    assert output.num_scheduled_tokens == {"0": 40, "1": 8, "2": 8}
    new = {
        r.req_id: (r.num_computed_tokens, r.block_ids[0][:2])
        for r in output.scheduled_new_reqs
    }
    assert new["1"] == new["2"] == (32, new["0"][1])


def test_invalid_switch_value_names_variable(model_dir, monkeypatch):
    monkeypatch.setenv(SWITCH, "maybe")
    with pytest.raises(ValueError, match=SWITCH):
        create_scheduler(model_dir)
