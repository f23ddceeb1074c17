"""Reasoning parser ``muse``: ``to=self`` channels are reasoning, ``to=user`` channels content.

Usage: ``--reasoning-parser muse`` (registered by the plugin). With ``--tool-call-parser muse`` the
phase moves to the tool parser once a tool channel carries ATEM markup; this parser then hands
over the text from that channel's header on (framing included), which the tool parser needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import DeltaMessage
from vllm.reasoning.abs_reasoning_parsers import ReasoningParser

from . import channels


class MuseReasoningParser(ReasoningParser):
    def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        # what this stream has emitted: the classification of the text so far is diffed against it
        self._emitted_reasoning = ""
        self._emitted_content = ""
        self._handed_off = False

    def adjust_request(self, request: Any) -> Any:
        # The framing markers are special tokens: with vLLM's default skip_special_tokens=True they
        # are gone before any parser runs, and reasoning, answer and tool calls run together.
        request.skip_special_tokens = False
        return request

    # -- phase -------------------------------------------------------------------------------

    def _decode(self, ids: Sequence[int]) -> str | None:
        try:
            return self.model_tokenizer.decode(list(ids), skip_special_tokens=False)
        except TypeError:
            return self.model_tokenizer.decode(list(ids))
        except Exception:
            return None

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Called on the prompt (and by structured outputs): does the current assistant turn
        already have a tool call? Earlier turns of the prompt do not count."""
        text = self._decode(input_ids)
        if text is None:
            return False
        return channels.first_tool_call_offset(channels.current_turn(text)) is not None

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
        """Called on the generated ids: has any tool channel of this generation got ATEM markup?"""
        text = self._decode(input_ids)
        return text is not None and channels.first_tool_call_offset(text) is not None

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        # markers span several tokens in some tokenizers: the split is done on text
        return []

    # -- whole output ------------------------------------------------------------------------

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        if not channels.is_framed(model_output):
            return None, model_output or None
        found = channels.classify(model_output, streaming=False)
        reasoning = found.reasoning or None
        offset = found.tool_call_offset
        if offset is not None:
            # The tool parser reads the calls and the answer from this text, framing included;
            # an answer given before the tool channel goes first, unframed (as when streamed).
            before = channels.classify(model_output[:offset], streaming=False).content
            return reasoning, before + model_output[offset:]
        return reasoning, found.content or None

    # -- streaming ---------------------------------------------------------------------------

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> DeltaMessage | None:
        found = channels.classify(current_text, streaming=True)
        reasoning_delta = self._advance("_emitted_reasoning", found.reasoning)
        content_delta = self._advance("_emitted_content", found.content)
        handoff = ""
        if not self._handed_off:
            offset = found.tool_call_offset  # from the same segmentation, not a second one per delta
            if offset is not None:
                handoff, self._handed_off = current_text[offset:], True
        if handoff:
            # the tool parser takes over from here; content emitted before the tool channel went out above
            return DeltaMessage(reasoning=reasoning_delta or None, content=(content_delta + handoff))
        if not reasoning_delta and not content_delta:
            return None
        return DeltaMessage(reasoning=reasoning_delta or None, content=content_delta or None)

    def _advance(self, attr: str, now: str) -> str:
        emitted: str = getattr(self, attr)
        if len(now) > len(emitted) and now.startswith(emitted):
            setattr(self, attr, now)
            return now[len(emitted):]
        return ""

    def get_streaming_fallback_content(self, previous_text: str, request: Any) -> str | None:
        """At the end of a stream that never reached a tool call: the content not yet emitted,
        including a tail that was held back because it might have been a marker."""
        content = channels.classify(previous_text, streaming=False).content
        if content.startswith(self._emitted_content) and len(content) > len(self._emitted_content):
            rest = content[len(self._emitted_content):]
            self._emitted_content = content
            return rest
        return None
