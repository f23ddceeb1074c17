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

BLOCK_SIZE = 16  # test_prompt_order.BLOCK_SIZE (the parent process does not import vLLM)
SWITCH = "VLLM_PROMPT_ORDER"
MAX_MODEL_LEN = 4096  # the proof's tiny model has 2048: room for longer prompts here


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
    # The proof's scheduler helpers (a trimmed copy of vLLM's own), imported in
    # the child only: this script's folder is on sys.path.
    from test_prompt_order import TINY_OPT_CONFIG, create_scheduler

    model_dir = tempfile.mkdtemp(prefix="bench_hit_rate_")
    try:
        with open(os.path.join(model_dir, "config.json"), "w") as f:
            json.dump({**TINY_OPT_CONFIG, "max_position_embeddings": MAX_MODEL_LEN}, f)
        scheduler = create_scheduler(
            model_dir,
            num_blocks=20000,
            max_num_seqs=256,
            max_num_batched_tokens=args.max_batched_tokens,
        )
        return simulate(args, scheduler)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


def simulate(args, scheduler) -> dict:
    from test_prompt_order import create_request, fake_model_output

    pending = [
        create_request(str(i), prompt, max_tokens=args.max_tokens)
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
        runner_output = fake_model_output(scheduler, output)
        for req_id, sampled in zip(
            runner_output.req_ids, runner_output.sampled_token_ids
        ):
            request = scheduler.requests[req_id]
            num_new = output.num_scheduled_tokens[req_id]
            start = request.num_computed_tokens - num_new
            computed_prefill += max(0, min(request.num_prompt_tokens - start, num_new))
            if sampled:  # a token was sampled: the first one counts
                first_token_step.setdefault(req_id, step)
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
