#!/usr/bin/env python3
"""Prefix-cache hit rate with the prompt-order fix on and off.

Drives vLLM's own v1 Scheduler (CPU, no model: outputs are simulated the way
vLLM's scheduler tests do) over a stream of chat-like requests that share a
system prompt, once with the fix on and once with VLLM_PROMPT_ORDER=0, each in
its own subprocess (the switch is read when the scheduler is built), and prints
both hit rates and their difference.

Hit rate = prompt tokens served from the prefix cache (a request's computed
tokens when it is first scheduled) / prompt tokens. vLLM's own
PrefixCacheStats (hits / queries, as the scheduler reports them) is printed
too, with the prefill tokens actually computed and the mean number of steps a
request waits before its first token.

Usage: python bench_hit_rate.py [--requests 64] [--system 512]
           [--unique-min 32] [--unique-max 256] [--per-step 4]
           [--max-batched-tokens 2048] [--max-tokens 16] [--seed 0]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

BLOCK_SIZE = 16
SWITCH = "VLLM_PROMPT_ORDER"

TINY_OPT_CONFIG = {
    "architectures": ["OPTForCausalLM"],
    "model_type": "opt",
    "vocab_size": 50272,
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "ffn_dim": 32,
    "max_position_embeddings": 4096,
    "word_embed_proj_dim": 16,
    "do_layer_norm_before": True,
    "torch_dtype": "float16",
    "bos_token_id": 2,
    "eos_token_id": 2,
    "pad_token_id": 1,
}


def build_scheduler(model_dir: str, max_batched_tokens: int):
    import torch

    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.core.single_type_kv_cache_manager import (
        register_all_kvcache_specs,
    )
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
    )
    from vllm.v1.structured_output import StructuredOutputManager

    model_config = ModelConfig(
        model=model_dir, dtype="float16", seed=0, skip_tokenizer_init=True
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=256,
        max_num_batched_tokens=max_batched_tokens,
        max_model_len=model_config.max_model_len,
        enable_chunked_prefill=True,
        is_encoder_decoder=False,
        watermark=0.0,
    )
    cache_config = CacheConfig(
        block_size=BLOCK_SIZE, cache_dtype="auto", enable_prefix_caching=True
    )
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config,
        model_config=model_config,
        cache_config=cache_config,
    )
    num_blocks = 20000
    cache_config.num_gpu_blocks = num_blocks
    spec = FullAttentionSpec(
        block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    kv_cache_config = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)],
    )
    register_all_kvcache_specs(vllm_config)
    return Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        block_size=BLOCK_SIZE,
        log_stats=True,
        structured_output_manager=StructuredOutputManager(vllm_config),
    )


def make_prompts(args) -> list[list[int]]:
    rng = random.Random(args.seed)
    system = [rng.randrange(1000, 30000) for _ in range(args.system)]
    return [
        system
        + [
            rng.randrange(30000, 50000)
            for _ in range(rng.randint(args.unique_min, args.unique_max))
        ]
        for _ in range(args.requests)
    ]


def run_one(args) -> dict:
    """One simulated run with the current environment's switch value."""
    model_dir = tempfile.mkdtemp(prefix="bench_hit_rate_")
    try:
        with open(os.path.join(model_dir, "config.json"), "w") as f:
            json.dump(TINY_OPT_CONFIG, f)
        scheduler = build_scheduler(model_dir, args.max_batched_tokens)
        return simulate(args, scheduler)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


def simulate(args, scheduler) -> dict:
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request

    init_none_hash(sha256)
    hasher = get_request_block_hasher(BLOCK_SIZE, sha256)
    params = SamplingParams(ignore_eos=True, max_tokens=args.max_tokens)
    params.update_from_generation_config({}, 50256)
    pending = [
        Request(
            request_id=str(i),
            prompt_token_ids=prompt,
            sampling_params=params,
            pooling_params=None,
            block_hasher=hasher,
        )
        for i, prompt in enumerate(make_prompts(args))
    ]
    prompt_tokens = sum(r.num_prompt_tokens for r in pending)
    arrival_step: dict[str, int] = {}
    first_token_step: dict[str, int] = {}
    cached_at_admission: dict[str, int] = {}
    stats_queries = stats_hits = 0
    computed_prefill = 0
    step = 0
    while pending or scheduler.has_requests():
        for request in pending[: args.per_step]:
            scheduler.add_request(request)
            arrival_step[request.request_id] = step
        pending = pending[args.per_step :]
        output = scheduler.schedule()
        for new in output.scheduled_new_reqs:
            cached_at_admission.setdefault(new.req_id, new.num_computed_tokens)
        req_ids = list(output.num_scheduled_tokens)
        sampled = []
        for req_id in req_ids:
            request = scheduler.requests[req_id]
            num_new = output.num_scheduled_tokens[req_id]
            start = request.num_computed_tokens - num_new
            computed_prefill += max(0, min(request.num_prompt_tokens - start, num_new))
            done = request.num_computed_tokens >= request.num_tokens
            sampled.append([7] if done else [])
            if done:
                first_token_step.setdefault(req_id, step)
        runner_output = ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            sampled_token_ids=sampled,
            logprobs=None,
            prompt_logprobs_dict={},
            pooler_output=[],
        )
        for eco in scheduler.update_from_output(output, runner_output).values():
            stats = eco.scheduler_stats
            if stats is not None and stats.prefix_cache_stats is not None:
                stats_queries += stats.prefix_cache_stats.queries
                stats_hits += stats.prefix_cache_stats.hits
        step += 1
        if step > 100000:
            raise RuntimeError("simulation did not finish")
    assert len(first_token_step) == args.requests
    waits = [first_token_step[r] - arrival_step[r] for r in first_token_step]
    return {
        "switch": os.environ.get(SWITCH, "<unset>"),
        "prompt_tokens": prompt_tokens,
        "cached_tokens": sum(cached_at_admission.values()),
        "stats_queries": stats_queries,
        "stats_hits": stats_hits,
        "computed_prefill_tokens": computed_prefill,
        "steps": step,
        "mean_steps_to_first_token": sum(waits) / len(waits),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--system", type=int, default=512)
    parser.add_argument("--unique-min", type=int, default=32)
    parser.add_argument("--unique-max", type=int, default=256)
    parser.add_argument("--per-step", type=int, default=4)
    parser.add_argument("--max-batched-tokens", type=int, default=2048)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print("RESULT " + json.dumps(run_one(args)))
        return

    env = dict(os.environ)
    env.setdefault("VLLM_TARGET_DEVICE", "cpu")
    env.setdefault("HF_HUB_OFFLINE", "1")
    results = {}
    for label, value in (("fix on", "1"), ("fix off", "0")):
        proc = subprocess.run(
            [sys.executable, __file__, "--child", *sys.argv[1:]],
            env={**env, SWITCH: value},
            capture_output=True,
            text=True,
        )
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            sys.stderr.write(proc.stderr[-4000:])
            raise SystemExit(f"{label} run failed (rc={proc.returncode})")
        results[label] = json.loads(lines[-1][len("RESULT ") :])

    print(
        f"{args.requests} requests, {args.system}-token shared system prompt + "
        f"{args.unique_min}-{args.unique_max} unique tokens, {args.per_step} "
        f"arriving per step, max_num_batched_tokens={args.max_batched_tokens}, "
        f"block size {BLOCK_SIZE}"
    )
    rates = {}
    for label, r in results.items():
        rate = r["cached_tokens"] / r["prompt_tokens"]
        stats_rate = r["stats_hits"] / r["stats_queries"] if r["stats_queries"] else 0
        rates[label] = (rate, stats_rate)
        print(
            f"{label:8s} ({SWITCH}={r['switch']}): hit rate {rate:.4f} "
            f"({r['cached_tokens']}/{r['prompt_tokens']} prompt tokens from cache); "
            f"vLLM PrefixCacheStats {stats_rate:.4f} "
            f"({r['stats_hits']}/{r['stats_queries']}); "
            f"prefill tokens computed {r['computed_prefill_tokens']}; "
            f"steps {r['steps']}; "
            f"mean steps to first token {r['mean_steps_to_first_token']:.2f}"
        )
    on, off = rates["fix on"], rates["fix off"]
    print(
        f"difference (on - off): hit rate {on[0] - off[0]:+.4f}, "
        f"PrefixCacheStats {on[1] - off[1]:+.4f}"
    )


if __name__ == "__main__":
    main()
