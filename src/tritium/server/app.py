"""The OpenAI-compatible HTTP app (FastAPI) over an :class:`~tritium.engine.AsyncLLMEngine`.

    app = build_app(AsyncLLMEngine(LLMEngine(path)), model_name="my-model", api_key=None)

Routes: ``GET /v1/models`` (and ``/v1/models/{id}``), ``POST /v1/completions``, ``POST /v1/chat/completions``
(JSON, or server-sent events with ``stream: true``, ending in ``data: [DONE]``), ``POST /v1/responses`` (OpenAI's
Responses API over the chat machinery, streamed as its typed events; ``GET`` and ``DELETE /v1/responses/{id}``
and ``GET /v1/responses/{id}/input_items`` for the responses kept, ``POST /v1/responses/input_tokens`` to count a
prompt: :mod:`tritium.server.responses`),
``POST /v1/embeddings`` (the
inputs' pooled hidden states: :mod:`tritium.engine.pooling`), ``GET /health`` (and ``HEAD``: 200 while
the engine loop runs, 503 otherwise), ``GET /metrics`` (Prometheus), and vLLM's ``POST /tokenize`` (a prompt,
or messages as a chat request renders them), ``POST /detokenize`` and ``GET /tokenizer_info``. With an API
key, ``/v1/*``, ``/tokenize``, ``/detokenize`` and ``/tokenizer_info`` need ``Authorization: Bearer <key>``.

Every error is OpenAI's JSON ``{"error": {"message", "type", "param", "code"}}``: 400 for a bad parameter,
malformed JSON or a prompt longer than the context (code ``context_length_exceeded``), 401 for a missing
or wrong key, 404 for an unknown model or path, 405 for a wrong method (with ``Allow``), 413 for a body over
``max_request_bytes``, 503 when the queue is full (``--max-queue``) or the engine stopped. A client that
disconnects has its requests aborted (their KV pages are freed before the engine's next step).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hmac
import json
import logging
import re
import time
import uuid

import torch

from tritium.engine import (AsyncLLMEngine, EngineStoppedError, LoRARequest, QueueFullError, RequestOutput,
                            RequestTooLargeError, SamplingParams)
from tritium.engine.async_engine import RequestStream
from tritium.engine.chat import encode_chat
from tritium.engine.fim import encode_fim, fim_stop_ids
from tritium.engine.pooling import UnsupportedDimensions, check_dimensions, finish, model_matryoshka, model_pooling
from tritium.engine.reasoning import ReasoningStream, prompt_opens_reasoning, split_reasoning
from tritium.engine.tools import (PARSERS, ArgumentsDelta, ForcedCallStream, ToolCall, ToolCallStream, detect_parser,
                                  parse_tool_calls)
from tritium.server.errors import APIError, error_body, invalid
from tritium.server.metrics import Metrics, RequestTracker
from tritium.server.protocol import (GenerationRequest, LogprobFormatter, TextOffsets, check_chat_template_kwargs,
                                     parse_chat, parse_completion, parse_embedding, usage)
from tritium.server.responses import (DEFAULT_MAX_STORED, ResponsesRequest, ResponseStore, ResponseWriter, Stored,
                                      conversation, drop_oldest_turn, input_item_page, parse_responses, rename_error)
from tritium.server.responses import sse as response_sse

try:  # the optional extra tritium[serve]
    import fastapi
    from fastapi.middleware.cors import CORSMiddleware
    from fastapi.responses import JSONResponse, Response, StreamingResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.requests import ClientDisconnect
except ImportError as e:  # pragma: no cover - exercised only without the extra
    fastapi = None
    _IMPORT_ERROR = e

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 16 << 20
# the paths an API key guards (the OpenAI API and the tokenizer's)
PROTECTED = ("/v1", "/tokenize", "/detokenize", "/tokenizer_info")


def _require_extra() -> None:
    if fastapi is None:
        raise ImportError(f"the server needs the 'serve' extra: pip install 'tritium[serve]' ({_IMPORT_ERROR})")


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _sse(obj) -> str:
    return f"data: {_dumps(obj)}\n\n"


_DONE = object()  # the end of a stream whose every choice finished


@dataclasses.dataclass
class _Choice:
    """Progress of one choice (one engine request) of a response."""

    index: int
    prompt_tokens: int
    text: str = ""
    tokens: int = 0
    logprobs: list = dataclasses.field(default_factory=list)
    finish_reason: str | None = None
    tools: ToolCallStream | ForcedCallStream | None = None  # with tools: the answer's calls read as it streams
    reasoning: ReasoningStream | None = None  # with the reasoning parser: <think> ... </think> as it streams
    # completions with echo: the prompt's text and ids (and their logprobs once computed), not yet streamed;
    # score_only (max_tokens 0): the engine scores the prompt and generates nothing
    echo: str | None = None
    prompt_ids: list[int] | None = None
    prompt_logprobs: list | None = None
    echo_sent: bool = False
    score_only: bool = False
    cached_tokens: int = 0  # of its prompt, served from the prefix cache
    prediction: tuple[int, int] = (0, 0)  # draft tokens from the request's prediction: accepted, rejected
    stop_reason: str | int | None = None  # vLLM's: the stop string or stop token id that ended it
    offsets: TextOffsets | None = None  # completions' logprobs: the text offsets reached (a stream's chunks go on)
    content_sent: bool = False  # a parsed chat stream (tools, reasoning): whether some content text went out

    @property
    def parsed(self) -> bool:
        """Whether the answer is read for tool calls or reasoning (its content may then be null)."""
        return self.tools is not None or self.reasoning is not None


@dataclasses.dataclass
class _Run:
    """A completions or chat request submitted to the engine: what its answer is built from."""

    req: GenerationRequest
    kind: str
    prefix: str
    stream: RequestStream
    choices: dict[str, _Choice]
    tracker: RequestTracker
    prompt_tokens: int
    model: str  # the name the request asked for: the served model's or a LoRA adapter's
    # when it was made (s): every chunk of a stream carries it, as OpenAI's do, however long the stream runs
    created: int = dataclasses.field(default_factory=lambda: int(time.time()))

    def fields(self) -> tuple:
        """The fields in order up to ``prompt_tokens``, not copied (``dataclasses.astuple`` copies them)."""
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))[:7]


class OpenAIServer:
    """The handlers, with the engine, model name, key and metrics they share (see the module docstring)."""

    def __init__(self, engine: AsyncLLMEngine, model_name: str, api_key: str | None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, chat_template_kwargs: dict | None = None,
                 tool_parser: str | None = None, reasoning_parser: str | None = None,
                 max_stored_responses: int = DEFAULT_MAX_STORED, responses_dir: str | None = None):
        if not isinstance(model_name, str) or not model_name:
            raise ValueError(f"model_name must be a non-empty string, got {model_name!r}")
        if reasoning_parser not in (None, "think"):
            raise ValueError(f"reasoning_parser must be 'think' or None, got {reasoning_parser!r}")
        self.reasoning_parser = reasoning_parser
        # /v1/responses kept for retrieval and chaining (on disk too with a directory)
        self.stored = ResponseStore(max_stored_responses, directory=responses_dir, name="responses_dir")
        if tool_parser is not None and tool_parser not in PARSERS:
            raise ValueError(f"tool_parser must be one of {', '.join(PARSERS)} or None (from the chat template), got "
                             f"{tool_parser!r}")
        # every chat request's template variables, under its own chat_template_kwargs
        self.template_kwargs = check_chat_template_kwargs(chat_template_kwargs)
        self.engine = engine
        self.model_name = model_name
        self.api_key = api_key
        self.max_request_bytes = max_request_bytes
        self.tokenizer = engine.engine.tokenizer
        # the format the model writes tool calls in: given, else recognised in its chat template
        self.tool_parser = tool_parser or detect_parser(self.tokenizer.chat_template if self.tokenizer else None)
        self.max_model_len = engine.engine.max_model_len
        self.vocab_size = engine.engine.model_config.vocab_size
        self.metrics = Metrics(engine, model_name)
        self.logprobs = LogprobFormatter(self.tokenizer)
        self.created = int(time.time())
        try:  # /v1/embeddings: how the model pools (its sentence-transformers files; none: the last token)
            self.pooling, self.pooling_error = model_pooling(engine.engine.model_path), None
        except (ValueError, OSError) as e:
            self.pooling, self.pooling_error = None, str(e)
        self.matryoshka = model_matryoshka(engine.engine.model_path)  # the embedding sizes it may be cut to

    # -- routes --------------------------------------------------------------------------------------------
    def model_card(self) -> dict:
        return {"id": self.model_name, "object": "model", "created": self.created, "owned_by": "tritium",
                "max_model_len": self.max_model_len}

    def adapter_card(self, name: str) -> dict:
        return {"id": name, "object": "model", "created": self.created, "owned_by": "tritium",
                "max_model_len": self.max_model_len, "parent": self.model_name, "root": name}

    async def models(self):
        return JSONResponse({"object": "list", "data": [self.model_card()] + [
            self.adapter_card(name) for name in self.engine.engine.lora_names()]})

    async def model(self, model: str):
        lora = self._check_model(model)
        return JSONResponse(self.model_card() if lora is None else self.adapter_card(lora.name))

    async def load_lora_adapter(self, request: "fastapi.Request"):
        """``POST /v1/load_lora_adapter`` (vLLM's; with ``runtime_lora``): ``{"lora_name", "lora_path"}`` reads the
        PEFT adapter at ``lora_path`` (a path on the server) on the engine thread between two steps and serves it
        as ``lora_name``. A name already served is a 400, as vLLM's, unless ``load_inplace: true`` (vLLM's too)
        asks to read it again (from the new path; while no request runs it)."""
        body = await self._json(request)
        extra = sorted(set(body) - {"lora_name", "lora_path", "load_inplace"})
        if extra:
            raise invalid(f"Unrecognized request argument supplied: {extra[0]}", extra[0], "unknown_parameter")
        name, path, inplace = body.get("lora_name"), body.get("lora_path"), body.get("load_inplace", False)
        if not isinstance(name, str) or not name:
            raise invalid(f"lora_name must be a non-empty string, got {name!r}", "lora_name")
        if name == self.model_name:
            raise invalid(f"lora_name {name!r} is the served model's own name", "lora_name")
        if not isinstance(path, str) or not path:
            raise invalid(f"lora_path must be a non-empty string (a PEFT adapter directory), got {path!r}",
                          "lora_path")
        if not isinstance(inplace, bool):
            raise invalid(f"load_inplace must be true or false, got {inplace!r}", "load_inplace")

        def load(engine) -> bool:  # on the engine thread: two loads of one name do not both find it free
            if name in engine.lora_names() and not inplace:
                return False
            engine.load_lora(name, path)
            return True

        try:
            loaded = await self.engine.call(load)
        except (ValueError, OSError) as e:
            raise invalid(str(e), "lora_path") from None
        except EngineStoppedError as e:
            raise APIError(503, str(e), type="server_error", code="engine_stopped") from None
        if not loaded:
            raise invalid(f"The lora adapter '{name}' has already been loaded (pass load_inplace: true to read it "
                          "again)", "lora_name")
        return JSONResponse(self.adapter_card(name))

    async def unload_lora_adapter(self, request: "fastapi.Request"):
        """``POST /v1/unload_lora_adapter`` (with ``runtime_lora``): ``{"lora_name"}`` stops serving an adapter (a
        400 while requests run it)."""
        body = await self._json(request)
        extra = sorted(set(body) - {"lora_name", "lora_int_id"})
        if extra:
            raise invalid(f"Unrecognized request argument supplied: {extra[0]}", extra[0], "unknown_parameter")
        name = body.get("lora_name")
        if not isinstance(name, str) or name not in self.engine.engine.lora_names():
            raise APIError(404, f"No LoRA adapter named {name!r} is served", param="lora_name", code="not_found")
        try:
            await self.engine.call(lambda engine: engine.remove_lora(name))
        except ValueError as e:
            raise invalid(str(e), "lora_name") from None
        except EngineStoppedError as e:
            raise APIError(503, str(e), type="server_error", code="engine_stopped") from None
        return JSONResponse({"id": name, "object": "model", "deleted": True})

    async def health(self):
        if self.engine.running:
            return JSONResponse({"status": "ok"})
        return JSONResponse(error_body("the engine is not running", "server_error", None, "engine_stopped"),
                            status_code=503)

    async def render_metrics(self):
        body, content_type = self.metrics.render()
        return Response(body, media_type=content_type)

    async def tokenize(self, request: "fastapi.Request"):
        """``POST /tokenize`` (vLLM's): ``{"prompt": str, "add_special_tokens": true}`` or ``{"messages": [...],
        "chat_template_kwargs": {...}, "tools": [...]}`` (rendered as a chat request is) -> the token ids."""
        body = await self._json(request)
        if body.get("model") is not None:
            self._check_model(body["model"])
        if self.tokenizer is None:
            raise invalid("this model has no tokenizer", None)
        if ("prompt" in body) == ("messages" in body):
            raise invalid("give either prompt (text) or messages (a conversation)", None)
        if "prompt" in body:
            extra = sorted(set(body) - {"model", "prompt", "add_special_tokens"})
            if extra:
                raise invalid(f"Unrecognized request argument supplied to /tokenize: {extra[0]}", extra[0],
                              "unknown_parameter")
            if not isinstance(body["prompt"], str):
                raise invalid(f"prompt must be a string, got {type(body['prompt']).__name__}", "prompt")
            special = body.get("add_special_tokens", True)
            if not isinstance(special, bool):
                raise invalid("add_special_tokens must be true or false", "add_special_tokens")
            ids = self.tokenizer.encode(body["prompt"], add_special_tokens=special)
        else:
            extra = sorted(set(body) - {"model", "messages", "chat_template_kwargs", "tools", "add_generation_prompt",
                                        "continue_final_message"})
            if extra:
                raise invalid(f"Unrecognized request argument supplied to /tokenize: {extra[0]}", extra[0],
                              "unknown_parameter")
            req = parse_chat({k: v for k, v in body.items() if k != "model"})
            try:
                ids = self._chat_ids(req)
            except ValueError as e:
                raise invalid(str(e), "messages") from None
        return JSONResponse({"count": len(ids), "max_model_len": self.max_model_len, "tokens": ids})

    async def tokenizer_info(self):
        """``GET /tokenizer_info`` (vLLM's): the special tokens and the chat template, which a client that
        tokenizes through ``/tokenize`` (lm-evaluation-harness's remote tokenizer) reads."""
        if self.tokenizer is None:
            raise invalid("this model has no tokenizer", None)
        tok = self.tokenizer
        return JSONResponse({"eos_token": tok.eos_token, "bos_token": tok.bos_token, "pad_token": None,
                             "chat_template": tok.chat_template, "model_max_length": self.max_model_len,
                             "eos_token_ids": list(tok.eos_token_ids), "vocab_size": tok.vocab_size})

    async def detokenize(self, request: "fastapi.Request"):
        """``POST /detokenize`` (vLLM's): ``{"tokens": [ids]}`` -> ``{"prompt": text}``."""
        body = await self._json(request)
        if body.get("model") is not None:
            self._check_model(body["model"])
        extra = sorted(set(body) - {"model", "tokens"})
        if extra:
            raise invalid(f"Unrecognized request argument supplied to /detokenize: {extra[0]}", extra[0],
                          "unknown_parameter")
        if self.tokenizer is None:
            raise invalid("this model has no tokenizer", None)
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) and
                                                   0 <= t < self.vocab_size for t in tokens):
            raise invalid(f"tokens must be a list of token ids in [0, {self.vocab_size})", "tokens")
        return JSONResponse({"prompt": self.tokenizer.decode(tokens)})

    async def embeddings(self, request: "fastapi.Request"):
        """``POST /v1/embeddings``: each input's final hidden states pooled as the model says
        (:mod:`tritium.engine.pooling`), batched with the generation requests running."""
        arrival = time.perf_counter()
        body = await self._json(request)
        req = parse_embedding(body)
        lora = self._check_model(body["model"]) if body.get("model") is not None else None
        if self.pooling_error is not None:
            raise invalid(self.pooling_error, None, "unsupported_parameter")
        mode, normalize = self.pooling
        if req.dimensions is not None:
            self._check_dimensions(req.dimensions)
        prompts = [self._encode(x, "embedding", i, len(req.inputs), None) for i, x in enumerate(req.inputs)]
        prefix = "embd-" + uuid.uuid4().hex
        params = SamplingParams(max_tokens=1, pooling=mode)
        stream = self._submit([(f"{prefix}-{i}", ids, params, lora) for i, ids in enumerate(prompts)], "input")
        prompt_tokens = sum(map(len, prompts))
        tracker = self.metrics.tracker(prompt_tokens, arrival)
        vectors: dict[str, torch.Tensor] = {}

        def take(out: RequestOutput) -> None:
            if out.embedding is not None:
                vectors[out.request_id] = out.embedding

        if not await self._gather(request, stream, tracker, take):
            return Response(status_code=499)  # nobody reads it
        out = finish(torch.stack([vectors[f"{prefix}-{i}"] for i in range(len(prompts))]), normalize, req.dimensions)
        data = []
        for i, v in enumerate(out):
            value = base64.b64encode(v.numpy().astype("<f4").tobytes()).decode() if req.base64 else v.tolist()
            data.append({"object": "embedding", "index": i, "embedding": value})
        return JSONResponse({"object": "list", "data": data, "model": self.model_name if lora is None else lora.name,
                             "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}})

    def _check_dimensions(self, dimensions: int) -> None:
        """400 naming ``dimensions`` unless the model was trained for Matryoshka embeddings of that size, as vLLM
        (a vector cut from any other model's loses what its last components held): the engine's rule, which
        ``LLM.embed`` applies offline, and its words."""
        try:
            check_dimensions(dimensions, self.engine.engine.model_config.hidden_size, self.matryoshka, self.model_name)
        except UnsupportedDimensions as e:
            raise invalid(str(e), "dimensions", "unsupported_parameter") from None
        except ValueError as e:
            raise invalid(str(e), "dimensions") from None

    async def completions(self, request: "fastapi.Request"):
        return await self._generate(request, "completion")

    async def chat_completions(self, request: "fastapi.Request"):
        return await self._generate(request, "chat")

    async def create_response(self, request: "fastapi.Request"):
        """``POST /v1/responses``: run as a chat request, its answer written as output items
        (:mod:`tritium.server.responses`); kept (``store``) once it ends."""
        arrival = time.perf_counter()
        body = await self._json(request)
        model = self.model_name
        if body.get("model") is not None:
            self._check_model(body["model"])
            model = body["model"]  # a LoRA adapter's name runs that adapter
        try:
            parsed = parse_responses(body, self.stored, model)
            while True:
                try:
                    run = await self._start(parsed.chat, "chat", arrival)
                    break
                except APIError as e:  # truncation "auto": the oldest turn out, while one is left to drop
                    if e.code != "context_length_exceeded" or not parsed.truncate or not drop_oldest_turn(parsed):
                        raise
        except APIError as e:
            raise rename_error(e) from None
        writer = ResponseWriter(parsed.response, self._count_tokens, parsed.logprobs)
        events = self._response_events(request, parsed, run, writer)
        if parsed.stream:
            async def stream():
                async with contextlib.aclosing(events) as each:
                    async for event in each:
                        yield response_sse(event)
            return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        async with contextlib.aclosing(events) as each:
            async for _ in each:
                pass
        if writer.error is not None:  # renamed when the writer took it
            raise writer.error
        if not writer.done:
            return Response(status_code=499)  # nobody reads it
        return JSONResponse(writer.response)

    async def _response_events(self, request, parsed: ResponsesRequest, run: _Run, writer: ResponseWriter):
        """The Responses stream events of ``run``'s chat chunks; the response is kept once it ends (not failed)."""
        for event in writer.start():
            yield event
        async with contextlib.aclosing(self._chunks(request, run)) as chunks:
            async for chunk in chunks:
                if chunk is _DONE:
                    events = writer.finish()
                elif isinstance(chunk, APIError):
                    events = writer.fail(rename_error(chunk))
                else:
                    events = writer.feed(chunk)
                if writer.done and writer.error is None and parsed.store:  # before its last event goes out
                    self.stored.put(Stored(writer.response, parsed.items,
                                           parsed.messages + conversation(writer.response["output"])))
                for event in events:
                    yield event

    async def count_input_tokens(self, request: "fastapi.Request"):
        """``POST /v1/responses/input_tokens``: the prompt tokens a Responses request would have (its template,
        tools, instructions and previous response included), counted even past the context."""
        body = await self._json(request)
        if body.get("model") is not None:
            self._check_model(body["model"])
        try:
            parsed = parse_responses(body, self.stored, self.model_name)
            ids = self._chat_ids(parse_chat(parsed.chat))
        except ValueError as e:
            raise invalid(f"input: {e}", "input") from None
        except APIError as e:
            raise rename_error(e) from None
        return JSONResponse({"object": "response.input_tokens", "input_tokens": len(ids)})

    def _count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False)) if self.tokenizer is not None else 0

    def _stored_response(self, response_id: str) -> Stored:
        stored = self.stored.get(response_id)
        if stored is None:
            raise APIError(404, f"No response with id '{response_id}' found (responses are kept {self.stored.where}, "
                           f"the {self.stored.max_responses} most recently used, and only with store: true)",
                           param="response_id", code="not_found")
        return stored

    async def get_response(self, response_id: str, request: "fastapi.Request"):
        """``GET /v1/responses/{id}``: a kept response."""
        if request.query_params.get("stream") not in (None, "false"):
            raise invalid("stream is for background responses, which this server does not run", "stream",
                          "unsupported_parameter")
        return JSONResponse(self._stored_response(response_id).response)

    async def delete_response(self, response_id: str):
        """``DELETE /v1/responses/{id}``: forget a kept response."""
        self._stored_response(response_id)
        self.stored.delete(response_id)
        return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})

    async def response_input_items(self, response_id: str, request: "fastapi.Request"):
        """``GET /v1/responses/{id}/input_items``: a page of a kept response's input items."""
        return JSONResponse(input_item_page(self._stored_response(response_id), request.query_params))

    # -- generation ----------------------------------------------------------------------------------------
    async def _generate(self, request, kind: str):
        arrival = time.perf_counter()
        run = await self._start(await self._json(request), kind, arrival)
        if run.req.stream:
            return StreamingResponse(self._stream(request, run), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return await self._respond(request, run)

    async def _start(self, body: dict, kind: str, arrival: float) -> _Run:
        """Check a completions or chat ``body`` and submit its requests to the engine."""
        req = parse_completion(body) if kind == "completion" else parse_chat(body)
        lora = self._check_model(body["model"]) if body.get("model") is not None else None
        template_kwargs = self._template_kwargs(req)
        if req.tools is not None:
            if req.tool_choice == "auto" and self.tool_parser is None:
                raise invalid("tools need a tool-call format this server parses, and this model's chat template "
                              "shows none it recognises; start the server with --tool-call-parser "
                              f"({', '.join(PARSERS)})", "tools", "unsupported_parameter")
        bias = req.params[0].logit_bias or {}
        bad = next((t for t in bias if t >= self.vocab_size), None)
        if bad is not None:
            raise invalid(f"logit_bias has token id {bad} outside the vocabulary [0, {self.vocab_size})", "logit_bias")
        bad = next((t for t in req.params[0].stop_token_ids or () if t >= self.vocab_size), None)
        if bad is not None:
            raise invalid(f"stop_token_ids has token id {bad} outside the vocabulary [0, {self.vocab_size})",
                          "stop_token_ids")
        if req.params[0].response_format is not None:  # refused here, not after a stream's 200 has gone out
            refused = await asyncio.to_thread(self.engine.engine.constraint_error, req.params[0])
            if refused is not None:  # a guided answer, JSON asked for, or a forced tool call's arguments
                param = req.guided_field or (
                    "response_format" if body.get("response_format") is not None else "tool_choice")
                raise invalid(f"{param}: {refused}", param)
        prompts = [self._encode(p, kind, i, len(req.prompts), req, template_kwargs) for i, p in enumerate(req.prompts)]
        if req.suffix is not None:  # fill in the middle: the format's end tokens end the answer
            stops = set(fim_stop_ids(self.tokenizer))
            req.params = [dataclasses.replace(p, stop_token_ids=sorted(set(p.stop_token_ids or []) | stops))
                          for p in req.params]
        if isinstance(req.params[0].prediction, str) and self.tokenizer is not None:  # tokenized once, not per choice
            predicted = self.tokenizer.encode(req.params[0].prediction, add_special_tokens=False)
            req.params = [dataclasses.replace(p, prediction=predicted) for p in req.params]
        prefix = ("cmpl-" if kind == "completion" else "chatcmpl-") + uuid.uuid4().hex
        choices: dict[str, _Choice] = {}
        subs = []
        opened = [kind == "chat" and self.reasoning_parser is not None and self._think_open(ids) for ids in prompts]
        for i, ids in enumerate(prompts):
            echo = None
            if req.echo:  # the prompt as given, or its ids' text
                echo = req.prompts[i] if isinstance(req.prompts[i], str) else (
                    self.tokenizer.decode(ids, skip_special_tokens=False) if self.tokenizer is not None else "")
            for j, params in enumerate(req.params):
                limit = self.max_model_len - len(ids)  # (0 for a prompt alone that fills the context)
                wanted = limit if req.max_tokens is None else req.max_tokens  # 0 (echo): the prompt alone
                params = dataclasses.replace(params, max_tokens=min(wanted, limit),
                                             min_tokens=min(params.min_tokens, wanted, limit))
                if req.tool_choice == "auto" and self._parses(req) and self.tool_parser == "mistral":
                    # its calls' markers ([TOOL_CALLS], [ARGS], [CALL_ID]) are control tokens: kept in the text
                    params = dataclasses.replace(params, skip_special_tokens=False)
                rid = f"{prefix}-{i * req.n + j}"
                choices[rid] = _Choice(i * req.n + j, len(ids),
                                       tools=self._call_stream(req),
                                       echo=echo, prompt_ids=ids if req.echo else None,
                                       score_only=req.max_tokens == 0)
                if kind == "chat" and self.reasoning_parser is not None:
                    choices[rid].reasoning = ReasoningStream(opened[i])
                    if params.response_format is not None:  # JSON mode (or a forced call) after the reasoning
                        params = dataclasses.replace(params, reasoning_after=True, reasoning_open=opened[i])
                subs.append((rid, ids, params, lora))
        stream = self._submit(subs, "n" if req.n > 1 else "prompt")
        tracker = self.metrics.tracker(sum(map(len, prompts)), arrival)
        return _Run(req, kind, prefix, stream, choices, tracker, sum(map(len, prompts)),
                    self.model_name if lora is None else lora.name)

    def _advance(self, req: GenerationRequest, choices: dict[str, _Choice], out: RequestOutput) -> _Choice:
        choice = choices[out.request_id]
        choice.cached_tokens = out.num_cached_tokens
        choice.prediction = (out.accepted_prediction_tokens, out.rejected_prediction_tokens)
        if out.prompt_logprobs is not None:
            choice.prompt_logprobs = out.prompt_logprobs
        if choice.score_only:  # nothing generated is reported; the prompt was asked for
            if out.finished:
                choice.finish_reason = "length" if out.finish_reason != "abort" else out.finish_reason
            return choice
        choice.text += out.text_delta
        choice.tokens += len(out.new_token_ids)
        if out.new_logprobs:
            choice.logprobs += out.new_logprobs
        if out.finished:
            choice.finish_reason, choice.stop_reason = out.finish_reason, out.stop_reason
        return choice

    def _echo_logprobs(self, c: _Choice, logprobs: list) -> dict:
        """A completion choice's logprobs object: with echo, its prompt's first (once); text offsets go on from
        the choice's last (a stream's chunks)."""
        if c.offsets is None:
            c.offsets = TextOffsets()
        if c.echo is None or c.echo_sent:
            return self.logprobs.completion(logprobs, c.offsets)
        return self.logprobs.completion(logprobs, c.offsets, prompt=(c.prompt_ids, c.prompt_logprobs))

    def _header(self, run: _Run, chunk: bool) -> dict:
        chat = "chat.completion.chunk" if chunk else "chat.completion"
        obj = {"completion": "text_completion", "chat": chat}[run.kind]
        return {"id": run.prefix, "object": obj, "created": run.created, "model": self.model_name}

    async def _respond(self, request, run: _Run):
        req, kind, prefix, stream, choices, tracker, prompt_tokens = run.fields()
        if not await self._gather(request, stream, tracker, lambda out: self._advance(req, choices, out)):
            return Response(status_code=499)  # nobody reads it
        body = self._header(run, chunk=False) | {"model": run.model}
        ordered = sorted(choices.values(), key=lambda c: c.index)
        for c in ordered:  # the first choice of each prompt scored it (parse_completion): the others share that
            if c.index % req.n and c.prompt_logprobs is None:
                c.prompt_logprobs = ordered[c.index - c.index % req.n].prompt_logprobs
        usage_now = self._usage_now(req, choices, prompt_tokens)  # best_of: every candidate's tokens count
        if req.best_of_n is not None:
            ordered = self._best_of(ordered, req.n, req.best_of_n)
        body["choices"] = [self._final_choice(kind, c, req) for c in ordered]
        body["usage"] = usage_now
        if kind == "chat" and req.prompt_logprobs is not None:  # vLLM's: the conversation's, once
            body["prompt_logprobs"] = self.logprobs.prompt(ordered[0].prompt_logprobs or [], req.prompt_logprobs)
        return JSONResponse(body)

    @staticmethod
    def _best_of(ordered: list[_Choice], candidates: int, n: int) -> list[_Choice]:
        """Completions' best_of: of each prompt's ``candidates`` choices (in index order), the ``n`` with the highest
        mean log-probability of their tokens (the first among equals; none generated: last), renumbered."""
        out = []
        for first in range(0, len(ordered), candidates):
            group = ordered[first:first + candidates]
            mean = [sum(lp.logprob for lp in c.logprobs) / len(c.logprobs) if c.logprobs else float("-inf")
                    for c in group]
            best = sorted(range(len(group)), key=lambda k: -mean[k])[:n]
            for rank, k in enumerate(best):
                group[k].index = first // candidates * n + rank
                out.append(group[k])
        return out

    def _chat_ids(self, req: GenerationRequest) -> list[int]:
        """The prompt token ids of a checked chat request's conversation (ValueError naming what is wrong in it)."""
        return encode_chat(self.tokenizer, req.prompts[0], "messages", self._template_kwargs(req),
                           req.add_generation_prompt, req.continue_final_message)

    def _template_kwargs(self, req: GenerationRequest) -> dict:
        """A chat request's template variables: the server's, its own over them, its tools."""
        kwargs = {**self.template_kwargs, **(req.template_kwargs or {})}
        if req.tools is not None:
            kwargs["tools"] = req.tools
        return kwargs

    def _parses(self, req: GenerationRequest) -> bool:
        """Whether the answers of ``req`` are read for tool calls (parsed, or forced)."""
        return req.kind == "chat" and req.tools is not None and req.tool_choice != "none"

    def _call_stream(self, req: GenerationRequest) -> ToolCallStream | ForcedCallStream | None:
        """What reads one answer of ``req`` for tool calls: the model's own format, or a forced call's JSON."""
        if not self._parses(req):
            return None
        if req.tool_choice == "auto":
            return ToolCallStream(self.tool_parser)
        return ForcedCallStream(req.tool_name, incremental=req.stream)

    def _final_message(self, c: _Choice, req: GenerationRequest) -> tuple[dict, str | None]:
        """(message, finish reason) of a whole chat answer: reasoning, content (null where the answer is
        reasoning or calls only) and calls, as a stream of it sends them."""
        message = {"role": "assistant", "content": c.text}
        finish = c.finish_reason
        if c.reasoning is not None:
            reasoning, message["content"] = split_reasoning(c.text, c.reasoning.open_at_start)
            message["reasoning_content"] = reasoning
            if reasoning is not None and not message["content"]:
                message["content"] = None
        if self._parses(req) and message["content"]:
            if req.tool_choice == "auto":
                content, calls = parse_tool_calls(message["content"], self.tool_parser)
                reason = "tool_calls"
            else:  # forced: the answer is the call(s), held to them by JSON mode
                forced = ForcedCallStream(req.tool_name)
                events = forced.feed(message["content"]) + forced.finish()
                calls = [e for e in events if isinstance(e, ToolCall)]
                content, reason = None if calls else message["content"], forced.finish_reason
            if calls:
                calls = calls if req.parallel_tool_calls else calls[:1]
                message.update(content=content, tool_calls=[t.to_openai() for t in calls])
                finish = reason if finish == "stop" else finish
        return message, finish

    def _final_choice(self, kind: str, c: _Choice, req: GenerationRequest) -> dict:
        logprobs = None
        if req.logprobs is not None:
            logprobs = self.logprobs.chat(c.logprobs) if kind == "chat" else self._echo_logprobs(c, c.logprobs)
        if kind == "chat":
            message, finish = self._final_message(c, req)
            return {"index": c.index, "message": message, "logprobs": logprobs, "finish_reason": finish,
                    "stop_reason": c.stop_reason}
        choice = {"index": c.index, "text": (c.echo or "") + c.text, "logprobs": logprobs,
                  "finish_reason": c.finish_reason, "stop_reason": c.stop_reason}
        if req.prompt_logprobs is not None:
            choice["prompt_logprobs"] = self.logprobs.prompt(c.prompt_logprobs or [], req.prompt_logprobs)
        return choice

    async def _stream(self, request, run: _Run):
        """The SSE of a completions or chat stream, ending in ``data: [DONE]`` (after an error too)."""
        async with contextlib.aclosing(self._chunks(request, run)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, APIError):  # the error, then the end
                    yield _sse(chunk.body())
                    chunk = _DONE
                yield "data: [DONE]\n\n" if chunk is _DONE else _sse(chunk)

    async def _chunks(self, request, run: _Run):
        """The chunks (dicts) of a stream, then ``_DONE`` once every choice finished, or an :class:`APIError`
        that ended it; nothing more if the client left (its requests are aborted). Each names the model the
        request asked for (a LoRA adapter's name where it named one)."""
        async with contextlib.aclosing(self._run_chunks(request, run)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, dict):
                    chunk["model"] = run.model
                yield chunk

    async def _run_chunks(self, request, run: _Run):
        req, kind, prefix, stream, choices, tracker, prompt_tokens = run.fields()
        gone = asyncio.ensure_future(_disconnected(request))
        gone.add_done_callback(lambda t: None if t.cancelled() else stream.abort())
        # per chunk: the usage so far (continuous_usage_stats), null (include_usage: usage in a last chunk), absent
        usage_field = req.include_usage or req.continuous_usage
        roles_sent = kind != "chat"
        try:
            async for out in stream:
                tracker.observe(out)
                if not roles_sent:  # the role first, as OpenAI does; sent once the first output is here, as vLLM's,
                    # so that its usage (continuous_usage_stats) has the prompt's cached tokens (and no answer yet)
                    roles_sent = True
                    choices[out.request_id].cached_tokens = out.num_cached_tokens
                    for c in sorted(choices.values(), key=lambda c: c.index):
                        # an answer that may turn out calls or reasoning only has null content (as OpenAI streams
                        # calls), which an empty string would replace in a client that joins the deltas
                        yield self._chunk(run, c.index, {"role": "assistant", "content": None if c.parsed else ""},
                                          None, None, usage_field and self._usage(req, choices, prompt_tokens))
                c = self._advance(req, choices, out)
                if c.echo is not None and not c.echo_sent:  # the prompt first, in a chunk of its own
                    yield self._chunk(run, c.index, c.echo,
                                      None if req.logprobs is None else self._echo_logprobs(c, []), None,
                                      usage_field and self._usage(req, choices, prompt_tokens))
                    c.echo_sent = True
                new_logprobs = None if c.score_only else out.new_logprobs
                logprobs = None
                if req.logprobs is not None and new_logprobs:
                    logprobs = (self.logprobs.chat(new_logprobs) if kind == "chat"
                                else self._echo_logprobs(c, new_logprobs))
                if c.tools is None and c.reasoning is None:
                    text = "" if c.score_only else out.text_delta
                    delta = {"content": text} if kind == "chat" else text
                    yield self._chunk(run, c.index, delta, logprobs, c.finish_reason,
                                      usage_field and self._usage(req, choices, prompt_tokens), c.stop_reason)
                    continue
                deltas = self._parsed_deltas(c, req, out)
                c.content_sent = c.content_sent or any(d.get("content") for d in deltas)
                if out.finished and not c.content_sent and self._final_message(c, req)[0]["content"] == "":
                    deltas.insert(len(deltas) - 1, {"content": ""})  # an empty answer's content: "", not null
                for k, delta in enumerate(deltas):
                    last = k == len(deltas) - 1
                    finish = c.finish_reason if last else None
                    if last and finish == "stop" and c.tools is not None and c.tools.calls:
                        finish = c.tools.finish_reason
                    yield self._chunk(run, c.index, delta, logprobs if k == 0 else None, finish,
                                      usage_field and self._usage(req, choices, prompt_tokens),
                                      c.stop_reason if last else None)
            if stream.finished and all(c.finish_reason is not None for c in choices.values()):
                if req.include_usage:
                    final = self._header(run, chunk=True)
                    final.update(choices=[], usage=self._usage_now(req, choices, prompt_tokens))
                    yield final
                yield _DONE
        except EngineStoppedError as e:
            yield APIError(503, str(e), type="server_error", code="engine_stopped")
        except ValueError as e:  # refused by the engine itself
            yield invalid(str(e), None)
        finally:
            gone.cancel()
            self._client_left(stream)

    def _think_open(self, ids: list[int]) -> bool:
        """Whether a prompt ends inside a <think> block (its template opened one for the answer)."""
        return prompt_opens_reasoning(self.tokenizer.decode(ids[-32:], skip_special_tokens=False))

    @classmethod
    def _parsed_deltas(cls, c: _Choice, req: GenerationRequest, out: RequestOutput) -> list[dict]:
        """The chat deltas of one engine output of a choice parsed for reasoning or tool calls (at least one):
        reasoning as ``reasoning_content``, content as it is known not to be a call, a ``tool_calls`` delta
        per call as it completes; never an empty content string (``{"content": null}`` where there is nothing
        to send), so that the content of an answer of calls or reasoning only stays null."""
        if c.reasoning is not None:
            pieces = c.reasoning.feed(out.text_delta) + (c.reasoning.finish() if out.finished else [])
        else:
            pieces = [("content", out.text_delta)]
        deltas = []
        for kind, text in pieces:
            if kind == "reasoning":
                deltas.append({"reasoning_content": text})
            elif c.tools is None:
                if text:
                    deltas.append({"content": text})
            else:
                deltas += cls._tool_deltas(c, req, c.tools.feed(text))
        if out.finished and c.tools is not None:
            deltas += cls._tool_deltas(c, req, c.tools.finish())
        return deltas or [{"content": None}]

    @staticmethod
    def _tool_deltas(c: _Choice, req: GenerationRequest, events: list) -> list[dict]:
        """Deltas of the tool-call parser's ``events`` (content text, completed calls)."""
        deltas = []
        index = c.tools.calls - sum(isinstance(e, ToolCall) for e in events)  # of the first call among events
        for event in events:
            if isinstance(event, str):
                deltas.append({"content": event})
                continue
            if isinstance(event, ArgumentsDelta):  # more of a call that went out already
                if event.index == 0 or req.parallel_tool_calls:
                    deltas.append({"tool_calls": [{"index": event.index,
                                                   "function": {"arguments": event.arguments}}]})
                continue
            if index == 0 or req.parallel_tool_calls:
                deltas.append({"tool_calls": [{"index": index, **event.to_openai()}]})
            index += 1
        return deltas

    def _submit(self, subs: list, param: str) -> RequestStream:
        """Queue ``(request id, prompt ids, params)`` requests together; 503 when the queue is full or the engine
        stopped, 400 (naming ``param``) for more than the engine runs and queues at once."""
        try:
            return self.engine.submit(subs)
        except QueueFullError as e:
            self.metrics.reject("queue_full")
            raise APIError(503, str(e), type="server_error", code="server_overloaded",
                           headers={"Retry-After": "1"}) from None
        except RequestTooLargeError as e:
            self.metrics.reject("too_large")
            raise invalid(str(e), param) from None
        except EngineStoppedError as e:
            self.metrics.reject("engine_stopped")
            raise APIError(503, str(e), type="server_error", code="engine_stopped") from None

    async def _gather(self, request, stream: RequestStream, tracker: RequestTracker, take) -> bool:
        """Pass every output of ``stream`` to ``take`` until its requests end; False if the client left first
        (they are aborted, their pages freed). 503 if the engine stopped, 400 for what the engine refused."""
        async def collect():
            async for out in stream:
                tracker.observe(out)
                take(out)

        task = asyncio.ensure_future(collect())
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            left = not task.done()
            if left:  # the client left (or we are cancelled): abort, free the pages
                task.cancel()
                self._client_left(stream)
        if left:
            return False
        try:
            task.result()
        except EngineStoppedError as e:
            raise APIError(503, str(e), type="server_error", code="engine_stopped") from None
        except ValueError as e:  # refused by the engine itself
            raise invalid(str(e), None) from None
        return True

    def _client_left(self, stream: RequestStream) -> None:
        """Once per response that ends: abort what is unfinished; count it if the client had left early."""
        stream.abort()
        if stream.aborted:
            self.metrics.aborted.inc()

    def _usage(self, req, choices, prompt_tokens) -> dict | None:
        """A chunk's ``usage``: so far with continuous_usage_stats, else null."""
        return self._usage_now(req, choices, prompt_tokens) if req.continuous_usage else None

    @staticmethod
    def _usage_now(req, choices, prompt_tokens) -> dict:
        """The response's usage so far; a prompt's cached tokens are its first choice's (the prompt counts once
        for its ``n`` choices, as in ``prompt_tokens``)."""
        cached = sum(c.cached_tokens for c in choices.values() if c.index % req.n == 0)
        prediction = None
        if req.params[0].prediction is not None:
            prediction = tuple(sum(c.prediction[i] for c in choices.values()) for i in range(2))
        return usage(prompt_tokens, sum(c.tokens for c in choices.values()), cached, prediction)

    def _chunk(self, run: _Run, index, delta, logprobs, finish_reason, usage_value=False, stop_reason=None) -> dict:
        """One stream chunk; ``usage_value`` False leaves the field out (no stream_options), None sends null;
        the last chunk of a choice (its finish_reason) also has vLLM's ``stop_reason``."""
        chunk = self._header(run, chunk=True)
        if run.kind == "chat":
            choice = {"index": index, "delta": delta if finish_reason is None or any(delta.values()) else {},
                      "logprobs": logprobs, "finish_reason": finish_reason}
        else:
            choice = {"index": index, "text": delta, "logprobs": logprobs, "finish_reason": finish_reason}
        if finish_reason is not None:
            choice["stop_reason"] = stop_reason
        chunk["choices"] = [choice]
        if usage_value is not False:
            chunk["usage"] = usage_value
        return chunk

    # -- checks --------------------------------------------------------------------------------------------
    async def _json(self, request) -> dict:
        # read as it arrives: a chunked body (no Content-Length for the middleware to refuse) is refused as soon
        # as it passes the limit, not once it has all been held in memory
        chunks, size = [], 0
        stream = request.stream()
        while True:
            try:
                chunk = await stream.__anext__()
            except StopAsyncIteration:
                break
            except ClientDisconnect:  # the client left before its body was all here: nothing to answer, no error
                raise APIError(400, "the client disconnected before the request body was complete",
                               code="client_disconnected") from None
            size += len(chunk)
            if size > self.max_request_bytes:
                raise APIError(413, f"request body of more than {self.max_request_bytes} bytes (at least {size} "
                               f"sent) is over the limit of {self.max_request_bytes}", code="request_too_large")
            chunks.append(chunk)
        try:
            raw = b"".join(chunks)
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise invalid(f"We could not parse the JSON body of your request: {e}", None, "invalid_json") from None
        except RecursionError:  # (deeper than the interpreter's json parser goes: ~1,000 levels on CPython 3.11)
            too_deep = True
        else:  # bounded here, the same on every Python (3.12's parser takes 5,000 levels): no handler recurses
            too_deep = _nesting_over(body, raw, MAX_JSON_NESTING)
        if too_deep:
            raise invalid(f"We could not parse the JSON body of your request: it nests arrays or objects more than "
                          f"{MAX_JSON_NESTING} deep", None, "invalid_json")
        if not isinstance(body, dict):
            raise invalid(f"the request body must be a JSON object, got {type(body).__name__}", None, "invalid_json")
        where = _lone_surrogate(body) if _SURROGATE_ESCAPE.search(raw) else None
        if where is not None:  # JSON's \ud800-\udfff escapes outside a pair: text no tokenizer or client can take
            field = where[0].split(".")[0].split("[")[0]
            raise invalid(f"{where[0]} holds a lone UTF-16 surrogate (U+{where[1]:04X}): not valid Unicode text",
                          None if field in ("<key>", "the body") else field, "invalid_json")
        return body

    def _check_model(self, model) -> LoRARequest | None:
        """The LoRA adapter a request's ``model`` names (None: the served model itself); 404 for another name."""
        if model == self.model_name:
            return None
        if not isinstance(model, str):
            raise invalid(f"model must be a string (this server serves '{self.model_name}'), got "
                          f"{type(model).__name__} {json.dumps(model)[:80]}", "model")
        if model in self.engine.engine.lora_names():
            return LoRARequest(model)
        adapters = self.engine.engine.lora_names()
        also = f" and the LoRA adapters {', '.join(map(repr, adapters))}" if adapters else ""
        raise APIError(404, f"The model '{model}' does not exist; this server serves '{self.model_name}'{also}",
                       param="model", code="model_not_found")

    def _encode(self, prompt, kind: str, i: int, count: int, req: GenerationRequest,
                template_kwargs: dict | None = None) -> list[int]:
        param = {"chat": "messages", "embedding": "input"}.get(kind, "prompt")
        where = param if count == 1 else f"{param}[{i}]"
        try:
            if kind == "chat":
                ids = encode_chat(self.tokenizer, prompt, "messages", template_kwargs, req.add_generation_prompt,
                                  req.continue_final_message)
            elif req is not None and req.suffix is not None:  # fill in the middle: the text before the gap
                try:
                    ids, _ = encode_fim(self.tokenizer, prompt, req.suffix)
                except ValueError as e:
                    raise invalid(f"suffix: {e}", "suffix", "unsupported_parameter") from None
            elif isinstance(prompt, str):
                if self.tokenizer is None:
                    raise ValueError(f"{where} is text but this model has no tokenizer; send token ids")
                ids = self.tokenizer.encode(prompt)
            else:
                ids = list(prompt)
        except ValueError as e:
            raise invalid(str(e), param) from None
        if not ids:
            raise invalid(f"{where} is empty", param)
        bad = next((t for t in ids if not 0 <= t < self.vocab_size), None)
        if bad is not None:
            raise invalid(f"{where} has token id {bad} outside the vocabulary [0, {self.vocab_size})", param)
        # an embedding's input may fill the context, as may a prompt scored alone (echo, max_tokens 0)
        generates = kind != "embedding" and not (req is not None and req.max_tokens == 0)
        if len(ids) > self.max_model_len - generates:
            raise invalid(f"This model's maximum context length is {self.max_model_len} tokens. However, your "
                          f"{where} has {len(ids)} tokens" + (", leaving no room to generate." if generates
                                                              else "."), param, "context_length_exceeded")
        return ids


async def _disconnected(request) -> None:
    """Returns once the client has disconnected (the request body must have been read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _methods(app, path: str) -> list[str]:
    """The HTTP methods the app's routes take at ``path`` (none: no route has it)."""
    methods = set()
    for route in app.router.routes:
        match = getattr(route, "path_regex", None)
        if match is not None and match.fullmatch(path):
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


class _Guard:
    """ASGI middleware: the API key on ``/v1/*``, the request-size limit and an uncompressed body (415 for a
    ``Content-Encoding``), answered before any route runs."""

    def __init__(self, app, api_key: str | None, max_request_bytes: int):
        self.app = app
        self.key = f"Bearer {api_key}".encode() if api_key else None
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or ())
            error = None
            if self.key is not None and scope["path"].startswith(PROTECTED):
                given = headers.get(b"authorization", b"")
                scheme, _, credentials = given.partition(b" ")
                if scheme.lower() == b"bearer":  # the scheme is case-insensitive (RFC 9110), the key is not
                    given = b"Bearer " + credentials.lstrip(b" ")
                if not hmac.compare_digest(given, self.key):
                    error = APIError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>'",
                                     code="invalid_api_key")
            length = headers.get(b"content-length")
            if error is None and length is not None and length.isdigit() and int(length) > self.max_request_bytes:
                error = APIError(413, f"request body of {int(length)} bytes is over the limit of "
                                 f"{self.max_request_bytes}", code="request_too_large")
            coding = headers.get(b"content-encoding", b"identity").strip().lower()
            if error is None and coding not in (b"identity", b""):  # else the compressed bytes read as malformed JSON
                error = APIError(415, f"Content-Encoding {coding.decode('latin-1')!r} is not supported: send the "
                                 "body uncompressed", code="unsupported_content_encoding")
            if error is not None:
                await JSONResponse(error.body(), status_code=error.status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


MAX_JSON_NESTING = 256  # arrays and objects in a request body (a tool's JSON schema may nest ~20 deep)


def _nesting_over(value, raw: bytes, limit: int) -> bool:
    """Whether ``value`` (``raw`` parsed) nests arrays and objects more than ``limit`` deep; walked only where
    ``raw`` holds more than ``limit`` brackets (C-speed counts), iteratively."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def _lone_surrogate(value, path: str = "") -> tuple[str, int] | None:
    """(where, code point) of the first string in a parsed JSON body that holds a lone surrogate, else None.
    Iterative: a body nested as deeply as json.loads accepts does not reach Python's recursion limit here."""
    stack = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")  # json.loads joins the escapes of a pair; a lone one cannot be encoded
            except UnicodeEncodeError as e:
                return where or "the body", ord(item[e.start])
        elif isinstance(item, dict):
            stack.extend((f"{where}.{key}" if where else str(key), v) for key, v in reversed(item.items()))
            stack.extend((f"{where}.<key>" if where else "<key>", key) for key in item)
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


def build_app(engine: AsyncLLMEngine, *, model_name: str, api_key: str | None = None,
              max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
              chat_template_kwargs: dict | None = None, tool_parser: str | None = None,
              reasoning_parser: str | None = None, allowed_origins: list[str] | None = None,
              max_stored_responses: int = DEFAULT_MAX_STORED, runtime_lora: bool = False,
              responses_dir: str | None = None) -> "fastapi.FastAPI":
    """The FastAPI app serving ``engine`` as ``model_name``. The app starts the engine loop when it starts
    (if not running yet) and stops it when it shuts down (requests in flight end with an error).
    ``chat_template_kwargs``: chat-template variables of every chat request, which its own override;
    ``tool_parser``: the format of the model's tool calls (``tritium.engine.tools.PARSERS``; None: recognised
    from its chat template); ``reasoning_parser``: "think" returns ``<think>`` blocks as ``reasoning_content``
    (:mod:`tritium.engine.reasoning`), None leaves them in the content. ``allowed_origins``: the web origins
    whose browser pages may call the server (CORS; ``["*"]``: any); None: no CORS headers (browsers then
    refuse other origins' pages). Preflight requests are answered before the API key is asked for.
    ``max_stored_responses``: how many ``/v1/responses`` are kept for retrieval and ``previous_response_id``
    (the least recently used are dropped first); ``responses_dir``: a directory where they are also written, so
    that they outlive the process (read back by the next server on it; one server a directory). ``runtime_lora``:
    the routes that load and unload LoRA adapters from paths on the server (``/v1/load_lora_adapter``,
    ``/v1/unload_lora_adapter``; off: 404)."""
    _require_extra()
    if allowed_origins is not None and (not isinstance(allowed_origins, (list, tuple)) or not all(
            isinstance(o, str) and o for o in allowed_origins)):
        raise ValueError(f"allowed_origins must be a list of origins (e.g. ['https://app.example.com'] or ['*']), "
                         f"got {allowed_origins!r}")
    if model_name in engine.engine.lora_names():  # (requests naming it would run the base model)
        raise ValueError(f"the LoRA adapter {model_name!r} has the served model's name (--served-model-name): "
                         f"give one of them another name")
    server = OpenAIServer(engine, model_name, api_key, max_request_bytes, chat_template_kwargs, tool_parser,
                          reasoning_parser, max_stored_responses, responses_dir)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if not engine.running:
            engine.start()
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, engine.shutdown)

    # no redirect of "/v1/completions/" (a 307 that clients do not follow with their POST): a 404 naming the path
    app = fastapi.FastAPI(title="tritium", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                          openapi_url=None, redirect_slashes=False)
    app.state.server = server
    app.add_api_route("/health", server.health, methods=["GET", "HEAD"])  # HEAD: load balancers' probes
    app.add_api_route("/metrics", server.render_metrics, methods=["GET"])
    app.add_api_route("/v1/models", server.models, methods=["GET"])
    if runtime_lora:
        app.add_api_route("/v1/load_lora_adapter", server.load_lora_adapter, methods=["POST"])
        app.add_api_route("/v1/unload_lora_adapter", server.unload_lora_adapter, methods=["POST"])
    app.add_api_route("/v1/models/{model:path}", server.model, methods=["GET"])
    app.add_api_route("/v1/completions", server.completions, methods=["POST"])
    app.add_api_route("/v1/embeddings", server.embeddings, methods=["POST"])
    app.add_api_route("/tokenize", server.tokenize, methods=["POST"])
    app.add_api_route("/detokenize", server.detokenize, methods=["POST"])
    app.add_api_route("/tokenizer_info", server.tokenizer_info, methods=["GET"])
    app.add_api_route("/v1/chat/completions", server.chat_completions, methods=["POST"])
    app.add_api_route("/v1/responses", server.create_response, methods=["POST"])
    app.add_api_route("/v1/responses/input_tokens", server.count_input_tokens, methods=["POST"])
    app.add_api_route("/v1/responses/{response_id}", server.get_response, methods=["GET"])
    app.add_api_route("/v1/responses/{response_id}", server.delete_response, methods=["DELETE"])
    app.add_api_route("/v1/responses/{response_id}/input_items", server.response_input_items, methods=["GET"])

    @app.exception_handler(APIError)
    async def api_error(request, exc: APIError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, exc):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        path, headers = request.url.path, dict(exc.headers or {})
        message = f"{request.method} {path}: {exc.detail}"
        if exc.status_code == 405 and (methods := _methods(app, path)):  # every method of the path (its routes may be several)
            headers["Allow"] = ", ".join(methods)
            message += f" (allowed: {headers['Allow']})"
        elif exc.status_code == 404 and path.endswith("/") and _methods(app, path.rstrip("/")):
            message += f" (the path is {path.rstrip('/')}, without the trailing slash)"
        return JSONResponse(error_body(message, "invalid_request_error", None, code), status_code=exc.status_code,
                            headers=headers or None)

    @app.exception_handler(Exception)
    async def internal_error(request, exc):
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}", "server_error", None, "internal_error"),
                            status_code=500)

    app.add_middleware(_Guard, api_key=api_key, max_request_bytes=max_request_bytes)
    if allowed_origins:  # added last: the outermost, so that a preflight needs no key and errors carry the headers
        app.add_middleware(CORSMiddleware, allow_origins=list(allowed_origins), allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["*"], allow_credentials=False)
    return app
