"""Parsers `muse`: reasoning and tool calls in the Muse channel format, streamed and not, through
vLLM's own parser composition (ParserManager -> DelegatingParser.parse / parse_delta)."""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import json

import pytest

pytest.importorskip("vllm")

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.parser.parser_manager import ParserManager  # noqa: E402

from vllm.reasoning import ReasoningParserManager  # noqa: E402
from vllm.tool_parsers import ToolParserManager  # noqa: E402

from muse_spark_open import upstream  # noqa: E402
from muse_spark_open.parsers import channels  # noqa: E402
from muse_spark_open.plugin import REASONING_PARSER, TOOL_PARSER, register  # noqa: E402

register()
# `muse` is what vLLM serves: the port's parsers, or on vLLM 0.33.0 upstream's (the plugin steps aside). The
# port's own are also tested under a test-only name there, since they still serve 0.30.0 to 0.32.0.
PORT_NAME = "muse-port-under-test"
ReasoningParserManager.register_lazy_module(PORT_NAME, *REASONING_PARSER)
ToolParserManager.register_lazy_module(PORT_NAME, *TOOL_PARSER)
UPSTREAM_MUSE = upstream.current().tool_parser == upstream.UPSTREAM
IMPLS = ["muse", PORT_NAME] if UPSTREAM_MUSE else ["muse"]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "opts": {"type": "object"}}}}},
]
PROMPT = ["<|start|>user<|message|>hi<|eot|>", "<|start|>assistant"]


class Tok:
    """A tokenizer whose ids index the text pieces it has seen (any chunking round-trips)."""

    def __init__(self):
        self.pieces, self.ix = [], {}

    def encode(self, pieces):
        out = []
        for p in pieces:
            if p not in self.ix:
                self.ix[p] = len(self.pieces)
                self.pieces.append(p)
            out.append(self.ix[p])
        return out

    def decode(self, ids, **kw):
        return "".join(self.pieces[i] for i in ids)

    def get_vocab(self):
        return dict(self.ix)


def request(tool_choice="auto"):
    return ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS, tool_choice=tool_choice)


def parser(name="muse"):
    cls = ParserManager.get_parser(tool_parser_name=name, reasoning_parser_name=name, enable_auto_tools=True)
    return cls(Tok(), request().tools)


def stream(text, chunk, name="muse"):
    p = parser(name)
    req = p.adjust_request(request())
    tok = p.model_tokenizer
    prompt = tok.encode(PROMPT)
    pieces = [text[i:i + chunk] for i in range(0, len(text), chunk)]
    ids = tok.encode(pieces)
    deltas = [p.parse_delta(piece, [i], req, prompt_token_ids=prompt, finished=(k == len(pieces) - 1))
              for k, (piece, i) in enumerate(zip(pieces, ids))]
    deltas = [d for d in deltas if d]
    calls = [(tc.function.name, json.loads(tc.function.arguments)) for d in deltas for tc in (d.tool_calls or []) if tc.function]
    return "".join(d.reasoning or "" for d in deltas) or None, "".join(d.content or "" for d in deltas) or None, calls


def whole(text, name="muse"):
    p = parser(name)
    req = p.adjust_request(request())
    r, c, calls = p.parse(text, req, enable_auto_tools=True)
    return r, c, [(t.name, json.loads(t.arguments)) for t in calls or []]


CALL = ('<|start|>assistant to={fn}<|message|><atem:function_calls>\n<atem:invoke name="{fn}">\n'
        '<atem:parameter name="{k}">{v}</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eom|>')

CASES = {
    "one call": (' to=self<|message|>Weather needs a tool.<|eom|>' + CALL.format(fn="get_weather", k="city", v="Paris"),
                 ("Weather needs a tool.", None, [("get_weather", {"city": "Paris"})])),
    "two calls, one block": (
        ' to=self<|message|>two<|eom|><|start|>assistant to=get_weather<|message|><atem:function_calls>'
        '<atem:invoke name="get_weather"><atem:parameter name="city">Paris</atem:parameter></atem:invoke>'
        '<atem:invoke name="get_time"><atem:parameter name="tz">CET</atem:parameter></atem:invoke>'
        '</atem:function_calls><|eom|>',
        ("two", None, [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})])),
    "two calls, two messages, answer first": (
        ' to=self<|message|>plan<|eom|><|start|>assistant to=user<|message|>Let me check.<|eom|>'
        + CALL.format(fn="get_weather", k="city", v="Oslo") + CALL.format(fn="get_time", k="tz", v="UTC"),
        ("plan", "Let me check.", [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "UTC"})])),
    "invalid JSON arguments": (
        ' to=self<|message|>x<|eom|><|start|>assistant to=add<|message|><atem:function_calls><atem:invoke name="add">'
        '<atem:parameter name="a">3</atem:parameter><atem:parameter name="opts">{"x": [1, 2</atem:parameter>'
        '</atem:invoke></atem:function_calls><|eom|>',
        ("x", None, [("add", {"a": 3, "opts": '{"x": [1, 2'})])),
    "reasoning without an end marker, then a tool call": (
        ' to=self<|message|>no end marker' + CALL.format(fn="get_weather", k="city", v="Rome"),
        ("no end marker", None, [("get_weather", {"city": "Rome"})])),
    "reasoning without an end marker, then the answer": (
        ' to=self<|message|>unterminated<|start|>assistant to=user<|message|>Done.<|eot|>',
        ("unterminated", "Done.", [])),
    "reasoning cut off (no end marker, stream ends)": (
        ' to=self<|message|>still thinking when max_tokens hit', ("still thinking when max_tokens hit", None, [])),
    "answer only": (' to=self<|message|>short<|eom|><|start|>assistant to=user<|message|>Hello <there>!<|eot|>',
                    ("short", "Hello <there>!", [])),
    "invoke echoed in reasoning is not a call": (
        ' to=self<|message|>maybe <atem:invoke name="get_time"><atem:parameter name="tz">UTC</atem:parameter>'
        '</atem:invoke> no<|eom|><|start|>assistant to=user<|message|>42<|eot|>',
        ('maybe <atem:invoke name="get_time"><atem:parameter name="tz">UTC</atem:parameter></atem:invoke> no', "42", [])),
    "unframed text": ("Plain text, no channels.", (None, "Plain text, no channels.", [])),
    "doubled bare name": (' to=self<|message|>r<|eom|>' + CALL.format(fn="get_weather.get_weather", k="city", v='"Lima"'),
                          ("r", None, [("get_weather", {"city": "Lima"})])),
}


# Where upstream's `muse` (vLLM 0.33.0) reads a case otherwise than the port's (README: "Parsers"): a string
# parameter written as a JSON literal keeps its quotes, and a streamed turn without channel framing yields
# no content (non-streamed it is content, as with the port's).
UPSTREAM_WHOLE = {"doubled bare name": ("r", None, [("get_weather", {"city": '"Lima"'})])}
UPSTREAM_STREAMED = {**UPSTREAM_WHOLE, "unframed text": (None, None, [])}


def expected(case: str, impl: str, streamed: bool) -> tuple:
    if impl == "muse" and UPSTREAM_MUSE:
        return (UPSTREAM_STREAMED if streamed else UPSTREAM_WHOLE).get(case, CASES[case][1])
    return CASES[case][1]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_whole_output(case, impl):
    text, _ = CASES[case]
    assert whole(text, impl) == expected(case, impl, streamed=False)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 19, 10_000])
@pytest.mark.parametrize("case", sorted(CASES))
def test_streamed_equals_whole_for_every_chunking(case, chunk, impl):
    """Markers and tool calls split across chunks anywhere: the stream carries the same result."""
    text, _ = CASES[case]
    r, c, calls = stream(text, chunk, impl)
    want_r, want_c, want_calls = expected(case, impl, streamed=True)
    assert (r or None, c, calls) == (want_r or None, want_c, want_calls)


def test_muse_is_vllms_own_where_vllm_ships_it():
    """The name the recipe serves with resolves to upstream's parsers exactly where vLLM registers them."""
    modules = (ReasoningParserManager.get_reasoning_parser("muse").__module__,
               ToolParserManager.get_tool_parser("muse").__module__)
    shipped = "muse_reasoning_parser" in ReasoningParserManager.lazy_parsers.get("musespark1x", ("",))[0]
    assert modules == (("vllm.reasoning.muse_reasoning_parser", "vllm.tool_parsers.muse_tool_parser") if shipped
                       else (REASONING_PARSER[0], TOOL_PARSER[0]))


@pytest.mark.parametrize("impl", IMPLS)
def test_stream_emits_each_call_once_when_complete(impl):
    text = CASES["two calls, two messages, answer first"][0]
    p = parser(impl)
    req = p.adjust_request(request())
    tok = p.model_tokenizer
    prompt = tok.encode(PROMPT)
    seen = []
    for k in range(0, len(text), 5):
        d = p.parse_delta(text[k:k + 5], tok.encode([text[k:k + 5]]), req, prompt_token_ids=prompt, finished=k + 5 >= len(text))
        for tc in (d.tool_calls if d and d.tool_calls else []):
            seen.append((tc.index, tc.function.name, tc.id is not None))
            assert json.loads(tc.function.arguments)  # complete JSON in the delta it appears in
    assert seen == [(0, "get_weather", True), (1, "get_time", True)]


@pytest.mark.parametrize("impl", IMPLS)
def test_requests_keep_special_tokens_and_required_is_not_json_constrained(impl):
    p = parser(impl)
    for choice in ("auto", "required"):
        req = p.adjust_request(request(choice))
        assert req.skip_special_tokens is False
        assert req.structured_outputs is None  # ATEM is decoded natively, never a JSON schema


def test_phase_from_the_prompt_ignores_earlier_turns():
    from muse_spark_open.parsers.reasoning import MuseReasoningParser

    tok = Tok()
    rp = MuseReasoningParser(tok)
    earlier = ("<|start|>assistant to=get_weather<|message|><atem:function_calls><atem:invoke name=\"get_weather\">"
               "</atem:invoke></atem:function_calls><|eom|><|start|>get_weather to=assistant<|message|>sunny<|eom|>")
    assert not rp.is_reasoning_end(tok.encode([earlier, "<|start|>assistant"]))
    assert rp.is_reasoning_end(tok.encode(["<|start|>assistant", ' to=get_weather<|message|><atem:function_calls>']))


@pytest.mark.parametrize("impl", IMPLS)
def test_in_tree_muse_glimmer_loses_the_call_that_muse_keeps(impl):
    """Why `muse` is its own grammar: v0.30.0's muse_glimmer reasoning parser lets an unterminated
    reasoning body run to the tool message's <|eom|>, and the call is lost (non-streamed)."""
    text = CASES["reasoning without an end marker, then a tool call"][0]
    r, _, calls = whole(text, name="muse_glimmer")
    assert calls == [] and "atem:invoke" in r
    assert whole(text, impl)[2] == [("get_weather", {"city": "Rome"})]


@pytest.mark.parametrize("case", ["one call", "two calls, one block", "answer only", "reasoning cut off (no end marker, stream ends)",
                                  "invoke echoed in reasoning is not a call"])
@pytest.mark.parametrize("impl", IMPLS)
def test_agrees_with_muse_glimmer_on_well_formed_turns(case, impl):
    text = CASES[case][0]
    assert whole(text, impl) == whole(text, "muse_glimmer")
    assert stream(text, 4, impl) == stream(text, 4, "muse_glimmer")


def test_safe_prefix_never_emits_a_partial_marker():
    for tail in ("<", "<|", "<|eo", "<|start|", " ", " t", " to", " to=get_w"):
        assert channels.safe_prefix("abc" + tail) == "abc"
    assert channels.safe_prefix("a < b") == "a < b"
