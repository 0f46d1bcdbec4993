"""JSON schemas compiled into grammars for JSON mode (``response_format={"type": "json_schema", ...}``): the
answer is one JSON object that the schema accepts, its properties written in the schema's order, every one
of them (as OpenAI's strict structured outputs writes them).

What is enforced: ``type`` (one or a list), ``properties`` / ``required`` / ``additionalProperties`` (only the
listed properties are written, all of them), ``items``, ``minItems`` / ``maxItems``, ``prefixItems`` of a
fixed length (a tuple), ``enum``, ``const``, ``minLength`` / ``maxLength`` of strings (in characters),
``pattern`` and ``format`` of strings (date-time, date, time, uuid, email, hostname, ipv4;
:mod:`tritium.engine.regex`: such a string is written in printable ASCII without escapes, and a pattern is
not anchored unless it says ``^`` / ``$``; with ``minLength`` / ``maxLength`` too, a character only where a
match of an allowed length can still end), ``minimum`` / ``maximum`` / ``exclusiveMinimum`` /
``exclusiveMaximum`` of integers and of numbers (digit by digit: a digit only where the range can still be
reached; a bounded number is written without an exponent, with at most 15 significant digits:
:class:`_DecimalRange`), ``anyOf`` and ``oneOf`` (branches that begin with different characters: a string
or null, an object or an array, ...; objects among them told apart by their first property, the same name in
each with a different ``const`` string: a tagged union, as forced tool calls and pydantic's discriminated
unions use; such branches never match one value together, so ``oneOf``'s "exactly one" holds), ``allOf`` of
one schema, ``$ref`` into ``$defs`` / ``definitions`` (not recursive), and ``{}`` / ``true`` (any JSON
value); an object without ``properties`` is any JSON object. The root is an object or an array.
Annotations (``title``, ``description``, ``default``, ...) are ignored (OpenAPI's ``discriminator`` too).
What is not (other formats, a pattern together with a format, ``multipleOf``, ``allOf`` of several
schemas, ``not``, recursive references, ...) is refused by name with ValueError, so that no answer silently
breaks its schema. Every string is well-formed UTF-8, as in JSON mode (a free string's frame carries the
character left open, :data:`tritium.engine.json_mode.UTF8_OPEN`).

A state is a tuple of frames (the innermost last), each a tuple naming its node and its progress; the empty
tuple is the finished answer. Grammars are cached by the schema's canonical JSON, so requests with the same
schema share their masks (:class:`tritium.engine.json_mode.TokenIndex`).
"""

from __future__ import annotations

import collections
import fractions
import json
import math
import threading

from tritium.engine import json_mode as jm
from tritium.engine.regex import FORMATS, compile_pattern

_ANNOTATIONS = frozenset(("title", "description", "examples", "default", "$schema", "$id", "$comment", "deprecated",
                          "readOnly", "writeOnly", "$defs", "definitions", "discriminator"))
_KEYWORDS = {
    "object": frozenset(("type", "properties", "required", "additionalProperties")),
    "array": frozenset(("type", "items", "minItems", "maxItems", "prefixItems")),
    "string": frozenset(("type", "minLength", "maxLength", "pattern", "format")),
    "number": frozenset(("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")),
    "integer": frozenset(("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")),
    "boolean": frozenset(("type",)), "null": frozenset(("type",)),
}
_VALUE_START = frozenset(b'{["-0123456789tfn')
_NUMBER_BYTES = frozenset(b"0123456789.eE+-")
MAX_NODES = 4096


class SchemaGrammar(jm.Grammar):
    """A compiled schema (:func:`compile_schema`): a grammar of :mod:`tritium.engine.json_mode`."""

    def __init__(self, schema, key: str):
        self.key = "json_schema:" + key
        self.nodes: list[tuple] = []
        self._defs = (schema.get("$defs") or schema.get("definitions") or {}) if isinstance(schema, dict) else {}
        self._resolving: list[str] = []
        root = self._compile(schema, "schema")
        if self._first(root) not in (frozenset(b"{"), frozenset(b"[")):
            raise ValueError("json_schema: the schema's root must be an object or an array (type 'object' or 'array')")
        self.start = (self._frame(root),)

    # -- compiling --------------------------------------------------------------------------------------------
    def _node(self, node: tuple) -> int:
        if len(self.nodes) >= MAX_NODES:
            raise ValueError(f"json_schema: more than {MAX_NODES} nodes")
        self.nodes.append(node)
        return len(self.nodes) - 1

    def _compile(self, schema, where: str) -> int:
        if schema is True or schema == {}:
            return self._node(("any", (jm.VALUE, "", None)))
        if not isinstance(schema, dict):
            raise ValueError(f"json_schema: {where} must be an object (a schema), got {schema!r}")
        if "$ref" in schema:
            return self._ref(schema, where)
        if "enum" in schema or "const" in schema:
            values = schema["enum"] if "enum" in schema else [schema["const"]]
            self._check(schema, frozenset(("enum", "const", "type")), where)
            if not isinstance(values, list) or not values:
                raise ValueError(f"json_schema: {where}.enum must be a non-empty list, got {values!r}")
            literals = tuple(sorted({json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()
                                     for v in values}))
            return self._node(("enum", literals))
        for key in ("anyOf", "oneOf"):  # oneOf: the alternatives taken are disjoint (_union), so one matches
            if key in schema:
                self._check(schema, frozenset((key,)), where)
                branches = schema[key]
                if not isinstance(branches, list) or not branches:
                    raise ValueError(f"json_schema: {where}.{key} must be a non-empty list of schemas")
                return self._union([self._compile(b, f"{where}.{key}[{i}]") for i, b in enumerate(branches)], where)
        if "allOf" in schema:  # one schema (as pydantic wraps a $ref to give it a description): that schema
            self._check(schema, frozenset(("allOf",)), where)
            parts = schema["allOf"]
            if not isinstance(parts, list) or len(parts) != 1:
                raise ValueError(f"json_schema: {where}.allOf is supported with one schema in it, got "
                                 f"{len(parts) if isinstance(parts, list) else repr(parts)}")
            return self._compile(parts[0], f"{where}.allOf[0]")
        kind = schema.get("type")
        if kind is None:
            self._check(schema, frozenset(), where)
            return self._node(("any", (jm.VALUE, "", None)))
        if isinstance(kind, list):
            if not kind or not all(isinstance(k, str) for k in kind):
                raise ValueError(f"json_schema: {where}.type must be a type name or a list of them, got {kind!r}")
            unknown = [k for k in kind if k not in _KEYWORDS]
            if unknown:
                raise ValueError(f"json_schema: {where}.type {unknown[0]!r} is not a JSON Schema type "
                                 f"({', '.join(_KEYWORDS)})")
            self._check(schema, frozenset().union(*(_KEYWORDS[k] for k in kind)), where)
            if "number" in kind:  # an integer is a number
                kind = [k for k in kind if k != "integer"]
            if len(kind) > 1:  # each type with its own keywords (an object's properties go to the object)
                return self._union([self._compile({key: v for key, v in schema.items()
                                                   if key in _KEYWORDS[k] or key in _ANNOTATIONS} | {"type": k},
                                                  f"{where}<{k}>") for k in kind], where)
            kind = kind[0]
        if kind not in _KEYWORDS:
            raise ValueError(f"json_schema: {where}.type {kind!r} is not a JSON Schema type "
                             f"({', '.join(_KEYWORDS)})")
        self._check(schema, _KEYWORDS[kind], where)
        if kind == "string" and ("pattern" in schema or "format" in schema):
            dfa = _pattern(schema, where)
            lo, hi = _bound(schema, "minLength", where), _bound(schema, "maxLength", where)
            if lo is None and hi is None:
                return self._node(("pattern", dfa, None))
            return self._node(("pattern", dfa, _LengthWindow(dfa, lo or 0, hi, where)))
        if kind == "string":
            lo, hi = _bound(schema, "minLength", where), _bound(schema, "maxLength", where)
            if lo is None and hi is None:
                return self._node(("string",))
            if hi is not None and hi < (lo or 0):
                raise ValueError(f"json_schema: {where}.maxLength {hi} is below minLength {lo}")
            return self._node(("lstring", lo or 0, hi))
        if kind == "integer" and any(k in schema for k in _RANGE):
            lo, hi = _integer_range(schema, where)
            return self._node(("range", lo, hi))
        if kind == "number" and any(k in schema for k in _RANGE):
            return self._node(("drange", _DecimalRange(schema, where)))
        if kind in ("number", "integer"):
            return self._node(("number", kind == "integer"))
        if kind == "boolean":
            return self._node(("enum", (b"false", b"true")))
        if kind == "null":
            return self._node(("enum", (b"null",)))
        if kind == "array":
            return self._array(schema, where)
        return self._object(schema, where)

    def _check(self, schema: dict, allowed: frozenset, where: str) -> None:
        for key in schema:
            if key not in allowed and key not in _ANNOTATIONS:
                raise ValueError(f"json_schema: {where}.{key} is not supported (JSON mode enforces type, properties, "
                                 f"required, additionalProperties, items, minItems, maxItems, prefixItems, enum, "
                                 f"const, anyOf, oneOf, $ref, minLength / maxLength / pattern / format of strings and "
                                 f"minimum / maximum (exclusive too) of numbers; {key} would not be checked)")

    def _ref(self, schema: dict, where: str) -> int:
        ref = schema["$ref"]
        self._check(schema, frozenset(("$ref",)), where)
        for prefix in ("#/$defs/", "#/definitions/"):
            if isinstance(ref, str) and ref.startswith(prefix) and ref[len(prefix):] in self._defs:
                name = ref[len(prefix):]
                if name in self._resolving:
                    raise ValueError(f"json_schema: {where}.$ref {ref!r} is recursive, which is not supported")
                self._resolving.append(name)
                try:
                    return self._compile(self._defs[name], ref)
                finally:
                    self._resolving.pop()
        raise ValueError(f"json_schema: {where}.$ref {ref!r} names no definition under #/$defs or #/definitions")

    def _union(self, branches: list[int], where: str) -> int:
        objects = [nid for nid in branches if self.nodes[nid][0] == "object"]
        if len(objects) > 1:  # told apart by their first property's const, or refused below
            tagged = self._tagged(objects)
            if tagged is not None:
                branches = [tagged] + [nid for nid in branches if nid not in objects]
        if len(branches) == 1:
            return branches[0]
        seen: set[int] = set()
        table = []
        for nid in branches:
            first = self._first(nid)
            if first & seen:
                raise ValueError(f"json_schema: {where}: the alternatives can begin with the same character "
                                 f"({bytes(sorted(first & seen)).decode()!r}); JSON mode takes alternatives that "
                                 f"differ in their first character (e.g. a string or null), and objects whose first "
                                 f"property is the same name with a different const string in each")
            seen |= first
            table.append((first, nid))
        return self._node(("union", tuple(table)))

    def _tagged(self, objects: list[int]) -> int | None:
        """One node for objects whose first property has the same name in each and a different ``const``
        string (``{"name": {"const": "f"}, ...}``): the tag's value picks the object; None if they are not."""
        prefix, table = None, []
        for nid in objects:
            items = self.nodes[nid][1]
            if len(items) < 5 or items[3][0] != "val":
                return None
            value = self.nodes[items[3][1]]
            if value[0] != "enum" or len(value[1]) != 1 or value[1][0][:1] != b'"':
                return None
            if prefix is None:
                prefix = items[:3]
            elif items[:3] != prefix:
                return None
            table.append((value[1][0], self._node(("object", items[4:]))))
        if len({tag for tag, _ in table}) < len(table):
            return None
        return self._node(("tagged", tuple(lit for _, lit in prefix), tuple(table)))

    def _array(self, schema: dict, where: str) -> int:
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        for name, v in (("minItems", lo), ("maxItems", hi)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 256):
                raise ValueError(f"json_schema: {where}.{name} must be an integer in [0, 256], got {v!r}")
        if hi is not None and hi < lo:
            raise ValueError(f"json_schema: {where}.maxItems {hi} is below minItems {lo}")
        if "prefixItems" in schema:
            return self._tuple(schema, lo, hi, where)
        item = self._compile(schema.get("items", True), f"{where}.items")
        return self._node(("array", item, lo, hi))

    def _tuple(self, schema: dict, lo: int, hi: int | None, where: str) -> int:
        """``prefixItems`` of a fixed length (as pydantic writes a tuple: ``minItems`` = ``maxItems`` = their
        count, or no items past them): each item its own schema, in order; the sequence of an object without
        its keys."""
        parts = schema["prefixItems"]
        if not isinstance(parts, list):
            raise ValueError(f"json_schema: {where}.prefixItems must be a list of schemas")
        n = len(parts)
        closed = schema.get("items", True) is False or hi == n
        if not closed or lo != n:
            raise ValueError(f"json_schema: {where}.prefixItems is supported as a tuple of exactly its {n} items "
                             f"(minItems {n} and maxItems {n}, or items false), got minItems {lo}, maxItems {hi}")
        items: list[tuple] = [("lit", b"[")]
        for i, sub in enumerate(parts):
            items += [("lit", b",")] if i else []
            items.append(("val", self._compile(sub, f"{where}.prefixItems[{i}]")))
        items.append(("lit", b"]"))
        return self._node(("tuple", tuple(items)))

    def _object(self, schema: dict, where: str) -> int:
        props = schema.get("properties")
        extra = schema.get("additionalProperties", True)
        if not (isinstance(extra, bool) or isinstance(extra, dict)):
            raise ValueError(f"json_schema: {where}.additionalProperties must be a boolean or a schema")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise ValueError(f"json_schema: {where}.required must be a list of property names")
        if props is None:
            if required:
                raise ValueError(f"json_schema: {where}.required names properties but the object has none")
            return self._node(("any", (jm.TOP, "", None)))  # any JSON object
        if not isinstance(props, dict):
            raise ValueError(f"json_schema: {where}.properties must be an object")
        missing = [r for r in required if r not in props]
        if missing:
            raise ValueError(f"json_schema: {where}.required names {missing[0]!r}, which is not in properties")
        items: list[tuple] = [("lit", b"{")]
        for i, (name, sub) in enumerate(props.items()):
            key = json.dumps(name, ensure_ascii=False).encode()
            items += [("lit", b"," if i else b""), ("lit", key), ("lit", b":"),
                      ("val", self._compile(sub, f"{where}.properties.{name}"))]
        items.append(("lit", b"}"))
        return self._node(("object", tuple(it for it in items if it != ("lit", b""))))

    def _first(self, nid: int) -> frozenset:
        """The bytes a value of node ``nid`` can begin with."""
        node = self.nodes[nid]
        kind = node[0]
        if kind in ("object", "tagged"):
            return frozenset(b"{")
        if kind in ("array", "tuple"):
            return frozenset(b"[")
        if kind in ("string", "lstring", "pattern"):
            return frozenset(b'"')
        if kind == "number":
            return frozenset(b"-0123456789")
        if kind == "range":
            _, lo, hi = node
            return frozenset((b"-" if lo is None or lo < 0 else b"")
                             + (b"0123456789" if hi is None or hi >= 0 else b""))
        if kind == "drange":
            return frozenset(b for b in b"-0123456789" if node[1].reachable(bytes([b])))
        if kind == "enum":
            return frozenset(lit[0] for lit in node[1])
        if kind == "union":
            return frozenset().union(*(first for first, _ in node[1]))
        return frozenset(b"{") if node[1][0] == jm.TOP else _VALUE_START

    def _frame(self, nid: int) -> tuple:
        """A value of node ``nid`` about to begin (whitespace may come first)."""
        kind = self.nodes[nid][0]
        if kind in ("object", "tuple"):  # a tuple steps as an object's items do
            return ("o", nid, 0, 0)
        if kind == "array":
            return ("a", nid, 0, 0)
        if kind == "string":
            return ("s", nid, 0, ())
        if kind == "lstring":
            return ("S", nid, 0, 0, ())
        if kind == "pattern":
            return ("p", nid, -1, 0)
        if kind == "number":
            return ("n", nid, -1)
        if kind == "range":
            return ("r", nid, b"")
        if kind == "drange":
            return ("d", nid, b"")
        if kind == "enum":
            return ("e", nid, b"")
        if kind == "union":
            return ("u", nid)
        if kind == "tagged":
            return ("t", nid, 0, 0, b"")
        return ("g", nid, self.nodes[nid][1])

    # -- the grammar ----------------------------------------------------------------------------------------
    def complete(self, state) -> bool:
        return state == ()

    def in_string(self, state) -> bool:
        if not state:
            return False
        top = state[-1]
        return ((top[0] in "sS" and top[2] == 1) or (top[0] == "p" and top[2] >= 0)
                or (top[0] == "g" and jm.JSON_OBJECT.in_string(top[2])))

    def plain_string(self, state) -> tuple | None:
        # the character left open in a free string (a value's, or one inside an "any" value); a string with
        # length bounds counts its characters, a pattern's steps its automaton: plain bytes change more than
        # the open character there (not plain)
        if not state:
            return None
        top = state[-1]
        if top[0] == "s":
            return top[3] if top[2] == 1 else None
        return jm.JSON_OBJECT.plain_string(top[2]) if top[0] == "g" else None

    def advance(self, state, b: int):
        while state:
            top = state[-1]
            out = self._step(top, b)
            if out is None:
                return None
            what = out[0]
            if what == "set":
                return state[:-1] + (out[1],)
            if what == "push":  # a value begins at this byte: its frame takes the byte
                state = state[:-1] + (out[1], self._frame(out[2]))
                continue
            if what == "replace":  # an alternative chosen by this byte: its frame takes the byte
                state = state[:-1] + (self._frame(out[1]),)
                continue
            state = self._child_done(state[:-1])  # "done": the byte ended it; "end": the byte follows it
            if what == "done":
                return state
        return None  # the answer is finished: nothing follows

    def _child_done(self, state: tuple) -> tuple:
        if not state:
            return state
        parent = state[-1]
        if parent[0] == "o":
            return state[:-1] + (("o", parent[1], parent[2] + 1, 0),)
        _, nid, _, count = parent
        node = self.nodes[nid]
        cap = max(node[2], node[3] or 0)
        return state[:-1] + (("a", nid, 2, min(count + 1, cap)),)

    def _step(self, frame: tuple, b: int):
        kind = frame[0]
        if kind == "s":  # ("s", node, sub, the UTF-8 character left open: jm.UTF8_OPEN)
            _, nid, sub, open_ = frame
            if sub == 1:
                if open_ or b >= 0x80:
                    open_ = jm.utf8_step(open_, b)
                    return None if open_ is None else ("set", ("s", nid, 1, open_))
                if b == 0x22:
                    return ("done",)
                if b == 0x5C:
                    return ("set", ("s", nid, 2, ()))
                return None if b < 0x20 else ("set", frame)
            if sub == 0:
                return ("set", frame) if b in jm._WS else ("set", ("s", nid, 1, ())) if b == 0x22 else None
            if sub == 2:
                return ("set", ("s", nid, 14, ())) if b == 0x75 else (
                    ("set", ("s", nid, 1, ())) if b in jm._ESCAPES else None)
            if b not in jm._HEX:  # sub 14..11: hex digits of a \\u escape left
                return None
            return ("set", ("s", nid, 1 if sub == 11 else sub - 1, ()))
        if kind == "S":
            return self._bounded_string(frame, b)
        if kind == "p":  # a string of a pattern: its automaton on the bytes (written unescaped)
            _, nid, q, count = frame
            _, dfa, window = self.nodes[nid]
            if q < 0:
                return ("set", frame) if b in jm._WS else ("set", ("p", nid, dfa.start, 0)) if b == 0x22 else None
            if b == 0x22:
                return ("done",) if dfa.accepting(q) and (window is None or window.closes(count)) else None
            nxt = dfa.step(q, b)
            if nxt is None or (window is not None and not window.reachable(nxt, count + 1)):
                return None
            # characters are counted only where the length is bounded (else equal states share their masks)
            return ("set", ("p", nid, nxt, count + 1 if window is not None else 0))
        if kind == "r":
            return self._range(frame, b)
        if kind == "d":
            return self._decimal(frame, b)
        if kind == "o":
            _, nid, pos, off = frame
            item = self.nodes[nid][1][pos]
            if item[0] == "val":
                return ("push", frame, item[1])
            lit = item[1]
            if off == 0 and b in jm._WS:
                return ("set", frame)
            if b != lit[off]:
                return None
            if off + 1 < len(lit):
                return ("set", ("o", nid, pos, off + 1))
            return ("done",) if pos + 1 == len(self.nodes[nid][1]) else ("set", ("o", nid, pos + 1, 0))
        if kind == "a":
            _, nid, phase, count = frame
            _, item, lo, hi = self.nodes[nid]
            if b in jm._WS:
                return ("set", frame)
            if phase == 0:
                return ("set", ("a", nid, 1, count)) if b == 0x5B else None
            if b == 0x5D and phase in (1, 2):
                return ("done",) if count >= lo else None
            if phase == 2:
                return ("set", ("a", nid, 3, count)) if b == 0x2C and (hi is None or count < hi) else None
            if phase == 1 and hi == 0:
                return None
            return ("push", frame, item)
        if kind == "n":
            return self._number(frame, b)
        if kind == "e":
            _, nid, prefix = frame
            literals = self.nodes[nid][1]
            if not prefix and b in jm._WS:
                return ("set", frame)
            grown = prefix + bytes([b])
            longer = [lit for lit in literals if lit.startswith(grown)]
            if longer:
                return ("done",) if longer == [grown] else ("set", ("e", nid, grown))
            return ("end",) if prefix in literals else None
        if kind == "t":  # a tagged union: its shared first literals, then the tag's value picks the object
            _, nid, pos, off, tag = frame
            _, prefix, table = self.nodes[nid]
            if pos < len(prefix):
                lit = prefix[pos]
                if off == 0 and b in jm._WS:
                    return ("set", frame)
                if b != lit[off]:
                    return None
                return ("set", ("t", nid, pos, off + 1, b"") if off + 1 < len(lit) else ("t", nid, pos + 1, 0, b""))
            if not tag and b in jm._WS:
                return ("set", frame)
            grown = tag + bytes([b])
            for lit, tail in table:  # JSON strings: none is a prefix of another
                if lit == grown:
                    return ("set", ("o", tail, 0, 0))
            return ("set", ("t", nid, pos, 0, grown)) if any(lit.startswith(grown) for lit, _ in table) else None
        if kind == "u":
            if b in jm._WS:
                return ("set", frame)
            for first, nid in self.nodes[frame[1]][1]:
                if b in first:
                    return ("replace", nid)
            return None
        # "g": any JSON value (or object), the generic recognizer inside
        gs = frame[2]
        if gs[0] == jm.NUM and gs[1] == "" and b not in _NUMBER_BYTES:
            return ("end",) if gs[2] in jm._NUMBER_ENDS else None
        nxt = jm.advance(gs, b)
        if nxt is None:
            return None
        return ("done",) if nxt[0] == jm.DONE else ("set", ("g", frame[1], nxt))

    def _bounded_string(self, frame: tuple, b: int):
        """A string of minLength..maxLength characters: valid UTF-8 (each character counted once; bytes
        that would decode to replacement characters are not written), an escape counting one (escapes of
        surrogates, which would pair into one character, are not written)."""
        _, nid, sub, count, cont = frame
        _, lo, hi = self.nodes[nid]
        if cont:  # inside a UTF-8 character: (bytes left, range of the next byte)
            cont = jm.utf8_step(cont, b)
            return None if cont is None else ("set", ("S", nid, 1, count, cont))
        if sub == 0:
            return ("set", frame) if b in jm._WS else ("set", ("S", nid, 1, 0, ())) if b == 0x22 else None
        if sub == 1:
            if b == 0x22:
                return ("done",) if count >= lo else None
            if b < 0x20 or (hi is not None and count >= hi):
                return None
            if b == 0x5C:
                return ("set", ("S", nid, 2, count, ()))
            if b < 0x80:
                return ("set", ("S", nid, 1, count + 1, ()))
            lead = jm.UTF8_LEADS.get(b)
            return None if lead is None else ("set", ("S", nid, 1, count + 1, lead))
        if sub == 2:
            return ("set", ("S", nid, 14, count, ())) if b == 0x75 else (
                ("set", ("S", nid, 1, count + 1, ())) if b in jm._ESCAPES else None)
        if sub == 20:  # \u and a first hex digit d: not a surrogate (d800-dfff)
            return ("set", ("S", nid, 12, count, ())) if b in b"01234567" else None
        if b not in jm._HEX:  # sub 14..11: hex digits of a \u escape left
            return None
        if sub == 14 and b in b"dD":
            return ("set", ("S", nid, 20, count, ()))
        return ("set", ("S", nid, 1, count + 1, ()) if sub == 11 else ("S", nid, sub - 1, count, ()))

    def _range(self, frame: tuple, b: int):
        """An integer in [lo, hi] (either may be None), digit by digit: a digit only where some integer of
        the range still begins with the digits so far; the number ends where its value is in the range."""
        _, nid, text = frame
        _, lo, hi = self.nodes[nid]
        if not text and b in jm._WS:
            return ("set", frame)
        if b in jm._DIGITS or (b == 0x2D and not text):
            grown = text + bytes([b])
            digits = grown.lstrip(b"-")
            if digits[:1] == b"0" and (len(digits) > 1 or grown.startswith(b"-")):
                return None  # no leading zeros, no -0
            if digits and not _range_reachable(grown.startswith(b"-"), digits.decode(), lo, hi):
                return None
            if grown == b"-" and lo is not None and lo >= 0:
                return None
            return ("set", ("r", nid, grown))
        if text.lstrip(b"-") and (lo is None or int(text) >= lo) and (hi is None or int(text) <= hi):
            return ("end",)
        return None

    def _decimal(self, frame: tuple, b: int):
        """A number in a range (:class:`_DecimalRange`), written without an exponent, byte by byte: a byte only
        where some number of the range still begins with the text so far; the number ends where its value
        is in the range."""
        _, nid, text = frame
        rng = self.nodes[nid][1]
        if not text and b in jm._WS:
            return ("set", frame)
        if b in jm._DIGITS or b == 0x2E or (b == 0x2D and not text):
            grown = text + bytes([b])
            return ("set", ("d", nid, grown)) if rng.reachable(grown) else None
        return ("end",) if rng.closes(text) else None

    def _number(self, frame: tuple, b: int):
        _, nid, sub = frame
        integer = self.nodes[nid][1]
        if sub == -1:
            if b in jm._WS:
                return ("set", frame)
            if b == 0x2D:
                return ("set", ("n", nid, jm.N_MINUS))
            return ("set", ("n", nid, jm.N_ZERO if b == 0x30 else jm.N_INT)) if b in jm._DIGITS else None
        if b in jm._DIGITS:
            if sub == jm.N_ZERO:
                return None
            nxt = {jm.N_MINUS: jm.N_ZERO if b == 0x30 else jm.N_INT, jm.N_INT: jm.N_INT, jm.N_DOT: jm.N_FRAC,
                   jm.N_FRAC: jm.N_FRAC, jm.N_E: jm.N_EXP, jm.N_ESIGN: jm.N_EXP, jm.N_EXP: jm.N_EXP}[sub]
            return ("set", ("n", nid, nxt))
        if not integer and b == 0x2E and sub in (jm.N_ZERO, jm.N_INT):
            return ("set", ("n", nid, jm.N_DOT))
        if not integer and b in (0x65, 0x45) and sub in (jm.N_ZERO, jm.N_INT, jm.N_FRAC):
            return ("set", ("n", nid, jm.N_E))
        if b in (0x2B, 0x2D) and sub == jm.N_E:
            return ("set", ("n", nid, jm.N_ESIGN))
        return ("end",) if sub in jm._NUMBER_ENDS else None


_RANGE = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


class _LengthWindow:
    """minLength / maxLength of a pattern's string: which DFA states can still end a match within the length
    window. ``bits[q]`` has bit r set where an accepting state is r characters from q (r <= R: maxLength, or
    without one minLength plus the number of states: a longer match then has a shorter one at least as long
    as minLength, by cutting a cycle out)."""

    MAX_WORK = 4_000_000  # states x distinct successors x R: the compile-time bound

    def __init__(self, dfa, lo: int, hi: int | None, where: str):
        if hi is not None and hi < lo:
            raise ValueError(f"json_schema: {where}.maxLength {hi} is below minLength {lo}")
        n = len(dfa.table)
        self.lo, self.hi = lo, hi
        self.R = hi if hi is not None else lo + n
        succ = [sorted(set(row.values())) for row in dfa.table]
        if sum(map(len, succ)) * self.R > self.MAX_WORK:
            raise ValueError(f"json_schema: {where}: the pattern's automaton ({n} states) is too large for a length "
                             f"bound of {self.R}")
        full = (1 << (self.R + 1)) - 1
        base = [1 if dfa.accepting(q) else 0 for q in range(n)]
        bits = list(base)
        for _ in range(self.R):
            nxt = []
            for q in range(n):
                b = base[q]
                for t in succ[q]:
                    b |= bits[t] << 1
                nxt.append(b & full)
            bits = nxt
        self.bits = bits
        if not self.reachable(dfa.start, 0):
            raise ValueError(f"json_schema: {where}: no string of the pattern has a length in [{lo}, "
                             f"{'inf' if hi is None else hi}]")

    def reachable(self, q: int, count: int) -> bool:
        """Whether a match can end from state q after ``count`` characters, its length in the window."""
        if self.hi is None:
            if count >= self.lo:
                return True  # every state of the DFA can still end a match (its dead states are pruned)
            need, top = self.lo - count, self.R
        else:
            if count > self.hi:
                return False
            need, top = max(0, self.lo - count), self.hi - count
        return (self.bits[q] >> need) & ((1 << (top - need + 1)) - 1) != 0

    def closes(self, count: int) -> bool:
        return count >= self.lo and (self.hi is None or count <= self.hi)


def _pattern(schema: dict, where: str):
    """The DFA of a string schema's ``pattern`` or ``format`` (one of them)."""
    if "pattern" in schema and "format" in schema:
        raise ValueError(f"json_schema: {where} has both a pattern and a format; one of them is supported")
    if "format" in schema:
        name = schema["format"]
        if name not in FORMATS:
            raise ValueError(f"json_schema: {where}.format {name!r} is not supported; expected one of "
                             f"{', '.join(FORMATS)}")
        return compile_pattern(FORMATS[name])
    try:
        return compile_pattern(schema["pattern"])
    except ValueError as e:
        raise ValueError(f"json_schema: {where}.{e}") from None


def _bound(schema: dict, key: str, where: str) -> int | None:
    value = schema.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"json_schema: {where}.{key} must be a non-negative integer, got {value!r}")
    return value


def _bounds(schema: dict, where: str) -> list[tuple[str, int | float]]:
    """A number schema's range keywords present, each a finite number (ValueError naming it otherwise)."""
    found = []
    for key in _RANGE:
        value = schema.get(key)
        if value is None:
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"json_schema: {where}.{key} must be a finite number, got {value!r}")
        found.append((key, value))
    return found


def _integer_range(schema: dict, where: str) -> tuple[int | None, int | None]:
    """An integer schema's bounds as an inclusive [lo, hi] (None: unbounded)."""
    lo = hi = None
    for key, value in _bounds(schema, where):
        if key == "minimum":
            bound = math.ceil(value)
        elif key == "exclusiveMinimum":
            bound = math.floor(value) + 1
        elif key == "maximum":
            bound = math.floor(value)
        else:
            bound = math.ceil(value) - 1
        if key.endswith("inimum"):
            lo = bound if lo is None else max(lo, bound)
        else:
            hi = bound if hi is None else min(hi, bound)
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"json_schema: {where}: no integer lies in its range ({lo} > {hi})")
    return lo, hi


def _range_reachable(negative: bool, digits: str, lo: int | None, hi: int | None) -> bool:
    """Whether some integer in [lo, hi] is written with the sign and leading ``digits`` given."""
    n = int(digits)
    if digits == "0":
        return (lo is None or lo <= 0) and (hi is None or hi >= 0)
    for k in range(400):
        a, b = n * 10 ** k, (n + 1) * 10 ** k - 1  # the magnitudes written with these leading digits
        if negative:
            a, b = -b, -a
        if (hi is None or a <= hi) and (lo is None or b >= lo):
            return True
        if (not negative and hi is not None and a > hi) or (negative and lo is not None and b < lo):
            return False  # more digits only move further away
    return False


class _DecimalRange:
    """The bounds of a number schema (``minimum`` / ``maximum``, exclusive or not) and the numbers written
    for it: ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``, no exponent, at most ``MAX_SIG`` significant digits (from the first
    non-zero digit on) and ``MAX_FRAC`` after the point. Each bound is the decimal of its shortest repr (the
    ``0.1`` a schema says, not the double nearest it), and values compare exactly. With at most 15 significant
    digits two different numbers are two different doubles, in the same order, so that a validator that
    reads the answer's numbers as doubles (Python's json) agrees with every comparison made here."""

    MAX_SIG = 15
    MAX_FRAC = 20

    def __init__(self, schema: dict, where: str):
        self.lo = self.hi = None  # Fractions, or None: unbounded
        self.lo_open = self.hi_open = False
        self._cache: dict[bytes, bool] = {}
        for key, value in _bounds(schema, where):
            bound = fractions.Fraction(value) if isinstance(value, int) else fractions.Fraction(repr(value))
            is_open = key.startswith("exclusive")
            if key.endswith("inimum"):
                if self.lo is None or bound > self.lo or (bound == self.lo and is_open):
                    self.lo, self.lo_open = bound, is_open
            elif self.hi is None or bound < self.hi or (bound == self.hi and is_open):
                self.hi, self.hi_open = bound, is_open
        if not self.reachable(b""):
            raise ValueError(f"json_schema: {where}: no number of at most {self.MAX_SIG} significant digits lies in "
                             f"its range")

    def _fits(self, v) -> bool:
        return ((self.lo is None or v > self.lo or (v == self.lo and not self.lo_open))
                and (self.hi is None or v < self.hi or (v == self.hi and not self.hi_open)))

    def closes(self, text: bytes) -> bool:
        """Whether ``text`` is a whole number of the range."""
        body = text.lstrip(b"-")
        if not body or body.endswith(b".") or not self.reachable(text):
            return False
        v = fractions.Fraction(text.decode())
        return self._fits(v)

    def reachable(self, text: bytes) -> bool:
        """Whether some number of the range, written as this class writes them, begins with ``text``."""
        hit = self._cache.get(text)
        if hit is None:
            hit = self._cache[text] = self._reachable(text)
            if len(self._cache) > 65536:
                self._cache.clear()
        return hit

    def _reachable(self, text: bytes) -> bool:
        negative = text.startswith(b"-")
        body = text[1:] if negative else text
        if b"-" in body or body.count(b".") > 1 or body.startswith(b"."):
            return False
        if not body:  # a sign or a first digit to come
            return any(self.reachable(text + bytes([d])) for d in (b"0123456789" if negative else b"-0123456789"))
        whole, point, frac = body.partition(b".")
        if (len(whole) > 1 and whole.startswith(b"0")) or len(frac) > self.MAX_FRAC:
            return False
        if len((whole + frac).lstrip(b"0")) > self.MAX_SIG:
            return False
        # the magnitudes allowed: the range mirrored for a negative number
        if negative:
            lo, lo_open = (None, False) if self.hi is None else (-self.hi, self.hi_open)
            hi, hi_open = (None, False) if self.lo is None else (-self.lo, self.lo_open)
        else:
            lo, lo_open, hi, hi_open = self.lo, self.lo_open, self.hi, self.hi_open
        p, nf = int(whole + frac), len(frac)
        cap = 10 ** self.MAX_SIG  # digits from the first non-zero one: c < cap
        # e more whole digits (none after a point or a leading 0) put the magnitude in [p, p + 1) * 10^(e - nf);
        # written with k digits after the point it is c / 10^k, c an integer
        for e in range(1 if point or whole == b"0" else self.MAX_SIG + 1):
            a = fractions.Fraction(p * 10 ** e, 10 ** nf)
            if hi is not None and (a > hi or (a == hi and hi_open)):
                break  # more whole digits only grow it
            b = fractions.Fraction((p + 1) * 10 ** e, 10 ** nf)  # excluded
            if lo is not None and b <= lo:
                continue
            for k in range(max(nf, 1 if point else 0), self.MAX_FRAC + 1):
                scale = 10 ** k
                c_lo, c_hi = a * scale, b * scale - 1  # integers
                if lo is not None:
                    need = lo * scale
                    c_lo = max(c_lo, math.floor(need) + 1 if lo_open and need.denominator == 1 else math.ceil(need))
                if hi is not None:
                    top = hi * scale
                    c_hi = min(c_hi, top.numerator - 1 if hi_open and top.denominator == 1 else math.floor(top))
                if c_lo >= cap:
                    break  # more digits after the point only make more significant ones
                if c_lo <= min(c_hi, cap - 1):
                    return True
        return False


_GRAMMARS: collections.OrderedDict = collections.OrderedDict()
_LOCK = threading.Lock()


def compile_schema(schema) -> SchemaGrammar:
    """The grammar of ``schema`` (a JSON Schema as decoded JSON; cached by its canonical JSON, the 64 most
    recent). ValueError naming the keyword for what JSON mode cannot enforce."""
    try:
        key = json.dumps(schema, sort_keys=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise ValueError(f"json_schema: the schema is not JSON ({e})") from None
    with _LOCK:
        grammar = _GRAMMARS.get(key)
        if grammar is not None:
            _GRAMMARS.move_to_end(key)
            return grammar
    grammar = SchemaGrammar(schema, key)
    with _LOCK:
        _GRAMMARS[key] = grammar
        while len(_GRAMMARS) > 64:
            _GRAMMARS.popitem(last=False)
    return grammar
