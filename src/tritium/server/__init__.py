"""OpenAI-compatible HTTP serving over the engine (``tritium serve``; needs ``pip install 'tritium[serve]'``).

- ``app``: :func:`build_app` (FastAPI routes, errors, streaming) over an :class:`~tritium.engine.AsyncLLMEngine`.
- ``protocol``: request checks and response JSON; ``errors``: OpenAI-style errors; ``metrics``: Prometheus.
- ``launch``: :func:`serve` runs the app with uvicorn until SIGINT / SIGTERM.

FastAPI, uvicorn and prometheus-client are imported only when a server is built, so ``import tritium.server``
works without the extra.
"""

from tritium.server.app import build_app
from tritium.server.errors import APIError
from tritium.server.launch import check_extra, check_listen, check_tls, default_model_name, serve

__all__ = ["build_app", "serve", "default_model_name", "check_tls", "check_listen", "check_extra", "APIError"]
