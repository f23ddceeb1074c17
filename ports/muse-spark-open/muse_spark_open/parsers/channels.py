"""The Muse family's channel format, as one grammar both ``muse`` parsers share.

An assistant turn is a run of messages, each a header and a body:

    <|start|>assistant to=RECIPIENT<|message|>BODY<|eom|>     a message that the turn continues after
    <|start|>assistant to=user<|message|>BODY<|eot|>          the final answer ends the turn

* The first message of a turn has no ``<|start|>assistant``: the prompt already ends with it, so
  the model's first text is `` to=self<|message|>``. A bare ``<|message|>`` (no recipient) is
  untagged content.
* Recipients: ``self`` is reasoning, ``user`` is the answer, anything else is a tool channel whose
  body holds ATEM markup (``<atem:function_calls><atem:invoke name="...">`` with
  ``<atem:parameter name="...">value</atem:parameter>``).

A body ends at ``<|eom|>`` or ``<|eot|>``, or, when the model leaves a channel without its end
marker, at the next header. This is the point where the in-tree ``muse_glimmer`` parsers of vLLM
0.30.0 disagree with each other: its reasoning parser lets an unterminated ``to=self`` body run to
the next ``<|eom|>``, which swallows a following tool call (non-streamed: the call is lost; streamed:
``<|start|>assistant`` leaks into the reasoning). Here the segmentation is one function, used by
both parsers, streamed and not.

While a body is still growing (streaming), its tail may be the start of a marker (``<|e``) or of a
header without ``<|start|>`` (`` to=get_wea``); :func:`safe_prefix` holds that tail back, so what a
stream emits only ever grows.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex as re

START = "<|start|>"
MESSAGE = "<|message|>"
EOM = "<|eom|>"
EOT = "<|eot|>"
MARKERS = (EOM, EOT, START, MESSAGE)
FUNCTION_CALLS = "<atem:function_calls>"
INVOKE = "<atem:invoke"
REASONING = "self"
USER = "user"
ASSISTANT_OPEN = "<|start|>assistant"

HEADER_RE = re.compile(r"(?:<\|start\|>[^\S\n]*assistant)?[^\S\n]*(?:to=(?P<rcpt>[^\s<]+))?<\|message\|>")
END_RE = re.compile(r"<\|eom\|>|<\|eot\|>")
# a tail that may still become a header without <|start|>: " ", " t", " to", " to=", " to=get_wea"
_TAIL_HEADER_RE = re.compile(r"[^\S\n]+(?:t|to|to=[^\s<]*)?$")


@dataclass(frozen=True)
class Message:
    recipient: str | None  # None: a bare <|message|>
    body: str
    start: int  # where the header starts in the text
    closed: bool  # ended by <|eom|> / <|eot|>
    growing: bool  # runs to the end of the text: more may come

    @property
    def is_reasoning(self) -> bool:
        return self.recipient == REASONING

    @property
    def is_content(self) -> bool:
        return self.recipient is None or self.recipient == USER

    @property
    def is_tool(self) -> bool:
        return not self.is_reasoning and not self.is_content

    @property
    def has_atem(self) -> bool:
        return FUNCTION_CALLS in self.body or INVOKE in self.body


def segment(text: str) -> list[Message]:
    """Split text into messages. Text before the first header is not a message (see preamble)."""
    out: list[Message] = []
    pos = 0
    n = len(text)
    while pos < n:
        header = HEADER_RE.search(text, pos)
        if header is None:
            break
        body_start = header.end()
        end = END_RE.search(text, body_start)
        nxt = HEADER_RE.search(text, body_start)
        stop, closed, resume = n, False, n
        if end is not None:
            stop, closed, resume = end.start(), True, end.end()
        if nxt is not None and nxt.start() < stop:
            stop, closed, resume = nxt.start(), False, nxt.start()
        body = text[body_start:stop]
        growing = stop == n
        cut = body.find(START)
        if cut != -1:
            # a header is arriving whose <|message|> has not: the body ends at its <|start|>
            body, closed, growing = body[:cut], False, False
        out.append(Message(header.group("rcpt"), body, header.start(), closed, growing))
        pos = resume
    return out


def preamble(text: str) -> str:
    """Text before the first header ('' when the text has a header at offset 0)."""
    header = HEADER_RE.search(text)
    return text if header is None else text[: header.start()]


def is_framed(text: str) -> bool:
    return HEADER_RE.search(text) is not None


def safe_prefix(body: str) -> str:
    """The part of a growing body that can be emitted now (never shrinks as the body grows)."""
    while True:
        trimmed = body
        m = _TAIL_HEADER_RE.search(trimmed)
        if m is not None:
            trimmed = trimmed[: m.start()]
        for k in range(min(len(trimmed), max(map(len, MARKERS)) - 1), 0, -1):
            tail = trimmed[-k:]
            if any(marker.startswith(tail) for marker in MARKERS):
                trimmed = trimmed[:-k]
                break
        if trimmed == body:
            return body
        body = trimmed


@dataclass(frozen=True)
class Channels:
    reasoning: str
    content: str
    tool_messages: tuple[Message, ...]

    @property
    def tool_call_offset(self) -> int | None:
        """Where the first tool message that carries ATEM markup starts, or None."""
        return _first_call(self.tool_messages)


def classify(text: str, streaming: bool) -> Channels:
    """Reasoning (``self`` bodies joined by a newline), content (``user`` and bare bodies) and the
    tool messages. ``streaming``: hold back the tail of a growing body. Unframed text is content."""
    messages = segment(text)
    if not messages:
        return Channels("", text if not streaming else safe_prefix(text), ())
    reasoning: list[str] = []
    content: list[str] = []
    pre = preamble(text)
    if pre.strip():
        content.append(pre)
    for m in messages:
        body = safe_prefix(m.body) if (streaming and m.growing) else m.body
        if m.is_reasoning:
            reasoning.append(body)
        elif m.is_content and FUNCTION_CALLS not in body and INVOKE not in body:
            content.append(body)
    tools = tuple(m for m in messages if m.is_tool)
    return Channels("\n".join(reasoning), "".join(content), tools)


def current_turn(text: str) -> str:
    """The text after the last ``<|start|>assistant`` (for deciding the phase from a prompt)."""
    i = text.rfind(ASSISTANT_OPEN)
    return text if i == -1 else text[i + len(ASSISTANT_OPEN):]


def _first_call(messages: tuple[Message, ...] | list[Message]) -> int | None:
    return next((m.start for m in messages if m.is_tool and m.has_atem), None)


def first_tool_call_offset(text: str) -> int | None:
    """Where the first tool message that carries ATEM markup starts, or None (without classifying)."""
    return _first_call(segment(text))
