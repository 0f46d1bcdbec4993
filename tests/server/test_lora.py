"""LoRA adapters over HTTP: a request whose ``model`` is an adapter's name runs that adapter (its text equals the
merged model's greedy answer), the base model's name runs none, both batch together; ``/v1/models`` lists the
adapters with their parent; an unknown name is a 404 naming what is served; ``--lora-modules`` is parsed with
errors naming the bad entry."""

import os
import shutil

import pytest
import torch

from engine.conftest import PROMPTS, hf_greedy, make_tiny_model
from engine.test_lora import merged, write_adapter
from tritium.cli import lora_modules
from tritium.engine import AsyncLLMEngine, LLMEngine
from tritium.server import build_app

pytest.importorskip("fastapi", reason="needs the serve extra: pip install 'tritium[serve]'")
openai = pytest.importorskip("openai")
TestClient = pytest.importorskip("fastapi.testclient").TestClient
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("llama"))
    base = make_tiny_model(path, "llama")
    adapter = str(tmp_path_factory.mktemp("sql"))
    reference = merged(base, write_adapter(adapter, base, seed=3), 16 / 8)
    return path, adapter, base, reference


@pytest.fixture(scope="module")
def setup(model):
    path, adapter, base, reference = model
    engine = LLMEngine(path, dtype=torch.float32, max_model_len=64, enable_lora=True, max_loras=2, max_lora_rank=8)
    engine.load_lora("sql", adapter)
    with TestClient(build_app(AsyncLLMEngine(engine), model_name="base")) as http:
        yield http, engine.tokenizer, base, reference


def test_adapter_by_model_name(setup):
    http, tok, base, reference = setup
    client = openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http, max_retries=0)
    for model, ref in (("sql", reference), ("base", base)):
        out = client.completions.create(model=model, prompt=PROMPTS[1], max_tokens=8, temperature=0)
        assert out.model == model
        assert tok.encode(out.choices[0].text, add_special_tokens=False) == hf_greedy(ref, tok.encode(PROMPTS[1]), 8)
    want = hf_greedy(reference, tok.encode(PROMPTS[3]), 6)
    assert want != hf_greedy(base, tok.encode(PROMPTS[3]), 6)  # the adapter changes this answer
    chunks = list(client.completions.create(model="sql", prompt=PROMPTS[3], max_tokens=6, temperature=0, stream=True))
    assert {c.model for c in chunks} == {"sql"}
    assert tok.encode("".join(c.choices[0].text for c in chunks if c.choices), add_special_tokens=False) == want


def test_embeddings_and_chat_name_the_adapter(setup):
    http = setup[0]
    vectors = {}
    for model in ("base", "sql"):
        r = http.post("/v1/embeddings", json={"model": model, "input": PROMPTS[1]}).json()
        assert r["model"] == model
        vectors[model] = torch.tensor(r["data"][0]["embedding"])
    assert not torch.allclose(vectors["base"], vectors["sql"])  # the adapter's hidden states
    chat = http.post("/v1/chat/completions", json={"model": "sql", "max_tokens": 3,
                                                   "messages": [{"role": "user", "content": "w1"}]})
    assert chat.status_code == 200 and chat.json()["model"] == "sql"


def test_models_list_and_unknown_name(setup):
    http = setup[0]
    models = http.get("/v1/models").json()["data"]
    assert [(m["id"], m.get("parent")) for m in models] == [("base", None), ("sql", "base")]
    assert http.get("/v1/models/sql").json()["parent"] == "base"
    r = http.post("/v1/completions", json={"model": "nope", "prompt": "w1", "max_tokens": 2})
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["param"] == "model" and "'sql'" in error["message"]
    assert http.post("/v1/completions", json={"model": "sql", "prompt": "w1", "max_tokens": 2}).status_code == 200


def test_lora_modules_flag():
    assert lora_modules(["a=/x", "b=/y/z"]) == {"a": "/x", "b": "/y/z"}
    assert lora_modules(None) == {}
    for bad, match in (("a", "NAME=PATH"), ("=/x", "NAME=PATH"), ("a=", "NAME=PATH")):
        with pytest.raises(ValueError, match=match):
            lora_modules([bad])
    with pytest.raises(ValueError, match="given twice"):
        lora_modules(["a=/x", "a=/y"])


def test_runtime_load_and_unload(model, setup):
    """``runtime_lora``: adapters loaded and unloaded over HTTP (on the engine thread); without it the routes are
    not there."""
    path, adapter, _, reference = model
    assert setup[0].post("/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": adapter}).status_code == 404
    engine = LLMEngine(path, dtype=torch.float32, max_model_len=64, enable_lora=True, max_lora_rank=8)
    with TestClient(build_app(AsyncLLMEngine(engine), model_name="base", runtime_lora=True)) as http:
        assert http.post("/v1/completions", json={"model": "sql", "prompt": "w1", "max_tokens": 2}).status_code == 404
        r = http.post("/v1/load_lora_adapter", json={"lora_name": "sql", "lora_path": adapter})
        assert r.status_code == 200 and r.json()["parent"] == "base"
        out = http.post("/v1/completions", json={"model": "sql", "prompt": PROMPTS[1], "max_tokens": 8,
                                                  "temperature": 0}).json()
        tok = engine.tokenizer
        assert tok.encode(out["choices"][0]["text"], add_special_tokens=False) == \
            hf_greedy(reference, tok.encode(PROMPTS[1]), 8)
        # a name already served is a 400, as vLLM's, unless vLLM's load_inplace asks to read it again
        r = http.post("/v1/load_lora_adapter", json={"lora_name": "sql", "lora_path": adapter})
        assert r.status_code == 400 and r.json()["error"]["param"] == "lora_name", r.text
        assert "'sql' has already been loaded" in r.json()["error"]["message"]
        r = http.post("/v1/load_lora_adapter", json={"lora_name": "sql", "lora_path": adapter, "load_inplace": True})
        assert r.status_code == 200 and r.json()["id"] == "sql"
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["base", "sql"]
        for body, param in (({"lora_name": "y", "lora_path": "/nonexistent"}, "lora_path"),
                            ({"lora_name": "base", "lora_path": adapter}, "lora_name"),
                            ({"lora_name": "y"}, "lora_path"),
                            ({"lora_name": "y", "lora_path": adapter, "x": 1}, "x"),
                            ({"lora_name": "y", "lora_path": adapter, "load_inplace": "yes"}, "load_inplace")):
            r = http.post("/v1/load_lora_adapter", json=body)
            assert r.status_code == 400 and r.json()["error"]["param"] == param, body
        assert http.post("/v1/unload_lora_adapter", json={"lora_name": "sql"}).json()["deleted"] is True
        assert http.post("/v1/unload_lora_adapter", json={"lora_name": "sql"}).status_code == 404
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["base"]
        assert http.post("/v1/completions", json={"model": "sql", "prompt": "w1", "max_tokens": 2}).status_code == 404


def test_lora_metric(setup):
    """``tritium:lora_requests_info``: the adapters of running and waiting requests as labels, and max_lora."""
    http = setup[0]
    text = http.get("/metrics").text
    line = next(x for x in text.splitlines() if x.startswith("tritium:lora_requests_info{"))
    assert 'max_lora="2"' in line and 'running_lora_adapters=""' in line and line.endswith(" 1.0")


def test_damaged_adapter_and_the_served_models_name(model, tmp_path):
    """``/v1/load_lora_adapter`` of a directory whose weights file is damaged is a 400 naming lora_path (safetensors'
    own error was a 500); an adapter read before the server is built under the served model's name is refused at
    start-up (requests naming it ran the base model, and /v1/models listed the name twice)."""
    path, adapter, _, _ = model
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    shutil.copy(os.path.join(adapter, "adapter_config.json"), damaged)
    (damaged / "adapter_model.safetensors").write_bytes(b"garbage")
    engine = LLMEngine(path, dtype=torch.float32, max_model_len=64, enable_lora=True, max_lora_rank=8)
    with TestClient(build_app(AsyncLLMEngine(engine), model_name="base", runtime_lora=True)) as http:
        r = http.post("/v1/load_lora_adapter", json={"lora_name": "d", "lora_path": str(damaged)})
        assert r.status_code == 400 and r.json()["error"]["param"] == "lora_path", r.text
        assert "not a readable safetensors file" in r.json()["error"]["message"]
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["base"]
    engine.load_lora("base", adapter)
    with pytest.raises(ValueError, match="the LoRA adapter 'base' has the served model's name"):
        build_app(AsyncLLMEngine(engine), model_name="base")
