"""Chat conversations: checking OpenAI-style ``messages`` and turning them into prompt token ids.

A conversation is a list of ``{"role": "system" | "user" | "assistant", "content": ...}`` messages
(``"developer"`` is taken as ``"system"``, as OpenAI does); ``content`` is a string or a list of text parts
``[{"type": "text", "text": ...}]``, joined. The model's chat template renders it, the generation prompt
(the assistant's turn) appended.
"""

from __future__ import annotations

from tritium.engine.tokenizer import Tokenizer

ROLES = ("system", "user", "assistant")
_ALIASES = {"developer": "system"}


def normalize_messages(messages, what: str = "messages") -> list[dict]:
    """``[{"role", "content": str}]`` of a conversation; ValueError naming ``what[i].field`` for bad input."""
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
        extra = sorted(set(m) - {"role", "content", "name"})
        if extra:
            raise ValueError(f"{where}.{extra[0]} is not supported (tools and function calls are not)")
        out.append({"role": role, "content": _content(m.get("content"), f"{where}.content")})
    return out


def _content(content, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ValueError(f"{where}[{j}] must be a text part {{'type': 'text', 'text': ...}}, got type "
                                 f"{kind!r} (only text is supported)")
            parts.append(part["text"])
        return "".join(parts)
    raise ValueError(f"{where} must be a string or a list of text parts, got {_show(content)}")


def encode_chat(tokenizer: Tokenizer | None, messages, what: str = "messages",
                template_kwargs: dict | None = None) -> list[int]:
    """Token ids of a conversation rendered by the model's chat template, generation prompt appended;
    ``template_kwargs``: more template variables (``Tokenizer.apply_chat_template``)."""
    if tokenizer is None:
        raise ValueError("this engine has no tokenizer, so no chat template; pass prompts as token-id lists")
    return tokenizer.apply_chat_template(normalize_messages(messages, what), add_generation_prompt=True,
                                         template_kwargs=template_kwargs)


def is_conversation(messages) -> bool:
    """True for one conversation (a list of message dicts), False for a list of conversations."""
    return isinstance(messages, (list, tuple)) and (not messages or isinstance(messages[0], dict))


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
