"""Request parsing (:mod:`tritium.server.protocol`) without a server: what each choice's sampling parameters
carry."""

import pytest

from tritium.server.errors import APIError
from tritium.engine.sampling import TokenLogprobs
from tritium.server.protocol import LogprobFormatter, TextOffsets, parse_chat, parse_completion

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


def test_prompt_forms_are_not_mixed():
    """A prompt is one of OpenAI's four forms (a string, a list of strings, token ids, a list of token-id lists), as
    vLLM types it: strings and token-id lists mixed in one list are a 400 naming prompt that says so."""
    assert parse_completion({"prompt": ["a", "b"]}).prompts == ["a", "b"]
    assert parse_completion({"prompt": [[1, 2], [3]]}).prompts == [[1, 2], [3]]
    assert parse_completion({"prompt": [1, 2]}).prompts == [[1, 2]]
    for bad in (["a", [1, 2]], [[1, 2], "a"], ["a", 1]):
        with pytest.raises(APIError) as e:
            parse_completion({"prompt": bad})
        assert (e.value.status, e.value.param) == (400, "prompt")
        assert ("not strings and token-id lists mixed" in e.value.message) == (bad != ["a", 1]), e.value.message


def test_user_is_a_string():
    """OpenAI's user (an end-user id) is a string, as /v1/responses checks it: anything else is a 400 naming it."""
    for parse, body in ((parse_completion, {"prompt": "a"}), (parse_chat, {"messages": MESSAGES})):
        assert parse({**body, "user": "u-1"}).n == 1 and parse({**body, "user": None}).n == 1
        for bad in (3, ["x"], {"id": "u"}):
            with pytest.raises(APIError) as e:
                parse({**body, "user": bad})
            assert (e.value.status, e.value.param) == (400, "user") and "user must be a string" in e.value.message


def test_stream_options_name_their_field_in_full():
    """A stream option that is not a boolean is a 400 naming ``stream_options.<key>``, as an unknown one is (its
    bare key is no field of the body)."""
    for parse, body in ((parse_completion, {"prompt": "a"}), (parse_chat, {"messages": MESSAGES})):
        req = parse({**body, "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": None}})
        assert (req.include_usage, req.continuous_usage) == (True, False)
        for key in ("include_usage", "continuous_usage_stats"):
            with pytest.raises(APIError) as e:
                parse({**body, "stream": True, "stream_options": {key: 1}})
            assert e.value.param == f"stream_options.{key}" and f"stream_options.{key} must be true or false" in (
                e.value.message)


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


class _ByteTokens:
    """A byte-level vocabulary's token_bytes: 'Café 🎉 is' in tokens that split both non-ASCII characters."""

    PIECES = [b"Caf", b"\xc3", b"\xa9", b" \xf0\x9f", b"\x8e\x89", b" is"]

    def token_bytes(self, token_id: int) -> bytes:
        return self.PIECES[token_id]


def test_legacy_logprobs_name_partial_characters_and_count_offsets_in_characters():
    """Completions' legacy logprobs: a token holding part of a character is named ``bytes:\\xNN`` (distinct
    ``top_logprobs`` keys, not one '\\ufffd' each), and ``text_offset`` counts characters of the text, a token
    that starts inside a character at that character; a stream's chunks give the same offsets as one answer."""
    text = "Café 🎉 is"
    assert b"".join(_ByteTokens.PIECES).decode() == text
    lps = [TokenLogprobs(t, -0.5, [(t, -0.5), ((t + 1) % 6, -1.5), ((t + 2) % 6, -2.5)]) for t in range(6)]
    fmt = LogprobFormatter(_ByteTokens())
    whole = fmt.completion(lps)
    assert whole["tokens"] == ["Caf", "bytes:\\xc3", "bytes:\\xa9", "bytes:\\x20\\xf0\\x9f", "bytes:\\x8e\\x89", " is"]
    assert whole["text_offset"] == [0, 3, 3, 4, 5, 6]
    assert all(text[o:].startswith(t) for o, t in zip(whole["text_offset"], whole["tokens"]) if "bytes:" not in t)
    assert text[3] == "é" and text[5] == "🎉"
    assert all(len(top) == 3 for top in whole["top_logprobs"])  # three distinct keys everywhere
    assert whole["top_logprobs"][1] == {"bytes:\\xc3": -0.5, "bytes:\\xa9": -1.5, "bytes:\\x20\\xf0\\x9f": -2.5}
    offsets = TextOffsets()
    chunks = [fmt.completion(lps[i:i + 2], offsets) for i in range(0, 6, 2)]
    assert [o for c in chunks for o in c["text_offset"]] == whole["text_offset"]
    # echo: the prompt's tokens first (the first without logprobs), then the answer's, offsets running on
    echoed = fmt.completion(lps[3:], prompt=([0, 1, 2], [None, lps[1], lps[2]]))
    assert echoed["text_offset"] == whole["text_offset"] and echoed["token_logprobs"][0] is None
