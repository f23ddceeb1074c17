"""Serving gates: run against an OpenAI-compatible endpoint (vLLM serving Muse Spark Open).

Each gate prints one line: PASS or FAIL, its name, its figure, the threshold it was held to.

    perplexity          served prompt logprobs against the CPU reference's, on the same token ids
    decode_vs_prefill   logprobs of greedy tokens when decoded vs. when re-read as a prompt
    needles             a number hidden at given lengths and depths is found
    tools               tool calls with tool_choice auto, required, and streamed
    reasoning_effort    reasoning_effort high reasons longer than low, both answer right
    greedy_repeat       two greedy runs with fresh cache_salt values give the same tokens
    decode_speed        decode tokens/s at 1 stream and in total at 4 streams

Only the standard library is needed, except for ``--reference-checkpoint`` (torch, safetensors).
Exit status: 0 every gate passed, 1 a gate failed, 2 bad arguments or the endpoint unreachable.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_THRESHOLDS = Path(__file__).resolve().parent.parent / "serving" / "gate-thresholds.json"
GATES = ("perplexity", "decode_vs_prefill", "needles", "tools", "reasoning_effort", "greedy_repeat", "decode_speed")


class EndpointError(RuntimeError):
    """The endpoint could not be reached or answered with an error."""


# -- HTTP ---------------------------------------------------------------------------------------


class Client:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 900.0) -> None:
        self.base = base_url.rstrip("/")
        self.root = re.sub(r"/v1$", "", self.base)
        self.model = model
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def _request(self, url: str, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        return urllib.request.urlopen(urllib.request.Request(url, data=data, headers=self.headers), timeout=self.timeout)

    def post(self, path: str, body: dict[str, Any], root: bool = False) -> dict[str, Any]:
        url = (self.root if root else self.base) + path
        try:
            with self._request(url, {"model": self.model, **body}) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise EndpointError(f"POST {url}: HTTP {e.code}: {e.read()[:500]!r}") from e
        except (urllib.error.URLError, OSError) as e:
            raise EndpointError(f"POST {url}: {e}") from e

    def stream(self, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        url = self.base + path
        try:
            with self._request(url, {"model": self.model, "stream": True, **body}) as r:
                for raw in r:
                    line = raw.decode().strip()
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        return
                    yield json.loads(payload)
        except urllib.error.HTTPError as e:
            raise EndpointError(f"POST {url} (stream): HTTP {e.code}: {e.read()[:500]!r}") from e
        except (urllib.error.URLError, OSError) as e:
            raise EndpointError(f"POST {url} (stream): {e}") from e

    def ping(self) -> None:
        """GET /models: fail early (EndpointError) when nothing serves at the base URL."""
        url = self.base + "/models"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=self.headers), timeout=self.timeout) as r:
                r.read()
        except (urllib.error.URLError, OSError) as e:
            raise EndpointError(f"GET {url}: {e}") from e

    def tokenize(self, text: str) -> list[int]:
        return list(self.post("/tokenize", {"prompt": text, "add_special_tokens": False}, root=True)["tokens"])

    def prompt_logprobs(self, token_ids: list[int]) -> list[float]:
        """log p(token_i | tokens before i) for i >= 1, as the server computes them in prefill."""
        r = self.post("/completions", {"prompt": token_ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0})
        return logprobs_of(r["choices"][0]["prompt_logprobs"], token_ids)

    def greedy(self, prompt: list[int] | str, n: int, salt: str | None = None, logprobs: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"prompt": prompt, "max_tokens": n, "temperature": 0, "return_token_ids": True,
                                "ignore_eos": True}
        if logprobs:
            body["logprobs"] = 1
        if salt is not None:
            body["cache_salt"] = salt
        return self.post("/completions", body)["choices"][0]


def logprobs_of(prompt_logprobs: list[Any], token_ids: list[int]) -> list[float]:
    """Pick each prompt token's own logprob out of vLLM's prompt_logprobs (first entry None)."""
    out: list[float] = []
    for i, entry in enumerate(prompt_logprobs[1:], start=1):
        if entry is None:
            raise EndpointError(f"prompt_logprobs[{i}] is missing")
        tok = entry.get(str(token_ids[i]), entry.get(token_ids[i]))  # type: ignore[call-overload]
        if tok is None:
            raise EndpointError(f"prompt_logprobs[{i}] has no entry for token {token_ids[i]}")
        out.append(float(tok["logprob"] if isinstance(tok, dict) else tok))
    return out


# -- results ------------------------------------------------------------------------------------


@dataclass
class GateResult:
    name: str
    passed: bool
    figure: float | None
    unit: str
    threshold: str
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        fig = "n/a" if self.figure is None else (f"{self.figure:.4g}" if isinstance(self.figure, float) else str(self.figure))
        verdict = "PASS" if self.passed else "FAIL"
        text = f"{verdict}  {self.name:<18} {fig} {self.unit}  (threshold: {self.threshold})"
        return text + (f"  {self.detail}" if self.detail else "")


def perplexity(logprobs: list[float]) -> float:
    return math.exp(-sum(logprobs) / max(len(logprobs), 1))


# -- gates (each: client + settings -> GateResult) ------------------------------------------------


def gate_perplexity(client: Client, reference: dict[str, Any], t: dict[str, Any]) -> GateResult:
    ids = [int(i) for i in reference["token_ids"]]
    ref = [float(x) for x in reference["logprobs"]]
    served = client.prompt_logprobs(ids)
    if len(served) != len(ref):
        return GateResult("perplexity", False, None, "", "", f"{len(served)} served logprobs for {len(ref)} reference ones")
    p_s, p_r = perplexity(served), perplexity(ref)
    rel = p_s / p_r - 1.0
    mad = sum(abs(a - b) for a, b in zip(served, ref)) / len(ref)
    ok = abs(rel) <= t["max_relative_diff"] and mad <= t["max_mean_abs_logprob_diff"]
    return GateResult(
        "perplexity", ok, rel, "relative",
        f"|rel| <= {t['max_relative_diff']}, mean |dlogprob| <= {t['max_mean_abs_logprob_diff']}",
        f"served {p_s:.4f} vs reference {p_r:.4f} over {len(ref)} tokens, mean |dlogprob| {mad:.4f}",
        {"served_ppl": p_s, "reference_ppl": p_r, "mean_abs_diff": mad},
    )


def gate_decode_vs_prefill(client: Client, prompt_ids: list[int], t: dict[str, Any]) -> GateResult:
    n = int(t["tokens"])
    dec = client.greedy(prompt_ids, n, salt=uuid.uuid4().hex, logprobs=True)
    gen = [int(x) for x in dec["token_ids"]]
    dec_lp = [float(x) for x in dec["logprobs"]["token_logprobs"]]
    pre_lp = client.prompt_logprobs(prompt_ids + gen)[len(prompt_ids) - 1:]
    diffs = [abs(a - b) for a, b in zip(dec_lp, pre_lp)]
    worst = max(diffs) if diffs else math.inf
    ok = len(diffs) == len(gen) > 0 and worst <= t["max_abs_logprob_diff"]
    return GateResult("decode_vs_prefill", ok, worst, "max |dlogprob|", f"<= {t['max_abs_logprob_diff']}",
                      f"{len(gen)} greedy tokens, mean |dlogprob| {sum(diffs) / max(len(diffs), 1):.4f}")


FILLER = (
    "The grass is green and the sky is blue. The sun rises in the east and sets in the west. "
    "Rivers run down to the sea and the sea gives the rain back to the hills. "
)


def build_haystack(per_filler: int, length: int, depth: float, key: str, secret: str) -> str:
    """About ``length`` tokens of filler (``per_filler`` tokens a FILLER) with the needle sentence at
    ``depth`` (0..1) of it."""
    reps = max(1, length // per_filler)
    at = min(reps, max(0, round(reps * depth)))
    needle = f" The secret number for {key} is {secret}. "
    return FILLER * at + needle + FILLER * (reps - at)


def answer_text(choice: dict[str, Any]) -> tuple[str, str]:
    msg = choice.get("message") or {}
    reasoning = msg.get("reasoning") or msg.get("reasoning_content") or ""
    return (msg.get("content") or ""), reasoning


def gate_needles(client: Client, t: dict[str, Any], lengths: list[int], depths: list[float], seed: int = 0) -> GateResult:
    rng = random.Random(seed)
    found, misses = 0, []
    per_filler = max(1, len(client.tokenize(FILLER)))  # once: the filler is the same for every haystack
    for length in lengths:
        for depth in depths:
            key, secret = f"door-{rng.randrange(1000)}", str(rng.randrange(10_000_000, 99_999_999))
            hay = build_haystack(per_filler, length, depth, key, secret)
            q = f"{hay}\n\nQuestion: what is the secret number for {key}? Answer with the number only."
            r = client.post("/chat/completions", {"messages": [{"role": "user", "content": q}], "temperature": 0,
                                                 "max_tokens": int(t.get("max_tokens", 1024)),
                                                 "reasoning_effort": "low", "cache_salt": uuid.uuid4().hex})
            content, _ = answer_text(r["choices"][0])
            if secret in content:
                found += 1
            else:
                misses.append(f"{length}@{depth}")
    total = len(lengths) * len(depths)
    frac = found / total if total else 0.0
    ok = total > 0 and frac >= t["min_found_fraction"]
    return GateResult("needles", ok, frac, "found", f">= {t['min_found_fraction']}",
                      f"{found}/{total}" + (f", missed {', '.join(misses)}" if misses else ""))


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def _call_ok(name: str | None, arguments: str | None) -> bool:
    if name != "get_weather" or arguments is None:
        return False
    try:
        args = json.loads(arguments)
    except ValueError:
        return False
    return isinstance(args, dict) and "paris" in str(args.get("city", "")).lower()


def assemble_stream_calls(chunks: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    """Tool calls of a chat stream: deltas merged by index (name once, arguments concatenated)."""
    calls: dict[int, list[Any]] = {}
    for ch in chunks:
        for choice in ch.get("choices", []):
            for tc in (choice.get("delta") or {}).get("tool_calls") or []:
                slot = calls.setdefault(int(tc.get("index", 0)), [None, ""])
                fn = tc.get("function") or {}
                if fn.get("name"):
                    slot[0] = fn["name"]
                slot[1] += fn.get("arguments") or ""
    return [(calls[i][0], calls[i][1]) for i in sorted(calls)]


def gate_tools(client: Client, t: dict[str, Any]) -> GateResult:
    ask = [{"role": "user", "content": "What is the weather in Paris right now? Use the tool."}]
    results: dict[str, bool] = {}
    for choice in ("auto", "required"):
        r = client.post("/chat/completions", {"messages": ask, "tools": [WEATHER_TOOL], "tool_choice": choice,
                                             "temperature": 0, "max_tokens": 1024})
        calls = (r["choices"][0].get("message") or {}).get("tool_calls") or []
        results[choice] = bool(calls) and _call_ok(calls[0]["function"].get("name"), calls[0]["function"].get("arguments"))
    chunks = list(client.stream("/chat/completions", {"messages": ask, "tools": [WEATHER_TOOL], "tool_choice": "auto",
                                                     "temperature": 0, "max_tokens": 1024}))
    streamed = assemble_stream_calls(chunks)
    results["streamed"] = bool(streamed) and _call_ok(*streamed[0])
    passed = sum(results.values())
    return GateResult("tools", passed >= t["min_passed"], float(passed), "of 3", f">= {t['min_passed']}",
                      ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in results.items()))


def reasoning_tokens(client: Client, choice: dict[str, Any], usage: dict[str, Any] | None) -> int:
    details = (usage or {}).get("completion_tokens_details") or {}
    if details.get("reasoning_tokens"):
        return int(details["reasoning_tokens"])
    _, reasoning = answer_text(choice)
    return len(client.tokenize(reasoning)) if reasoning else 0


def gate_reasoning_effort(client: Client, t: dict[str, Any]) -> GateResult:
    q = [{"role": "user", "content": "A train leaves at 09:40 and the trip takes 2 hours 55 minutes. "
                                     "At what time does it arrive? Give the time as HH:MM."}]
    counts: dict[str, int] = {}
    right: dict[str, bool] = {}
    for effort in ("low", "high"):
        r = client.post("/chat/completions", {"messages": q, "reasoning_effort": effort, "temperature": 0,
                                             "max_tokens": int(t.get("max_tokens", 4096))})
        counts[effort] = reasoning_tokens(client, r["choices"][0], r.get("usage"))
        right[effort] = "12:35" in answer_text(r["choices"][0])[0]
    ratio = (counts["high"] + 1) / (counts["low"] + 1)
    ok = ratio >= t["min_high_low_ratio"] and all(right.values())
    return GateResult("reasoning_effort", ok, ratio, "high/low reasoning tokens", f">= {t['min_high_low_ratio']}, both right",
                      f"low {counts['low']} high {counts['high']} tokens; answers right: {right}")


def gate_greedy_repeat(client: Client, prompt: str, t: dict[str, Any]) -> GateResult:
    n = int(t["tokens"])
    a = client.greedy(prompt, n, salt=uuid.uuid4().hex)["token_ids"]
    b = client.greedy(prompt, n, salt=uuid.uuid4().hex)["token_ids"]
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    ok = a == b and len(a) == n
    return GateResult("greedy_repeat", ok, float(same), f"of {n} tokens equal", "all equal",
                      "identical" if ok else f"first difference at token {same} (lengths {len(a)}, {len(b)})")


def _one_stream(client: Client, prompt: str, n: int, out: list[Any], clock: Callable[[], float]) -> None:
    first = last = None
    tokens = 0
    usage_tokens = None
    for ch in client.stream("/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True,
                                             "stream_options": {"include_usage": True},
                                             "cache_salt": uuid.uuid4().hex}):
        if ch.get("usage"):
            usage_tokens = ch["usage"].get("completion_tokens")
        if any(c.get("text") for c in ch.get("choices", [])):
            now = clock()
            first = now if first is None else first
            last = now
            tokens += 1
    count = usage_tokens or tokens
    out.append((count, first, last))


def decode_rate(count: int, first: float | None, last: float | None) -> float:
    if first is None or last is None or last <= first or count < 2:
        return 0.0
    return (count - 1) / (last - first)


def gate_decode_speed(client: Client, t: dict[str, Any], clock: Callable[[], float] = time.monotonic) -> GateResult:
    n = int(t["tokens"])
    prompt = "Write a long story about a lighthouse keeper and the sea."
    single: list[Any] = []
    _one_stream(client, prompt, n, single, clock)
    one = decode_rate(*single[0])
    four: list[Any] = []
    threads = [threading.Thread(target=_one_stream, args=(client, prompt, n, four, clock)) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rates = [decode_rate(*r) for r in four]
    total = sum(rates)
    ok = one >= t["one_stream_min_tps"] and total >= t["four_streams_min_total_tps"] and len(rates) == 4
    return GateResult("decode_speed", ok, one, "tok/s at 1 stream",
                      f">= {t['one_stream_min_tps']} at 1, >= {t['four_streams_min_total_tps']} total at 4",
                      f"4 streams: {total:.1f} tok/s total, per stream {', '.join(f'{r:.1f}' for r in rates)}",
                      {"four_streams_total": total})


# -- driver -------------------------------------------------------------------------------------


def reference_from_checkpoint(checkpoint: str, token_ids: list[int]) -> dict[str, Any]:
    from .reference import MuseSparkReference

    ref = MuseSparkReference.from_checkpoint(checkpoint)
    return {"token_ids": token_ids, "logprobs": ref.logprobs(token_ids)}


def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> list[GateResult]:
    thresholds = json.loads(Path(args.thresholds).read_text())
    client = Client(args.base_url, args.model, args.api_key, args.timeout)
    names = GATES if args.gates == "all" else tuple(g.strip() for g in args.gates.split(","))
    unknown = [g for g in names if g not in GATES]
    if unknown:
        raise SystemExit(f"unknown gate(s) {unknown}; known: {', '.join(GATES)}")
    reference = None
    if "perplexity" in names or "decode_vs_prefill" in names:
        if args.reference_logprobs:
            reference = json.loads(Path(args.reference_logprobs).read_text())
        elif args.reference_checkpoint and args.token_ids:
            reference = reference_from_checkpoint(args.reference_checkpoint, json.loads(Path(args.token_ids).read_text()))
    results: list[GateResult] = []
    for name in names:
        t = thresholds[name]
        try:
            if name == "perplexity":
                if reference is None:
                    r = GateResult(name, False, None, "", "", "no reference: give --reference-logprobs, or "
                                   "--reference-checkpoint with --token-ids")
                else:
                    r = gate_perplexity(client, reference, t)
            elif name == "decode_vs_prefill":
                ids = reference["token_ids"][:64] if reference else client.tokenize(FILLER)
                r = gate_decode_vs_prefill(client, ids, t)
            elif name == "needles":
                lengths = [int(x) for x in args.needle_lengths.split(",")] if args.needle_lengths else t["lengths"]
                depths = [float(x) for x in args.needle_depths.split(",")] if args.needle_depths else t["depths"]
                r = gate_needles(client, t, lengths, depths)
            elif name == "tools":
                r = gate_tools(client, t)
            elif name == "reasoning_effort":
                r = gate_reasoning_effort(client, t)
            elif name == "greedy_repeat":
                r = gate_greedy_repeat(client, "The history of the lighthouse begins", t)
            else:
                r = gate_decode_speed(client, t)
        except (EndpointError, KeyError, TypeError, ValueError) as e:
            r = GateResult(name, False, None, "", "", f"error: {type(e).__name__}: {e}")
        results.append(r)
        out(r.line())
    passed = sum(r.passed for r in results)
    out(f"{passed}/{len(results)} gates passed")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps([r.__dict__ for r in results], indent=2, default=str))
    return results


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="muse-spark-gates", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    p.add_argument("--model", default="muse-spark-open")
    p.add_argument("--api-key", default=None)
    p.add_argument("--thresholds", default=str(DEFAULT_THRESHOLDS))
    p.add_argument("--gates", default="all", help=f"comma-separated subset of: {', '.join(GATES)}")
    p.add_argument("--reference-logprobs", help="JSON {token_ids, logprobs} computed by the CPU reference")
    p.add_argument("--reference-checkpoint", help="compute the reference here (small checkpoints only)")
    p.add_argument("--token-ids", help="JSON list of token ids for --reference-checkpoint")
    p.add_argument("--needle-lengths", help="comma-separated token counts (default: thresholds file)")
    p.add_argument("--needle-depths", help="comma-separated fractions (default: thresholds file)")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--json-out")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not Path(args.thresholds).is_file():
        print(f"gates: no thresholds file at {args.thresholds}", file=sys.stderr)
        return 2
    try:
        Client(args.base_url, args.model, args.api_key, 30).ping()
        results = run(args)
    except EndpointError as e:
        print(f"gates: endpoint error: {e}", file=sys.stderr)
        return 2
    return 0 if results and all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
