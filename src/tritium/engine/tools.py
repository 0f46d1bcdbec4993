"""Tool calling: the OpenAI ``tools`` a chat template is given, and the calls parsed out of a model's answer.

The chat template renders the tools (as the model was trained to read them: the template's ``tools``
variable, a list of ``{"type": "function", "function": {"name", "description", "parameters"}}``); the
answer is then parsed by the model family's format:

- ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, text around them is the
  content (Qwen2.5, Qwen3, QwQ, Hermes and most models whose template mentions ``<tool_call>``).
- ``llama3_json``: the whole answer is a call ``{"name": ..., "parameters": {...}}`` (after an optional
  ``<|python_tag|>``), or several separated by ``;`` (Llama 3.1-3.3); any other answer is content.
- ``mistral``: after ``[TOOL_CALLS]``, a JSON list of calls ``[{"name": ..., "arguments": {...}}, ...]``
  (tokenizers before v11: Mistral 7B v0.3, Mixtral 8x22B, Mistral Nemo), or one ``name[ARGS]{...}`` per
  ``[TOOL_CALLS]`` (v11 and later: Mistral Small 3.1+, Devstral, Magistral; v13's ``name[CALL_ID]id[ARGS]{...}``
  too); the text before the first ``[TOOL_CALLS]`` is content. Its markers are control tokens, kept in the
  text of such requests (the server detokenizes them with ``skip_special_tokens`` off); an answer that is a
  JSON list of calls alone (the marker dropped) is read as calls too. Call ids are 9 letters and digits, as
  Mistral's templates require of the calls sent back to them (v13: the model's own).
- ``pythonic``: the whole answer is a Python list of calls with keyword arguments of literal values,
  ``[get_weather(city="Paris", days=3), get_time()]`` (Llama 3.2 and Llama 4 with their pythonic templates,
  whose instructions show ``[func_name1(params_name1=params_value1, ...)]``); read with :mod:`ast`, never
  run; any other answer is content.

:func:`detect_parser` picks one from the template's text. A block that is not a well-formed call (bad JSON,
no name) stays in the content, as the model wrote it. :class:`ToolCallStream` parses a streamed answer:
content is passed on as it comes, except what may still turn into a call, which is held until it does or
cannot.

A forced call (``tool_choice`` "required" or a named function) is not parsed out of free text: the answer is
constrained by JSON mode (:func:`forced_call_schema`) to the function's arguments (named) or to a JSON list
of calls ``[{"name": ..., "arguments": {...}}, ...]`` ("required"), whatever the model's own format, and
:class:`ForcedCallStream` turns it into calls.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import uuid

from tritium.engine.reasoning import partial_suffix

PARSERS = ("hermes", "llama3_json", "mistral", "pythonic")
_HERMES_OPEN, _HERMES_CLOSE = "<tool_call>", "</tool_call>"
_PYTHON_TAG = "<|python_tag|>"
_MISTRAL_TAG = "[TOOL_CALLS]"
_MISTRAL_ARGS, _MISTRAL_CALL_ID = "[ARGS]", "[CALL_ID]"
_PYTHONIC_HINT = "[func_name1(params_name1=params_value1"  # the instructions of pythonic templates
# whole-answer formats: (the tag an answer of calls may start with, the character its calls start with)
_WHOLE = {"llama3_json": (_PYTHON_TAG, "{"), "pythonic": ("", "[")}


@dataclasses.dataclass
class ToolCall:
    """One call as OpenAI returns it: ``arguments`` is a JSON text (an object)."""
    name: str
    arguments: str
    id: str = dataclasses.field(default_factory=lambda: "call_" + uuid.uuid4().hex[:24])

    def to_openai(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def detect_parser(template: str | None) -> str | None:
    """The tool-call format a chat template's model writes, from the template's text; None if unknown."""
    if not template:
        return None
    if _HERMES_OPEN in template:
        return "hermes"
    if _PYTHONIC_HINT in template:
        return "pythonic"
    if _MISTRAL_TAG in template:
        return "mistral"
    if _PYTHON_TAG in template or ("parameters" in template and "Environment: ipython" in template):
        return "llama3_json"
    return None


def check_tools(tools, what: str = "tools") -> list[dict]:
    """``tools`` as a list of OpenAI function tools (each ``{"type": "function", "function": {"name", ...}}``);
    ValueError naming the field otherwise."""
    if not isinstance(tools, list) or not tools:
        raise ValueError(f"{what} must be a non-empty list of tools, got {_kind(tools)}")
    names = set()
    for i, tool in enumerate(tools):
        where = f"{what}[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise ValueError(f"{where} must be {{'type': 'function', 'function': {{...}}}} (only function tools are "
                             f"supported)")
        fn = tool.get("function")
        if not isinstance(fn, dict):
            raise ValueError(f"{where}.function must be an object with a name, got {_kind(fn)}")
        name = fn.get("name")
        if not isinstance(name, str) or not name or len(name) > 64 or \
                not all(ch.isalnum() or ch in "_-." for ch in name):
            raise ValueError(f"{where}.function.name must be 1-64 letters, digits, '_', '-' or '.', got {name!r}")
        if name in names:
            raise ValueError(f"{where}.function.name {name!r} is given twice")
        names.add(name)
        if "description" in fn and not isinstance(fn["description"], str):
            raise ValueError(f"{where}.function.description must be a string, got {_kind(fn['description'])}")
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            raise ValueError(f"{where}.function.parameters must be a JSON schema object, got {_kind(fn['parameters'])}")
        params = fn.get("parameters", {})
        kind = params.get("type", "object")
        if kind not in ("object", ["object"]):
            # a call's arguments are a JSON object (clients unpack them as keyword arguments), as OpenAI requires
            raise ValueError(f"{where}.function.parameters must describe an object (type 'object'), got type "
                             f"{kind!r}")
        props = params.get("properties", {})
        # (chat templates walk these: a wrong type would fail inside the template, or render nonsense)
        if not isinstance(props, dict) or not all(isinstance(v, dict) for v in props.values()):
            raise ValueError(f"{where}.function.parameters.properties must be an object of JSON schemas, got "
                             f"{_kind(props) if not isinstance(props, dict) else 'an entry that is not an object'}")
        required = params.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise ValueError(f"{where}.function.parameters.required must be a list of property names, got "
                             f"{required!r:.80}")
        extra = sorted(set(fn) - {"name", "description", "parameters", "strict"})
        if extra:
            raise ValueError(f"{where}.function.{extra[0]} is not a function field")
    return [dict(t) for t in tools]


def _kind(x) -> str:
    return "null" if x is None else type(x).__name__


def _call(obj, args_key: str) -> ToolCall | None:
    """A call from a decoded JSON object ``{"name": str, args_key: object}``; None if it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args = obj.get(args_key, obj.get("arguments", {}))
    if isinstance(args, str):  # some models write the arguments as a JSON text already
        args = _decode(args)
    if not isinstance(args, dict):
        return None
    return ToolCall(obj["name"], json.dumps(args, ensure_ascii=False))


def _decode(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _hermes_block(body: str) -> ToolCall | None:
    return _call(_decode(body.strip()), "arguments")


def parse_tool_calls(text: str, parser: str) -> tuple[str | None, list[ToolCall]]:
    """(content, calls) of a whole answer; content None where the answer is calls only."""
    if parser not in PARSERS:
        raise ValueError(f"tool-call parser must be one of {', '.join(PARSERS)}, got {parser!r}")
    stream = ToolCallStream(parser)
    events = stream.feed(text) + stream.finish()
    content = "".join(e for e in events if isinstance(e, str))  # as a stream of it gives it, piece by piece
    calls = [e for e in events if isinstance(e, ToolCall)]
    return (content or None) if calls else content, calls


def _strip_tag(text: str, tag: str) -> str:
    body = text.strip()
    return body[len(tag):].strip() if body.startswith(tag) else body


def _mistral_calls(text: str) -> list[ToolCall] | None:
    """Mistral's calls: the text (from its first ``[TOOL_CALLS]`` on, or without it) one JSON list of
    ``{"name", "arguments"}``, or ``[TOOL_CALLS]name[ARGS]{...}`` repeated (v11+; ``name[CALL_ID]id[ARGS]``:
    v13); None if it is not."""
    body = text.strip()
    tagged = body.startswith(_MISTRAL_TAG)
    if tagged:
        body = body[len(_MISTRAL_TAG):].strip()
    if body.startswith("["):
        items = _decode(body)
        if not isinstance(items, list) or not items:
            return None
        calls = [_call(item, "arguments") for item in items]
        if not all(calls):
            return None
        for call in calls:
            call.id = _mistral_id()
        return calls
    if not tagged:
        return None
    calls = []
    for part in body.split(_MISTRAL_TAG):
        at, brace = part.find(_MISTRAL_ARGS), part.find("{")
        if at >= 0 and (brace < 0 or at < brace):
            head, args = part[:at], part[at + len(_MISTRAL_ARGS):]
        else:  # no [ARGS] before them: the arguments start at the first brace
            head, args = (part[:brace], part[brace:]) if brace > 0 else (part, "")
        name, _, call_id = head.partition(_MISTRAL_CALL_ID)
        name, call_id = name.strip(), call_id.strip()
        decoded = _decode(args.strip())
        if not name or not isinstance(decoded, dict):
            return None
        calls.append(ToolCall(name, json.dumps(decoded, ensure_ascii=False), call_id or _mistral_id()))
    return calls


def _mistral_id() -> str:
    return uuid.uuid4().hex[:9]


def _llama3_calls(text: str) -> list[ToolCall] | None:
    """Llama 3's calls: the whole text one JSON object, or several joined by ';'; None if it is not."""
    body = _strip_tag(text, _PYTHON_TAG)
    if not body.startswith("{"):
        return None
    decoder, calls, at = json.JSONDecoder(), [], 0
    while at < len(body):
        try:
            obj, end = decoder.raw_decode(body, at)
        except json.JSONDecodeError:
            return None
        call = _call(obj, "parameters")
        if call is None:
            return None
        calls.append(call)
        rest = body[end:].lstrip()
        if not rest:
            break
        if not rest.startswith(";"):
            return None
        at = len(body) - len(rest[1:].lstrip())
    return calls or None


def _pythonic_calls(text: str) -> list[ToolCall] | None:
    """Pythonic calls: the whole text one Python list of ``name(key=literal, ...)``; None if it is not (a
    call with positional arguments, a value that is not a literal, ...)."""
    body = text.strip()
    if not body.startswith("["):
        return None
    try:
        tree = ast.parse(body, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    calls = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or node.args or not isinstance(node.func, (ast.Name, ast.Attribute)):
            return None
        name = ast.unparse(node.func)  # a dotted name stays dotted (tool names may hold '.')
        args = {}
        for kw in node.keywords:
            if kw.arg is None:  # **kwargs
                return None
            try:
                args[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
        try:
            calls.append(ToolCall(name, json.dumps(args, ensure_ascii=False)))
        except (TypeError, ValueError):  # a literal JSON cannot hold (a set, bytes, a complex number)
            return None
    return calls


class ToolCallStream:
    """Parses an answer as it streams: ``feed(delta)`` and ``finish()`` return events, content text (str) or
    a :class:`ToolCall`, in answer order. Content that may still be part of a call is held back."""

    finish_reason = "tool_calls"  # of an answer that ends with calls in it

    def __init__(self, parser: str):
        if parser not in PARSERS:
            raise ValueError(f"tool-call parser must be one of {', '.join(PARSERS)}, got {parser!r}")
        self.parser = parser
        self.buffer = ""  # held back
        self.in_call = False  # hermes: inside <tool_call> ... (buffer holds the block's text)
        self.decided = False  # llama3_json, mistral: whether the answer is known to be content
        self.calls = 0
        self._ws = ""  # whitespace at the end of the content so far, held back
        self._said = False  # whether any content went out

    def feed(self, delta: str) -> list:
        self.buffer += delta
        return self._trim(self._parse(final=False), final=False)

    def finish(self) -> list:
        return self._trim(self._parse(final=True), final=True)

    def _trim(self, events: list, final: bool) -> list:
        """Content without the whitespace around calls: whitespace at the end of the content so far is held
        until more content follows it; at the end it goes out only if no call was made. Content that starts
        after a call does so without leading whitespace. Content before the first call keeps the whitespace it
        begins with: it went out before any call was known (whitespace alone before a call is held, and
        dropped)."""
        out = []
        calls = self.calls - sum(isinstance(e, ToolCall) for e in events)  # made before this batch's first event
        for event in events:
            if not isinstance(event, str):
                calls += isinstance(event, ToolCall)
                out.append(event)
                continue
            text = self._ws + event
            body = text.rstrip()
            if not body:
                self._ws = text
                continue
            self._ws = text[len(body):]
            if not self._said and calls:
                body = body.lstrip()
            self._said = True
            out.append(body)
        if final:
            if self._ws and not self.calls:
                out.append(self._ws)
            self._ws = ""
        return out

    def _parse(self, final: bool) -> list:
        if self.parser == "hermes":
            return self._hermes(final)
        return self._mistral(final) if self.parser == "mistral" else self._whole(final)

    def _mistral(self, final: bool) -> list:
        """Content up to the first ``[TOOL_CALLS]``, the calls after it (parsed at the end); an answer that
        begins with '[' is held as the tag-less JSON list it may be (decided at the end, as ``_whole``)."""
        events = []
        if not self.in_call:
            start = self.buffer.find(_MISTRAL_TAG)
            if start >= 0:
                if start:
                    events.append(self.buffer[:start])
                self.buffer, self.in_call, self.decided = self.buffer[start:], True, True
            elif self.decided or (self.buffer.strip() and not self.buffer.lstrip().startswith("[")):
                self.decided = True  # content: passed on, but for what may begin the tag
                keep = 0 if final else partial_suffix(self.buffer, _MISTRAL_TAG)
                text, self.buffer = self.buffer[:len(self.buffer) - keep], self.buffer[len(self.buffer) - keep:]
                return self._count(events + ([text] if text else []))
        if final and self.buffer:  # the calls after the tag, or a tag-less list; else the text as written
            events += _mistral_calls(self.buffer) or [self.buffer]
            self.buffer, self.in_call = "", False
        return self._count(events)

    def _hermes(self, final: bool) -> list:
        events = []
        while True:
            if self.in_call:
                end = self.buffer.find(_HERMES_CLOSE)
                if end < 0:
                    if final:  # an unclosed block: a call if its text is one, else content as written
                        call = _hermes_block(self.buffer)
                        events.append(call if call else _HERMES_OPEN + self.buffer)
                        self.buffer, self.in_call = "", False
                    return self._count(events)
                body, self.buffer = self.buffer[:end], self.buffer[end + len(_HERMES_CLOSE):]
                self.in_call = False
                call = _hermes_block(body)
                events.append(call if call else _HERMES_OPEN + body + _HERMES_CLOSE)
                continue
            start = self.buffer.find(_HERMES_OPEN)
            if start >= 0:
                if start:
                    events.append(self.buffer[:start])
                self.buffer, self.in_call = self.buffer[start + len(_HERMES_OPEN):], True
                continue
            keep = 0 if final else partial_suffix(self.buffer, _HERMES_OPEN)
            text, self.buffer = self.buffer[:len(self.buffer) - keep], self.buffer[len(self.buffer) - keep:]
            if text:
                events.append(text)
            return self._count(events)

    def _whole(self, final: bool) -> list:
        """Formats whose calls are the whole answer: held while it may be calls, parsed at its end."""
        if self.decided:
            text, self.buffer = self.buffer, ""
            return [text] if text else []
        tag, opener = _WHOLE[self.parser]
        head = self.buffer.lstrip()
        maybe = not head or head.startswith(opener) or bool(tag) and tag.startswith(head[:len(tag)])
        if maybe and not final:
            return []
        calls = None
        if maybe:
            calls = (_llama3_calls if self.parser == "llama3_json" else _pythonic_calls)(self.buffer)
        self.decided = True
        if calls:
            self.buffer = ""
            return self._count(calls)
        return self._whole(final)

    def _count(self, events: list) -> list:
        self.calls += sum(isinstance(e, ToolCall) for e in events)
        return events


def _parameters(tool: dict) -> dict:
    """A checked tool's parameters schema (none: a function of no arguments, as OpenAI reads it)."""
    return tool["function"].get("parameters") or {"type": "object", "properties": {}}


def forced_call_schema(tools: list[dict], name: str | None = None, parallel: bool = True) -> dict:
    """The JSON schema a forced call's answer is held to (``tools`` checked by :func:`check_tools`): with
    ``name``, that function's arguments (its parameters); else a list of at least one call, each
    ``{"name": <a tool's name>, "arguments": <its parameters>}`` (at most one without ``parallel``)."""
    if name is not None:
        for tool in tools:
            if tool["function"]["name"] == name:
                return _parameters(tool)
        raise ValueError(f"no tool is named {name!r} (tools: {', '.join(t['function']['name'] for t in tools)})")
    calls = [{"type": "object", "properties": {"name": {"const": t["function"]["name"]},
                                               "arguments": _parameters(t)}} for t in tools]
    schema = {"type": "array", "minItems": 1, "items": {"anyOf": calls}}
    if not parallel:
        schema["maxItems"] = 1
    return schema


_PARTIAL_CALL = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*(.*)', re.DOTALL)


def _as_written(text: str) -> ToolCall | None:
    """The call of a whole call object of a forced answer (``{"name": ..., "arguments": {...}}``, as
    :func:`forced_call_schema` writes it), its arguments as written; None if it is not one."""
    call = _call(_decode(text), "arguments")
    m = _PARTIAL_CALL.match(text)
    if call is not None and m is not None:
        args = m.group(2)[:-1].strip()  # the arguments, then the call's closing brace
        if isinstance(_decode(args), dict):
            call.arguments = args
    return call


@dataclasses.dataclass
class ArgumentsDelta:
    """More of the arguments of the call at ``index`` of a streamed answer (OpenAI's tool-call delta)."""
    index: int
    arguments: str


class ForcedCallStream:
    """The calls of a forced answer (:func:`forced_call_schema`), with the interface of
    :class:`ToolCallStream`: ``feed(delta)`` and ``finish()`` return the calls as they complete (named: the
    one call, at the end; "required": each call as its object closes). An answer cut short (``max_tokens``)
    ends with its last call as far as it got, the arguments unfinished; an answer with no call in it at all
    (cut before its first name) is content.

    ``incremental`` (streamed): a call as soon as its arguments begin, then each piece of them as an
    :class:`ArgumentsDelta` (with the call's index among the answer's calls); "required": each call's name as
    soon as it is written in full (the schema writes a call's ``name`` before its ``arguments``). Streamed or
    not, the arguments are the model's text as written (JSON mode held it to valid JSON), from their opening
    brace on."""

    def __init__(self, name: str | None = None, incremental: bool = False):
        self.name = name
        self.incremental = incremental
        self._sent = 0  # incremental: how much of the text went out
        self._args = -1  # incremental "required": where the arguments of the call being read begin
        # OpenAI's finish reason: "stop" for a named function forced, "tool_calls" for "required"
        self.finish_reason = "stop" if name is not None else "tool_calls"
        self.text = ""
        self.calls = 0
        self._scan = 0  # "required": how far the text is scanned
        self._depth = 0
        self._in_string = self._escape = False
        self._start = -1  # where the call object being read began

    def feed(self, delta: str) -> list:
        self.text += delta
        if self.incremental and self.name is None:
            return self._required_pieces()
        if self.incremental:
            return self._pieces()
        if self.name is not None:
            return []
        events = []
        for i, ch in self._brackets():
            if ch == "{" and self._depth == 2:
                self._start = i
            elif ch == "}" and self._depth == 1 and self._start >= 0:
                call = _as_written(self.text[self._start:i + 1])
                if call is not None:
                    events.append(call)
                self._start = -1
        self.calls += len(events)
        return events

    def _brackets(self):
        """The brackets of the text not scanned yet that lie outside strings: (position, bracket), each with
        ``_depth`` counting it (after an opening one, before a closing one is taken off: the depth of what it
        opens or closes)."""
        for i in range(self._scan, len(self.text)):
            ch = self.text[i]
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif ch == "\\":
                    self._escape = True
                elif ch == '"':
                    self._in_string = False
            elif ch == '"':
                self._in_string = True
            elif ch in "{[":
                self._depth += 1
                yield i, ch
            elif ch in "}]":
                self._depth -= 1
                yield i, ch
        self._scan = len(self.text)

    def _required_pieces(self) -> list:
        """Incremental "required": scan the new text; a call goes out with the first character of its
        arguments (its name then complete), the rest of them as deltas up to the arguments' closing brace."""
        events = []
        for i, ch in self._brackets():
            if ch == "{" and self._depth == 2:
                self._start, self._args = i, -1
            elif ch == "{" and self._depth == 3 and self._start >= 0 and self._args < 0:
                m = _PARTIAL_CALL.match(self.text[self._start:i + 1])
                if m is not None and m.group(2) == "{":  # the arguments object begins: the call goes out
                    self._args, self._sent = i, i + 1
                    events.append(ToolCall(json.loads(m.group(1)), "{"))
                    self.calls += 1
            elif ch == "}" and self._depth == 2 and self._args >= 0:  # the arguments close
                events += self._args_delta(i + 1)
                self._args = -1
            elif ch in "}]" and self._depth == 1:
                self._start = -1
        if self._args >= 0:
            events += self._args_delta(len(self.text))
        return events

    def _args_delta(self, end: int) -> list:
        piece, self._sent = self.text[self._sent:end], end
        return [ArgumentsDelta(self.calls - 1, piece)] if piece else []

    def _pieces(self) -> list:
        if not self.calls:  # the call goes out with the arguments' first character
            start = len(self.text) - len(self.text.lstrip())
            if start == len(self.text):
                return []
            self.calls, self._sent = 1, len(self.text)
            return [ToolCall(self.name, self.text[start:])]
        piece, self._sent = self.text[self._sent:], len(self.text)
        return [ArgumentsDelta(0, piece)] if piece else []

    def finish(self) -> list:
        if self.incremental and self.name is None:
            events = self._required_pieces()  # a call cut before its arguments began is not sent
            return [self.text] if not self.calls and self.text and not events else events
        if self.incremental:
            return self._pieces()
        if self.name is not None:
            if not self.text.strip():
                return []
            self.calls += 1  # whole or cut short (as far as it got): as written, as a stream sends it
            return [ToolCall(self.name, self.text.lstrip())]
        if self._start >= 0:  # cut short inside a call
            m = _PARTIAL_CALL.match(self.text[self._start:])
            self._start = -1
            if m is not None:
                self.calls += 1
                return [ToolCall(json.loads(m.group(1)), m.group(2))]
        if not self.calls and self.text:
            return [self.text]
        return []
