"""Tool calling without a model: the hermes and llama3_json parsers on whole answers and on the same answers
streamed in every chunking (the same content and calls, nothing lost, nothing shown early), the parser a
chat template implies, the tools and tool turns a request may give (errors name the field), and what the
template is given for them."""

import json
import random

import pytest

from tritium import LLM
from tritium.engine.chat import encode_chat, normalize_messages
from tritium.engine.tools import (ArgumentsDelta, ForcedCallStream, ToolCall, ToolCallStream, check_tools,
                                  detect_parser, forced_call_schema, parse_tool_calls)

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def call(name, **args):
    return (name, args)


def calls_of(calls: list[ToolCall]):
    return [(c.name, json.loads(c.arguments)) for c in calls]


HERMES = [
    ("plain answer", "plain answer", []),
    # whitespace: kept where it begins content before a call (a stream sends it before any call is known),
    # dropped around calls, whitespace alone before a call dropped
    ('\n  Let me look.\n<tool_call>{"name": "a", "arguments": {}}</tool_call>\n', "\n  Let me look.", [call("a")]),
    ('\n\n<tool_call>{"name": "a", "arguments": {}}</tool_call>', None, [call("a")]),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', None,
     [call("get_weather", city="Paris")]),
    ('Let me look.\n<tool_call>\n{"name": "a", "arguments": {"x": [1, 2]}}\n</tool_call>\n<tool_call>\n'
     '{"name": "b", "arguments": "{\\"y\\": \\"\u00e9\\"}"}\n</tool_call>', "Let me look.",
     [call("a", x=[1, 2]), call("b", y="\u00e9")]),
    # not a call: kept in the content as written, beside a call that is one
    ('<tool_call>{"name": "a", "arguments": {bad}}</tool_call> then <tool_call>{"name": "b"}</tool_call>',
     '<tool_call>{"name": "a", "arguments": {bad}}</tool_call> then', [call("b")]),
    ('<tool_call>["no name"]</tool_call>', '<tool_call>["no name"]</tool_call>', []),
    # cut off by max_tokens inside a block: a call if its text is one, else content
    ('<tool_call>{"name": "a", "arguments": {}}', None, [call("a")]),
    ('x <tool_call>{"name": "a", "argu', 'x <tool_call>{"name": "a", "argu', []),
    ("a < b and <tool_ but no call", "a < b and <tool_ but no call", []),
]

LLAMA3 = [
    ('{"name": "get_weather", "parameters": {"city": "Paris"}}', None, [call("get_weather", city="Paris")]),
    ('<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"k": 1}}', None,
     [call("a"), call("b", k=1)]),
    (' {"name": "a", "arguments": {"k": 2}} ', None, [call("a", k=2)]),
    ("The answer is 4.", "The answer is 4.", []),
    ('{"not": "a call"}', '{"not": "a call"}', []),
    ('{"name": "a", "parameters": {}} and text', '{"name": "a", "parameters": {}} and text', []),
    ("{ cut off", "{ cut off", []),
]


MISTRAL = [
    (' [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "b", "arguments": "{\\"k\\": 1}"}]', None,
     [call("get_weather", city="Paris"), call("b", k=1)]),
    ('[TOOL_CALLS][{"name": "a", "arguments": {}}]', None, [call("a")]),
    ("[1] is a citation.", "[1] is a citation.", []),
    ('[{"name": "a"}, {"no": "name"}]', '[{"name": "a"}, {"no": "name"}]', []),
    ("Plain answer.", "Plain answer.", []),
    ('[{"name": "a", "argum', '[{"name": "a", "argum', []),
    # v11+: name[ARGS]{...} after each [TOOL_CALLS] (kept in the text), content before the first
    ('Let me check.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]now[ARGS]{}', "Let me check.",
     [call("get_weather", city="Paris"), call("now")]),
    ('[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}', None, [call("get_weather", city="Paris")]),
    ('[TOOL_CALLS]a{"k": [1, "[ARGS]"]}', None, [call("a", k=[1, "[ARGS]"])]),
    ('Text [TOOL_CALLS]get_weather[ARGS]{"city": "Pa', 'Text [TOOL_CALLS]get_weather[ARGS]{"city": "Pa', []),
    ("Cites [1] and [TOOL_ but no call", "Cites [1] and [TOOL_ but no call", []),
]
PYTHONIC = [
    ('[get_weather(city="Paris", days=3), get_time()]', None, [call("get_weather", city="Paris", days=3),
                                                              call("get_time")]),
    (' [fs.read(path=\'a "b"\', flags=[1, -2.5, None, True], opts={"k": (1, 2)})] ', None,
     [call("fs.read", path='a "b"', flags=[1, -2.5, None, True], opts={"k": [1, 2]})]),
    ("[1] is a citation.", "[1] is a citation.", []),
    ("[f(1)]", "[f(1)]", []),  # positional: not a call of keyword arguments
    ("[f(x=g())]", "[f(x=g())]", []),  # not a literal: never run
    ("[f(x={1, 2})]", "[f(x={1, 2})]", []),  # a set: no JSON value
    ("[f(**kw)]", "[f(**kw)]", []),
    ("Call [f()] now", "Call [f()] now", []),
    ('[get_weather(city="Pa', '[get_weather(city="Pa', []),  # cut off
]
CASES = [("hermes", *c) for c in HERMES] + [("llama3_json", *c) for c in LLAMA3] + [("mistral", *c) for c in MISTRAL] \
    + [("pythonic", *c) for c in PYTHONIC]


@pytest.mark.parametrize("parser, text, content, calls", CASES)
def test_whole_answers(parser, text, content, calls):
    got_content, got_calls = parse_tool_calls(text, parser)
    assert got_content == content and calls_of(got_calls) == calls
    assert len({c.id for c in got_calls}) == len(got_calls)
    for c in got_calls:  # Mistral's templates require ids of 9 letters and digits of the calls sent back
        assert (len(c.id) == 9 and c.id.isalnum()) if parser == "mistral" else c.id.startswith("call_")


def _streamed(parser: str, text: str, cuts: list[int]):
    stream = ToolCallStream(parser)
    events = []
    for a, b in zip([0] + cuts, cuts + [len(text)]):
        events += stream.feed(text[a:b])
    events += stream.finish()
    return events, stream.calls


@pytest.mark.parametrize("parser, text, content, calls", CASES)
def test_streamed_answers_parse_the_same(parser, text, content, calls):
    """Every chunking (one character at a time, random cuts) gives the whole answer's content and calls,
    and content never includes the text of a call."""
    rng = random.Random(len(text))
    chunkings = [list(range(1, len(text)))] + [sorted(rng.sample(range(1, len(text)), min(len(text) - 1, k)))
                                                for k in (1, 3, 7) for _ in range(5)]
    for cuts in chunkings:
        events, count = _streamed(parser, text, cuts)
        got = [e for e in events if isinstance(e, ToolCall)]
        text_out = "".join(e for e in events if isinstance(e, str))
        assert calls_of(got) == calls and count == len(calls), cuts
        assert (text_out or None if calls else text_out) == content, cuts  # exactly: nothing stripped after


def test_hermes_streams_content_as_soon_as_it_cannot_be_a_call():
    stream = ToolCallStream("hermes")
    assert stream.feed("Hello") == ["Hello"]
    assert stream.feed(" wor") == [" wor"]
    assert stream.feed("ld <to") == ["ld"]  # "<to" may open a call, the space may end the content: held
    assert stream.feed("p") == [" <top"]
    assert stream.feed(" <tool_call>{\"name\": ") == []  # the space before a call: held (dropped if nothing follows)
    assert stream.feed('"f", "arguments": {}}</tool_') == []
    out = stream.feed("call> done")
    assert calls_of([out[0]]) == [call("f")] and out[1:] == ["  done"] and stream.finish() == []  # both spaces
    stream = ToolCallStream("hermes")  # content, then a call, then only whitespace: as the whole answer's content
    events = stream.feed("Sure. \n<tool_call>") + stream.feed('{"name": "f", "arguments": {}}</tool_call>\n\n')
    assert events[0] == "Sure." and calls_of(events[1:]) == [call("f")] and stream.finish() == []
    assert parse_tool_calls("Sure. \n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\n",
                            "hermes")[0] == "Sure."
    stream = ToolCallStream("hermes")  # no call: the text as written, trailing whitespace at the end
    assert stream.feed("a \n") == ["a"] and stream.finish() == [" \n"]


def _forced(stream: ForcedCallStream, text: str, pieces: int) -> list:
    """The events of ``text`` fed in ``pieces`` random pieces, then finish()."""
    cuts = sorted(random.Random(pieces).sample(range(1, len(text)), min(pieces - 1, len(text) - 1)))
    events = []
    for a, b in zip([0, *cuts], [*cuts, len(text)]):
        events += stream.feed(text[a:b])
    return events + stream.finish()


@pytest.mark.parametrize("pieces", [1, 3, 40])
def test_forced_calls(pieces):
    """A forced answer read as calls, whole or in pieces: "required" (a list of calls, each as its object
    closes, braces and quotes inside strings not counted), named (the arguments), both with the arguments
    as written, as a stream sends them; cut short (the last call as far as it got), nothing but a cut "["
    (content)."""
    text = ('[{"name": "get_weather", "arguments": {"city": "Pa\\"ris}{", "d": [1, {"x": "]"}]}} ,\n'
            ' {"name":"now","arguments":{}}]')
    stream = ForcedCallStream()
    events = _forced(stream, text, pieces)
    assert [(e.name, e.arguments) for e in events] == [
        ("get_weather", '{"city": "Pa\\"ris}{", "d": [1, {"x": "]"}]}'), ("now", "{}")]
    assert stream.calls == 2 and stream.finish_reason == "tool_calls"
    cut = _forced(ForcedCallStream(), text[:text.index('"d"') + 3], pieces)
    assert [(e.name, e.arguments) for e in cut] == [("get_weather", '{"city": "Pa\\"ris}{", "d"')]
    assert _forced(ForcedCallStream(), '[{"na', pieces) == ['[{"na']
    named = ForcedCallStream("f")
    assert [(e.name, e.arguments) for e in _forced(named, ' { "a" :\t[1, 2] }', pieces)] == [("f", '{ "a" :\t[1, 2] }')]
    assert named.finish_reason == "stop" and named.calls == 1
    assert [e.arguments for e in _forced(ForcedCallStream("f"), '{"a": [1', pieces)] == ['{"a": [1']


def test_forced_named_call_streams_its_arguments():
    stream = ForcedCallStream("f", incremental=True)
    assert stream.feed(" \n") == []  # nothing of the arguments yet
    first = stream.feed('{"a"')
    assert [(e.name, e.arguments) for e in first] == [("f", '{"a"')] and stream.calls == 1
    assert stream.feed(": [1,") == [ArgumentsDelta(0, ": [1,")]
    assert stream.feed("") == [] and stream.finish() == []
    assert ForcedCallStream("f", incremental=True).finish() == []  # cut before anything: no call


@pytest.mark.parametrize("pieces", [1, 3, 40])
def test_forced_required_calls_stream_their_arguments(pieces):
    """Streamed "required": each call goes out with its arguments' first character (its name whole), then the
    rest of its arguments as written, in deltas of its index; nothing of the list around them; a call cut
    before its arguments begin is not sent, an answer with no call is content."""
    text = ('[{"name": "get_weather", "arguments": {"city": "Pa\\"ris}{", "d": [1, {"x": "]"}]}} ,\n'
            ' {"name":"now","arguments":{ }}]')
    stream = ForcedCallStream(incremental=True)
    events = _forced(stream, text, pieces)
    calls: dict[int, list] = {}
    for e in events:
        if isinstance(e, ToolCall):
            calls[len(calls)] = [e.name, e.arguments]
        else:
            assert isinstance(e, ArgumentsDelta) and e.index in calls
            calls[e.index][1] += e.arguments
    assert [tuple(c) for c in calls.values()] == [
        ("get_weather", '{"city": "Pa\\"ris}{", "d": [1, {"x": "]"}]}'), ("now", "{ }")]
    assert stream.calls == 2 and stream.finish_reason == "tool_calls"
    cut = _forced(ForcedCallStream(incremental=True), text[:text.index('"d"') + 3], pieces)
    assert (cut[0].name, cut[0].arguments) == ("get_weather", "{")
    assert "".join(e.arguments for e in cut) == '{"city": "Pa\\"ris}{", "d"'
    early = text[:text.index('"now"') + 3]  # the second call cut inside its name: only the first goes out
    assert [e.name for e in _forced(ForcedCallStream(incremental=True), early, pieces)
            if isinstance(e, ToolCall)] == ["get_weather"]
    assert _forced(ForcedCallStream(incremental=True), '[{"na', pieces) == ['[{"na']


def test_forced_call_schema():
    tools = check_tools([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
                         {"type": "function", "function": {"name": "g"}}])
    assert forced_call_schema(tools, "f") == {"type": "object"}
    assert forced_call_schema(tools, "g") == {"type": "object", "properties": {}}  # no parameters: {}
    with pytest.raises(ValueError, match="no tool is named 'h'"):
        forced_call_schema(tools, "h")
    many = forced_call_schema(tools)
    assert many["minItems"] == 1 and "maxItems" not in many and len(many["items"]["anyOf"]) == 2
    assert forced_call_schema(tools, parallel=False)["maxItems"] == 1


def test_mistral_call_ids():
    """Mistral's call ids: 9 characters of its own (templates check them), v13's [CALL_ID] as the model wrote it."""
    _, calls = parse_tool_calls('[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{}[TOOL_CALLS]g[ARGS]{}', "mistral")
    assert calls[0].id == "a1b2c3d4e" and len(calls[1].id) == 9 and calls[1].id.isalnum()
    _, calls = parse_tool_calls('[{"name": "f", "arguments": {}}]', "mistral")
    assert len(calls[0].id) == 9


def test_detect_parser():
    assert detect_parser("{% for tool in tools %}...<tool_call>\n{{ tool }}</tool_call>{% endfor %}") == "hermes"
    assert detect_parser("Environment: ipython ... <|python_tag|> ... parameters") == "llama3_json"
    assert detect_parser("{{ '[AVAILABLE_TOOLS] ' + tools|tojson }}...{{ '[TOOL_CALLS] ' }}") == "mistral"
    assert detect_parser("... you MUST put it in the format of [func_name1(params_name1=params_value1, "
                         "params_name2=params_value2...), func_name2(params)] ...") == "pythonic"
    assert detect_parser("{% for m in messages %}{{ m.content }}{% endfor %}") is None
    assert detect_parser(None) is None and detect_parser("") is None


@pytest.mark.parametrize("tools, message", [
    ([], "tools must be a non-empty list of tools, got list"),
    ({"type": "function"}, "tools must be a non-empty list of tools, got dict"),
    ([{"type": "retrieval"}], r"tools\[0\] must be \{'type': 'function'"),
    ([{"type": "function", "function": "f"}], r"tools\[0\].function must be an object with a name, got str"),
    ([{"type": "function", "function": {"name": "bad name"}}], r"tools\[0\].function.name must be 1-64"),
    ([WEATHER, WEATHER], r"tools\[1\].function.name 'get_weather' is given twice"),
    ([{"type": "function", "function": {"name": "f", "parameters": "{}"}}], r"tools\[0\].function.parameters must be"),
    ([{"type": "function", "function": {"name": "f", "description": 3}}], r"tools\[0\].function.description must"),
    ([{"type": "function", "function": {"name": "f", "args": {}}}], r"tools\[0\].function.args is not a function field"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": 5}}}],
     r"tools\[0\].function.parameters.properties must be an object of JSON schemas, got int"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": "string"}}}}],
     r"parameters.properties must be an object of JSON schemas, got an entry that is not an object"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"properties": {}, "required": "a"}}}],
     r"tools\[0\].function.parameters.required must be a list of property names, got 'a'"),
])
def test_bad_tools_are_named(tools, message):
    with pytest.raises(ValueError, match=message):
        check_tools(tools)


def test_tool_turns_reach_the_template(llm, monkeypatch):
    """An assistant turn with calls (content null, arguments as JSON text -> an object, as transformers gives
    them) and the tool's answer are rendered by the template, with the tools."""
    messages = [{"role": "user", "content": "w1"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                      "arguments": '{"city": "w5"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "w7"}]
    norm = normalize_messages(messages)
    assert norm[1] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "w5"}}}]}
    assert norm[2] == {"role": "tool", "content": "w7", "tool_call_id": "call_1"}
    monkeypatch.setattr(llm.tokenizer, "chat_template",
                        "{% for t in tools %}w{{ t.function.name|length }} {% endfor %}"
                        "{% for m in messages %}{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments.city }}"
                        "{% else %}{{ m.content }}{% endif %} {% endfor %}")
    ids = encode_chat(llm.tokenizer, messages, template_kwargs={"tools": [WEATHER]})
    assert ids == llm.tokenizer.encode("w11 w1 w5 w7", add_special_tokens=False)
    out = llm.chat(messages, tools=[WEATHER])[0]
    assert out.prompt_token_ids == ids
    with pytest.raises(ValueError, match=r"tools\[0\] must be"):
        llm.chat(messages, tools=["f"])


def test_templates_render_tools_as_transformers_does(llm, monkeypatch):
    """tojson as transformers defines it (keys in order, no HTML escaping, indent), loop controls and
    strftime_now: Qwen's and Llama 3's tool templates use them."""
    tool = {"type": "function", "function": {"name": "f", "description": "a < b & 'c'", "parameters": {"z": 1, "a": 2}}}
    monkeypatch.setattr(llm.tokenizer, "chat_template",
                        "{% for t in tools %}{{ t | tojson }}|{{ t.function.parameters | tojson(indent=1) }}"
                        "{% endfor %}{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
                        "{{ m.content }}{% endfor %}|{{ strftime_now('%Y') | length }}")
    rendered = []
    monkeypatch.setattr(llm.tokenizer, "encode", lambda text, add_special_tokens=True: rendered.append(text) or [3])
    llm.tokenizer.apply_chat_template([{"role": "user", "content": "w1"}, {"role": "user", "content": "w2"}],
                                      template_kwargs={"tools": [tool]})
    assert rendered == [json.dumps(tool, ensure_ascii=False) + "|" + json.dumps({"z": 1, "a": 2}, indent=1) + "w1|4"]


# the constructs tool templates use (Hermes / Qwen, Llama 3.1): tools as JSON, dict items, membership tests,
# calls' arguments as JSON, a tool turn's content as JSON, strftime_now guarded, raise_exception
TOOL_TEMPLATE = """{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = "x" %}{%- endif %}
{%- if tools is iterable and tools | length > 0 %}<tools>{% for t in tools %}{{ t | tojson(indent=4) }}
{% for name, spec in t.function.parameters.properties | items %}{{ name }}: {{ spec.type }}{% endfor %}{% endfor %}</tools>
{%- endif %}{{ date_string }}
{%- for message in messages %}
{%- if message.role == "assistant" and message.tool_calls is defined %}{% for call in message.tool_calls %}
<tool_call>{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}</tool_call>
{%- endfor %}{% elif message.role == "tool" %}{% if 'tool_call_id' not in message %}{{ raise_exception("no id") }}{% endif %}
<tool_response>{{ message.content | tojson }}</tool_response>{% else %}
{{ message.role }}: {{ message.content | trim }}{% endif %}{%- endfor %}
{%- if add_generation_prompt %}
assistant:{% endif %}"""


def test_tool_templates_render_as_in_transformers(llm, monkeypatch):
    """A conversation with tools, a call and its answer renders to the same text as transformers renders it."""
    from transformers.utils.chat_template_utils import render_jinja_template

    tool = {"type": "function", "function": {"name": "get_weather", "description": "Now <and> & 'then' \u00e9",
                                             "parameters": {"type": "object", "properties": {
                                                 "city": {"type": "string"}, "days": {"type": "integer"}}}}}
    messages = normalize_messages([
        {"role": "system", "content": " Be brief. "}, {"role": "user", "content": "w1 <b>"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "22 \"C\" \u00e9"}])
    monkeypatch.setattr(llm.tokenizer, "chat_template", TOOL_TEMPLATE)
    rendered = []
    monkeypatch.setattr(llm.tokenizer, "encode", lambda text, add_special_tokens=True: rendered.append(text) or [3])
    llm.tokenizer.apply_chat_template(messages, template_kwargs={"tools": [tool]})
    want, _ = render_jinja_template(conversations=[messages], tools=[tool], add_generation_prompt=True,
                                    chat_template=TOOL_TEMPLATE, bos_token=llm.tokenizer.bos_token or "",
                                    eos_token=llm.tokenizer.eos_token or "")
    assert rendered == want and '"arguments": {"city": "Paris", "days": 2}' in rendered[0]


@pytest.mark.parametrize("messages, error", [
    ([{"role": "tool", "content": "x"}], r"messages\[0\].tool_call_id must be the id of the call it answers"),
    ([{"role": "assistant", "content": None, "tool_calls": "f"}], r"messages\[0\].tool_calls must be a list"),
    ([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}], r"messages\[0\].tool_calls\[0\] must be"),
    ([{"role": "assistant", "content": None}], r"messages\[0\].content must be a string"),
    ([{"role": "system", "content": "x", "tool_call_id": "1"}], r"messages\[0\].tool_call_id is not supported on a "
                                                                r"system message"),
])
def test_bad_tool_turns_are_named(messages, error):
    with pytest.raises(ValueError, match=error):
        normalize_messages(messages)


@pytest.fixture(scope="module")
def llm(tiny_models):
    path, _ = tiny_models["llama"]
    return LLM(path, max_model_len=64)


@pytest.mark.parametrize("name, text", [
    (None, '[{"name": "get_weather", "arguments": {"city": "Pa\\"ris}{",\n "d": [1, {"x": "]"}]} } ,\n'
           ' {"name":"now","arguments":{ }}]'),
    (None, '[{"name": "get_weather", "arguments": {"city":  "Par'),
    ("f", ' \n{ "a" :\t[1, 2],\n  "b": {"c": "\\u00e9"} }'),
    ("f", '{"a": [1'),
])
def test_forced_calls_streamed_and_not_agree(name, text):
    """A forced answer's calls are the same streamed (a call, then pieces of its arguments) and not: the
    arguments as the model wrote them, spacing and escapes kept."""
    whole = ForcedCallStream(name)
    calls = [(e.name, e.arguments) for e in whole.feed(text) + whole.finish()]
    for pieces in (1, 4, len(text)):
        streamed: list[list] = []
        for e in _forced(ForcedCallStream(name, incremental=True), text, pieces):
            if isinstance(e, ToolCall):
                streamed.append([e.name, e.arguments])
            else:
                streamed[e.index][1] += e.arguments
        assert [tuple(c) for c in streamed] == calls, pieces
    assert calls and all(args.startswith("{") for _, args in calls)
