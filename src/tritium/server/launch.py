"""Running the app with uvicorn: ``serve(engine, host=..., port=...)`` until SIGINT / SIGTERM.

On a signal the engine loop stops first (requests in flight end with an error: 503 JSON, or an error event
then ``data: [DONE]`` on a stream), so open connections close at once; then uvicorn stops accepting,
closes the connections and runs the app's shutdown (the engine thread is joined).

If the engine loop fails (an exception in a step: a GPU fault, say; its requests end with 503 ``engine_stopped``),
the server shuts down the same way within a second and :func:`serve` raises :class:`EngineStoppedError`
(``tritium serve`` exits with status 1), so that a supervisor restarts it: a process that keeps answering 503 to
every request would look alive to all but its ``/health``.
"""

from __future__ import annotations

import gc
import logging
import os
import socket

from tritium.engine import AsyncLLMEngine, EngineStoppedError, LLMEngine
from tritium.server.app import DEFAULT_MAX_REQUEST_BYTES, build_app
from tritium.server.responses import DEFAULT_MAX_STORED

log = logging.getLogger(__name__)


def default_model_name(engine: LLMEngine) -> str:
    """The served name: the Hub name the model was given by (org/name), else the checkpoint's file or
    directory name without ``.gguf``."""
    if engine.hub_name:
        return engine.hub_name
    path = engine.model_path
    if path is None:
        return "tritium-model"
    name = os.path.basename(os.path.normpath(path))
    return name[:-5] if name.lower().endswith(".gguf") else name


def check_tls(keyfile: str | None, certfile: str | None, names=("ssl_keyfile", "ssl_certfile")) -> None:
    """ValueError unless both PEM files are given and exist, or neither (``names``: how the caller calls them)."""
    if (keyfile is None) != (certfile is None):
        raise ValueError(f"{names[0]} and {names[1]} go together (HTTPS needs the key and its certificate)")
    for name, path in zip(names, (keyfile, certfile)):
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"{name}: no file {path!r}")


def check_extra() -> None:
    """ImportError naming the extra to install unless FastAPI and uvicorn are importable (checked before a model
    loads for minutes only to fail at the first import)."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise ImportError(f"serving needs the 'serve' extra: pip install 'tritium[serve]' ({e})") from None


def check_listen(host: str, port: int, names=("host", "port")) -> None:
    """ValueError unless ``port`` is in [0, 65535] and ``host:port`` can be bound now (checked before a model loads
    for minutes only to fail there: a port in use, one below 1024 without the right, an address not this
    machine's). The socket is closed again; uvicorn binds it for real (``SO_REUSEADDR`` both times)."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValueError(f"{names[1]} must be an int in [0, 65535], got {port!r}")
    if not isinstance(host, str) or not host:
        raise ValueError(f"{names[0]} must be an address or a host name, got {host!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise ValueError(f"{names[0]} {host!r} does not resolve to an address: {e}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as e:
            raise ValueError(f"cannot listen on {host}:{port} ({names[0]}, {names[1]}): {e.strerror or e}") from None


def serve(engine: LLMEngine, *, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          max_queue: int | None = None, model_name: str | None = None, log_level: str = "info",
          max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, ready=None,
          chat_template_kwargs: dict | None = None, tool_parser: str | None = None,
          reasoning_parser: str | None = None, allowed_origins: list[str] | None = None,
          ssl_keyfile: str | None = None, ssl_certfile: str | None = None,
          max_stored_responses: int = DEFAULT_MAX_STORED, runtime_lora: bool = False,
          responses_dir: str | None = None) -> None:
    """Serve ``engine`` over HTTP until interrupted. ``ready()`` (optional) is called once the socket listens;
    ``chat_template_kwargs``: chat-template variables of every chat request, which its own override;
    ``tool_parser``: the model's tool-call format (None: recognised from its chat template);
    ``reasoning_parser``: "think" returns ``<think>`` blocks as ``reasoning_content``; ``allowed_origins``:
    CORS (:func:`~tritium.server.build_app`); ``ssl_keyfile`` and ``ssl_certfile`` (PEM files, both or
    neither): HTTPS instead of HTTP; ``max_stored_responses``: ``/v1/responses`` kept in memory; ``responses_dir``:
    where they are also kept on disk, to outlive the process (None: memory only); ``runtime_lora``:
    the routes that load and unload LoRA adapters while serving. Raises :class:`EngineStoppedError` once the server
    has shut down because the engine loop failed."""
    check_tls(ssl_keyfile, ssl_certfile)
    check_extra()
    import uvicorn

    check_listen(host, port)
    async_engine = AsyncLLMEngine(engine, max_queue=max_queue)
    name = model_name or default_model_name(engine)
    app = build_app(async_engine, model_name=name, api_key=api_key, max_request_bytes=max_request_bytes,
                    chat_template_kwargs=chat_template_kwargs, tool_parser=tool_parser,
                    reasoning_parser=reasoning_parser, allowed_origins=allowed_origins,
                    max_stored_responses=max_stored_responses, runtime_lora=runtime_lora,
                    responses_dir=responses_dir)
    # the engine and the app live as long as the process: keep what they hold out of the cyclic collector's
    # full passes, which otherwise walk all of it while requests allocate (a prompt scored for
    # log-probabilities makes objects per token)
    gc.collect()
    gc.freeze()
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug",
                            timeout_graceful_shutdown=10, lifespan="on", ssl_keyfile=ssl_keyfile,
                            ssl_certfile=ssl_certfile)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            async_engine.stop()  # in-flight requests end now, so their connections close
            super().handle_exit(sig, frame)

        async def on_tick(self, counter: int) -> bool:  # every 0.1 s in uvicorn's main loop
            if async_engine.error is not None and not self.should_exit:
                log.error("the engine failed (%s: %s): shutting down", type(async_engine.error).__name__,
                          async_engine.error)
                self.should_exit = True
            return await super().on_tick(counter)

        async def startup(self, sockets=None):
            await super().startup(sockets)
            if self.started:
                log.warning("serving %s on %s://%s:%d/v1 (context %d tokens, %d sequences at once%s)",
                            name, "https" if ssl_certfile else "http", host, port, engine.max_model_len,
                            engine.config.max_num_seqs, ", API key required" if api_key else "")
                if ready is not None:
                    ready()

    Server(config).run()
    if async_engine.error is not None:
        error = async_engine.error
        raise EngineStoppedError(f"the engine failed: {type(error).__name__}: {error}") from error
