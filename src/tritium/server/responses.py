"""OpenAI's Responses API (``POST /v1/responses``): requests translated to chat, answers written as output items.

A request becomes a chat request (:func:`parse_responses`) and runs through the machinery of
``/v1/chat/completions``: the model's chat template, tool-call parser, reasoning parser, JSON mode and structured
outputs. Its answer, read from the chat stream's deltas (:class:`ResponseWriter`), becomes the response's output
items in the order the model wrote them: ``reasoning`` (with the reasoning parser), ``message`` (one
``output_text`` part) and ``function_call``. A non-streamed response is the streamed one's last snapshot, so
both give the same items.

Translation: ``input`` (a string, one user message; or a list of items: messages whose content is a string or
``input_text`` / ``output_text`` / ``refusal`` parts, ``function_call`` and ``function_call_output`` items, and
``reasoning`` items, accepted and left out of the prompt) becomes ``messages``; ``instructions`` a system
message before them; ``max_output_tokens`` chat's ``max_completion_tokens``; flat function ``tools`` chat's
nested ones and ``tool_choice {"type": "function", "name"}`` a named function; ``text.format`` the
``response_format``; ``include: ["message.output_text.logprobs"]`` (or ``top_logprobs``) the output tokens'
log-probabilities. ``previous_response_id`` continues a stored response: its conversation, input and output
(not its instructions, as OpenAI does), comes before this input. vLLM's sampling extensions (``top_k``,
``min_p``, ``repetition_penalty``, ``seed``, ``stop``, ``chat_template_kwargs``, ...) pass through. What this
server cannot do (built-in tools, images and files, background mode, a reasoning effort) is refused by name;
errors name the Responses field, not the chat one. ``truncation: "auto"`` drops the conversation's oldest turns
(up to its last user message) until the prompt fits the context; ``POST /v1/responses/input_tokens`` counts a
request's prompt tokens (:meth:`~tritium.server.app.OpenAIServer.count_input_tokens`), whatever the context.

Responses with ``store`` (the default) are kept by a :class:`ResponseStore` bounded in count and in bytes (the
least recently used go first) for ``GET /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``,
``DELETE /v1/responses/{id}`` and ``previous_response_id``: in memory, and with a directory (``--responses-dir``)
also on disk, one JSON file a response, read back when a server starts on that directory.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import fcntl
import json
import logging
import os
import re
import time
import uuid

from tritium.engine.chat import join_text_parts
from tritium.engine.tools import check_tools
from tritium.server.errors import APIError, invalid
from tritium.server.protocol import _show

log = logging.getLogger(__name__)

DEFAULT_MAX_STORED = 1024  # responses kept for retrieval and previous_response_id
DEFAULT_MAX_STORED_BYTES = 256 << 20  # and at most this much of their JSON
LOGPROBS = "message.output_text.logprobs"
# include values with nothing to add here (no encrypted reasoning, built-in tools or images): accepted
_INCLUDE_NOTHING = {"reasoning.encrypted_content", "file_search_call.results", "web_search_call.results",
                    "web_search_call.action.sources", "message.input_image.image_url",
                    "computer_call_output.output.image_url", "code_interpreter_call.outputs"}
_FIELDS = {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools", "tool_choice",
           "parallel_tool_calls", "text", "stream", "stream_options", "previous_response_id", "store", "metadata",
           "include", "top_logprobs", "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention",
           "service_tier", "reasoning", "truncation", "background", "max_tool_calls", "conversation", "prompt"}
# passed to chat as they are (vLLM's extensions and chat's own)
_EXTENSIONS = {"top_k", "min_p", "repetition_penalty", "seed", "stop", "stop_token_ids", "min_tokens", "ignore_eos",
               "presence_penalty", "frequency_penalty", "logit_bias", "skip_special_tokens", "chat_template_kwargs"}
# accepted when absent, null or one of these; refused by name otherwise (with why)
_NEUTRAL = {"background": ((False,), "background mode is not supported: responses run while the request is open"),
            "max_tool_calls": ((), "it limits built-in tool calls, which this server does not run"),
            "conversation": ((), "conversations are not supported; chain responses with previous_response_id"),
            "prompt": ((), "stored prompt templates are not supported"),
            "service_tier": (("auto", "default"), "there is one service tier"),
            "prompt_cache_retention": (("in_memory",), "the prefix cache lives in GPU memory")}
# chat's names for the Responses fields they came from, in errors
_RENAMED = {"max_completion_tokens": "max_output_tokens", "response_format": "text.format", "messages": "input"}
_TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclasses.dataclass
class Stored:
    """A kept response: the object, its input items and the conversation after it (without instructions)."""

    response: dict
    items: list[dict]
    messages: list[dict]
    size: int = 0


_STORED_ID = re.compile(r"resp_[0-9a-f]{32}")  # the ids this server gives (_id): the names of the stored files


class ResponseStore:
    """Responses by id, at most ``max_responses`` of them and ``max_bytes`` of their JSON; the least recently
    used are dropped first (a response larger than ``max_bytes`` alone is not kept).

    ``directory``: also keep each response on disk, as ``<id>.json`` there (readable by this user only, written
    whole then renamed into place), so that responses outlive the process: a store opened on the directory
    reads them back, in the order they were last used (the files' modification times), within its own bounds
    (the oldest beyond them are deleted). A file that cannot be read is left where it is and named in a
    warning. One server a directory: it is locked (``.lock``) while the store is open, and a second store on
    it is a ``ValueError`` (``name``: what the caller calls the directory, in errors). A response that cannot be
    written (disk full) is kept in memory only, with a warning; the request does not fail."""

    def __init__(self, max_responses: int = DEFAULT_MAX_STORED, max_bytes: int = DEFAULT_MAX_STORED_BYTES,
                 directory: str | os.PathLike | None = None, *, name: str = "directory"):
        for arg, value in (("max_responses", max_responses), ("max_bytes", max_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{arg} must be an int >= 1, got {value!r}")
        self.max_responses, self.max_bytes = max_responses, max_bytes
        self.entries: collections.OrderedDict[str, Stored] = collections.OrderedDict()
        self.bytes = 0
        self.directory: str | None = None
        self.unreadable: list[str] = []  # files found at opening that could not be read back
        self._lock = None
        self._stamp = 0  # the last modification time given to a file (ns): a strict order of use on disk
        if directory is not None:
            self._open(directory, name)

    def _open(self, directory, name: str) -> None:
        path, lock = _lock_directory(directory, name)
        self.directory, self._lock = path, lock
        found = []
        for entry in os.listdir(path):
            file = os.path.join(path, entry)
            if entry.endswith(".tmp"):  # a write cut short: the response it held was never kept
                _remove(file)
            elif entry.endswith(".json") and _STORED_ID.fullmatch(entry[:-5]):
                try:
                    found.append((os.stat(file).st_mtime_ns, entry))
                except OSError:
                    pass
        self._stamp = max((t for t, _ in found), default=0)
        for _, entry in sorted(found):
            file = os.path.join(path, entry)
            try:
                with open(file, encoding="utf-8") as f:
                    data = json.load(f)
                stored = Stored(data["response"], data["items"], data["messages"])
                if not isinstance(stored.response, dict) or stored.response.get("id") != entry[:-5] or not (
                        isinstance(stored.items, list) and isinstance(stored.messages, list)):
                    raise ValueError("not a stored response of this name")
            except (OSError, ValueError, KeyError, TypeError) as e:
                self.unreadable.append(file)
                log.warning("stored response %s cannot be read (%s); left out", file, e)
                continue
            self._keep(stored)

    def close(self) -> None:
        """Release the directory (its files stay); the store keeps working in memory."""
        if self._lock is not None:
            self._lock.close()
            self._lock, self.directory = None, None

    def _file(self, response_id: str) -> str | None:
        if self.directory is None or not _STORED_ID.fullmatch(response_id):
            return None
        return os.path.join(self.directory, response_id + ".json")

    def _keep(self, stored: Stored) -> bool:
        stored.size = len(json.dumps(stored.response)) + len(json.dumps(stored.items))
        self._drop(stored.response["id"], unlink=False)
        if stored.size > self.max_bytes:
            _remove(self._file(stored.response["id"]))
            return False
        self.entries[stored.response["id"]] = stored
        self.bytes += stored.size
        while len(self.entries) > self.max_responses or self.bytes > self.max_bytes:
            old_id, old = self.entries.popitem(last=False)
            self.bytes -= old.size
            _remove(self._file(old_id))
        return True

    def put(self, stored: Stored) -> bool:
        """Keep ``stored`` (dropping the least recently used beyond the bounds); False if it alone is too large."""
        if not self._keep(stored):
            return False
        file = self._file(stored.response["id"])
        if file is not None:
            data = dict(response=stored.response, items=stored.items, messages=stored.messages)
            tmp = f"{file}.{os.getpid()}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with open(fd, "w", encoding="utf-8") as f:
                    json.dump(data, f)
                os.replace(tmp, file)
            except (OSError, TypeError, ValueError) as e:
                _remove(tmp)
                log.warning("response %s kept in memory only: writing %s failed (%s)", stored.response["id"], file, e)
            else:
                self._touch(file)
        return True

    def get(self, response_id: str) -> Stored | None:
        stored = self.entries.get(response_id)
        if stored is not None:
            self.entries.move_to_end(response_id)
            file = self._file(response_id)
            if file is not None:
                self._touch(file)
        return stored

    def _touch(self, file: str) -> None:
        """Stamp ``file`` as used now, after every other file of this store (the order a store opened on the
        directory reads them back in; the file system's clock can give two writes the same time)."""
        self._stamp = max(time.time_ns(), self._stamp + 1)
        try:
            os.utime(file, ns=(self._stamp, self._stamp))
        except OSError:  # gone or not ours to stamp: it reads back in an older place, nothing is lost
            pass

    def delete(self, response_id: str) -> bool:
        return self._drop(response_id, unlink=True)

    def _drop(self, response_id: str, unlink: bool) -> bool:
        stored = self.entries.pop(response_id, None)
        if stored is not None:
            self.bytes -= stored.size
            if unlink:
                _remove(self._file(response_id))
        return stored is not None

    @property
    def where(self) -> str:
        """Where responses are kept, for messages."""
        return f"in {self.directory}" if self.directory is not None else "in this server's memory"


def _lock_directory(directory, name: str):
    """(absolute path, the open lock file holding ``.lock``) of a store's directory, made if missing;
    ``ValueError`` naming ``name`` where it cannot be made or another store holds it."""
    if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory):
        raise ValueError(f"{name} must be a path (str or os.PathLike), got {directory!r}")
    path = os.path.abspath(os.fspath(directory))
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        lock = open(os.path.join(path, ".lock"), "a")
    except OSError as e:
        raise ValueError(f"{name}: {path!r} cannot hold the stored responses: {e.strerror or e}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise ValueError(f"{name}: {path!r} is in use by another server's response store (its .lock is held); "
                         f"give each server a directory of its own") from None
    return path, lock


def check_responses_dir(directory, name: str = "responses_dir") -> None:
    """``ValueError`` naming ``name`` unless a response store could open ``directory`` now (checked before a
    model loads; the directory is made if missing, then released)."""
    _lock_directory(directory, name)[1].close()


def _remove(path: str | None) -> None:
    if path is not None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("could not remove %s: %s", path, e)


@dataclasses.dataclass
class ResponsesRequest:
    """A checked ``POST /v1/responses``: the chat body it runs as, its input items (with ids, as kept), the
    conversation before the answer (without instructions) and the response object it starts as."""

    chat: dict
    items: list[dict]
    messages: list[dict]
    response: dict
    stream: bool
    store: bool
    logprobs: bool
    truncate: bool = False  # truncation "auto": the oldest turns are dropped where the prompt is too long


def drop_oldest_turn(parsed: ResponsesRequest) -> bool:
    """``truncation: "auto"``: drop the conversation's oldest turn (what comes before its second user message,
    leading system and developer messages kept) from the prompt and from what is kept; False where one user
    turn or none is left."""
    instructions = len(parsed.chat["messages"]) - len(parsed.messages)
    messages = parsed.messages
    lead = next((i for i, m in enumerate(messages) if m["role"] not in ("system", "developer")), len(messages))
    users = [i for i in range(lead, len(messages)) if messages[i]["role"] == "user"]
    if len(users) < 2:
        return False
    parsed.messages = messages[:lead] + messages[users[1]:]
    parsed.chat["messages"] = parsed.chat["messages"][:instructions] + parsed.messages
    return True


def rename_error(e: APIError) -> APIError:
    """An error of the chat request a Responses request became, naming the Responses field."""
    message, param = e.message, e.param
    for chat, field in _RENAMED.items():
        message = message.replace(chat, field)
    return APIError(e.status, message, type=e.type, param=_RENAMED.get(param, param), code=e.code)


def parse_responses(body: dict, store: ResponseStore, model_name: str) -> ResponsesRequest:
    """Check a Responses request and translate it to chat (see the module docstring); 400 naming the field."""
    for name in body:
        if name not in _FIELDS and name not in _EXTENSIONS:
            raise invalid(f"Unrecognized request argument supplied to /v1/responses: {name}", name,
                          "unknown_parameter")
    for name, (allowed, why) in _NEUTRAL.items():
        if body.get(name) is not None and body[name] not in allowed:
            raise invalid(f"{name} {_show(body[name])} is not supported: {why}", name, "unsupported_parameter")
    for name in ("instructions", "previous_response_id", "user", "safety_identifier", "prompt_cache_key"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise invalid(f"{name} must be a string, got {_show(body[name])}", name)
    for name in ("stream", "store", "parallel_tool_calls"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise invalid(f"{name} must be true or false, got {_show(body[name])}", name)
    _check_reasoning(body.get("reasoning"))
    truncation = body.get("truncation") or "disabled"
    if truncation not in ("disabled", "auto"):
        raise invalid(f"truncation must be 'disabled' or 'auto', got {_show(truncation)}", "truncation")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or set(options) - {"include_obfuscation"}):
        raise invalid(f"stream_options takes include_obfuscation only, got {_show(options)}", "stream_options")
    logprobs = _include(body.get("include")) or body.get("top_logprobs") is not None
    previous = None
    if body.get("previous_response_id") is not None:
        previous = store.get(body["previous_response_id"])
        if previous is None:
            raise invalid(f"Previous response with id '{body['previous_response_id']}' not found (responses are kept "
                          f"in this server's memory, the {store.max_responses} most recently used, and only with "
                          "store: true)", "previous_response_id", "previous_response_not_found")
    items = input_items(body.get("input"), required=previous is None)
    history = previous.messages if previous is not None else []
    messages = history + conversation(items)
    _check_outputs_answer_calls(messages)
    instructions = body.get("instructions")
    if not messages and not instructions:  # (else chat's error, renamed, reads "a non-empty list of input")
        raise invalid("input holds reasoning items only, which are kept but not part of the prompt: give a message "
                      "too (or instructions, or previous_response_id)", "input")
    chat = {"messages": ([{"role": "system", "content": instructions}] if instructions else []) + messages,
            "stream": True, "stream_options": {"include_usage": True}}
    for name in ("temperature", "top_p", "parallel_tool_calls", "user", *_EXTENSIONS):
        if body.get(name) is not None:
            chat[name] = body[name]
    if body.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = body["max_output_tokens"]
    if logprobs:
        chat["logprobs"] = True
        if body.get("top_logprobs") is not None:
            chat["top_logprobs"] = body["top_logprobs"]
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    text = _text(body.get("text"))
    if text["format"]["type"] != "text":
        chat["response_format"] = _response_format(text["format"])
    metadata = _metadata(body.get("metadata"))
    response = {"id": _id("resp"), "object": "response", "created_at": int(time.time()), "status": "in_progress",
                "background": False, "error": None, "incomplete_details": None, "instructions": instructions,
                "max_output_tokens": body.get("max_output_tokens"), "max_tool_calls": None, "model": model_name,
                "output": [], "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
                "previous_response_id": body.get("previous_response_id"),
                "reasoning": {"effort": None, "summary": None}, "service_tier": "default",
                "store": body.get("store") is not False, "temperature": _given(body, "temperature", 1.0),
                "text": text, "tool_choice": body.get("tool_choice") or ("auto" if tools else "none"),
                "tools": body.get("tools") or [], "top_logprobs": body.get("top_logprobs") or 0,
                "top_p": _given(body, "top_p", 1.0), "truncation": truncation, "usage": None,
                "user": body.get("user"),
                "metadata": metadata}
    return ResponsesRequest(chat, items, messages, response, body.get("stream") is True,
                            body.get("store") is not False, logprobs, truncation == "auto")


def _given(body: dict, name: str, default):
    return default if body.get(name) is None else body[name]


def _check_reasoning(value) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or set(value) - {"effort", "summary", "generate_summary"}:
        raise invalid(f"reasoning must be an object with effort and summary, got {_show(value)}", "reasoning")
    for name in ("effort", "summary", "generate_summary"):
        if value.get(name) is not None:
            raise invalid(f"reasoning.{name} is not supported: this server cannot set how much a model reasons or "
                          "summarise it (a reasoning model's thinking comes back as a reasoning item; switch it with "
                          "chat_template_kwargs, e.g. enable_thinking)", "reasoning", "unsupported_parameter")


def _include(value) -> bool:
    """Whether ``include`` asks for the output tokens' log-probabilities."""
    if value is None:
        return False
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"include must be a list of strings, got {_show(value)}", "include")
    bad = next((v for v in value if v != LOGPROBS and v not in _INCLUDE_NOTHING), None)
    if bad is not None:
        raise invalid(f"include value {bad!r} is not supported (supported: {LOGPROBS})", "include")
    return LOGPROBS in value


def input_items(value, required: bool = True) -> list[dict]:
    """The request's ``input`` as items with ids (a string: one user message); 400 naming ``input[i]...``."""
    if value is None or value == [] or value == "":
        if required:
            raise invalid("input is required: a string or a non-empty list of items (or previous_response_id with "
                          "more input)", "input")
        return []
    if isinstance(value, str):
        return [{"type": "message", "id": _id("msg"), "role": "user", "status": "completed",
                 "content": [{"type": "input_text", "text": value}]}]
    if not isinstance(value, list):
        raise invalid(f"input must be a string or a list of items, got {_show(value)}", "input")
    return [_item(item, f"input[{i}]") for i, item in enumerate(value)]


def _item(item, where: str) -> dict:
    if not isinstance(item, dict):
        raise invalid(f"{where} must be an object (a message or an item with a type), got {_show(item)}", "input")
    kind = item.get("type", "message")

    def fields(allowed: set[str]) -> None:
        # what a client sends back of an output item as it came (status, phase, ...: null or not read) is accepted
        extra = sorted(k for k in set(item) - allowed - {"type", "id", "status", "phase"} if item[k] is not None)
        if extra:
            raise invalid(f"{where}.{extra[0]} is not a field of a {kind} item", "input")
        if item.get("id") is not None and not isinstance(item["id"], str):
            raise invalid(f"{where}.id must be a string, got {_show(item['id'])}", "input")

    def string(name: str) -> str:
        if not isinstance(item.get(name), str):
            raise invalid(f"{where}.{name} must be a string, got {_show(item.get(name))}", "input")
        return item[name]

    if kind == "message":
        fields({"role", "content"})
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise invalid(f"{where}.role must be user, assistant, system or developer, got {_show(role)}", "input")
        part_type = "output_text" if role == "assistant" else "input_text"
        content = item.get("content")
        if isinstance(content, str):
            parts = [{"type": part_type, "text": content}]
        elif isinstance(content, list):
            parts = [_part(p, f"{where}.content[{j}]") for j, p in enumerate(content)]
        else:
            raise invalid(f"{where}.content must be a string or a list of text parts, got {_show(content)}", "input")
        return {"type": "message", "id": item.get("id") or _id("msg"), "role": role, "status": "completed",
                "content": parts}
    if kind == "function_call":
        fields({"call_id", "name", "arguments"})
        return {"type": "function_call", "id": item.get("id") or _id("fc"), "call_id": string("call_id"),
                "name": string("name"), "arguments": string("arguments"), "status": "completed"}
    if kind == "function_call_output":
        fields({"call_id", "output"})
        output = item.get("output")
        if isinstance(output, list):
            output = "".join(_part(p, f"{where}.output[{j}]")["text"] for j, p in enumerate(output))
        elif not isinstance(output, str):
            raise invalid(f"{where}.output must be a string or a list of text parts, got {_show(output)}", "input")
        return {"type": "function_call_output", "id": item.get("id") or _id("fco"), "call_id": string("call_id"),
                "output": output, "status": "completed"}
    if kind == "reasoning":  # a past answer's reasoning, sent back: kept with the input, not in the prompt
        fields({"summary", "content", "encrypted_content"})
        for name, part in (("summary", "summary_text"), ("content", "reasoning_text")):  # kept, so returned
            parts = item.get(name)
            if parts is not None and not (isinstance(parts, list) and all(
                    isinstance(p, dict) and p.get("type") == part and isinstance(p.get("text"), str) for p in parts)):
                raise invalid(f"{where}.{name} must be a list of {{'type': '{part}', 'text': ...}} parts, got "
                              f"{_show(parts)}", "input")
        return {"type": "reasoning", "id": item.get("id") or _id("rs"), "summary": item.get("summary") or [],
                **({"content": item["content"]} if item.get("content") is not None else {})}
    if kind == "item_reference":
        raise invalid(f"{where}: item_reference is not supported; send the item itself, or previous_response_id",
                      "input", "unsupported_parameter")
    raise invalid(f"{where}.type must be message, function_call, function_call_output or reasoning, got {_show(kind)} "
                  "(this server runs no built-in tools)", "input", "unsupported_parameter")


def _part(part, where: str) -> dict:
    kind = part.get("type") if isinstance(part, dict) else None
    key = _TEXT_PARTS.get(kind)
    if key is None:
        raise invalid(f"{where} must be a text part (input_text, output_text or refusal), got "
                      f"{_show(kind if kind is not None else part)}: this server's models read text only", "input")
    if not isinstance(part.get(key), str):
        raise invalid(f"{where}.{key} must be a string, got {_show(part.get(key))}", "input")
    return {"type": kind, "text": part[key]} if key == "text" else {"type": kind, "refusal": part[key]}


def conversation(items: list[dict]) -> list[dict]:
    """Chat messages of input or output items: a message's text parts joined by newlines (as chat's content
    lists); the assistant's messages and function calls in a row one assistant turn (its text joined, the calls
    its ``tool_calls``), as chat returns an answer; the calls' outputs tool messages; reasoning left out."""
    messages = []
    for item in items:
        last = messages[-1] if messages and messages[-1]["role"] == "assistant" else None
        if item["type"] == "message":
            text = join_text_parts(p.get("text", p.get("refusal", "")) for p in item["content"])
            if item["role"] == "assistant" and last is not None:  # one assistant turn, as chat returns it
                messages[-1] = {**last, "content": (last["content"] or "") + text}
            else:
                messages.append({"role": item["role"], "content": text})
        elif item["type"] == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            if last is not None:
                messages[-1] = {**last, "tool_calls": [*last.get("tool_calls", []), call]}
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif item["type"] == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
    return messages


def _check_outputs_answer_calls(messages: list[dict]) -> None:
    """400 for a function call output whose call_id no earlier function call (of the input, or of the previous
    responses) carries, as OpenAI's: the model would read an answer to a call it never made."""
    calls = set()
    for m in messages:
        calls.update(c["id"] for c in m.get("tool_calls") or ())
        if m["role"] == "tool" and m["tool_call_id"] not in calls:
            raise invalid(f"No tool call found for function call output with call_id {m['tool_call_id']!r} (an "
                          "output follows the function_call item of the same call_id, in input or in the previous "
                          "response)", "input")


def _tools(value) -> list[dict] | None:
    """Flat Responses function tools as chat's nested ones."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise invalid(f"tools must be a list of function tools, got {_show(value)}", "tools")
    nested = []
    for i, tool in enumerate(value):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else tool
            raise invalid(f"tools[{i}] must be a function tool {{'type': 'function', 'name', 'parameters'}}, got "
                          f"{_show(kind)}: this server runs no built-in tools", "tools", "unsupported_parameter")
        fn = {k: v for k, v in tool.items() if k != "type"}
        if fn.get("strict") is None:
            fn.pop("strict", None)
        nested.append({"type": "function", "function": fn})
    try:
        return check_tools(nested)
    except ValueError as e:
        raise invalid(str(e).replace(".function.", ".").replace(".function", ""), "tools") from None


def _tool_choice(value):
    if value in ("auto", "none", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function" and set(value) == {"type", "name"} \
            and isinstance(value["name"], str):
        return {"type": "function", "function": {"name": value["name"]}}
    raise invalid(f"tool_choice must be 'auto', 'none', 'required' or {{'type': 'function', 'name': ...}}, got "
                  f"{_show(value)}", "tool_choice")


def _text(value) -> dict:
    """The ``text`` configuration as the response repeats it."""
    if value is None:
        return {"format": {"type": "text"}}
    if not isinstance(value, dict) or set(value) - {"format", "verbosity"}:
        raise invalid(f"text must be an object with format (and verbosity), got {_show(value)}", "text")
    if value.get("verbosity") not in (None, "medium"):
        raise invalid(f"text.verbosity {_show(value['verbosity'])} is not supported: a model's length is its own "
                      "(limit it with max_output_tokens)", "text.verbosity", "unsupported_parameter")
    fmt = value.get("format") or {"type": "text"}
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise invalid(f"text.format must be {{'type': 'text' | 'json_object' | 'json_schema', ...}}, got {_show(fmt)}",
                      "text.format")
    return {"format": fmt, **({"verbosity": value["verbosity"]} if value.get("verbosity") else {})}


def _response_format(fmt: dict) -> dict:
    if fmt["type"] == "json_object":
        if set(fmt) != {"type"}:
            raise invalid("text.format of type json_object takes no other field", "text.format")
        return {"type": "json_object"}
    extra = sorted(set(fmt) - {"type", "name", "schema", "description", "strict"})
    if extra:
        raise invalid(f"text.format of type json_schema takes name, schema, description and strict, got {extra[0]}",
                      "text.format")
    for key, kind in (("name", str), ("schema", dict)):  # both required here (chat's schema may be left out)
        if not isinstance(fmt.get(key), kind) or not fmt[key]:
            what = "a non-empty string" if kind is str else "a JSON Schema object"
            raise invalid(f"text.format.{key} is required with type json_schema: {what}, got {_show(fmt.get(key))}",
                          f"text.format.{key}")
    return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}


def _metadata(value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > 16 or not all(
            isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512 for k, v in value.items()):
        raise invalid("metadata must be an object of at most 16 string values (keys up to 64 characters, values up "
                      f"to 512), got {_show(value)}", "metadata")
    return dict(value)


def usage(chat_usage: dict | None, reasoning_tokens: int) -> dict | None:
    """A response's usage from the chat answer's: every field openai-python's ``ResponseUsage`` requires.
    ``cache_write_tokens`` is 0: the prefix cache keeps a prompt's pages as a side effect of computing them,
    with no write of its own to count (OpenAI's counts writes of prompts kept on purpose, with a retention
    time)."""
    if chat_usage is None:
        return None
    return {"input_tokens": chat_usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": chat_usage["prompt_tokens_details"]["cached_tokens"],
                                     "cache_write_tokens": 0},
            "output_tokens": chat_usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": chat_usage["total_tokens"]}


class ResponseWriter:
    """A response's output items written from the chat stream's chunks (:meth:`feed`), as the Responses stream
    events that say so (each with its ``sequence_number``). ``count_tokens(text)`` counts the reasoning's tokens
    for the usage."""

    def __init__(self, response: dict, count_tokens, logprobs: bool = False):
        self.response = response
        self.count_tokens = count_tokens
        self.logprobs = logprobs
        self.sequence = 0
        self.open: dict | None = None  # the output item being written
        self.calls: dict[int, dict] = {}  # chat's tool-call index -> its function_call item
        # log-probabilities of tokens whose text was held back (a possible stop string, <think> or call start):
        # the next output text's, unless reasoning or a call comes first (then the tokens were those)
        self.held: list = []
        self.finish_reason: str | None = None
        self.chat_usage: dict | None = None
        self.error: APIError | None = None
        self.done = False  # completed, incomplete or failed

    def _event(self, kind: str, **fields) -> dict:
        event = {"type": kind, "sequence_number": self.sequence, **copy.deepcopy(fields)}
        self.sequence += 1
        return event

    def start(self) -> list[dict]:
        return [self._event("response.created", response=self.response),
                self._event("response.in_progress", response=self.response)]

    def feed(self, chunk: dict) -> list[dict]:
        """The events of one chat chunk (a delta of reasoning, content or tool calls; its usage)."""
        events = []
        if chunk.get("usage") is not None:
            self.chat_usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            logprobs = ((choice.get("logprobs") or {}).get("content") or []) if self.logprobs else []
            not_text = delta.get("reasoning_content") or delta.get("tool_calls")
            if not_text:  # what was held became reasoning or a call
                self.held = []
            if delta.get("reasoning_content"):
                events += self._text("reasoning", delta["reasoning_content"])
            if delta.get("content"):
                events += self._text("message", delta["content"], self.held + logprobs)
                self.held = []
            elif not not_text and (self.open is None or self.open["type"] != "reasoning"):
                self.held += logprobs  # (after a reasoning block: its end and the blank space the text leaves out)
            for call in delta.get("tool_calls") or ():
                events += self._call(call)
            if choice.get("finish_reason") is not None:
                self.finish_reason = choice["finish_reason"]
        return events

    def _add(self, item: dict) -> list[dict]:
        self.open = item
        self.response["output"].append(item)
        return [self._event("response.output_item.added", output_index=len(self.response["output"]) - 1,
                            item=item)]

    def _text(self, kind: str, text: str, logprobs: list | None = None) -> list[dict]:
        events = []
        item = self.open
        if item is None or item["type"] != kind:
            events += self._close("completed")
            if kind == "message":
                item = {"type": "message", "id": _id("msg"), "status": "in_progress", "role": "assistant",
                        "content": []}
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            else:
                item = {"type": "reasoning", "id": _id("rs"), "status": "in_progress", "summary": [], "content": []}
                part = {"type": "reasoning_text", "text": ""}
            events += self._add(item)
            events.append(self._event("response.content_part.added", item_id=item["id"], output_index=self._index(),
                                      content_index=0, part=part))
            item["content"].append(part)
        part = item["content"][0]
        part["text"] += text
        if kind == "message":
            part["logprobs"] += logprobs
            events.append(self._event("response.output_text.delta", item_id=item["id"], output_index=self._index(),
                                      content_index=0, delta=text, logprobs=logprobs))
        else:
            events.append(self._event("response.reasoning_text.delta", item_id=item["id"],
                                      output_index=self._index(), content_index=0, delta=text))
        return events

    def _call(self, call: dict) -> list[dict]:
        events = []
        fn = call.get("function") or {}
        if call.get("id") is not None:  # a new call
            events += self._close("completed")
            item = {"type": "function_call", "id": _id("fc"), "call_id": call["id"], "name": fn["name"],
                    "arguments": "", "status": "in_progress"}
            events += self._add(item)
            self.calls[call["index"]] = item
        item = self.calls[call["index"]]
        if fn.get("arguments"):
            item["arguments"] += fn["arguments"]
            events.append(self._event("response.function_call_arguments.delta", item_id=item["id"],
                                      output_index=self.response["output"].index(item), delta=fn["arguments"]))
        return events

    def _index(self) -> int:
        return len(self.response["output"]) - 1

    def _close(self, status: str) -> list[dict]:
        """The events that end the open item, ``status`` ("completed" or "incomplete")."""
        item, self.open = self.open, None
        if item is None:
            return []
        index = self.response["output"].index(item)
        events = []
        if item["type"] == "function_call":
            events.append(self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                      name=item["name"], arguments=item["arguments"]))
        else:
            part = item["content"][0]
            if item["type"] == "message":
                events.append(self._event("response.output_text.done", item_id=item["id"], output_index=index,
                                          content_index=0, text=part["text"], logprobs=part["logprobs"]))
            else:
                events.append(self._event("response.reasoning_text.done", item_id=item["id"], output_index=index,
                                          content_index=0, text=part["text"]))
            events.append(self._event("response.content_part.done", item_id=item["id"], output_index=index,
                                      content_index=0, part=part))
        item["status"] = status
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events

    def finish(self) -> list[dict]:
        """The events that end the response: completed, or incomplete if the answer reached max_output_tokens."""
        incomplete = self.finish_reason == "length"
        events = self._close("incomplete" if incomplete else "completed")
        reasoning = "".join(item["content"][0]["text"] for item in self.response["output"]
                            if item["type"] == "reasoning")
        self.response["usage"] = usage(self.chat_usage, self.count_tokens(reasoning) if reasoning else 0)
        self.response["status"] = "incomplete" if incomplete else "completed"
        if incomplete:
            self.response["incomplete_details"] = {"reason": "max_output_tokens"}
        else:
            self.response["completed_at"] = int(time.time())
        self.done = True
        return events + [self._event(f"response.{self.response['status']}", response=self.response)]

    def fail(self, error: APIError) -> list[dict]:
        """The events that end the response as failed, with ``error``."""
        events = self._close("incomplete")
        self.error = error
        self.response["status"] = "failed"
        self.response["error"] = {"code": error.code or error.type, "message": error.message}
        self.done = True
        return events + [self._event("response.failed", response=self.response)]


def sse(event: dict) -> str:
    """A Responses stream event as server-sent events name them."""
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n"


def input_item_page(stored: Stored, query) -> dict:
    """``GET /v1/responses/{id}/input_items``: a page of a response's input items (``limit`` 1-100, default 20;
    ``order`` "desc" (default) or "asc"; ``after`` and ``before``: item ids bounding the page)."""
    limit = query.get("limit", "20")
    if not limit.isdigit() or not 1 <= int(limit) <= 100:
        raise invalid(f"limit must be an integer between 1 and 100, got {limit!r}", "limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid(f"order must be 'asc' or 'desc', got {order!r}", "order")
    items = stored.items if order == "asc" else stored.items[::-1]
    ids = [item["id"] for item in items]
    start, end = 0, len(items)
    for name in ("after", "before"):
        if query.get(name) is not None:
            if query[name] not in ids:
                raise invalid(f"{name}: no input item with id {query[name]!r} in this response", name)
            if name == "after":
                start = ids.index(query[name]) + 1
            else:
                end = ids.index(query[name])
    page = items[start:end][:int(limit)]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": start + len(page) < end}
