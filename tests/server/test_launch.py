"""``tritium.server.launch.serve``: a server whose engine loop fails shuts down and says so."""

import threading
from types import SimpleNamespace

import pytest
import torch

from engine.conftest import make_tiny_model
from tritium.engine import EngineStoppedError, LLMEngine
from tritium.server.launch import default_model_name, serve

pytest.importorskip("uvicorn")


def test_serve_shuts_down_when_the_engine_fails(tmp_path, monkeypatch):
    """An exception in the engine loop (here its first look for work; a GPU fault in a step) fails the requests in
    flight with 503 and, within a second, shuts the server down: serve() raises instead of leaving a process that
    answers 503 to everything and looks alive to anything but /health."""
    make_tiny_model(str(tmp_path), "llama")
    engine = LLMEngine(str(tmp_path), dtype=torch.float32, max_model_len=64)

    def broken():
        raise RuntimeError("the device was lost")

    monkeypatch.setattr(engine, "has_unfinished", broken)
    listening = threading.Event()
    with pytest.raises(EngineStoppedError, match="the engine failed: RuntimeError: the device was lost"):
        serve(engine, port=0, log_level="warning", ready=listening.set)
    assert listening.is_set()
    monkeypatch.undo()
    engine.close()


def test_default_model_name_drops_the_gguf_extension_in_any_case():
    for path, name in (("/m/Tiny.Q4_1.gguf", "Tiny.Q4_1"), ("/m/Tiny.GGUF", "Tiny"), ("/m/tiny-dir/", "tiny-dir")):
        assert default_model_name(SimpleNamespace(hub_name=None, model_path=path)) == name
