"""Tool parser ``muse``: ATEM tool calls from the tool channels of the Muse channel format.

Usage: ``--enable-auto-tool-choice --tool-call-parser muse`` (registered by the plugin).

* Only bodies of tool channels (recipient not ``self`` / ``user``) are searched, so an invoke the
  model echoes in its reasoning or its answer is not a call.
* A call is complete at ``</atem:invoke>``; streamed, each call goes out whole in the delta where
  it completes (ATEM parameters are not incremental JSON).
* Arguments are always a JSON object. A parameter whose schema type is ``string`` keeps its text;
  others are JSON-decoded when they parse, and kept as text when they do not (invalid JSON never
  breaks the call).
* ``tool_choice`` ``required`` and a named tool decode natively (no JSON-schema constraint, which
  would make the model write JSON inside the ATEM channel) and are parsed like ``auto``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import regex as re
from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.tool_parsers.abstract_tool_parser import ToolParser

from . import channels

try:  # vLLM 0.32.0 moved it to the renderers package
    from vllm.renderers.chat_utils import make_tool_call_id
except ImportError:  # vLLM 0.30.0, 0.31.0
    from vllm.entrypoints.chat_utils import make_tool_call_id

logger = logging.getLogger(__name__)

INVOKE_RE = re.compile(r"<atem:invoke\b[^>]*?\bname=\"(?P<name>[^\"]+)\"[^>]*>(?P<body>.*?)</atem:invoke>", re.DOTALL)
PARAM_RE = re.compile(
    r"<atem:parameter\b[^>]*?\bname=\"(?P<key>[^\"]+)\"[^>]*>(?P<value>.*?)</atem:parameter>", re.DOTALL
)


def _tool_schemas(request: Any) -> dict[str, dict[str, Any]]:
    """name -> JSON-schema 'properties' of each tool the request registered."""
    out: dict[str, dict[str, Any]] = {}
    for tool in getattr(request, "tools", None) or []:
        fn = getattr(tool, "function", None) or (tool.get("function") if isinstance(tool, dict) else None) or tool
        name = getattr(fn, "name", None) or (fn.get("name") if isinstance(fn, dict) else None)
        params = getattr(fn, "parameters", None) or (fn.get("parameters") if isinstance(fn, dict) else None) or {}
        if name:
            out[name] = dict(params.get("properties") or {}) if isinstance(params, dict) else {}
    return out


def _value(raw: str, schema: dict[str, Any] | None) -> Any:
    kind = (schema or {}).get("type")
    if kind == "string":
        # a bare string as the template renders it; a JSON string literal is accepted too
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            try:
                decoded = json.loads(raw)
            except ValueError:
                return raw
            return decoded if isinstance(decoded, str) else raw
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _resolve_name(emitted: str, registered: dict[str, dict[str, Any]]) -> str:
    """A bare tool 'f' is rendered to the model as recipient 'f.*', so it may answer 'f.f'."""
    if not registered or emitted in registered:
        return emitted
    head, dot, tail = emitted.partition(".")
    if dot and head == tail and head in registered:
        return head
    logger.warning("muse tool parser: tool %r is not one the request registered; passed through", emitted)
    return emitted


def parse_calls(text: str, request: Any = None) -> list[tuple[str, str]]:
    """(name, JSON arguments) of every complete invoke in the tool channels of ``text``."""
    schemas = _tool_schemas(request)
    if channels.is_framed(text):
        bodies = [m.body for m in channels.segment(text) if m.is_tool]
    elif channels.FUNCTION_CALLS in text or channels.INVOKE in text:
        logger.warning("muse tool parser: ATEM markup without channel framing (skip_special_tokens on?)")
        bodies = [text]
    else:
        bodies = []
    calls: list[tuple[str, str]] = []
    for body in bodies:
        for inv in INVOKE_RE.finditer(body):
            name = _resolve_name(inv.group("name"), schemas)
            props = schemas.get(name, {})
            args = {p.group("key"): _value(p.group("value"), props.get(p.group("key"))) for p in PARAM_RE.finditer(inv.group("body"))}
            calls.append((name, json.dumps(args, ensure_ascii=False)))
    return calls


class MuseToolParser(ToolParser):
    supports_required_and_named = False

    def __init__(self, tokenizer: Any, tools: Any = None) -> None:
        super().__init__(tokenizer, tools)
        self._sent_content = 0
        self._sent_reasoning = 0
        self._sent_calls = 0

    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False
        choice = getattr(request, "tool_choice", None)
        if getattr(request, "tools", None) and (choice == "required" or (choice not in (None, "auto", "none"))):
            return request  # no JSON-schema constraint: ATEM is decoded natively
        return super().adjust_request(request)

    def _content(self, text: str) -> str | None:
        if not channels.is_framed(text):
            stripped = text
            for inv in INVOKE_RE.finditer(text):
                stripped = stripped.replace(inv.group(0), "")
            return stripped.replace(channels.FUNCTION_CALLS, "").replace("</atem:function_calls>", "").strip() or None
        return channels.classify(text, streaming=False).content or None

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        calls = parse_calls(model_output, request)
        if not calls and (channels.FUNCTION_CALLS in model_output or channels.INVOKE in model_output):
            logger.warning("muse tool parser: a tool channel was opened but no complete <atem:invoke> parsed "
                           "(truncated call?); returning content only")
        return ExtractedToolCallInformation(
            tools_called=bool(calls),
            tool_calls=[ToolCall(function=FunctionCall(name=n, arguments=a)) for n, a in calls],
            content=self._content(model_output),
        )

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        if not previous_text:  # vLLM restarts the text when it hands the stream to this parser
            self._sent_content = self._sent_reasoning = self._sent_calls = 0
        found = channels.classify(current_text, streaming=True)
        calls = parse_calls(current_text, request)
        content = found.content[self._sent_content:] if len(found.content) > self._sent_content else ""
        reasoning = found.reasoning[self._sent_reasoning:] if len(found.reasoning) > self._sent_reasoning else ""
        new_calls = [
            DeltaToolCall(
                index=i,
                type="function",
                id=make_tool_call_id(),
                function=DeltaFunctionCall(name=name, arguments=args).model_dump(exclude_none=True),
            )
            for i, (name, args) in enumerate(calls)
            if i >= self._sent_calls
        ]
        self._sent_content = max(self._sent_content, len(found.content))
        self._sent_reasoning = max(self._sent_reasoning, len(found.reasoning))
        self._sent_calls = max(self._sent_calls, len(calls))
        if not (content or reasoning or new_calls):
            return None
        msg = DeltaMessage()
        if content:
            msg.content = content
        if reasoning:
            msg.reasoning = reasoning
        if new_calls:
            msg.tool_calls = new_calls
            # vLLM's finish path reads these to append arguments it thinks were not streamed
            self.prev_tool_call_arr = [{"name": n, "arguments": a} for n, a in calls]
            self.streamed_args_for_tool = [a for _, a in calls]
        return msg
