"""JSON schemas as JSON-mode grammars (:mod:`tritium.engine.json_schema`): texts the schema accepts and every
prefix of them go through, the rest does not; what cannot be enforced is refused by name; the masks equal a
token-by-token check; the engine's answers (a tiny random model sampled, SmolLM2 greedy) match the schema."""

import json
import random
import re

import pytest

from tritium import LLM, SamplingParams
from tritium.engine.json_mode import TokenIndex, advance_bytes
from tritium.engine.json_schema import compile_schema
from tritium.engine.tokenizer import Tokenizer

from .conftest import assert_masks_exact, default_model_or_skip, random_byte_strings

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
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}, "lookaround"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(a\\1)"}}}, "escape \\\\1"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^\"+$"}}}, "matches no string"),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "ipv6"}}}, "format 'ipv6' is not supported"),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "date", "pattern": "x"}}}, "both"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^ab$", "minLength": 3}}},
     "no string of the pattern has a length in \\[3, inf\\]"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^a+$", "minLength": 3, "maxLength": 2}}},
     "below minLength"),
    ({"type": "object", "properties": {"a": {"type": "number", "multipleOf": 0.5}}}, "multipleOf is not supported"),
    ({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}, {"maxLength": 3}]}}},
     "allOf is supported with one schema in it, got 2"),
    ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, "not is not supported"),
    ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]}}},
     "same character"),
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
    ({"type": "object", "properties": {"a": {"type": ["string", "null"], "pattern": "a{3,2}"}}}, "below its minimum"),
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


BOUNDED = {"type": "object", "properties": {
    "code": {"type": "string", "minLength": 2, "maxLength": 4},
    "n": {"type": "integer", "minimum": -15, "maximum": 120},
    "big": {"type": ["integer", "null"], "exclusiveMinimum": 999, "maximum": 20000},
    "neg": {"type": "integer", "exclusiveMaximum": -1.5},
    "pos": {"type": "integer", "minimum": 0.5},
}}


def _bounded_ok(value: dict) -> bool:
    code, n, big, neg, pos = (value[k] for k in ("code", "n", "big", "neg", "pos"))
    return (2 <= len(code) <= 4 and -15 <= n <= 120 and (big is None or 999 < big <= 20000) and neg <= -2
            and pos >= 1 and all(type(v) is int for v in (n, neg, pos)))


def test_string_lengths_and_integer_ranges():
    """minLength / maxLength (characters: UTF-8 and escapes count one) and integer bounds: a text goes
    through exactly when Python's json reads it as a value the schema accepts, on 3,000 random texts
    around the bounds; every prefix of an accepted text goes through."""
    grammar = compile_schema(BOUNDED)
    good = '{"code": "\\u00e9\\u00e9\\u00e9\\u00e9", "n": -15, "big": 20000, "neg": -2, "pos": 1}'
    assert _accepts(grammar, good) and _accepts(grammar, good.replace('"\\u00e9', '"é', 1))
    assert not _accepts(grammar, good.replace("\\u00e9", "\\ud83d", 1))  # surrogate escapes are not written
    rng = random.Random(0)
    fields = {  # per property: values inside, at and past its bounds, and some that are no integer of JSON's
        "code": ['"a"', '"ab"', '"abcd"', '"abcde"', '"é€😀x"', '"é€😀xy"', '"\\n\\t"', '"\\u0041bc"', '""'],
        "n": ["-15", "-16", "120", "121", "0", "7", "-0", "007", "99", "12.0"],
        "big": ["null", "999", "1000", "20000", "20001", "1e3", "15000"],
        "neg": ["-2", "-1", "-100", "0", "-02", "-3"],
        "pos": ["1", "0", "100", "-1", "1.0", "2"],
    }

    def want(picked: dict, text: str) -> bool:
        integers = all(re.fullmatch(r"-?(0|[1-9][0-9]*)", picked[k]) and picked[k] != "-0"
                       for k in ("n", "neg", "pos")) and (picked["big"] == "null" or
                                                          re.fullmatch(r"[1-9][0-9]*", picked["big"]))
        return bool(integers) and _bounded_ok(json.loads(text))

    seen = _random_texts(grammar, fields, want, rng, 3000)
    assert seen[True] > 20 and seen[False] > 1000, seen


def _random_texts(grammar, fields: dict, want, rng, count: int) -> dict:
    """``count`` objects of a random value for each property from ``fields``: each accepted exactly where
    ``want(picked, text)``, every prefix of an accepted one going through; how many went either way."""
    seen = {True: 0, False: 0}
    for _ in range(count):
        picked = {k: rng.choice(v) for k, v in fields.items()}
        text = "{" + ",".join(f'"{k}":{v}' for k, v in picked.items()) + "}"
        got = _accepts(grammar, text)
        assert got == want(picked, text), text
        seen[got] += 1
        if got:
            for k in range(len(text.encode())):
                assert advance_bytes(grammar.start, text.encode()[:k], grammar.advance) is not None, text[:k]
    return seen


def test_bounded_strings_write_valid_utf8():
    """A string that counts its characters takes exactly the bytes that begin valid UTF-8 (Python's strict
    decoder), so that no byte decodes to a replacement character and the count holds."""
    grammar = compile_schema(BOUNDED)
    start = advance_bytes(grammar.start, b'{"code":"', grammar.advance)

    def valid_prefix(seq: bytes) -> bool:
        for pad in range(3):
            for c in (0x80, 0x8F, 0x90, 0xBF):
                try:
                    (seq + bytes([c]) * pad).decode()
                    return True
                except UnicodeDecodeError:
                    pass
        return False

    for b1 in range(0x80, 0x100):
        for b2 in [*range(0x80, 0xC0), 0x41, 0x22]:
            seq = bytes([b1, b2])
            got = advance_bytes(start, seq, grammar.advance) is not None
            assert got == valid_prefix(seq), seq


@pytest.mark.parametrize("schema, message", [
    ({"type": "string", "minLength": 3, "maxLength": 2}, "maxLength 2 is below minLength 3"),
    ({"type": "string", "maxLength": -1}, "must be a non-negative integer"),
    ({"type": "integer", "minimum": 5, "exclusiveMaximum": 5}, "no integer lies in its range"),
    ({"type": "integer", "minimum": "1"}, "must be a finite number"),
    ({"type": "number", "minimum": 1, "exclusiveMaximum": 1}, "no number of at most 15 significant digits"),
    ({"type": "number", "minimum": 1e16}, "no number of at most 15 significant digits"),
    ({"type": "number", "maximum": float("inf")}, "must be a finite number"),
    ({"type": "number", "maximum": True}, "must be a finite number"),
])
def test_bad_bounds_are_refused(schema, message):
    with pytest.raises(ValueError, match=message):
        compile_schema({"type": "object", "properties": {"a": schema}})


PATTERNED = {"type": "object", "properties": {
    "id": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3,4}$"},
    "when": {"type": "string", "format": "date-time"},
    "day": {"type": ["string", "null"], "format": "date"},
    "mail": {"type": "string", "format": "email"},
    "uuid": {"type": "string", "format": "uuid"},
    "note": {"type": "string", "pattern": "ok"},  # not anchored: any text around "ok"
}}
PATTERNED_GOOD = ['{"id": "AB-123", "when": "2024-02-29T23:59:60.5+05:30", "day": null, "mail": "a.b@ex-ample.org", '
                  '"uuid": "123e4567-e89b-12d3-a456-426614174000", "note": "it is ok!"}',
                  '{"id":"ZZ-0000","when":"1999-12-31t00:00:00Z","day":"2024-01-09","mail":"x@y.co",'
                  '"uuid":"ABCDEF01-2345-6789-abcd-ef0123456789","note":"ok"}']


def test_patterns_and_formats():
    """Strings of a pattern or a format go through exactly when Python's re (ASCII) matches them, and they are
    written without escapes; every prefix of an accepted text goes through, and every state reached along
    one can still finish its string."""
    grammar = compile_schema(PATTERNED)
    for text in PATTERNED_GOOD:
        assert _accepts(grammar, text), text
        for k in range(len(text.encode())):
            assert advance_bytes(grammar.start, text.encode()[:k], grammar.advance) is not None, text[:k]
    base = json.loads(PATTERNED_GOOD[0])
    for key, bad in [("id", "AB-12"), ("id", "Ab-123"), ("id", "AB-12345"), ("when", "2024-02-29 23:59:60Z"),
                     ("when", "2024-13-01T00:00:00Z"), ("when", "2024-01-01T24:00:00Z"), ("day", "2024-1-01"),
                     ("mail", "a@b"), ("mail", "@b.co"), ("uuid", "123e4567e89b12d3a456426614174000"),
                     ("note", "o k"), ("note", r"\u006fk"), ("day", r"2024-01-0\u0031")]:
        text = json.dumps(dict(base, **{key: bad}), ensure_ascii=False).replace("\\\\", "\\")
        assert not _accepts(grammar, text), text
    with pytest.raises(ValueError, match="pattern"):
        compile_schema({"type": "object", "properties": {"a": {"type": "string", "pattern": "[z-a]"}}})


@pytest.mark.parametrize("string, regex, lo, hi", [
    ({"pattern": "^[a-c]+$", "minLength": 2, "maxLength": 4}, r"^[a-c]+$", 2, 4),
    ({"pattern": "ab", "minLength": 5}, r"ab", 5, None),
    ({"pattern": "^(xy)*$", "maxLength": 5}, r"^(xy)*$", 0, 5),
    ({"pattern": "^a*b?$", "minLength": 3, "maxLength": 3}, r"^a*b?$", 3, 3),
    ({"format": "email", "maxLength": 9}, r"^[a-z]+@[a-z]+\.[a-z]+$", 0, 9),  # the sample's letters only
])
def test_patterns_with_lengths(string, regex, lo, hi):
    """A pattern and minLength / maxLength together: a string goes through exactly when it matches and its
    length is in the window; no walk of allowed bytes gets stuck (a byte is allowed only where a match of an
    allowed length can still end)."""
    grammar = compile_schema({"type": "object", "properties": {"s": dict(string, type="string")}})
    rng = random.Random(str(string))
    letters = "abcxy@.ok" if "pattern" in string else "ab@."
    for _ in range(2000):
        value = "".join(rng.choice(letters) for _ in range(rng.randint(0, 13)))
        if "format" in string and not re.fullmatch(r"[a-z]*@?[a-z]*\.?[a-z]*", value):
            continue
        want = bool(re.search(regex, value)) and lo <= len(value) and (hi is None or len(value) <= hi)
        assert _accepts(grammar, json.dumps({"s": value})) == want, value
    for _ in range(200):
        state = advance_bytes(grammar.start, b'{"s":"', grammar.advance)
        for _ in range(40):
            allowed = [b for b in range(0x20, 0x7F) if grammar.advance(state, b) is not None]
            assert allowed, state
            b = rng.choice(allowed)
            state = grammar.advance(state, b)
            if b == 0x22:
                assert grammar.advance(state, 0x7D) is not None  # the string closed where it may: "}" follows
                break


PETS = {  # as pydantic writes a discriminated union, a model field with a description, an Optional
    "$defs": {
        "Cat": {"title": "Cat", "type": "object", "required": ["pet_type", "meows"],
                "properties": {"pet_type": {"const": "cat", "title": "Pet Type", "type": "string"},
                               "meows": {"type": "integer"}}},
        "Dog": {"title": "Dog", "type": "object", "required": ["pet_type", "barks"],
                "properties": {"pet_type": {"const": "dog", "title": "Pet Type", "type": "string"},
                               "barks": {"type": "number"}}},
        "Owner": {"title": "Owner", "type": "object", "properties": {"name": {"type": "string"}}},
    },
    "type": "object", "required": ["pet", "owner", "alt"],
    "properties": {
        "pet": {"title": "Pet", "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                "discriminator": {"propertyName": "pet_type", "mapping": {"cat": "#/$defs/Cat",
                                                                          "dog": "#/$defs/Dog"}}},
        "owner": {"allOf": [{"$ref": "#/$defs/Owner"}], "description": "who owns it"},
        "alt": {"oneOf": [{"type": "string"}, {"type": "null"}]},
    },
}


def test_one_of_and_all_of():
    """oneOf of alternatives JSON mode tells apart (a tagged union, a string or null: never two of them for
    one value) and allOf of one schema, with OpenAPI's discriminator ignored as an annotation."""
    grammar = compile_schema(PETS)
    good = '{"pet": {"pet_type": "dog", "barks": 1.5}, "owner": {"name": "Al"}, "alt": null}'
    assert _accepts(grammar, good)
    assert _accepts(grammar, good.replace('"dog", "barks": 1.5', '"cat", "meows": 3').replace("null", '"x"'))
    for old, new in (('"dog"', '"cow"'), ('"barks": 1.5', '"meows": 1'), ('"barks": 1.5', '"barks": "1"'),
                     ('{"name": "Al"}', '{"name": 7}'), ("null", "3")):
        assert not _accepts(grammar, good.replace(old, new)), (old, new)


def test_tuples():
    """prefixItems of a fixed length (pydantic's tuple[int, str]): each item its own schema, in order, no more
    and no fewer; other prefixItems are refused by name."""
    grammar = compile_schema({"type": "object", "properties": {
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2,
                 "maxItems": 2},
        "none": {"type": "array", "prefixItems": [], "items": False},
        "nested": {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "boolean"}],
                                              "minItems": 1, "items": False}}}})
    good = '{"pair": [1, "a"], "none": [], "nested": [[true], [ false ]]}'
    assert _accepts(grammar, good)
    for old, new in (('[1, "a"]', '["a", 1]'), ('[1, "a"]', "[1]"), ('[1, "a"]', '[1, "a", 2]'), ("[]", "[1]"),
                     ("[true]", "[true, true]"), ("[true]", "[]")):
        assert not _accepts(grammar, good.replace(old, new)), (old, new)
    for k in range(len(good)):
        assert advance_bytes(grammar.start, good.encode()[:k], grammar.advance) is not None, good[:k]
    for schema in ({"type": "array", "prefixItems": [{"type": "integer"}]},
                   {"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 0, "maxItems": 1}):
        with pytest.raises(ValueError, match="prefixItems is supported as a tuple of exactly its 1 items"):
            compile_schema({"type": "object", "properties": {"t": schema}})


NUMBERS = {"type": "object", "properties": {
    "p": {"type": "number", "minimum": 0, "maximum": 1},
    "t": {"type": ["number", "null"], "exclusiveMinimum": -273.15, "exclusiveMaximum": 0.1},
    "w": {"type": ["integer", "number"], "minimum": 2.5},
    "x": {"type": "number", "exclusiveMinimum": 0.1, "maximum": 0.1000001},
}}


def _numbers_ok(value: dict) -> bool:
    p, t, w, x = (value[k] for k in ("p", "t", "w", "x"))
    numeric = all(type(v) in (int, float) for v in (p, w, x)) and (t is None or type(t) in (int, float))
    return numeric and 0 <= p <= 1 and (t is None or -273.15 < t < 0.1) and w >= 2.5 and 0.1 < x <= 0.1000001


def test_number_ranges():
    """minimum / maximum (exclusive too) of numbers: a text goes through exactly when Python's json reads it
    as numbers the schema accepts and it is written as the grammar writes numbers (no exponent, at most 15
    significant digits, 20 after the point), on 4,000 random texts around the bounds; every prefix of an
    accepted text goes through."""
    grammar = compile_schema(NUMBERS)
    assert _accepts(grammar, '{"p": 0.5, "t": -273.149, "w": 2.5, "x": 0.10000001}')
    assert _accepts(grammar, '{"p": 1, "t": null, "w": 1000000, "x": 0.1000001}')
    rng = random.Random(1)
    fields = {
        "p": ["0", "1", "0.5", "1.0", "1.0000000001", "-0", "-0.0", "0.", "00.5", ".5", "1e0", "0.999999999999999",
              "-0.000001", "2", "0.00000000000000000001", "0.000000000000000000001"],
        "t": ["null", "-273.15", "-273.1499", "-273.16", "0.1", "0.09999", "0", "-12", "0.1000000000000001",
              "-273.14999999999999", "-300"],
        "w": ["2.5", "2.4999", "3", "2", "1e6", "123456789012345", "1234567890123456", "2.50000000000000"],
        "x": ["0.1", "0.10000001", "0.1000001", "0.10000011", "0.100000000000001", "0.1000000000000001", "0.2"],
    }
    written = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]{1,20})?")

    def want(picked: dict, text: str) -> bool:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return False
        as_written = all(v == "null" or (written.fullmatch(v) and len(v.replace("-", "").replace(".", "")
                                                                          .lstrip("0")) <= 15)
                         for v in picked.values())
        return bool(as_written) and _numbers_ok(value)

    seen = _random_texts(grammar, fields, want, rng, 4000)
    assert seen[True] > 50 and seen[False] > 1000, seen
    # a range that only negative numbers reach: no digit first; only "-"
    neg = compile_schema({"type": "array", "items": {"type": "number", "maximum": -0.5}})
    assert _accepts(neg, "[-0.5, -7]") and not _accepts(neg, "[-0.4]") and not _accepts(neg, "[0]")
    assert advance_bytes(neg.start, b"[1", neg.advance) is None


def test_masks_equal_a_check_of_every_token(json_model):
    assert_masks_exact(TokenIndex(Tokenizer.from_hf_dir(json_model), 448), compile_schema(BOUNDED),
                       ['{"code": "ab\\u00e9", "n": 119, "big": null, "neg": -20, "pos": 3}',
                        '{"code": "abcd", "n": -9, "big": 1000, "neg": -2, "pos": 100}'])
    assert_masks_exact(TokenIndex(Tokenizer.from_hf_dir(json_model), 448), compile_schema(CALLS), CALLS_GOOD)
    assert_masks_exact(TokenIndex(Tokenizer.from_hf_dir(json_model), 448), compile_schema(SCHEMA), GOOD)
    assert_masks_exact(TokenIndex(Tokenizer.from_hf_dir(json_model), 448), compile_schema(PATTERNED), PATTERNED_GOOD)
    assert_masks_exact(TokenIndex(Tokenizer.from_hf_dir(json_model), 448), compile_schema(NUMBERS),
                       ['{"p": 0.25, "t": -273.1, "w": 31.5, "x": 0.10000009}'])


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
    with LLM(json_model, max_model_len=512, kv_cache_memory=16 << 20, max_num_seqs=4) as llm:  # bounds too
        outs = llm.generate(["w1", "w2 w3", "w4", "w5"], [
            SamplingParams(max_tokens=120, temperature=1.0, seed=s, response_format="json_schema", json_schema=BOUNDED,
                           logit_bias=closers) for s in range(4)])
    finished = [json.loads(o.text) for o in outs if o.finish_reason == "stop"]
    assert finished and all(_bounded_ok(v) for v in finished), [o.text for o in outs]


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


def test_free_strings_write_valid_utf8(json_model):
    """A string without bounds, and a string inside a value of any type (``{}``), take exactly the bytes Python's
    strict UTF-8 decoder reads (no lead byte without its continuation bytes, no overlong form, no surrogate);
    the masks along texts with multi-byte characters equal a check of each token."""
    schema = {"type": "object", "properties": {"s": {"type": "string"}, "any": {}}}
    grammar = compile_schema(schema)
    for content, valid in random_byte_strings(2, [0x61, *range(0x80, 0x100)], 3000):
        for text in (b'{"s":"' + content + b'","any":1}', b'{"s":"","any":["' + content + b'"]}'):
            state = advance_bytes(grammar.start, text, grammar.advance)
            assert (state is not None and grammar.complete(state)) == valid, text
    good = ['{"s": "日本 é😀", "any": {"€": "½"}}', '{"s": "\\u00e9", "any": "日"}']
    assert all(_accepts(grammar, text) for text in good)
    assert_masks_exact(TokenIndex(Tokenizer.from_hf_dir(json_model), 448), grammar, good)
