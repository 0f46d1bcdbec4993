"""JSON mode through the server (``response_format={"type": "json_object"}``), with the official ``openai``
client over the app in-process: a tiny random Llama with a byte-level BPE tokenizer answers one JSON object
(or a prefix of one, cut at max_tokens), streamed or not, or one that a JSON schema accepts
(``json_schema``), and what cannot be honoured is a 400 naming the field."""

import json

import pytest
import torch

from engine.conftest import make_tiny_model, save_byte_bpe_tokenizer
from tritium.engine import AsyncLLMEngine, LLMEngine
from tritium.engine.json_mode import START, advance_bytes
from tritium.server import build_app

pytest.importorskip("fastapi", reason="needs the serve extra: pip install 'tritium[serve]'")
openai = pytest.importorskip("openai")
TestClient = pytest.importorskip("fastapi.testclient").TestClient
pytestmark = pytest.mark.timeout(120)
JSON = {"type": "json_object"}
_MODEL: list[str] = []  # the model's directory, once the fixture made it
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("json-model"))
    make_tiny_model(path, "llama", vocab_size=448)
    save_byte_bpe_tokenizer(path)
    _MODEL[:] = [path]
    engine = AsyncLLMEngine(LLMEngine(path, dtype=torch.float32, max_model_len=256))
    with TestClient(build_app(engine, model_name="tiny")) as http:
        yield openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http, max_retries=0)


def _json_or_cut(text: str, finish_reason: str) -> bool:
    if finish_reason == "stop":
        return isinstance(json.loads(text), dict)
    return finish_reason == "length" and advance_bytes(START, text.encode()) is not None


def ask(client, **kw):
    return client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "a b"}], **kw)


def test_answers_are_json_objects(client):
    """Greedy and sampled (n=3), streamed and not: each choice is a JSON object (finish reason stop) or a prefix
    of one cut at max_tokens; the stream's deltas join to the non-streamed answer."""
    r = ask(client, response_format=JSON, temperature=0, max_tokens=60)
    text, reason = r.choices[0].message.content, r.choices[0].finish_reason
    assert _json_or_cut(text, reason), (text, reason)
    chunks = ask(client, response_format=JSON, temperature=0, max_tokens=60, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    r = ask(client, response_format=JSON, temperature=1.0, seed=3, n=3, max_tokens=80)
    assert all(_json_or_cut(c.message.content, c.finish_reason) for c in r.choices), r.choices
    free = ask(client, temperature=0, max_tokens=60).choices[0].message.content
    assert advance_bytes(START, free.encode()) is None  # unconstrained, the random model writes no JSON


def test_answers_follow_a_json_schema(client):
    """``response_format`` json_schema (OpenAI's structured outputs): every finished answer has the schema's
    properties in order with their types."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"},
                                               "sunny": {"type": "boolean"}},
              "required": ["city", "n", "sunny"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "weather", "schema": schema, "strict": True}}
    r = ask(client, response_format=fmt, temperature=1.0, seed=5, n=4, max_tokens=120,
            logit_bias={str(i): 5 for i in _closing_tokens()})
    finished = [c.message.content for c in r.choices if c.finish_reason == "stop"]
    assert finished, [c.message.content for c in r.choices]
    for text in finished:
        value = json.loads(text)
        assert list(value) == ["city", "n", "sunny"] and isinstance(value["city"], str), value
        assert type(value["n"]) is int and type(value["sunny"]) is bool, value


def _closing_tokens(*more: bytes) -> list[int]:
    """The test tokenizer's ids of '"', ',' and '}' and ``more`` (favoured so that random answers end within
    the budget)."""
    from tritium.engine.tokenizer import Tokenizer
    tok = Tokenizer.from_hf_dir(_MODEL[0])
    return [i for i in range(tok.vocab_size) if tok.token_bytes(i) in (b'"', b",", b"}", *more)]


def test_what_cannot_be_honoured_is_a_400(client):
    for kw, param in ((dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}),
                       "response_format"),  # the root must be an object
                      (dict(response_format={"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}),
                       "response_format"),  # no name
                      (dict(response_format={"type": "json_schema", "json_schema": {
                          "name": "x", "schema": {"type": "object", "properties": {"d": {"type": "string",
                                                                                        "format": "ipv6"}}}}}),
                       "response_format"),  # a format JSON mode cannot enforce
                      (dict(response_format={"type": "json_object", "strict": True}), "response_format"),
                      (dict(response_format="json"), "response_format"),
                      (dict(response_format=JSON, tools=[WEATHER]), "response_format")):
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, **kw)
        assert e.value.body["param"] == param, kw
    r = ask(client, response_format={"type": "text"}, temperature=0, max_tokens=4)  # still serving; text is text
    assert r.choices[0].finish_reason in ("stop", "length")


# forced tool calls: tool_choice "required" or a named function holds the answer to calls (JSON mode), whatever
# the model writes on its own (this random model writes no call)
CITY = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"]}}}
NOW = {"type": "function", "function": {"name": "now"}}  # no parameters: {} only


def _check_call(call) -> None:
    args = json.loads(call.function.arguments)
    assert call.type == "function" and call.id.startswith("call_"), call
    if call.function.name == "get_weather":
        assert list(args) == ["city", "days"] and isinstance(args["city"], str) and type(args["days"]) is int, args
    else:
        assert call.function.name == "now" and args == {}, call


def test_a_named_function_is_called(client):
    """tool_choice names a function: every choice is one call of it with arguments its parameters accept
    (finish reason stop, as OpenAI's), content null; cut at max_tokens: the call as far as it got."""
    r = ask(client, tools=[CITY, NOW], tool_choice={"type": "function", "function": {"name": "get_weather"}},
            temperature=1.0, seed=7, n=4, max_tokens=60, logit_bias={str(i): 5 for i in _closing_tokens()})
    finished = [c for c in r.choices if c.finish_reason == "stop"]
    assert finished, [c.message for c in r.choices]
    for c in r.choices:
        assert c.message.content is None and len(c.message.tool_calls) == 1, c
        assert c.message.tool_calls[0].function.name == "get_weather"
        if c.finish_reason == "stop":
            _check_call(c.message.tool_calls[0])
    r = ask(client, tools=[CITY, NOW], tool_choice={"type": "function", "function": {"name": "now"}},
            temperature=0, max_tokens=20)
    # its arguments as written (whitespace in them kept): an empty object
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "stop" and json.loads(call.function.arguments) == {}
    # streamed: the call as its arguments begin, then the rest of them as they are written (OpenAI's deltas)
    named = {"type": "function", "function": {"name": "get_weather"}}
    bias = {str(i): 5 for i in _closing_tokens()}
    whole = ask(client, tools=[CITY], tool_choice=named, temperature=0, max_tokens=60, logit_bias=bias).choices[0]
    chunks = list(ask(client, tools=[CITY], tool_choice=named, temperature=0, max_tokens=60, logit_bias=bias,
                      stream=True))
    deltas = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert len(deltas) > 2 and deltas[0].id.startswith("call_") and deltas[0].function.name == "get_weather"
    assert all(t.index == 0 and t.id is None and t.function.name is None for t in deltas[1:])
    streamed = "".join(t.function.arguments for t in deltas)
    assert chunks[-1].choices[0].finish_reason == whole.finish_reason
    # the arguments as the model wrote them, streamed or not (finished or cut short)
    assert streamed == whole.message.tool_calls[0].function.arguments
    assert all(c.choices[0].delta.content is None for c in chunks if c.choices)  # content null, as not streamed


def test_required_calls_streamed_and_not(client):
    """tool_choice "required": one or more calls of the tools (finish reason tool_calls), each with arguments
    its own parameters accept; parallel_tool_calls false: exactly one; streamed, the same calls in
    ``tool_calls`` deltas: a call as its arguments begin, then the rest of them."""
    bias = {str(i): 5 for i in _closing_tokens(b"]")}
    r = ask(client, tools=[CITY, NOW], tool_choice="required", temperature=1.0, seed=11, n=4, max_tokens=100,
            logit_bias=bias)
    finished = [c for c in r.choices if c.finish_reason == "tool_calls"]
    assert finished, [(c.finish_reason, c.message) for c in r.choices]
    for c in finished:
        assert c.message.content is None and c.message.tool_calls, c
        for call in c.message.tool_calls:
            _check_call(call)
    one = ask(client, tools=[CITY, NOW], tool_choice="required", parallel_tool_calls=False, temperature=0,
              max_tokens=100, logit_bias=bias).choices[0]
    assert one.finish_reason == "tool_calls" and len(one.message.tool_calls) == 1, one
    _check_call(one.message.tool_calls[0])
    chunks = list(ask(client, tools=[CITY, NOW], tool_choice="required", parallel_tool_calls=False, temperature=0,
                      max_tokens=100, logit_bias=bias, stream=True))
    streamed = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    # the call with its name and the arguments' first character, then the rest of its arguments as written
    assert streamed[0].index == 0 and streamed[0].function.name == one.message.tool_calls[0].function.name
    assert all(t.index == 0 and t.function.name is None for t in streamed[1:])
    arguments = "".join(t.function.arguments for t in streamed)
    assert arguments == one.message.tool_calls[0].function.arguments  # as written, streamed or not
    assert all(c.choices[0].delta.content is None for c in chunks if c.choices) and one.message.content is None
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_forced_calls_that_cannot_be_honoured_are_a_400(client):
    strict = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}}}}
    for kw, param in ((dict(tool_choice="required"), "tool_choice"),  # no tools
                      (dict(tools=[CITY], tool_choice={"type": "function", "function": {"name": "nope"}}),
                       "tool_choice"),
                      (dict(tools=[CITY], tool_choice={"type": "function", "name": "get_weather"}), "tool_choice"),
                      (dict(tools=[strict], tool_choice="required"), "tools"),  # multipleOf: not enforced
                      (dict(tools=[CITY], tool_choice="required", response_format=JSON), "response_format")):
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, **kw)
        assert e.value.body["param"] == param, kw
    assert "multipleOf is not supported" in ask_error(client, tools=[strict], tool_choice="required")
    r = ask(client, tools=[CITY], tool_choice="none", temperature=0, max_tokens=4)  # still serving, no call
    assert r.choices[0].message.tool_calls is None


def ask_error(client, **kw) -> str:
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, **kw)
    return e.value.body["message"]


@pytest.fixture(scope="module")
def thinking(tmp_path_factory):
    """The tiny model with ``<think>`` (id 420) and ``</think>`` (421) tokens, served with the reasoning
    parser."""
    path = str(tmp_path_factory.mktemp("think-model"))
    make_tiny_model(path, "llama", vocab_size=448)
    save_byte_bpe_tokenizer(path, added=("<think>", "</think>"))
    engine = AsyncLLMEngine(LLMEngine(path, dtype=torch.float32, max_model_len=256))
    with TestClient(build_app(engine, model_name="tiny", reasoning_parser="think")) as http:
        yield openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http, max_retries=0)


@pytest.mark.parametrize("prompt", ["a", "a <think>"])  # the answer opens the block, or the prompt did
@pytest.mark.parametrize("stream", [False, True])
def test_json_after_the_reasoning(thinking, prompt, stream):
    """With the reasoning parser, JSON mode (here a forced call) holds the answer only after its reasoning
    block: the answer may open one (<think> is the one token allowed besides the JSON's first), it is free
    until </think>, then JSON; the block comes back as reasoning_content, the call as the call. (The logits
    favour <think>, then </think> more, so the block is empty.)"""
    kw = dict(model="tiny", messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=30,
              tools=[NOW], tool_choice={"type": "function", "function": {"name": "now"}},
              logit_bias={"420": 30, "421": 40})
    if not stream:
        message = thinking.chat.completions.create(**kw).choices[0].message
        reasoning, calls = message.reasoning_content, message.tool_calls
    else:
        chunks = list(thinking.chat.completions.create(stream=True, **kw))
        reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks)
        calls = [t for c in chunks for t in c.choices[0].delta.tool_calls or []]
        assert chunks[-1].choices[0].finish_reason == "stop"
    assert reasoning == "" and calls and calls[0].function.name == "now", (reasoning, calls)
    assert json.loads("".join(t.function.arguments for t in calls)) == {}
    free = thinking.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "a <think>"}],
                                            temperature=0, max_tokens=8)
    assert free.choices[0].message.content is None  # the prompt does open a block: no JSON asked, all reasoning


def test_guided_choice_and_regex(client):
    """vLLM's guided_choice / guided_regex and structured_outputs, on chat and completions, streamed or not:
    each answer is one of the choices or a full match; what cannot be honoured is a 400 naming the field."""
    import re
    choices = ["red", "green", "blue", "light blue"]
    r = ask(client, temperature=1.0, seed=5, n=4, max_tokens=20, extra_body={"guided_choice": choices})
    assert all(c.message.content in choices and c.finish_reason == "stop" for c in r.choices), r.choices
    pattern = r"[0-9]{2}:[0-9]{2}( (am|pm))?"
    r = client.completions.create(model="tiny", prompt="a b", temperature=1.0, seed=2, n=3, max_tokens=20,
                                  extra_body={"structured_outputs": {"regex": pattern}})
    assert all(re.fullmatch(pattern, c.text) for c in r.choices), [c.text for c in r.choices]
    chunks = ask(client, temperature=0, max_tokens=20, stream=True, extra_body={"guided_regex": pattern})
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert re.fullmatch(pattern, streamed) and streamed == ask(
        client, temperature=0, max_tokens=20, extra_body={"guided_regex": pattern}).choices[0].message.content
    for body, param in (({"guided_choice": []}, "guided_choice"), ({"guided_regex": "(a"}, "guided_regex"),
                        ({"guided_choice": ["a"], "guided_regex": "a"}, "guided_regex"),
                        ({"structured_outputs": {"json": {}}}, "structured_outputs"),
                        ({"structured_outputs": {"choice": "a"}}, "structured_outputs"),
                        ({"guided_choice": ["a"], "response_format": JSON}, "guided_choice"),
                        ({"guided_choice": ["a"], "tools": [WEATHER]}, "guided_choice")):
        extra = {k: v for k, v in body.items() if k not in ("response_format", "tools")}
        kw = {k: v for k, v in body.items() if k in ("response_format", "tools")}
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, max_tokens=5, extra_body=extra, **kw)
        assert e.value.body["param"] == param, (body, e.value.body)
    assert ask(client, max_tokens=3).choices[0].finish_reason == "length"  # still serving
