"""Request parsing (:mod:`tritium.server.protocol`) without a server: what each choice's sampling parameters
carry."""

import pytest

from tritium.server.errors import APIError
from tritium.server.protocol import parse_chat, parse_completion

MESSAGES = [{"role": "user", "content": "hi"}]


def test_chat_choices_score_the_prompt_once():
    """The conversation's prompt_logprobs are reported once, so only the first of n choices scores the prompt
    (the others may start from the prefix cache)."""
    req = parse_chat({"messages": MESSAGES, "n": 3, "prompt_logprobs": 2, "temperature": 1.0, "seed": 7})
    assert [p.prompt_logprobs for p in req.params] == [2, None, None] and req.prompt_logprobs == 2
    assert [p.seed for p in req.params] == [7, 8, 9]
    assert [p.prompt_logprobs for p in parse_chat({"messages": MESSAGES, "n": 2}).params] == [None, None]


def test_completion_choices_score_each_prompt_once():
    """Completions with n > 1: each prompt is scored by its first choice (the server gives the others its
    scores); streamed (echo with logprobs) every choice scores it, its scores going out in its first chunk."""
    req = parse_completion({"prompt": ["a", "b"], "n": 3, "prompt_logprobs": 1})
    assert [p.prompt_logprobs for p in req.params] == [1, None, None]
    req = parse_completion({"prompt": "a", "n": 2, "echo": True, "logprobs": 2, "stream": True})
    assert [p.prompt_logprobs for p in req.params] == [2, 2]


def test_chat_response_format():
    """json_object and json_schema reach every choice; text is no constraint; what cannot be enforced is a 400
    naming response_format."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    req = parse_chat({"messages": MESSAGES, "n": 2, "response_format": {"type": "json_object"}})
    assert [(p.response_format, p.json_schema) for p in req.params] == [("json_object", None)] * 2
    req = parse_chat({"messages": MESSAGES, "response_format": {"type": "json_schema",
                                                                "json_schema": {"name": "s", "schema": schema}}})
    assert (req.params[0].response_format, req.params[0].json_schema) == ("json_schema", schema)
    assert parse_chat({"messages": MESSAGES, "response_format": {"type": "text"}}).params[0].response_format is None
    for bad in ({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string"}}},
                {"type": "json_schema", "json_schema": {"name": "s", "schema": schema, "extra": 1}},
                {"type": "json_object", "schema": schema}, {"type": "xml"}, "json"):
        with pytest.raises(APIError) as e:
            parse_chat({"messages": MESSAGES, "response_format": bad})
        assert e.value.param == "response_format", bad


def test_forced_tool_choice():
    """tool_choice "required" or a named function: every choice is held to the calls' JSON schema
    (tritium.engine.tools.forced_call_schema), one call at most without parallel_tool_calls."""
    f = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "x": {"type": "string"}}}}}
    g = {"type": "function", "function": {"name": "g"}}
    req = parse_chat({"messages": MESSAGES, "n": 2, "tools": [f, g],
                      "tool_choice": {"type": "function", "function": {"name": "f"}}})
    assert (req.tool_choice, req.tool_name) == ("function", "f")
    want = ("json_schema", f["function"]["parameters"])
    assert [(p.response_format, p.json_schema) for p in req.params] == [want] * 2
    req = parse_chat({"messages": MESSAGES, "tools": [f, g], "tool_choice": "required", "parallel_tool_calls": False})
    schema = req.params[0].json_schema
    assert (req.tool_choice, req.tool_name, schema["minItems"], schema["maxItems"]) == ("required", None, 1, 1)
    assert [c["properties"]["name"] for c in schema["items"]["anyOf"]] == [{"const": "f"}, {"const": "g"}]
    assert schema["items"]["anyOf"][1]["properties"]["arguments"] == {"type": "object", "properties": {}}
    assert "maxItems" not in parse_chat({"messages": MESSAGES, "tools": [f], "tool_choice": "required"}
                                        ).params[0].json_schema
    assert parse_chat({"messages": MESSAGES, "tools": [f], "tool_choice": "auto"}).params[0].response_format is None
