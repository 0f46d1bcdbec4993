"""Chat conversations: checking OpenAI-style ``messages`` and turning them into prompt token ids.

A conversation is a list of ``{"role": "system" | "user" | "assistant" | "tool", "content": ...}`` messages
(``"developer"`` is taken as ``"system"``, as OpenAI does); ``content`` is a string or a list of text parts
``[{"type": "text", "text": ...}]``, joined by newlines (:func:`join_text_parts`, as vLLM flattens them). An
assistant turn may carry the ``tool_calls`` it made (its content then may be null), a ``tool`` turn answers one by
``tool_call_id``; calls reach the template as transformers gives them (``function.arguments`` an object where its
JSON text is one). The model's chat template renders it, the generation prompt (the assistant's turn) appended, or,
with ``continue_final_message``, the last (assistant) message left open for the answer to continue.
"""

from __future__ import annotations

import json

from tritium.engine.tokenizer import Tokenizer

ROLES = ("system", "user", "assistant", "tool")
_ALIASES = {"developer": "system"}
_FIELDS = {"system": {"name"}, "user": {"name"}, "assistant": {"name", "tool_calls"}, "tool": {"tool_call_id", "name"}}


def normalize_messages(messages, what: str = "messages") -> list[dict]:
    """``[{"role", "content": str, ...}]`` of a conversation; ValueError naming ``what[i].field`` for bad
    input."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError(f"{what} must be a non-empty list of messages, got {_show(messages)}")
    out = []
    for i, m in enumerate(messages):
        where = f"{what}[{i}]"
        if not isinstance(m, dict):
            raise ValueError(f"{where} must be an object with 'role' and 'content', got {_show(m)}")
        role = m.get("role")
        role = _ALIASES.get(role, role)
        if role not in ROLES:
            raise ValueError(f"{where}.role must be one of {', '.join(ROLES)}, got {_show(m.get('role'))}")
        extra = sorted(set(m) - {"role", "content"} - _FIELDS[role])
        if extra:
            raise ValueError(f"{where}.{extra[0]} is not supported on a {role} message")
        if m.get("name") is not None and not isinstance(m["name"], str):  # (read by a tool turn's template)
            raise ValueError(f"{where}.name must be a string, got {_show(m['name'])}")
        msg = {"role": role}
        if role == "assistant" and m.get("tool_calls"):
            msg["tool_calls"] = _tool_calls(m["tool_calls"], f"{where}.tool_calls")
            content = m.get("content")
            msg["content"] = "" if content is None else _content(content, f"{where}.content")
        else:
            msg["content"] = _content(m.get("content"), f"{where}.content")
        if role == "tool":
            if not isinstance(m.get("tool_call_id"), str):
                raise ValueError(f"{where}.tool_call_id must be the id of the call it answers, got "
                                 f"{_show(m.get('tool_call_id'))}")
            msg["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str) and role == "tool":
            msg["name"] = m["name"]
        out.append(msg)
    return out


def _tool_calls(calls, where: str) -> list[dict]:
    """An assistant turn's calls for the template: ``function.arguments`` decoded where it is a JSON object."""
    if not isinstance(calls, list):
        raise ValueError(f"{where} must be a list of calls, got {_show(calls)}")
    out = []
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(
                fn.get("arguments", "{}"), (str, dict)):
            raise ValueError(f"{where}[{j}] must be {{'id', 'type': 'function', 'function': {{'name': str, "
                             f"'arguments': str}}}}, got {_show(call)}")
        args = fn.get("arguments", "{}")
        if isinstance(args, str):
            try:
                decoded = json.loads(args)
            except json.JSONDecodeError:
                decoded = None
            args = decoded if isinstance(decoded, dict) else args
        out.append({"id": call.get("id"), "type": "function", "function": {"name": fn["name"], "arguments": args}})
    return out


def join_text_parts(texts) -> str:
    """One message's text parts as the chat template reads them: joined by newlines, as vLLM flattens a content
    list for a template that takes text (``["a", "b"]`` -> ``"a\\nb"``)."""
    return "\n".join(texts)


def _content(content, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text" and not isinstance(part.get("text"), str):
                raise ValueError(f"{where}[{j}] is a text part whose 'text' must be a string, got "
                                 f"{_show(part.get('text'))}")
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ValueError(f"{where}[{j}] must be a text part {{'type': 'text', 'text': ...}}, got type "
                                 f"{kind!r} (only text is supported)")
            parts.append(part["text"])
        return join_text_parts(parts)
    raise ValueError(f"{where} must be a string or a list of text parts, got {_show(content)}")


def encode_chat(tokenizer: Tokenizer | None, messages, what: str = "messages",
                template_kwargs: dict | None = None, add_generation_prompt: bool | None = None,
                continue_final_message: bool = False) -> list[int]:
    """Token ids of a conversation rendered by the model's chat template, generation prompt appended (unless
    ``add_generation_prompt`` is False; None: unless ``continue_final_message``); ``template_kwargs``: more
    template variables (``Tokenizer.apply_chat_template``; ``tools`` among them: :mod:`tritium.engine.tools`).
    ``continue_final_message``: the last message, the assistant's, is continued (a prefilled answer)."""
    if tokenizer is None:
        raise ValueError("this engine has no tokenizer, so no chat template; pass prompts as token-id lists")
    if not isinstance(continue_final_message, bool):
        raise ValueError(f"continue_final_message must be true or false, got {_show(continue_final_message)}")
    if add_generation_prompt is None:
        add_generation_prompt = not continue_final_message
    elif not isinstance(add_generation_prompt, bool):
        raise ValueError(f"add_generation_prompt must be true or false, got {_show(add_generation_prompt)}")
    normalized = normalize_messages(messages, what)
    if continue_final_message:  # (with a generation prompt too: apply_chat_template refuses it)
        if normalized[-1]["role"] != "assistant":
            raise ValueError(f"{what}[{len(normalized) - 1}].role must be 'assistant' to be continued "
                             f"(continue_final_message), got {normalized[-1]['role']!r}")
    return tokenizer.apply_chat_template(normalized, add_generation_prompt=add_generation_prompt,
                                         template_kwargs=template_kwargs,
                                         continue_final_message=continue_final_message)


def is_conversation(messages) -> bool:
    """True for one conversation (a list of message dicts), False for a list of conversations."""
    return isinstance(messages, (list, tuple)) and (not messages or isinstance(messages[0], dict))


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
