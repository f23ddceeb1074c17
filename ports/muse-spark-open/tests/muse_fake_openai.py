"""A small OpenAI-compatible server on 127.0.0.1 for the gate harness's CPU tests.

Logprobs and greedy tokens come from the CPU reference of a tiny checkpoint (token ids as prompts),
so the perplexity and decode/prefill gates compare real computations; the knobs of :class:`Behaviour`
make each gate fail on purpose. It answers a bounded number of requests and shuts itself down after
``lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch


@dataclass
class Behaviour:
    ppl_shift: float = 0.0  # added to every served prompt logprob (perplexity gate)
    decode_shift: float = 0.0  # added to decode-time logprobs (decode vs prefill gate)
    needle_miss_over: int | None = None  # haystacks longer than this many words: wrong answer
    tools_ok: bool = True
    required_ok: bool = True
    stream_tools_ok: bool = True
    reasoning_low: int = 8
    reasoning_high: int = 40
    answer_right: bool = True
    greedy_flaky: bool = False
    tps: float = 500.0  # streamed tokens a second
    max_requests: int = 300
    lifetime: float = 120.0


class FakeServer:
    def __init__(self, reference: Any, behaviour: Behaviour | None = None) -> None:
        self.ref = reference
        self.b = behaviour or Behaviour()
        self.requests = 0
        self.greedy_calls = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(self.b.lifetime, self.stop)
        self.timer.daemon = True

    def __enter__(self) -> FakeServer:
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the "model" ---------------------------------------------------------------------------

    def prompt_logprobs(self, ids: list[int]) -> list[Any]:
        lps = self.ref.logprobs(ids)
        return [None] + [{str(t): {"logprob": lp + self.b.ppl_shift, "rank": 1, "decoded_token": str(t)}}
                         for t, lp in zip(ids[1:], lps)]

    def greedy_ids(self, ids: list[int], n: int) -> tuple[list[int], list[float]]:
        out, lps = [], []
        seq = list(ids)
        for _ in range(n):
            lp = torch.log_softmax(self.ref.forward(seq)[-1], -1)
            tok = int(lp.argmax())
            out.append(tok)
            lps.append(float(lp[tok]) + self.b.decode_shift)
            seq.append(tok)
        return out, lps

    def text_tokens(self, text: str, n: int) -> list[int]:
        with self.lock:
            self.greedy_calls += 1
            flaky = self.b.greedy_flaky and self.greedy_calls % 2 == 0
        base = sum(map(ord, text))
        return [(base * (i + 7) + (1 if flaky and i >= n // 2 else 0)) % 90 + 3 for i in range(n)]

    # -- endpoints -----------------------------------------------------------------------------

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt, n = body["prompt"], int(body.get("max_tokens", 16))
        choice: dict[str, Any] = {"index": 0, "text": "", "finish_reason": "length"}
        if isinstance(prompt, list):
            if body.get("prompt_logprobs") is not None:
                choice["prompt_logprobs"] = self.prompt_logprobs(prompt)
            toks, lps = self.greedy_ids(prompt, n)
        else:
            toks = self.text_tokens(prompt, n)
            lps = [-0.1] * n
        choice["token_ids"] = toks
        choice["text"] = " ".join(f"w{t}" for t in toks)
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": [f"w{t}" for t in toks], "token_logprobs": lps,
                                  "top_logprobs": [], "text_offset": []}
        return {"id": "cmpl-1", "object": "text_completion", "choices": [choice],
                "usage": {"prompt_tokens": 0, "completion_tokens": n}}

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        text = body["messages"][-1]["content"]
        msg: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": []}
        if body.get("tools"):
            ok = self.b.required_ok if body.get("tool_choice") == "required" else self.b.tools_ok
            if ok:
                msg["tool_calls"] = [{"id": "call_1", "type": "function",
                                      "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]
            else:
                msg["content"] = "I cannot call tools."
        elif (m := re.search(r"secret number for (\S+) is (\d+)", text)):
            words = len(text.split())
            miss = self.b.needle_miss_over is not None and words > self.b.needle_miss_over
            msg["content"] = "12345" if miss else m.group(2)
        elif "train" in text:
            n = self.b.reasoning_high if body.get("reasoning_effort") == "high" else self.b.reasoning_low
            msg["reasoning"] = " ".join(["step"] * n)
            msg["content"] = "It arrives at 12:35." if self.b.answer_right else "It arrives at 12:15."
        else:
            msg["content"] = "ok"
        return {"id": "chat-1", "object": "chat.completion", "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 1}}

    def chat_stream(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        args = json.dumps({"city": "Paris"}) if self.b.stream_tools_ok else '{"city": "Par'
        pieces = [args[i:i + 4] for i in range(0, len(args), 4)]
        chunks = [{"choices": [{"index": 0, "delta": {"reasoning": "Need weather."}}]},
                  {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                                      "function": {"name": "get_weather", "arguments": ""}}]}}]}]
        chunks += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}}]} for p in pieces]
        return chunks

    def completion_stream(self, body: dict[str, Any]) -> Any:
        n = int(body.get("max_tokens", 16))
        for i in range(n):
            time.sleep(1.0 / self.b.tps)
            yield {"choices": [{"index": 0, "text": f" w{i}"}]}
        yield {"choices": [], "usage": {"completion_tokens": n}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _send(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, items: Any) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for it in items:
                    self.wfile.write(f"data: {json.dumps(it)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

            def _count(self) -> bool:
                with server.lock:
                    server.requests += 1
                    if server.requests > server.b.max_requests:
                        self._send(503, {"error": "request budget of the fake server spent"})
                        return False
                return True

            def do_GET(self) -> None:
                if not self._count():
                    return
                if self.path == "/v1/models":
                    self._send(200, {"data": [{"id": "muse-spark-open"}]})
                else:
                    self._send(404, {"error": self.path})

            def do_POST(self) -> None:
                if not self._count():
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/tokenize":
                    self._send(200, {"tokens": list(range(len(body["prompt"].split()))), "count": 0})
                elif self.path == "/v1/completions":
                    self._sse(server.completion_stream(body)) if body.get("stream") else self._send(200, server.completions(body))
                elif self.path == "/v1/chat/completions":
                    self._sse(server.chat_stream(body)) if body.get("stream") else self._send(200, server.chat(body))
                else:
                    self._send(404, {"error": self.path})

        return Handler
