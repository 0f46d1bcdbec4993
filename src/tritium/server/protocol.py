"""Requests of the OpenAI API checked field by field, and the JSON of responses and stream chunks.

``parse_completion(body)`` / ``parse_chat(body)`` turn a decoded JSON body into a :class:`GenerationRequest`
(prompts, one :class:`~tritium.engine.SamplingParams` per choice, streaming options) or raise
:class:`~tritium.server.errors.APIError` (400) naming the field. Fields OpenAI defines that this server does not
implement (audio, best_of > n on chat, ...) are refused by name instead of being ignored; unknown fields are
refused too. Completions take ``suffix`` (fill in the middle: :mod:`tritium.engine.fim`) and ``best_of`` (the n
of that many candidates with the highest mean token log-probability, not streamed), both endpoints ``prediction``
(predicted outputs: drafts for speculative decoding). Chat takes function ``tools`` (``tool_choice`` "auto", "none",
"required" or a named function, the last two forced through JSON mode: :mod:`tritium.engine.tools`) and
``response_format`` ``json_object`` (JSON mode: :mod:`tritium.engine.json_mode`) or ``json_schema`` (structured
outputs: :mod:`tritium.engine.json_schema`). Extensions in the style of vLLM: ``top_k``, ``min_p``,
``repetition_penalty``, ``stop_token_ids``, ``min_tokens``, ``ignore_eos``, ``skip_special_tokens``, and
``stream_options.continuous_usage_stats`` (usage in every chunk).
Completions take ``echo`` (the prompt before the answer; with ``logprobs``, the prompt tokens' log-probabilities
first, the first token's null) and, with ``echo``, ``max_tokens`` 0 (the prompt scored, nothing generated), as
lm-evaluation-harness asks for log-likelihoods. Both endpoints take vLLM's ``prompt_logprobs: k`` (not streamed):
each prompt token's log-probability, rank and top k (completions: per choice; chat: in the response).
"""

from __future__ import annotations

import codecs
import dataclasses
import math

from tritium.engine import SamplingParams
from tritium.engine.guided import compile_guided
from tritium.engine.json_schema import compile_schema
from tritium.engine.sampling import MAX_LOGPROBS, MAX_REPETITION_PENALTY
from tritium.engine.tokenizer import Tokenizer, check_template_kwargs
from tritium.engine.tools import check_tools, forced_call_schema
from tritium.server.errors import invalid

MAX_N = 128
# chat-template variables the server sets itself, beside the engine's (tokenizer.RESERVED_TEMPLATE_VARIABLES):
# tools (the request's checked tools field), strftime_now (the date function of Llama 3's templates)
SERVER_TEMPLATE_VARIABLES = {"tools": "the request's tools field (checked there); pass the tools as tools",
                             "strftime_now": "the date function chat templates call"}
COMPLETION_MAX_TOKENS_DEFAULT = 16  # OpenAI's legacy completions default

_COMMON = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "n", "stream", "stream_options",
           "presence_penalty", "frequency_penalty", "logprobs", "user", "ignore_eos", "best_of", "logit_bias",
           "min_p", "repetition_penalty", "stop_token_ids", "min_tokens", "prompt_logprobs", "skip_special_tokens",
           "guided_choice", "guided_regex", "structured_outputs", "include_stop_str_in_output", "prediction"}
_COMPLETION = _COMMON | {"prompt", "echo", "suffix"}
_CHAT = _COMMON | {"messages", "max_completion_tokens", "top_logprobs", "response_format", "tools", "tool_choice",
                   "functions", "function_call", "parallel_tool_calls", "store", "metadata", "service_tier",
                   "reasoning_effort", "modalities", "audio", "web_search_options",
                   "chat_template_kwargs", "add_generation_prompt", "continue_final_message"}
# accepted when absent, null or this value; refused by name otherwise
_NEUTRAL = {"best_of": 1,
            "functions": [], "function_call": "none", "store": False, "metadata": {},
            "service_tier": "auto", "reasoning_effort": None, "modalities": ["text"], "audio": None,
            "web_search_options": None}


@dataclasses.dataclass
class GenerationRequest:
    """A checked request: ``prompts`` (completions: text or token ids; chat: one conversation's messages),
    ``params[i]``: the sampling parameters of choice ``i`` of every prompt (``n`` of them)."""

    kind: str  # "completion" | "chat"
    prompts: list  # str | list[int] (completion) or list[dict] messages (chat)
    params: list[SamplingParams]
    max_tokens: int | None  # None: up to the context
    stream: bool = False
    include_usage: bool = False
    continuous_usage: bool = False
    logprobs: int | None = None  # top alternatives to report per token (0: the sampled token only)
    template_kwargs: dict | None = None  # chat: more chat-template variables (chat_template_kwargs)
    tools: list[dict] | None = None  # chat: function tools for the template
    tool_choice: str = "none"  # "auto": the answer is parsed for calls; "none": it is not; "required" or
    # "function" (tool_name): the answer is held to calls (forced_call_schema) and read as calls
    tool_name: str | None = None
    parallel_tool_calls: bool = True  # False: the first call only
    echo: bool = False  # completions: the prompt (and its logprobs) before the answer; max_tokens 0: only it
    prompt_logprobs: int | None = None  # vLLM's: each prompt token's logprob, rank and this many alternatives
    add_generation_prompt: bool = True  # chat (vLLM's): the template's generation prompt after the messages
    continue_final_message: bool = False  # chat (vLLM's): the last (assistant) message is continued
    guided_field: str | None = None  # where a guided choice or regex was asked for (the 400s name it)
    suffix: str | None = None  # completions: fill in the middle (the text after the gap; tritium.engine.fim)
    # completions' best_of > n: ``params`` holds best_of candidates a prompt, of which the n with the highest
    # mean token log-probability are returned (None: every choice is returned)
    best_of_n: int | None = None

    @property
    def n(self) -> int:
        return len(self.params)


# -- field checks --------------------------------------------------------------------------------------------
def _int(body: dict, name: str, lo: int | None = None, hi: int | None = None, default=None):
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(f"{name} must be an integer, got {_show(value)}", name)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise invalid(f"{name} must be {_range(lo, hi)}, got {value}", name)
    return value


def _number(body: dict, name: str, lo: float, hi: float, default: float, lo_open: bool = False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise invalid(f"{name} must be a number, got {_show(value)}", name)
    if value > hi or value < lo or (lo_open and value == lo):
        raise invalid(f"{name} must be in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {value:g}", name)
    return float(value)


def _bool(body: dict, name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(f"{name} must be true or false, got {_show(value)}", name)
    return value


def _range(lo, hi) -> str:
    if hi is None:
        return f">= {lo}"
    return f"between {lo} and {hi}"


def _show(value) -> str:
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 60 else text[:57] + "..."


def _check_fields(body: dict, allowed: set[str], where: str, neutral_fields: dict | None = None) -> None:
    neutral_fields = _NEUTRAL if neutral_fields is None else neutral_fields
    for name in body:
        if name not in allowed:
            raise invalid(f"Unrecognized request argument supplied to {where}: {name}", name, "unknown_parameter")
        if name in neutral_fields:
            value = body[name]
            neutral = neutral_fields[name]
            if value is not None and value != neutral and not (name == "best_of" and value == body.get("n")):
                raise invalid(f"{name} is not supported by this server (got {_show(value)})", name,
                              "unsupported_parameter")


def _user(body: dict) -> None:
    """OpenAI's ``user``, an id of the end user (not read here): a string where given."""
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise invalid(f"user must be a string (an id of the end user), got {_show(body['user'])}", "user")


def _logit_bias(body: dict) -> dict[int, float] | None:
    """OpenAI's logit_bias: {"token id": bias in [-100, 100]} (ids as JSON object keys, so strings)."""
    value = body.get("logit_bias")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid(f"logit_bias must be an object of token ids to biases, got {_show(value)}", "logit_bias")
    out = {}
    for key, bias in value.items():
        if not (isinstance(key, str) and key.isdigit() and len(key) < 10):
            raise invalid(f"logit_bias: {_show(key)} is not a token id", "logit_bias")
        if not isinstance(bias, (int, float)) or isinstance(bias, bool) or not -100 <= bias <= 100:
            raise invalid(f"logit_bias[{key}] must be a number in [-100, 100], got {_show(bias)}", "logit_bias")
        out[int(key)] = float(bias)
    return out or None


def _token_ids(body: dict, name: str) -> list[int] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not _is_ids(value) or not all(0 <= t < 2**31 for t in value):
        raise invalid(f"{name} must be a list of token ids, got {_show(value)}", name)
    return value or None


def _prediction(body: dict) -> str | None:
    """OpenAI's predicted outputs: ``{"type": "content", "content": text or [{"type": "text", "text": ...}]}``,
    the text the answer is expected to largely repeat (None for an empty one)."""
    value = body.get("prediction")
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") != "content" or set(value) - {"type", "content"}:
        raise invalid(f"prediction must be an object {{\"type\": \"content\", \"content\": ...}}, got {_show(value)}",
                      "prediction")
    content = value.get("content")
    if isinstance(content, list) and all(isinstance(part, dict) and part.get("type") == "text"
                                         and isinstance(part.get("text"), str) and set(part) == {"type", "text"}
                                         for part in content):
        content = "".join(part["text"] for part in content)
    if not isinstance(content, str):
        raise invalid(f"prediction.content must be a string or a list of text parts ({{\"type\": \"text\", "
                      f"\"text\": ...}}), got {_show(content)}", "prediction")
    return content or None


def _stop(body: dict) -> list[str] | None:
    stop = body.get("stop")
    if stop is None:
        return None
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise invalid(f"stop must be a string or a list of strings, got {_show(stop)}", "stop")
    stop = [s for s in stop if s]
    return stop or None


def _sampling(body: dict, max_tokens: int | None, logprobs: int | None, count: int | None = None
              ) -> list[SamplingParams]:
    """One SamplingParams per choice (``count`` of them: default ``n``), choice i seeded with ``seed + i``."""
    n = _int(body, "n", 1, MAX_N, default=1) if count is None else count
    temperature = _number(body, "temperature", 0.0, 2.0, 1.0)
    top_k = _int(body, "top_k", -1, 2**31 - 1, default=0)
    seed = _int(body, "seed", -2**63, 2**64 - 1 - n, default=None)  # choice i draws with seed + i
    # min_tokens is bounded by the max_tokens given (none: the context bounds both)
    min_tokens = _int(body, "min_tokens", 0, max_tokens, default=0)
    base = dict(  # max_tokens None (chat default: up to the context) is settled per prompt by the app
        max_tokens=max(min_tokens, 1) if max_tokens is None else max_tokens, temperature=temperature,
        top_p=_number(body, "top_p", 0.0, 1.0, 1.0, lo_open=True),
        top_k=max(top_k, 0), stop=_stop(body), ignore_eos=_bool(body, "ignore_eos"),
        presence_penalty=_number(body, "presence_penalty", -2.0, 2.0, 0.0),
        frequency_penalty=_number(body, "frequency_penalty", -2.0, 2.0, 0.0), logprobs=logprobs,
        min_p=_number(body, "min_p", 0.0, 1.0, 0.0),
        repetition_penalty=_number(body, "repetition_penalty", 0.0, MAX_REPETITION_PENALTY, 1.0, lo_open=True),
        stop_token_ids=_token_ids(body, "stop_token_ids"), min_tokens=min_tokens,
        logit_bias=_logit_bias(body), skip_special_tokens=_bool(body, "skip_special_tokens", default=True),
        include_stop_str_in_output=_bool(body, "include_stop_str_in_output"), prediction=_prediction(body))
    # choices of one prompt differ: seed i of a seeded request goes to choice i
    return [SamplingParams(**base, seed=None if seed is None else seed + i) for i in range(n)]


def _stream_options(body: dict, stream: bool) -> tuple[bool, bool]:
    options = body.get("stream_options")
    if options is None:
        return False, False
    if not stream:
        raise invalid("stream_options is only allowed with stream: true", "stream_options")
    if not isinstance(options, dict):
        raise invalid(f"stream_options must be an object, got {_show(options)}", "stream_options")
    for key in options:
        if key not in ("include_usage", "continuous_usage_stats"):
            raise invalid(f"stream_options.{key} is not supported (include_usage, continuous_usage_stats are)",
                          f"stream_options.{key}")
    for key, value in options.items():
        if value is not None and not isinstance(value, bool):
            raise invalid(f"stream_options.{key} must be true or false, got {_show(value)}", f"stream_options.{key}")
    return options.get("include_usage") is True, options.get("continuous_usage_stats") is True


def _prompt_logprobs(body: dict, stream: bool, params: list[SamplingParams], echo_k: int | None = None
                     ) -> tuple[int | None, list[SamplingParams]]:
    """vLLM's ``prompt_logprobs`` (refused with streaming, as vLLM does), and the sampling parameters that
    score the prompt for it and for an echo's ``logprobs`` (``echo_k``): the wider of the two."""
    k = _int(body, "prompt_logprobs", 0, MAX_LOGPROBS, default=None)
    if k is not None and stream:
        raise invalid("prompt_logprobs is not available with stream: true", "prompt_logprobs")
    wanted = [x for x in (k, echo_k) if x is not None]
    if wanted:
        params = [dataclasses.replace(p, prompt_logprobs=max(wanted)) for p in params]
    return k, params


def _max_tokens(body: dict, names: tuple[str, ...], default: int | None, echo: bool = False) -> int | None:
    given = [name for name in names if body.get(name) is not None]
    if len(given) > 1 and len({repr(body[name]) for name in given}) > 1:
        raise invalid(f"{' and '.join(given)} disagree ({', '.join(f'{n}={_show(body[n])}' for n in given)}): give "
                      f"one of them ({given[-1]} is deprecated), or the same value", given[-1])
    for name in names:  # max_completion_tokens or the deprecated max_tokens (equal if both are given)
        if body.get(name) == 0 and not isinstance(body[name], bool) and not echo:
            why = " (0 only with echo: true, to score the prompt)" if "max_completion_tokens" not in names else ""
            raise invalid(f"{name} must be >= 1{why}, got 0", name)  # (chat has no echo)
        if body.get(name) is not None:
            return _int(body, name, 0 if echo else 1)
    return default


# -- requests ------------------------------------------------------------------------------------------------
def _texts_or_ids(body: dict, name: str) -> list:
    """Field ``name`` as a list of prompts, in one of OpenAI's four forms: a string, a list of strings, token ids,
    or a list of token-id lists (not strings and token-id lists mixed, which OpenAI and vLLM refuse); none empty."""
    value = body.get(name)
    if isinstance(value, str) or (isinstance(value, list) and value and _is_ids(value)):
        items = [value]
    elif isinstance(value, list) and value and (all(isinstance(x, str) for x in value) or all(
            isinstance(x, list) and _is_ids(x) for x in value)):
        items = list(value)
    else:
        mixed = isinstance(value, list) and {str, list} <= {type(x) for x in value}
        raise invalid(f"{name} must be a string, a list of strings, a list of token ids, or a list of token-id "
                      f"lists{' (not strings and token-id lists mixed)' if mixed else ''}, got {_show(value)}", name)
    for i, x in enumerate(items):
        if not x:
            raise invalid(f"{name} is empty" if len(items) == 1 else f"{name}[{i}] is empty", name)
    return items


def parse_completion(body: dict) -> GenerationRequest:
    """``POST /v1/completions``: ``prompt`` is a string, a list of strings, token ids or a list of those."""
    _check_fields(body, _COMPLETION, "/v1/completions", {k: v for k, v in _NEUTRAL.items() if k != "best_of"})
    _user(body)
    prompts = _texts_or_ids(body, "prompt")
    logprobs = _int(body, "logprobs", 0, MAX_LOGPROBS, default=None)
    stream = _bool(body, "stream")
    include, continuous = _stream_options(body, stream)
    echo = _bool(body, "echo")
    max_tokens = _max_tokens(body, ("max_tokens",), COMPLETION_MAX_TOKENS_DEFAULT, echo)
    n = _int(body, "n", 1, MAX_N, default=1)
    best_of = _int(body, "best_of", 1, MAX_N, default=n)
    if best_of < n:
        raise invalid(f"best_of must be >= n ({n}), got {best_of}", "best_of")
    if best_of > n:
        for name, given in (("stream", stream), ("echo", echo), ("prompt_logprobs", body.get("prompt_logprobs"))):
            if given:
                raise invalid(f"best_of > n cannot be combined with {name} (the best candidates are known only at "
                              "the end)", "best_of")
    # best_of candidates score their tokens (logprobs 0: the sampled token's), reported only if asked for;
    # echo with logprobs: the prompt's tokens with as many alternatives as the answer's
    scored = logprobs if best_of == n or logprobs is not None else 0
    params, guided_field = _guided(body, _sampling(body, max_tokens, scored, best_of))
    prompt_k, params = _prompt_logprobs(body, stream, params, logprobs if echo else None)
    if not stream:  # each prompt is scored by its first choice, the others given its scores (OpenAIServer)
        params = _first_scores(params)
    suffix = body.get("suffix")
    if suffix is not None:
        if not isinstance(suffix, str):
            raise invalid(f"suffix must be a string, got {_show(suffix)}", "suffix")
        if suffix and echo:
            raise invalid("suffix cannot be combined with echo (the prompt of a fill-in-the-middle request is not "
                          "the text before the answer alone)", "suffix")
        if suffix and not all(isinstance(p, str) for p in prompts):
            raise invalid("suffix needs text prompts (the text before the gap), got token ids", "suffix")
    return GenerationRequest("completion", prompts, params, max_tokens, stream, include, continuous, logprobs,
                             echo=echo, prompt_logprobs=prompt_k, guided_field=guided_field, suffix=suffix or None,
                             best_of_n=n if best_of > n else None)


def _guided(body: dict, params: list[SamplingParams]) -> tuple[list[SamplingParams], str | None]:
    """vLLM's guided answers: ``guided_choice`` (a list of strings), ``guided_regex`` (a pattern, matched in
    full), or the same as ``structured_outputs`` ``{"choice": [...]}`` / ``{"regex": "..."}``; the parameters
    holding the one asked for (:mod:`tritium.engine.guided`), and the field it came from."""
    asked = [(name, body[name]) for name in ("guided_choice", "guided_regex") if body.get(name) is not None]
    outputs = body.get("structured_outputs")
    if outputs is not None:
        if not isinstance(outputs, dict):
            raise invalid(f"structured_outputs must be an object, got {_show(outputs)}", "structured_outputs")
        for key, value in outputs.items():
            if key not in ("choice", "regex"):
                hint = " (JSON: response_format json_schema)" if key in ("json", "json_object") else ""
                raise invalid(f"structured_outputs.{key} is not supported (choice and regex are){hint}",
                              "structured_outputs", "unsupported_parameter")
            if value is not None:
                asked.append((f"structured_outputs.{key}", value))
    if not asked:
        return params, None
    if len(asked) > 1:
        raise invalid(f"{asked[0][0]} and {asked[1][0]} exclude each other: one guided answer a request",
                      asked[1][0].partition(".")[0])
    field, spec = asked[0]
    kind = "choice" if field.endswith("choice") else "regex"
    try:
        compile_guided(kind, spec)
    except ValueError as e:
        raise invalid(f"{field}: {e}", field.partition(".")[0]) from None
    spec_field = {"choices": spec} if kind == "choice" else {"regex": spec}
    return [dataclasses.replace(p, response_format=kind, **spec_field) for p in params], field.partition(".")[0]


def parse_chat(body: dict) -> GenerationRequest:
    """``POST /v1/chat/completions``: ``messages`` of one conversation (checked when it is encoded)."""
    _check_fields(body, _CHAT, "/v1/chat/completions")
    _user(body)
    if "messages" not in body:
        raise invalid("messages is required", "messages")
    logprobs = None
    if _bool(body, "logprobs"):
        logprobs = _int(body, "top_logprobs", 0, MAX_LOGPROBS, default=0)
    elif body.get("top_logprobs") is not None:
        raise invalid("top_logprobs needs logprobs: true", "top_logprobs")
    stream = _bool(body, "stream")
    include, continuous = _stream_options(body, stream)
    max_tokens = _max_tokens(body, ("max_completion_tokens", "max_tokens"), None)
    try:
        template_kwargs = check_chat_template_kwargs(body.get("chat_template_kwargs"))
    except ValueError as e:
        raise invalid(str(e), "chat_template_kwargs") from None
    tools, tool_choice, tool_name = _tools(body)
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise invalid(f"parallel_tool_calls must be a boolean, got {_show(parallel)}", "parallel_tool_calls")
    params, guided_field = _guided(body, _sampling(body, max_tokens, logprobs))
    response_format = _response_format(body)
    if guided_field is not None and (response_format is not None or tool_choice != "none"):
        other = "response_format" if response_format is not None else f"tool_choice {tool_choice!r}"
        raise invalid(f"{guided_field} cannot be combined with {other}: one constraint on an answer", guided_field)
    if response_format is not None:
        if tool_choice != "none":
            raise invalid(f"response_format {response_format[0]} cannot be combined with tools (tool_choice "
                          f"{tool_choice!r}): a tool call is not the JSON answer asked for; pass tool_choice 'none' or "
                          "no tools", "response_format")
        kind, schema = response_format
        params = [dataclasses.replace(p, response_format=kind, json_schema=schema) for p in params]
    if tool_choice in ("required", "function"):
        try:
            schema = forced_call_schema(tools, tool_name, parallel is not False)
            compile_schema(schema)
        except ValueError as e:
            forced = "'required'" if tool_name is None else f"function {tool_name!r}"
            raise invalid(f"tool_choice {forced} holds the answer to the tools' parameters with JSON mode, which "
                          f"cannot enforce them: {e}", "tools") from None
        params = [dataclasses.replace(p, response_format="json_schema", json_schema=schema) for p in params]
    prompt_k, params = _prompt_logprobs(body, stream, params)
    # the conversation's prompt_logprobs are reported once: the first choice scores the prompt, the others may
    # take its KV pages from the prefix cache
    params = _first_scores(params)
    generation_prompt, continued = _chat_prompt_options(body)
    # an answer's text stands alone, unless it continues the final (assistant) message
    params = [dataclasses.replace(p, continuation=continued) for p in params]
    return GenerationRequest("chat", [body["messages"]], params, max_tokens, stream, include,
                             continuous, logprobs, template_kwargs, tools, tool_choice, tool_name,
                             parallel is not False, prompt_logprobs=prompt_k, add_generation_prompt=generation_prompt,
                             continue_final_message=continued, guided_field=guided_field)


def check_chat_template_kwargs(template_kwargs, what: str = "chat_template_kwargs") -> dict:
    """``template_kwargs`` as a dict of extra chat-template variables ({} for None); ValueError naming ``what``
    and the key for one the server or the engine sets itself (``messages``, ``tools``, ...), which would
    otherwise reach the template unchecked or be overridden silently."""
    kwargs = check_template_kwargs(template_kwargs, what)
    for key, why in SERVER_TEMPLATE_VARIABLES.items():
        if key in kwargs:
            raise ValueError(f"{what}: {key!r} is set by the server ({why}) and cannot be given")
    return kwargs


def _chat_prompt_options(body: dict) -> tuple[bool, bool]:
    """(add_generation_prompt, continue_final_message) of a chat or /tokenize body, vLLM's extensions: the
    defaults (True, False) answer after the conversation; (False, True) continues its last, assistant, message."""
    continued = _bool(body, "continue_final_message")
    generation_prompt = not continued if body.get("add_generation_prompt") is None else _bool(
        body, "add_generation_prompt")
    if continued and generation_prompt:
        raise invalid("continue_final_message and add_generation_prompt cannot both be true: a continued message "
                      "gets no generation prompt after it", "continue_final_message")
    return generation_prompt, continued


def _first_scores(params: list[SamplingParams]) -> list[SamplingParams]:
    """The choices' parameters with only the first scoring the prompt (prompt_logprobs)."""
    return params[:1] + [dataclasses.replace(p, prompt_logprobs=None) for p in params[1:]]


def _response_format(body: dict) -> tuple[str, dict | bool | None] | None:
    """A chat request's ``response_format``: None for ``{"type": "text"}`` (or none given); ("json_object", None)
    for OpenAI's JSON mode; ("json_schema", schema) for structured outputs (:mod:`tritium.engine.json_schema`:
    what cannot be enforced is refused by name)."""
    value = body.get("response_format")
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise invalid(f"response_format must be an object with a type ('text', 'json_object' or 'json_schema'), got "
                      f"{_show(value)}", "response_format")
    kind = value["type"]
    allowed = {"text": {"type"}, "json_object": {"type"}, "json_schema": {"type", "json_schema"}}.get(kind)
    if allowed is None:
        raise invalid(f"response_format.type must be 'text', 'json_object' or 'json_schema', got {_show(kind)}",
                      "response_format")
    extra = sorted(set(value) - allowed)
    if extra:
        raise invalid(f"response_format of type {kind!r} takes no field {', '.join(extra)}", "response_format")
    if kind == "text":
        return None
    if kind == "json_object":
        return "json_object", None
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise invalid(f"response_format.json_schema must be an object with a name (and a schema), got {_show(spec)}",
                      "response_format")
    unknown = sorted(set(spec) - {"name", "schema", "strict", "description"})
    if unknown:
        raise invalid(f"response_format.json_schema takes name, schema, strict and description, got "
                      f"{', '.join(unknown)}", "response_format")
    if "strict" in spec and not isinstance(spec["strict"], bool) and spec["strict"] is not None:
        raise invalid(f"response_format.json_schema.strict must be a boolean, got {_show(spec['strict'])}",
                      "response_format")
    schema = spec.get("schema", {"type": "object"})
    try:
        compile_schema(schema)
    except ValueError as e:
        raise invalid(str(e), "response_format") from None
    return "json_schema", schema


def _tools(body: dict) -> tuple[list[dict] | None, str, str | None]:
    """(tools, tool_choice, tool_name) of a chat request: tool_choice "auto" (the default with tools), "none",
    "required" (at least one call) or "function" (a named function's call, tool_name)."""
    tools = body.get("tools")
    if tools is not None and tools != []:
        try:
            tools = check_tools(tools)
        except ValueError as e:
            raise invalid(str(e), "tools") from None
    else:
        tools = None
    choice = body.get("tool_choice")
    if choice is None:
        return tools, "auto" if tools else "none", None
    if choice == "none":
        return tools, "none", None
    if choice in ("auto", "required"):
        if tools is None:
            raise invalid(f"tool_choice {choice!r} needs tools", "tool_choice")
        return tools, choice, None
    if isinstance(choice, dict):
        fn = choice.get("function")
        if choice.get("type") != "function" or set(choice) != {"type", "function"} or not isinstance(fn, dict) \
                or set(fn) != {"name"} or not isinstance(fn["name"], str):
            raise invalid(f"a named tool_choice must be {{'type': 'function', 'function': {{'name': ...}}}}, got "
                          f"{_show(choice)}", "tool_choice")
        names = [t["function"]["name"] for t in tools or []]
        if fn["name"] not in names:
            raise invalid(f"tool_choice names function {fn['name']!r}, which is not among the tools "
                          f"({', '.join(names) or 'none given'})", "tool_choice")
        return tools, "function", fn["name"]
    raise invalid(f"tool_choice must be 'none', 'auto', 'required' or a named function, got {_show(choice)}",
                  "tool_choice")


def _is_ids(value: list) -> bool:
    return all(isinstance(t, int) and not isinstance(t, bool) for t in value)


MAX_EMBEDDING_INPUTS = 2048  # OpenAI's bound on one request's inputs


@dataclasses.dataclass
class EmbeddingRequest:
    """A checked ``POST /v1/embeddings``: the inputs (text or token ids), ``base64`` (float32 little-endian bytes,
    base64-encoded, instead of lists of floats) and ``dimensions`` (the first components; None: all)."""

    inputs: list  # str | list[int]
    base64: bool = False
    dimensions: int | None = None


def parse_embedding(body: dict) -> EmbeddingRequest:
    """``POST /v1/embeddings``: ``input`` is a string, a list of strings, token ids or a list of those."""
    _check_fields(body, {"model", "input", "encoding_format", "dimensions", "user"}, "/v1/embeddings")
    _user(body)
    inputs = _texts_or_ids(body, "input")
    if len(inputs) > MAX_EMBEDDING_INPUTS:
        raise invalid(f"input holds {len(inputs)} items; a request takes at most {MAX_EMBEDDING_INPUTS}", "input")
    fmt = body.get("encoding_format")
    if fmt not in (None, "float", "base64"):
        raise invalid(f"encoding_format must be 'float' or 'base64', got {_show(fmt)}", "encoding_format")
    return EmbeddingRequest(inputs, fmt == "base64", _int(body, "dimensions", 1, 2**31 - 1, default=None))


# -- responses -----------------------------------------------------------------------------------------------
def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0,
          prediction: tuple[int, int] | None = None) -> dict:
    """OpenAI's usage object; ``prompt_tokens_details.cached_tokens``: prompt tokens the prefix cache served;
    ``prediction``: a predicted output's draft tokens (accepted, rejected), as ``completion_tokens_details``."""
    out = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
           "total_tokens": prompt_tokens + completion_tokens,
           "prompt_tokens_details": {"cached_tokens": cached_tokens}}
    if prediction is not None:
        out["completion_tokens_details"] = {"accepted_prediction_tokens": prediction[0],
                                            "rejected_prediction_tokens": prediction[1]}
    return out


class LogprobFormatter:
    """OpenAI's logprobs objects from :class:`~tritium.engine.TokenLogprobs` (token text, bytes)."""

    def __init__(self, tokenizer: Tokenizer | None):
        self.tokenizer = tokenizer
        self._cache: dict[int, tuple[str, list[int]]] = {}

    def token(self, token_id: int) -> tuple[str, list[int]]:
        hit = self._cache.get(token_id)
        if hit is None:
            raw = self.tokenizer.token_bytes(token_id) if self.tokenizer is not None else b""
            hit = self._cache[token_id] = (raw.decode("utf-8", errors="replace") if raw else f"token_id:{token_id}",
                                           list(raw))
        return hit

    def chat(self, logprobs) -> dict:
        """``{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}``."""
        content = []
        for lp in logprobs:
            text, raw = self.token(lp.token_id)
            top = []
            for tid, value in lp.top:
                t, b = self.token(tid)
                top.append({"token": t, "logprob": value, "bytes": b})
            content.append({"token": text, "logprob": lp.logprob, "bytes": raw, "top_logprobs": top})
        return {"content": content}

    def prompt(self, logprobs: list, k: int) -> list:
        """vLLM's ``prompt_logprobs``: per prompt token None (the first) or ``{token id: {"logprob", "rank",
        "decoded_token"}}`` for the token and the ``k`` most likely there (one entry where they coincide)."""
        out = []
        for lp in logprobs:
            if lp is None:
                out.append(None)
                continue
            entry = {lp.token_id: {"logprob": lp.logprob, "rank": lp.rank, "decoded_token": self.token(lp.token_id)[0]}}
            for rank, (tid, value) in enumerate(lp.top[:k], 1):
                entry.setdefault(tid, {"logprob": value, "rank": rank, "decoded_token": self.token(tid)[0]})
            out.append(entry)
        return out

    def legacy_token(self, token_id: int) -> str:
        """A token as the legacy completions form names it: its text, or, where its bytes are not whole UTF-8
        characters (a part of an emoji, say), OpenAI's ``bytes:\\xNN...``: then such tokens stay apart as
        ``top_logprobs`` keys instead of all becoming one "\ufffd"."""
        text, raw = self.token(token_id)
        if raw and "\ufffd" in text:
            try:
                bytes(raw).decode("utf-8")
            except UnicodeDecodeError:
                return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
        return text

    def completion(self, logprobs, offsets: TextOffsets | None = None,
                   prompt: tuple[list[int], list | None] | None = None) -> dict:
        """The legacy completions form: ``tokens``, ``token_logprobs``, ``top_logprobs`` (dicts), ``text_offset``.
        ``prompt`` (echo): (prompt token ids, their :class:`TokenLogprobs` or None each) first; a token
        without one (the first) has null ``token_logprobs`` and ``top_logprobs``. ``offsets``: the choice's
        :class:`TextOffsets` so far (a stream's chunks share one; None: a new one from 0)."""
        offsets = TextOffsets() if offsets is None else offsets
        tokens, values, tops, at = [], [], [], []
        ids, scored = prompt if prompt is not None else ([], None)
        for i, token_id in enumerate(ids):
            lp = None if scored is None else scored[i]
            tokens.append(self.legacy_token(token_id))
            values.append(None if lp is None else lp.logprob)
            tops.append(None if lp is None else {self.legacy_token(tid): value for tid, value in lp.top})
            at.append(offsets.advance(bytes(self.token(token_id)[1])))
        for lp in logprobs:
            tokens.append(self.legacy_token(lp.token_id))
            values.append(lp.logprob)
            tops.append({self.legacy_token(tid): value for tid, value in lp.top})
            at.append(offsets.advance(bytes(self.token(lp.token_id)[1])))
        return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": at}


class TextOffsets:
    """The legacy form's ``text_offset``: where each token starts, in characters, in the text its choice's tokens'
    bytes make; a token that begins inside a character (the second byte of an emoji) gets that character's."""

    def __init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.chars = 0  # characters whole so far (a character still missing bytes is not counted yet)

    def advance(self, raw: bytes) -> int:
        start = self.chars
        self.chars += len(self._decoder.decode(raw))
        return start
