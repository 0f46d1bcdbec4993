"""JSON schemas as JSON-mode grammars (:mod:`tritium.engine.json_schema`): texts the schema accepts and every
prefix of them go through, the rest does not; what cannot be enforced is refused by name; the masks equal a
token-by-token check; the engine's answers (a tiny random model sampled, SmolLM2 greedy) match the schema."""

import json

import pytest

from tritium import LLM, SamplingParams
from tritium.engine.json_mode import TokenIndex, advance_bytes
from tritium.engine.json_schema import compile_schema
from tritium.engine.tokenizer import Tokenizer

from .conftest import assert_masks_exact, default_model_or_skip

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "annotations are ignored"},
        "age": {"type": "integer"},
        "score": {"type": ["number", "null"]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "bb", "ccc"]}, "minItems": 1,
                 "maxItems": 3},
        "ok": {"type": "boolean"},
        "meta": {"type": "object"},
        "any": {},
        "pos": {"$ref": "#/$defs/P"},
        "n": {"enum": [1, 10, 2.5]},
        "c": {"const": "k"},
        "either": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
        "maybe": {"type": ["object", "null"], "properties": {"k": {"type": "integer"}}, "required": ["k"]},
    },
    "required": ["name"], "additionalProperties": False,
    "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}},
}
GOOD = [
    '{"name":"a","age":3,"score":null,"tags":["a"],"ok":true,"meta":{},"any":[1,{"q":2}],"pos":{"x":1,"y":-2.5e3},'
    '"n":10,"c":"k","either":"s","maybe":null}',
    '{ "name" : "a\\n\\u00e9" , "age" : -0 , "score" : 1.5 , "tags" : [ "bb" , "ccc" , "a" ] , "ok" : false , '
    '"meta" : {"z": [] } , "any" : 7 , "pos" : { "x" : 0 , "y" : 1 } , "n" : 1 , "c" : "k" , "either" : [ 1 , -2 ] , "maybe" : { "k" : 3 } }',
    '{\n  "name": "",\n  "age": 12,\n  "score": -0.5E+2,\n  "tags": ["ccc"],\n  "ok": true,\n  "meta": {"a": null},\n'
    '  "any": "x",\n  "pos": {"x": 2.5, "y": 0},\n  "n": 2.5,\n  "c": "k",\n  "either": [],\n  "maybe": {"k": 0}\n}',
]
EDITS = [('"age":3', '"age":3.5'), ('"tags":["a"]', '"tags":[]'), ('"tags":["a"]', '"tags":["a","a","a","a"]'),
         ('"tags":["a"]', '"tags":["d"]'), ('"n":10', '"n":100'), ('"n":10', '"n":3'), ('"ok":true', '"ok":1'),
         ('"meta":{}', '"meta":[]'), ('"c":"k"', '"c":"K"'), ('"either":"s"', '"either":["s"]'),
         ('"score":null', '"score":"1"'), ('"name":"a",', ''), ('"pos":{"x":1,"y":-2.5e3}', '"pos":{"y":1,"x":2}'),
         ('"pos":{"x":1,"y":-2.5e3}', '"pos":{"x":1}'), ('"age":3', '"age":03'), ('{"name"', '{"extra":1,"name"'),
         ('"maybe":null', '"maybe":{}'), ('"maybe":null', '"maybe":{"k":1.5}')]


def _accepts(grammar, text: str) -> bool:
    state = advance_bytes(grammar.start, text.encode(), grammar.advance)
    return state is not None and grammar.complete(state)


def test_schema_texts():
    grammar = compile_schema(SCHEMA)
    assert compile_schema(json.loads(json.dumps(SCHEMA))) is grammar  # cached by the schema's JSON
    for text in GOOD:
        json.loads(text)
        assert _accepts(grammar, text), text
        for k in range(len(text.encode())):
            assert advance_bytes(grammar.start, text.encode()[:k], grammar.advance) is not None, text[:k]
        assert not _accepts(grammar, text + " ") and not _accepts(grammar, text[:-1])
    for old, new in EDITS:
        assert old in GOOD[0]
        assert not _accepts(grammar, GOOD[0].replace(old, new, 1)), (old, new)


@pytest.mark.parametrize("schema, message", [
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}, "pattern is not supported"),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "date"}}}, "format is not supported"),
    ({"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}}, "minimum is not supported"),
    ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}, "oneOf is not supported"),
    ({"type": "string"}, "root must be an object or an array"),
    ({"enum": [1, 2]}, "root must be an object or an array"),
    ({"type": "array", "items": {"anyOf": [  # the same tag twice: not told apart
        {"type": "object", "properties": {"k": {"const": "a"}, "x": {"type": "string"}}},
        {"type": "object", "properties": {"k": {"const": "a"}, "y": {"type": "integer"}}}]}}, "same character"),
    ({"type": "array", "items": {"anyOf": [  # tags under different names
        {"type": "object", "properties": {"k": {"const": "a"}}},
        {"type": "object", "properties": {"j": {"const": "b"}}}]}}, "same character"),
    ({"type": "array", "items": {"anyOf": [  # a tag that is not a string
        {"type": "object", "properties": {"k": {"const": 1}}},
        {"type": "object", "properties": {"k": {"const": 2}}}]}}, "same character"),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "object"}, {"type": "object", "properties": {}}]}}},
     "same character"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
      "$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/A"}}}}}, "recursive"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/B"}}}, "names no definition"),
    ({"type": "object", "properties": {"a": {"type": "date"}}}, "is not a JSON Schema type"),
    ({"type": "object", "properties": {"a": {"type": ["string", "date"]}}}, "is not a JSON Schema type"),
    ({"type": "object", "properties": {"a": {"type": ["string", "null"], "maxLength": 3}}}, "maxLength"),
    ({"type": "object", "properties": {"a": {"type": "array", "minItems": 3, "maxItems": 2}}}, "below minItems"),
    ({"type": "object", "properties": {"a": {"enum": []}}}, "non-empty list"),
    ({"type": "object", "properties": {"a": 5}}, "must be an object"),
    ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, "not in properties"),
])
def test_what_cannot_be_enforced_is_refused(schema, message):
    with pytest.raises(ValueError, match=message):
        compile_schema(schema)


# tool calls as "required" forces them (tritium.engine.tools.forced_call_schema): objects told apart by the
# value of their first property, one tag a prefix of another but for the closing quote
CALLS = {"type": "array", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
    {"type": "object", "properties": {"name": {"const": "get"}, "arguments": {
        "type": "object", "properties": {"n": {"type": "integer"}}}}},
    {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}}}}},
    {"type": "object", "properties": {"name": {"enum": ["now"]}, "arguments": {"type": "object", "properties": {}}}},
    {"type": "null"},
]}}
CALLS_GOOD = ['[{"name":"get","arguments":{"n":3}}]',
              '[ {"name" : "get_weather", "arguments": {"city": "Paris", "days": null}} , null ,\n'
              ' {"name":"now","arguments":{ }}]']
CALLS_BAD = ['[]', '[{"name":"get","arguments":{"city":"x","days":1}}]', '[{"name":"gets","arguments":{"n":1}}]',
             '[{"name":"get_weather","arguments":{"n":1}}]', '[{"arguments":{},"name":"now"}]',
             '[{"name":"now","arguments":{}},{"name":"now","arguments":{}},null,null]', '{"name":"get","arguments":{}}',
             '[{"name":"now","arguments":{}}']


def test_tagged_unions():
    """anyOf of objects whose first property is the same name with a different const string (forced tool
    calls): each branch's own properties follow its tag; an unknown tag, a branch's properties under another
    tag, an empty list or one too long do not go through."""
    grammar = compile_schema(CALLS)
    for text in CALLS_GOOD:
        json.loads(text)
        assert _accepts(grammar, text), text
        for k in range(len(text.encode())):
            assert advance_bytes(grammar.start, text.encode()[:k], grammar.advance) is not None, text[:k]
    for text in CALLS_BAD:
        assert not _accepts(grammar, text), text


def test_masks_equal_a_check_of_every_token(json_model):
    assert_masks_exact(TokenIndex(Tokenizer.from_hf_dir(json_model), 448), compile_schema(CALLS), CALLS_GOOD)
    assert_masks_exact(TokenIndex(Tokenizer.from_hf_dir(json_model), 448), compile_schema(SCHEMA), GOOD)


def test_masks_on_a_real_vocabulary():
    from tritium.engine.llm_engine import load_checkpoint
    tok = load_checkpoint(default_model_or_skip())[3]
    assert_masks_exact(TokenIndex(tok, tok.vocab_size), compile_schema(SCHEMA), GOOD[:1])


def _matches(value) -> bool:
    """The Python check of SCHEMA's answers (keys in order, types, enums, array bounds)."""
    if not isinstance(value, dict) or list(value) != list(SCHEMA["properties"]):
        return False
    tags, pos, either = value["tags"], value["pos"], value["either"]
    return (isinstance(value["name"], str) and type(value["age"]) is int
            and (value["score"] is None or type(value["score"]) in (int, float))
            and isinstance(tags, list) and 1 <= len(tags) <= 3 and all(t in ("a", "bb", "ccc") for t in tags)
            and type(value["ok"]) is bool and isinstance(value["meta"], dict)
            and isinstance(pos, dict) and list(pos) == ["x", "y"] and value["n"] in (1, 10, 2.5)
            and value["c"] == "k" and (isinstance(either, str) or (isinstance(either, list) and all(
                type(v) is int for v in either)))
            and (value["maybe"] is None or (list(value["maybe"]) == ["k"] and type(value["maybe"]["k"]) is int)))


def test_engine_answers_match_the_schema(json_model):
    """Sampled at temperature 1 with the closing tokens favoured: each answer finished by the grammar is an
    object SCHEMA accepts (checked in Python), or a prefix of one cut at max_tokens."""
    tok = Tokenizer.from_hf_dir(json_model)
    closers = {i: 4.0 for i in range(tok.vocab_size) if tok.token_bytes(i) in (b'"', b"}", b"]", b",")}
    grammar = compile_schema(SCHEMA)
    with LLM(json_model, max_model_len=512, kv_cache_memory=16 << 20, max_num_seqs=4) as llm:
        outs = llm.generate(["w1", "w2 w3", "w4", "w5"], [
            SamplingParams(max_tokens=300, temperature=1.0, seed=s, response_format="json_schema", json_schema=SCHEMA,
                           logit_bias=closers) for s in range(4)])
    for o in outs:
        if o.finish_reason == "stop":
            assert _matches(json.loads(o.text)), o.text
        else:
            assert o.finish_reason == "length" and advance_bytes(grammar.start, o.text.encode(), grammar.advance)
    assert any(o.finish_reason == "stop" for o in outs), [o.text for o in outs]


def test_the_default_model_fills_a_schema():
    """SmolLM2-135M-Instruct (where installed), greedy: a person as {"name": string, "age": integer}."""
    path = default_model_or_skip()
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    question = [{"role": "user", "content": "Describe a famous scientist as JSON with their name and age."}]
    with LLM(path, max_model_len=256) as llm:
        out = llm.chat(question, SamplingParams(max_tokens=40, response_format="json_schema", json_schema=schema))
    out = out[0] if isinstance(out, list) else out
    assert out.finish_reason == "stop", out.text
    value = json.loads(out.text)
    assert list(value) == ["name", "age"] and isinstance(value["name"], str) and type(value["age"]) is int, value
