"""``tritium serve`` on a tiny random Llama (CPU), through the official ``openai`` client and plain HTTP.

One server for the module (API key set, context 256, queue bound 48). Greedy answers equal offline
``LLM.generate`` / ``LLM.chat`` on the same checkpoint; n, seeds, stop strings, usage, logprobs and penalties;
32 concurrent streaming clients; a client that disconnects is aborted and its KV pages freed (read through
/metrics); every bad request gets its status and an OpenAI-style JSON error and the server keeps serving;
SIGTERM ends an in-flight stream with an error event and the process exits without a traceback.
"""

import asyncio
import contextlib
import itertools
import json
import re
import signal
import shutil
import socket
import ssl
import subprocess
import time
import types
import urllib.error
import urllib.request

import pytest
import torch

from engine.conftest import PROMPTS, add_fim_tokens, make_tiny_model, with_config
from tritium import LLM, SamplingParams
from tritium.engine import AsyncLLMEngine, LLMEngine
from tritium.engine.fim import FORMATS
from tritium.server import build_app

from .conftest import Server

pytest.importorskip("fastapi", reason="needs the serve extra: pip install 'tritium[serve]'")
TestClient = pytest.importorskip("fastapi.testclient").TestClient
openai = pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(120)

KEY = "sk-tritium-test"
MAX_LEN = 256
MANY = [" ".join(f"w{(7 * i + j) % 250}" for j in range(1 + i % 5)) for i in range(32)]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("serve-llama"))
    make_tiny_model(path, "llama")
    return path


@pytest.fixture(scope="module")
def server(start_server, model_dir):
    # float32 as the offline engine below (on a GPU the default is bfloat16, whose greedy tokens differ on a
    # random model)
    return start_server("--model", model_dir, "--api-key", KEY, "--max-model-len", str(MAX_LEN), "--max-queue", "48",
                        "--served-model-name", "tiny", "--dtype", "float32")


@pytest.fixture(scope="module")
def llm(model_dir):
    return LLM(model_dir, dtype=torch.float32, max_model_len=MAX_LEN)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=60)


def greedy(n: int, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=n, **kw)


# -- the API ---------------------------------------------------------------------------------------------------
def test_models_health_and_metrics(server, client):
    assert [m.id for m in client.models.list().data] == ["tiny"]
    assert client.models.retrieve("tiny").id == "tiny"
    assert server.request("GET", "/health")[0] == 200  # no key needed outside /v1
    assert "tritium:kv_cache_usage_perc" in server.metrics()
    assert "tritium:spec_decode_num_accepted_tokens_total" in server.metrics()


def test_usage_counts_cached_prompt_tokens(client, llm):
    """usage.prompt_tokens_details.cached_tokens: the prompt tokens the prefix cache served (whole pages of
    16 here, the last prompt token always computed); once per prompt whatever n, in streamed usage too."""
    prompt = " ".join(f"w{(7 * i) % 10}" for i in range(40))  # a prompt no other test sends
    n_ids = len(llm.tokenizer.encode(prompt))
    first = client.completions.create(model="tiny", prompt=prompt, max_tokens=2, temperature=0)
    assert first.usage.prompt_tokens == n_ids and first.usage.prompt_tokens_details.cached_tokens == 0
    full = (n_ids - 1) // 16 * 16
    again = client.completions.create(model="tiny", prompt=prompt, max_tokens=2, temperature=0, n=2)
    assert again.usage.prompt_tokens == n_ids and again.usage.prompt_tokens_details.cached_tokens == full
    chunks = list(client.completions.create(model="tiny", prompt=prompt, max_tokens=2, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == full


def test_streamed_chat_usage_counts_cached_prompt_tokens(client):
    """A streamed chat answer's usage has the cached tokens its non-streamed twin has, in the final usage chunk
    and in every chunk with continuous_usage_stats, the first (the role's, sent with the first token as vLLM's,
    once the prefix cache has been looked up) included."""
    messages = [{"role": "user", "content": " ".join(f"w{(3 * i) % 11}" for i in range(40))}]  # no other test's
    first = client.chat.completions.create(model="tiny", messages=messages, max_tokens=2, temperature=0)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    full = (first.usage.prompt_tokens - 1) // 16 * 16
    again = client.chat.completions.create(model="tiny", messages=messages, max_tokens=2, temperature=0)
    assert again.usage.prompt_tokens_details.cached_tokens == full > 0
    for options in ({"include_usage": True}, {"include_usage": True, "continuous_usage_stats": True}):
        chunks = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=2, temperature=0,
                                                     n=2, stream=True, stream_options=options))
        assert [c.choices[0].delta.role for c in chunks[:2]] == ["assistant"] * 2
        assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens_details.cached_tokens == full
        if options.get("continuous_usage_stats"):
            assert {c.usage.prompt_tokens_details.cached_tokens for c in chunks} == {full}
            assert chunks[0].usage.completion_tokens == 0


def test_completions_equal_offline(client, llm):
    want = llm.generate(PROMPTS, greedy(12))
    for prompt, w in zip(PROMPTS, want):
        r = client.completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0)
        assert r.choices[0].text == w.text
        assert r.choices[0].finish_reason == "length"
        assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(w.prompt_token_ids), 12)
        assert r.usage.total_tokens == r.usage.prompt_tokens + 12
    # several prompts in one request (as text, as token ids): choices in prompt order
    for prompts in (PROMPTS[:3], [llm.tokenizer.encode(p) for p in PROMPTS[:3]]):
        r = client.completions.create(model="tiny", prompt=prompts, max_tokens=12, temperature=0)
        assert [c.index for c in r.choices] == [0, 1, 2]
        assert [c.text for c in r.choices] == [w.text for w in want[:3]]
        assert r.usage.prompt_tokens == sum(len(w.prompt_token_ids) for w in want[:3])


def test_streamed_completion_equals_offline(client, llm):
    want = llm.generate([PROMPTS[1]], greedy(20))[0]
    chunks = list(client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=20, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == want.text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 20
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_equals_offline(client, llm):
    messages = [{"role": "system", "content": "w5 w6"}, {"role": "user", "content": "w1 w2 w3"},
                {"role": "assistant", "content": "w9"}, {"role": "user", "content": "w4"}]
    want = llm.chat(messages, greedy(10))[0]
    r = client.chat.completions.create(model="tiny", messages=messages, max_completion_tokens=10, temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == want.text
    assert r.usage.prompt_tokens == len(want.prompt_token_ids)
    stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=10, temperature=0, stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == want.text
    assert chunks[-1].choices[0].finish_reason == "length"


def test_chat_template_kwargs(client, llm):
    """chat_template_kwargs (an extension of the API, as vLLM's) reach the template: the tiny template appends
    w0 when enable_thinking is false, as Qwen3's closes an empty think block."""
    messages = [{"role": "user", "content": "w1 w2"}]
    plain = llm.chat(messages, greedy(6))[0]
    off = llm.chat(messages, greedy(6), chat_template_kwargs={"enable_thinking": False})[0]
    assert off.prompt_token_ids == plain.prompt_token_ids + [llm.tokenizer.encode("w0")[-1]]
    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=6, temperature=0,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.choices[0].message.content == off.text
    assert r.usage.prompt_tokens == len(off.prompt_token_ids)
    # variables the server sets itself (tools from the checked tools field, the engine's) are refused by name
    for key, value in (("tools", 5), ("tools", [{"type": "function"}]), ("messages", []),
                       ("add_generation_prompt", False), ("strftime_now", "x")):
        with pytest.raises(openai.BadRequestError, match=f"chat_template_kwargs: '{key}' is set by the server") as e:
            client.chat.completions.create(model="tiny", messages=messages, max_tokens=2,
                                           extra_body={"chat_template_kwargs": {key: value}})
        assert e.value.body["param"] == "chat_template_kwargs"


def test_completions_best_of(client, llm):
    """best_of > n: that many seeded candidates a prompt (seed + i, as n choices are), the n with the highest mean
    token log-probability returned in index order, every candidate's tokens in usage; logprobs only if asked."""
    prompts = PROMPTS[:2]
    cands = [SamplingParams(max_tokens=6, temperature=1.0, seed=11 + i, logprobs=0) for i in range(4)]
    want = []
    for prompt in prompts:
        outs = llm.generate([prompt] * 4, cands)
        mean = [sum(lp.logprob for lp in o.logprobs) / len(o.logprobs) for o in outs]
        best = sorted(range(4), key=lambda k: -mean[k])[:2]
        want.append(([outs[k].text for k in best], sum(len(o.token_ids) for o in outs)))
    r = client.completions.create(model="tiny", prompt=prompts, max_tokens=6, temperature=1.0, seed=11, n=2, best_of=4)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert [c.text for c in r.choices] == want[0][0] + want[1][0]
    assert all(c.logprobs is None for c in r.choices)
    assert r.usage.completion_tokens == want[0][1] + want[1][1]
    one = client.completions.create(model="tiny", prompt=prompts[0], max_tokens=6, temperature=1.0, seed=11,
                                    best_of=4, logprobs=2)
    assert [c.text for c in one.choices] == want[0][0][:1] and len(one.choices[0].logprobs.tokens) == 6
    assert all(len(top) == 2 for top in one.choices[0].logprobs.top_logprobs)


def test_embeddings_equal_offline(server, client, llm):
    """POST /v1/embeddings through the openai client (which asks for base64) and as plain JSON floats: the
    offline LLM.embed vectors (the last token's final hidden state, normalized), token-id inputs, usage; an input
    may fill the whole context."""
    inputs = PROMPTS[:3]
    want = llm.embed(inputs)
    r = client.embeddings.create(model="tiny", input=inputs)
    got = torch.tensor([d.embedding for d in r.data])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert [d.index for d in r.data] == [0, 1, 2] and r.model == "tiny"
    assert r.usage.prompt_tokens == r.usage.total_tokens == sum(len(llm.tokenizer.encode(p)) for p in inputs)
    status, body = server.request("POST", "/v1/embeddings", {"input": [llm.tokenizer.encode(inputs[0])],
                                                            "encoding_format": "float"},
                                  headers={"Authorization": f"Bearer {KEY}"})
    assert status == 200 and body["object"] == "list" and body["data"][0]["object"] == "embedding"
    torch.testing.assert_close(torch.tensor(body["data"][0]["embedding"]), want[0], rtol=1e-5, atol=1e-5)
    full = client.embeddings.create(model="tiny", input=[[5] * MAX_LEN])
    assert len(full.data[0].embedding) == llm.engine.model_config.hidden_size


def test_embedding_dimensions_need_a_matryoshka_model(tmp_path):
    """dimensions, as vLLM takes it: only for a model whose config.json says it was trained for Matryoshka
    embeddings, one of its matryoshka_dimensions where it lists them (any size up to the hidden size with
    is_matryoshka); the vector's first components, then normalized. Another model's is a 400 naming dimensions
    (the module's server: BAD)."""
    path = tmp_path / "mrl"
    path.mkdir()
    make_tiny_model(str(path), "llama", matryoshka_dimensions=[16, 8])
    engine = AsyncLLMEngine(LLMEngine(str(path), dtype=torch.float32, max_model_len=MAX_LEN))
    with TestClient(build_app(engine, model_name="mrl")) as http:
        full = torch.tensor(http.post("/v1/embeddings", json={"input": "w1 w2"}).json()["data"][0]["embedding"])
        r = http.post("/v1/embeddings", json={"input": "w1 w2", "dimensions": 8})
        assert r.status_code == 200, r.text
        torch.testing.assert_close(torch.tensor(r.json()["data"][0]["embedding"]),
                                   torch.nn.functional.normalize(full[:8], dim=0), rtol=1e-5, atol=1e-5)
        r = http.post("/v1/embeddings", json={"input": "w1 w2", "dimensions": 12})
        assert r.status_code == 400 and r.json()["error"]["param"] == "dimensions"
        assert "only supports [8, 16] matryoshka dimensions" in r.json()["error"]["message"]


def test_embedding_dimensions_refused_as_offline(model_dir, tmp_path):
    """The server's 400 for dimensions carries LLM.embed's ValueError word for word, offline and served one rule
    (tritium.engine.pooling.check_dimensions): a model not trained for Matryoshka embeddings (unsupported_parameter),
    a size its matryoshka_dimensions do not list, one past the hidden size (LLM.embed cut any model's vectors)."""
    cases = [(model_dir, 8, "unsupported_parameter"),
             (with_config(model_dir, tmp_path / "listed", matryoshka_dimensions=[16, 8]), 12, None),
             (with_config(model_dir, tmp_path / "any", is_matryoshka=True), 4096, None)]
    for path, dimensions, code in cases:
        llm = LLM(path, dtype=torch.float32, max_model_len=MAX_LEN)
        with pytest.raises(ValueError) as offline:
            llm.embed("w1", dimensions=dimensions)
        with TestClient(build_app(AsyncLLMEngine(llm.engine), model_name=path)) as http:
            r = http.post("/v1/embeddings", json={"input": "w1", "dimensions": dimensions})
        assert r.status_code == 400, r.text
        assert r.json()["error"] == {"message": str(offline.value), "type": "invalid_request_error",
                                     "param": "dimensions", "code": code}


def test_completions_fill_in_the_middle(tmp_path):
    """OpenAI's suffix on a model with fill-in-the-middle tokens: the answer is what LLM.generate(..., suffix=...)
    gives (the format's prompt, its end tokens as stops), streamed or not, for every prompt of a list; an empty
    suffix is none."""
    path = str(tmp_path)
    make_tiny_model(path, "llama", vocab_size=261)
    add_fim_tokens(path, FORMATS[0])
    llm = LLM(path, dtype=torch.float32, max_model_len=MAX_LEN)
    want = llm.generate(["w1 w2 w3", "w4"], greedy(8), suffix="w9 w10")
    plain = llm.generate("w1 w2 w3", greedy(8))[0]
    engine = AsyncLLMEngine(LLMEngine(path, dtype=torch.float32, max_model_len=MAX_LEN))
    with TestClient(build_app(engine, model_name="tiny")) as http:
        r = http.post("/v1/completions", json={"prompt": ["w1 w2 w3", "w4"], "suffix": "w9 w10", "max_tokens": 8,
                                               "temperature": 0})
        assert r.status_code == 200, r.text
        body = r.json()
        assert [c["text"] for c in body["choices"]] == [w.text for w in want]
        assert body["usage"]["prompt_tokens"] == sum(len(w.prompt_token_ids) for w in want)
        r = http.post("/v1/completions", json={"prompt": "w1 w2 w3", "suffix": "w9 w10", "max_tokens": 8,
                                               "temperature": 0, "stream": True})
        text = "".join(json.loads(line[6:])["choices"][0]["text"] for line in r.text.splitlines()
                       if line.startswith("data: {"))
        assert text == want[0].text
        r = http.post("/v1/completions", json={"prompt": "w1 w2 w3", "suffix": "", "max_tokens": 8, "temperature": 0})
        assert r.json()["choices"][0]["text"] == plain.text


def test_default_chat_template_kwargs(model_dir, llm):
    """The server's chat_template_kwargs (``serve --chat-template-kwargs``) reach every chat request's template;
    a request's own override them name by name; completions are untouched."""
    messages = [{"role": "user", "content": "w1 w2"}]
    plain = llm.chat(messages, greedy(6))[0]
    off = llm.chat(messages, greedy(6), chat_template_kwargs={"enable_thinking": False})[0]
    engine = AsyncLLMEngine(LLMEngine(model_dir, dtype=torch.float32, max_model_len=MAX_LEN))
    app = build_app(engine, model_name="tiny", chat_template_kwargs={"enable_thinking": False})
    with TestClient(app) as http:
        def chat(**extra):
            r = http.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 6, "temperature": 0,
                                                         **extra})
            assert r.status_code == 200, r.text
            return r.json()
        r = chat()
        assert r["usage"]["prompt_tokens"] == len(off.prompt_token_ids)
        assert r["choices"][0]["message"]["content"] == off.text
        r = chat(chat_template_kwargs={"enable_thinking": True})
        assert r["usage"]["prompt_tokens"] == len(plain.prompt_token_ids)
        assert r["choices"][0]["message"]["content"] == plain.text
        r = http.post("/v1/completions", json={"prompt": "w1 w2", "max_tokens": 2})
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == len(llm.tokenizer.encode("w1 w2"))
    for key in ("messages", "tools"):
        with pytest.raises(ValueError, match=f"chat_template_kwargs: '{key}' is set by the server"):
            build_app(engine, model_name="tiny", chat_template_kwargs={key: []})


def test_chunks_of_a_stream_share_one_created(model_dir, monkeypatch):
    """Every chunk of a stream (role, text, finish, usage) carries the same ``created``, as OpenAI's do, however
    many seconds pass between them (here the app's clock moves on a second at each reading)."""
    from tritium.server import app as app_module

    seconds = itertools.count(1_700_000_000)
    monkeypatch.setattr(app_module, "time", types.SimpleNamespace(time=lambda: next(seconds),
                                                                  perf_counter=time.perf_counter))
    engine = AsyncLLMEngine(LLMEngine(model_dir, dtype=torch.float32, max_model_len=MAX_LEN))
    with TestClient(build_app(engine, model_name="tiny")) as http:
        for path, body in (("/v1/completions", {"prompt": "w1 w2", "n": 2}),
                           ("/v1/chat/completions", {"messages": [{"role": "user", "content": "w1 w2"}]})):
            r = http.post(path, json={**body, "max_tokens": 6, "temperature": 0, "stream": True,
                                      "stream_options": {"include_usage": True}})
            chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
            assert len(chunks) >= 3 and len({c["created"] for c in chunks}) == 1, (path, chunks)


def test_cors(model_dir):
    """--allowed-origins: a listed origin's preflight is answered without the API key, its requests (and their
    errors) carry the CORS headers; another origin's preflight is refused; with none listed, no CORS headers."""
    origin = "http://ui.example"
    engine = AsyncLLMEngine(LLMEngine(model_dir, dtype=torch.float32, max_model_len=MAX_LEN))
    preflight = {"Origin": origin, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"}
    with TestClient(build_app(engine, model_name="tiny", api_key=KEY, allowed_origins=[origin])) as http:
        r = http.options("/v1/chat/completions", headers=preflight)
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin
        assert "POST" in r.headers["access-control-allow-methods"]
        r = http.post("/v1/completions", json={"prompt": "w1", "max_tokens": 2},
                      headers={"Origin": origin, "Authorization": f"Bearer {KEY}"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin
        r = http.post("/v1/completions", json={"prompt": "w1", "max_tokens": 2}, headers={"Origin": origin})
        assert r.status_code == 401 and r.headers["access-control-allow-origin"] == origin
        r = http.options("/v1/chat/completions", headers={**preflight, "Origin": "http://elsewhere.example"})
        assert r.status_code == 400 and "access-control-allow-origin" not in r.headers
    engine = AsyncLLMEngine(LLMEngine(model_dir, dtype=torch.float32, max_model_len=MAX_LEN))
    with TestClient(build_app(engine, model_name="tiny", api_key=KEY)) as http:
        r = http.options("/v1/chat/completions", headers=preflight)
        assert r.status_code == 401 and "access-control-allow-origin" not in r.headers
    with pytest.raises(ValueError, match="allowed_origins must be a list of origins"):
        build_app(engine, model_name="tiny", allowed_origins="*")


def test_https(tmp_path, model_dir):
    """--ssl-keyfile / --ssl-certfile: the server answers HTTPS (a self-signed certificate made here)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    key, cert = str(tmp_path / "key.pem"), str(tmp_path / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "1", "-subj", "/CN=localhost"], check=True, capture_output=True)
    server = Server(["--model", model_dir, "--max-model-len", str(MAX_LEN), "--dtype", "float32", "--ssl-keyfile", key,
                     "--ssl-certfile", cert])
    context = ssl.create_default_context(cafile=cert)
    context.check_hostname = False  # the certificate names localhost, the request 127.0.0.1
    url = f"https://127.0.0.1:{server.port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.proc.poll() is None, server.output()
            try:
                with urllib.request.urlopen(url + "/health", timeout=2, context=context) as r:
                    assert r.status == 200
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert time.monotonic() < deadline, server.output()
                time.sleep(0.2)
        body = json.dumps({"prompt": "w1", "max_tokens": 2}).encode()
        req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60, context=context) as r:
            assert r.status == 200 and json.loads(r.read())["usage"]["completion_tokens"] == 2
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP is not spoken
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=5)
    finally:
        server.close()


def test_logit_bias(client, llm):
    """OpenAI's logit_bias: +100 forces a token (greedy and sampled), -100 bars the greedy answer's first."""
    w9 = llm.tokenizer.encode("w9", add_special_tokens=False)[-1]
    for temperature in (0, 1.0):
        r = client.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=4, temperature=temperature,
                                      logit_bias={str(w9): 100})
        assert r.choices[0].text.split() == ["w9"] * 4
    plain = llm.generate([PROMPTS[0]], greedy(3))[0]
    r = client.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=3, temperature=0,
                                  logit_bias={str(plain.token_ids[0]): -100})
    want = llm.generate([PROMPTS[0]], greedy(3, logit_bias={plain.token_ids[0]: -100.0}))[0]
    assert r.choices[0].text == want.text and want.token_ids[0] != plain.token_ids[0]


def test_n_seed_and_sampling(client, llm):
    kw = dict(model="tiny", prompt=PROMPTS[0], max_tokens=8, temperature=1.0, top_p=0.9, n=3, seed=11)
    a = client.completions.create(**kw)
    b = client.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.text for c in a.choices] == [c.text for c in b.choices]  # seeded: reproducible
    assert len({c.text for c in a.choices}) > 1  # choice i draws with seed + i
    assert a.usage.completion_tokens == 24
    want = llm.generate([PROMPTS[0]], SamplingParams(max_tokens=8, temperature=1.0, top_p=0.9, seed=12))[0]
    assert a.choices[1].text == want.text
    top_k = client.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=8, temperature=1.0, seed=3,
                                      extra_body={"top_k": 1})
    assert top_k.choices[0].text == llm.generate([PROMPTS[0]], greedy(8))[0].text  # top_k 1 is greedy
    # streamed choices: each index's deltas form its text
    chunks = list(client.completions.create(**kw, stream=True))
    texts = {}
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
    assert [texts[i] for i in range(3)] == [c.text for c in a.choices]


def test_stop_strings(client, llm):
    full = llm.generate([PROMPTS[3]], greedy(16))[0].text
    word = full.split()[3]
    want = llm.generate([PROMPTS[3]], greedy(16, stop=[word, "never"]))[0]
    assert want.finish_reason == "stop" and word not in want.text
    for stop in (word, [word, "never"]):
        r = client.completions.create(model="tiny", prompt=PROMPTS[3], max_tokens=16, temperature=0, stop=stop)
        assert r.choices[0].text == want.text and r.choices[0].finish_reason == "stop"
    chunks = list(client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": PROMPTS[3]}],
                                                 max_tokens=16, temperature=0, stop=word, stream=True))
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert word not in "".join(c.choices[0].delta.content or "" for c in chunks)
    # vLLM's stop_reason (the stop string) and include_stop_str_in_output, whole and streamed
    r = client.completions.create(model="tiny", prompt=PROMPTS[3], max_tokens=16, temperature=0, stop=[word, "never"],
                                  extra_body={"include_stop_str_in_output": True})
    assert r.choices[0].text == want.text + word and r.choices[0].model_extra["stop_reason"] == word
    chunks = list(client.completions.create(model="tiny", prompt=PROMPTS[3], max_tokens=16, temperature=0, stop=word,
                                            stream=True, extra_body={"include_stop_str_in_output": True}))
    assert "".join(c.choices[0].text for c in chunks) == want.text + word
    assert chunks[-1].choices[0].model_extra["stop_reason"] == word
    plain = client.completions.create(model="tiny", prompt=PROMPTS[3], max_tokens=4, temperature=0)
    assert plain.choices[0].finish_reason == "length" and plain.choices[0].model_extra["stop_reason"] is None


def test_logprobs(client, llm):
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": PROMPTS[0]}], max_tokens=6,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 6
    for item in content:
        assert len(item.top_logprobs) == 3
        assert item.top_logprobs[0].token == item.token  # greedy: the sampled token is the most likely
        assert item.logprob == pytest.approx(item.top_logprobs[0].logprob)
        assert item.top_logprobs[0].logprob >= item.top_logprobs[1].logprob >= item.top_logprobs[2].logprob
        assert bytes(item.bytes).decode() == item.token
    assert "".join(i.token if k == 0 else " " + i.token for k, i in enumerate(content)) == r.choices[0].message.content
    chunks = list(client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": PROMPTS[0]}],
                                                 max_tokens=6, temperature=0, logprobs=True, top_logprobs=3,
                                                 stream=True))
    streamed = [i for c in chunks if c.choices and c.choices[0].logprobs for i in c.choices[0].logprobs.content]
    assert [(i.token, i.logprob) for i in streamed] == [(i.token, i.logprob) for i in content]
    c = client.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=4, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
    assert all(len(t) <= 2 for t in lp.top_logprobs) and all(v <= 0 for v in lp.token_logprobs)


def test_echo_and_prompt_logprobs(server, client, llm):
    """``echo`` as lm-evaluation-harness's loglikelihood asks for it (token-id prompts in one request,
    max_tokens 1, logprobs 1): the prompt tokens' log-probabilities first (the first null), equal to the
    offline engine's ``prompt_logprobs``; max_tokens 0 scores the prompt alone; streamed, the prompt comes
    first in a chunk of its own."""
    prompts = [llm.tokenizer.encode(p) for p in PROMPTS[1:]]
    want = llm.generate(prompts, greedy(1, prompt_logprobs=1, logprobs=1))
    r = client.completions.create(model="tiny", prompt=prompts, max_tokens=1, temperature=0, logprobs=1, echo=True)
    for choice, w, ids in zip(sorted(r.choices, key=lambda c: c.index), want, prompts):
        lp = choice.logprobs
        assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(ids) + 1
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        assert lp.token_logprobs[1:-1] == pytest.approx([x.logprob for x in w.prompt_logprobs[1:]], abs=1e-5)
        assert lp.token_logprobs[-1] == pytest.approx(w.logprobs[0].logprob, abs=1e-5)
        assert all(len(t) == 1 for t in lp.top_logprobs[1:])
        # lm-eval's greedy check: a token is greedy when its logprob is the top one
        greedy_w = [x.top[0][0] == x.token_id for x in w.prompt_logprobs[1:]]
        assert [v == max(t.values()) for v, t in zip(lp.token_logprobs[1:-1], lp.top_logprobs[1:-1])] == greedy_w
        assert choice.text == llm.tokenizer.decode(ids, skip_special_tokens=False) + w.text
        assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    assert r.usage.completion_tokens == len(prompts)
    # max_tokens 0: the prompt, scored; nothing generated
    generated = server.metrics()["tritium:generation_tokens_total"]
    r = client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=0, logprobs=2, echo=True)
    c = r.choices[0]
    assert c.text == PROMPTS[1] and c.finish_reason == "length" and r.usage.completion_tokens == 0
    assert server.metrics()["tritium:generation_tokens_total"] == generated  # as usage
    assert c.logprobs.token_logprobs[1:] == pytest.approx([x.logprob for x in want[0].prompt_logprobs[1:]], abs=1e-5)
    assert all(len(t) == 2 for t in c.logprobs.top_logprobs[1:])
    # a prompt alone may fill the context (lm-eval's rolling windows); one token more, or one to generate, may not
    full = [5 + t % 50 for t in range(MAX_LEN)]
    r = client.completions.create(model="tiny", prompt=full, max_tokens=0, logprobs=1, echo=True)
    want_full = llm.generate([full], greedy(0, prompt_logprobs=1))[0]
    assert r.choices[0].logprobs.token_logprobs[1:] == pytest.approx(
        [x.logprob for x in want_full.prompt_logprobs[1:]], abs=1e-5)
    assert len(r.choices[0].logprobs.tokens) == MAX_LEN and r.usage.prompt_tokens == MAX_LEN
    for prompt, max_tokens in ((full + [5], 0), (full, 1)):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="tiny", prompt=prompt, max_tokens=max_tokens, echo=True)
        assert e.value.body["code"] == "context_length_exceeded"
    # echo without logprobs: the prompt text only; streamed: the prompt first
    plain = client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=3, temperature=0, echo=True)
    assert plain.choices[0].text == PROMPTS[1] + llm.generate([PROMPTS[1]], greedy(3))[0].text
    assert plain.choices[0].logprobs is None
    chunks = list(client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=3, temperature=0, echo=True,
                                            logprobs=1, stream=True))
    assert chunks[0].choices[0].text == PROMPTS[1] and chunks[0].choices[0].logprobs.token_logprobs[0] is None
    assert "".join(c.choices[0].text for c in chunks) == plain.choices[0].text
    streamed = [v for c in chunks if c.choices[0].logprobs for v in c.choices[0].logprobs.token_logprobs]
    full = client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=3, temperature=0, echo=True,
                                     logprobs=1)
    assert streamed == full.choices[0].logprobs.token_logprobs
    chunks = list(client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=0, echo=True, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == PROMPTS[1]
    assert chunks[-1].choices[0].finish_reason == "length"
    status, info = server.request("GET", "/tokenizer_info", headers={"Authorization": f"Bearer {KEY}"})
    assert status == 200 and info["eos_token"] == "</s>" and info["model_max_length"] == MAX_LEN
    assert server.request("GET", "/tokenizer_info")[0] == 401


def test_vllm_prompt_logprobs(server, llm):
    """vLLM's prompt_logprobs: per prompt token None (the first) or {token id: {logprob, rank, decoded_token}}
    for the token and the top k, equal to the offline engine's; completions per choice, chat once in the
    response; refused with streaming."""
    headers = {"Authorization": f"Bearer {KEY}"}
    ids = llm.tokenizer.encode(PROMPTS[3])
    want = llm.generate([ids], greedy(2, prompt_logprobs=2))[0].prompt_logprobs
    status, r = server.request("POST", "/v1/completions", {"prompt": ids, "max_tokens": 2, "temperature": 0,
                                                           "prompt_logprobs": 2, "n": 2}, headers=headers)
    assert status == 200, r
    for choice in r["choices"]:
        got = choice["prompt_logprobs"]
        assert len(got) == len(ids) and got[0] is None
        for t, (entry, w) in enumerate(zip(got[1:], want[1:]), 1):
            mine = entry[str(ids[t])]
            assert mine["logprob"] == pytest.approx(w.logprob, abs=1e-5) and mine["rank"] == w.rank >= 1
            assert mine["decoded_token"] == llm.tokenizer.decode([ids[t]])
            for rank, (tid, value) in enumerate(w.top, 1):  # the top 2, ranked by place (the token by its own)
                assert entry[str(tid)]["logprob"] == pytest.approx(value, abs=1e-5)
                assert entry[str(tid)]["rank"] == (w.rank if tid == ids[t] else rank)
            assert set(entry) == {str(ids[t])} | {str(tid) for tid, _ in w.top}  # one entry where they coincide
    two = [llm.tokenizer.encode(PROMPTS[1]), ids]  # n=2 each: the first choice of a prompt scores it for both
    status, r = server.request("POST", "/v1/completions", {"prompt": two, "max_tokens": 1, "temperature": 0,
                                                           "prompt_logprobs": 1, "n": 2}, headers=headers)
    assert status == 200, r
    for choice in r["choices"]:
        prompt = two[choice["index"] // 2]
        got = choice["prompt_logprobs"]
        assert len(got) == len(prompt) and all(str(t) in e for t, e in zip(prompt[1:], got[1:])), choice["index"]
    assert r["choices"][0]["prompt_logprobs"] == r["choices"][1]["prompt_logprobs"]
    assert r["choices"][2]["prompt_logprobs"] == r["choices"][3]["prompt_logprobs"]
    messages = [{"role": "user", "content": PROMPTS[3]}]
    chat_ids = llm.chat(messages, greedy(1))[0].prompt_token_ids
    status, r = server.request("POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 2,
                                                                "max_completion_tokens": 2,  # equal: taken
                                                                "prompt_logprobs": 0}, headers=headers)
    assert status == 200 and r["usage"]["completion_tokens"] <= 2, r
    got = r["prompt_logprobs"]
    assert len(got) == len(chat_ids) and got[0] is None and all(len(e) == 1 for e in got[1:])
    assert [int(next(iter(e))) for e in got[1:]] == chat_ids[1:]
    assert "prompt_logprobs" not in r["choices"][0]
    status, r2 = server.request("POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 2, "n": 3,
                                                                 "temperature": 1.0, "prompt_logprobs": 0},
                                headers=headers)
    assert status == 200 and len(r2["choices"]) == 3, r2
    # scored by the first choice alone (parse_chat), reported once: the same entries (the values within fp32
    # rounding of another batch)
    again = r2["prompt_logprobs"]
    assert again[0] is None and [list(e) for e in again[1:]] == [list(e) for e in got[1:]]
    assert all(a[k]["logprob"] == pytest.approx(g[k]["logprob"], abs=1e-5) and a[k]["rank"] == g[k]["rank"]
               for a, g in zip(again[1:], got[1:]) for k in g)


def test_penalties_match_offline(client, llm):
    params = dict(presence_penalty=1.5, frequency_penalty=0.5)
    want = llm.generate([PROMPTS[2]], greedy(24, **params))[0]
    assert want.text != llm.generate([PROMPTS[2]], greedy(24))[0].text or len(set(want.token_ids)) == 24
    r = client.completions.create(model="tiny", prompt=PROMPTS[2], max_tokens=24, temperature=0, **params)
    assert r.choices[0].text == want.text


def test_32_concurrent_streaming_clients(server, llm):
    want = [o.text for o in llm.generate(MANY, greedy(16))]
    aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=60)

    async def one(prompt):
        stream = await aclient.completions.create(model="tiny", prompt=prompt, max_tokens=16, temperature=0,
                                                  stream=True)
        return "".join([c.choices[0].text async for c in stream])

    async def run():
        try:
            return await asyncio.gather(*(one(p) for p in MANY))
        finally:
            await aclient.close()

    assert asyncio.run(run()) == want


# -- disconnects and errors -------------------------------------------------------------------------------------
def _raw_request(server, path: str, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def _read_until(sock: socket.socket, marker: bytes, received: bytes = b"") -> bytes:
    while marker not in received:
        part = sock.recv(65536)
        if not part:
            break
        received += part
    return received


def _wait_for(server, cond, timeout=15.0, poll=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = server.metrics()
        if cond(m):
            return m
        time.sleep(poll)
    raise AssertionError(f"metrics never reached the condition: {m}")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_disconnect_aborts_and_frees_blocks(server, stream):
    """A client that closes its connection mid-generation: the request is aborted and its KV pages freed.
    Without streaming nothing arrives before the end, so the request is seen running in /metrics first: 40
    prompts with logprobs and a penalty, which on a GPU keep this tiny model busy long enough to be seen (one
    248-token greedy sequence ran out between two polls on an H100)."""
    before = server.metrics()
    body = {"model": "tiny", "prompt": "w1 w2 w3", "max_tokens": MAX_LEN - 8, "temperature": 0, "ignore_eos": True,
            "stream": stream}
    if not stream:
        body.update(prompt=[f"w{i} w2 w3" for i in range(40)], logprobs=5, frequency_penalty=0.5)
    requested = (1 if stream else 40) * (MAX_LEN - 8)
    sock = _raw_request(server, "/v1/completions", body)
    if stream:
        assert b"data: " in _read_until(sock, b"data: ")  # generation is under way
    else:
        _wait_for(server, lambda m: m["tritium:num_requests_running"] >= 1, poll=0.002)
    sock.close()
    after = _wait_for(server, lambda m: m["tritium:request_aborted_total"] > before.get("tritium:request_aborted_total", 0))
    after = _wait_for(server, lambda m: m["tritium:kv_cache_usage_perc"] == 0 and m["tritium:num_requests_running"] == 0)
    generated = after["tritium:generation_tokens_total"] - before["tritium:generation_tokens_total"]
    assert generated < requested  # stopped early, not run to the end


BAD = [
    ("prediction-type", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                 "prediction": {"type": "text", "content": "w1"}}, 400, None,
     "prediction"),
    ("prediction-content", "/v1/completions", {"prompt": "w1", "prediction": {"type": "content", "content": 5}},
     400, None, "prediction"),
    # (id, path, body or raw bytes, status, code, param)
    ("malformed-json", "/v1/completions", b'{"prompt": "w1",', 400, "invalid_json", None),
    ("deep-json", "/v1/completions", b'{"prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400, "invalid_json", None),
    # over the server's bound of 256 (which no Python's parser refuses), and under it: a prompt of the wrong shape
    ("nested-257", "/v1/completions", b'{"prompt": ' + b"[" * 256 + b"]" * 256 + b"}", 400, "invalid_json", None),
    ("nested-255", "/v1/completions", b'{"prompt": ' + b"[" * 254 + b"]" * 254 + b"}", 400, None, "prompt"),
    ("lone-surrogate", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "w1 \\ud800"}]}', 400,
     "invalid_json", "messages"),
    ("lone-surrogate-prompt", "/v1/completions", b'{"prompt": ["w1", "\\udfff w2"]}', 400, "invalid_json", "prompt"),
    ("stop_token_ids-vocab", "/v1/completions", {"prompt": "w1", "stop_token_ids": [99999], "min_tokens": 1}, 400, None,
     "stop_token_ids"),
    ("not-an-object", "/v1/completions", [1, 2], 400, "invalid_json", None),
    ("unknown-field", "/v1/completions", {"prompt": "w1", "bogus": 1}, 400, "unknown_parameter", "bogus"),
    ("temperature", "/v1/completions", {"prompt": "w1", "temperature": -1}, 400, None, "temperature"),
    ("top_p", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}], "top_p": 0}, 400, None, "top_p"),
    ("max_tokens", "/v1/completions", {"prompt": "w1", "max_tokens": 0}, 400, None, "max_tokens"),
    ("max_tokens-type", "/v1/completions", {"prompt": "w1", "max_tokens": "ten"}, 400, None, "max_tokens"),
    ("model-type", "/v1/completions", {"prompt": "w1", "model": 5}, 400, None, "model"),
    ("tool-parameters-type", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}], "tool_choice": "required"},
     400, None, "tools"),
    ("max_tokens-both", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}], "max_tokens": 4,
                                                 "max_completion_tokens": 5}, 400, None, "max_tokens"),
    ("n", "/v1/completions", {"prompt": "w1", "n": 0}, 400, None, "n"),
    ("seed", "/v1/completions", {"prompt": "w1", "seed": 2**64}, 400, None, "seed"),
    ("top_k", "/v1/completions", {"prompt": "w1", "top_k": 10**20}, 400, None, "top_k"),
    ("stop", "/v1/completions", {"prompt": "w1", "stop": 5}, 400, None, "stop"),
    ("penalty", "/v1/completions", {"prompt": "w1", "presence_penalty": 3}, 400, None, "presence_penalty"),
    ("min_p", "/v1/completions", {"prompt": "w1", "min_p": 1.5}, 400, None, "min_p"),
    ("stop_token_ids", "/v1/completions", {"prompt": "w1", "stop_token_ids": ["x"]}, 400, None, "stop_token_ids"),
    ("min_tokens", "/v1/completions", {"prompt": "w1", "max_tokens": 4, "min_tokens": 5}, 400, None, "min_tokens"),
    ("repetition_penalty", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                    "repetition_penalty": 0}, 400, None, "repetition_penalty"),
    ("echo", "/v1/completions", {"prompt": "w1", "echo": "yes"}, 400, None, "echo"),
    ("prompt_logprobs", "/v1/completions", {"prompt": "w1", "prompt_logprobs": 21}, 400, None, "prompt_logprobs"),
    ("skip_special_tokens", "/v1/completions", {"prompt": "w1", "skip_special_tokens": "no"}, 400, None,
     "skip_special_tokens"),
    ("prompt_logprobs-stream", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                        "prompt_logprobs": 1, "stream": True}, 400, None,
     "prompt_logprobs"),
    ("max_tokens-0-chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                  "max_tokens": 0}, 400, None, "max_tokens"),
    ("logit_bias-key", "/v1/completions", {"prompt": "w1", "logit_bias": {"w5": 10}}, 400, None, "logit_bias"),
    ("logit_bias-value", "/v1/completions", {"prompt": "w1", "logit_bias": {"5": 101}}, 400, None, "logit_bias"),
    ("logit_bias-vocab", "/v1/completions", {"prompt": "w1", "logit_bias": {"99999": 1}}, 400, None, "logit_bias"),
    ("tools", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                       "tools": [{"type": "function"}]}, 400, None, "tools"),
    ("tools-no-format", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                 "tools": [{"type": "function", "function": {"name": "f"}}]}, 400,
     "unsupported_parameter", "tools"),
    ("tool_choice", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                             "tools": [{"type": "function", "function": {"name": "f"}}],
                                             "tool_choice": {"type": "function", "function": {"name": "g"}}}, 400,
     None, "tool_choice"),
    ("response_format-schema", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                        "response_format": {"type": "json_schema", "json_schema": {
                                                            "name": "x", "schema": {"type": "object", "properties": {
                                                                "a": {"type": "string", "pattern": "(?=x)"}}}}}},
     400, None, "response_format"),
    ("response_format-type", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                      "response_format": {"type": "yaml"}}, 400, None,
     "response_format"),
    ("response_format-field", "/v1/completions", {"prompt": "w1", "response_format": {"type": "json_object"}}, 400,
     "unknown_parameter", "response_format"),
    # the word-level test tokenizer has no '{' token: JSON mode is refused before anything is sent, streamed or not
    ("response_format-vocabulary", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                            "response_format": {"type": "json_object"}}, 400, None,
     "response_format"),
    ("response_format-vocabulary-stream", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                                   "response_format": {"type": "json_object"},
                                                                   "stream": True}, 400, None, "response_format"),
    ("guided_choice-vocabulary", "/v1/completions", {"prompt": "w1", "guided_choice": ["w1", "w2"], "stream": True},
     400, None, "guided_choice"),
    ("tool_choice-vocabulary", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                        "tools": [{"type": "function", "function": {"name": "f"}}],
                                                        "tool_choice": {"type": "function", "function": {"name": "f"}}},
     400, None, "tool_choice"),
    ("top_logprobs-alone", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                    "top_logprobs": 2}, 400, None, "top_logprobs"),
    ("stream_options", "/v1/completions", {"prompt": "w1", "stream_options": {"include_usage": True}}, 400, None,
     "stream_options"),
    ("no-messages", "/v1/chat/completions", {"model": "tiny"}, 400, None, "messages"),
    ("template-kwargs", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                 "chat_template_kwargs": [1]}, 400, None, "chat_template_kwargs"),
    ("template-kwargs-reserved", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                          "chat_template_kwargs": {"messages": []}}, 400, None,
     "chat_template_kwargs"),
    ("role", "/v1/chat/completions", {"messages": [{"role": "robot", "content": "w1"}]}, 400, None, "messages"),
    ("image", "/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, None,
     "messages"),
    ("empty-prompt", "/v1/completions", {"prompt": ""}, 400, None, "prompt"),
    ("token-id", "/v1/completions", {"prompt": [1, 99999]}, 400, None, "prompt"),
    # OpenAI's four forms (a string, strings, token ids, token-id lists), not strings and token-id lists mixed
    ("prompt-mixed", "/v1/completions", {"prompt": ["w1", [5, 6]]}, 400, None, "prompt"),
    ("prompt-mixed-ids-first", "/v1/completions", {"prompt": [[5, 6], "w1"]}, 400, None, "prompt"),
    ("too-long", "/v1/completions", {"prompt": " ".join(["w3"] * (MAX_LEN + 10))}, 400, "context_length_exceeded",
     "prompt"),
    ("too-long-chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w3 " * MAX_LEN}]}, 400,
     "context_length_exceeded", "messages"),
    ("unknown-model", "/v1/completions", {"model": "gpt-4", "prompt": "w1"}, 404, "model_not_found", "model"),
    ("unknown-path", "/v1/audio/speech", {"input": "w1"}, 404, "not_found", None),
    # more sequences than 64 running + 48 waiting: refused as too large (a full queue is tests/engine/test_serving_api)
    ("too-many-sequences", "/v1/completions", {"prompt": "w1", "n": 113}, 400, None, "n"),
    ("too-many-prompts", "/v1/completions", {"prompt": ["w1"] * 113}, 400, None, "prompt"),
    ("continue-and-generation-prompt", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "w1"}, {"role": "assistant", "content": "w2"}],
        "continue_final_message": True, "add_generation_prompt": True}, 400, None, "continue_final_message"),
    ("continue-a-user-message", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                         "continue_final_message": True}, 400, None, "messages"),
    ("add_generation_prompt", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}],
                                                       "add_generation_prompt": "no"}, 400, None,
     "add_generation_prompt"),
    ("tokenize-continue", "/tokenize", {"messages": [{"role": "user", "content": "w1"}],
                                        "continue_final_message": True}, 400, None, "messages"),
    ("tokenize-both", "/tokenize", {"prompt": "w1", "messages": []}, 400, None, None),
    ("tokenize-field", "/tokenize", {"prompt": "w1", "temperature": 1}, 400, "unknown_parameter", "temperature"),
    ("tokenize-messages", "/tokenize", {"messages": [{"role": "robot", "content": "w1"}]}, 400, None, "messages"),
    ("detokenize", "/detokenize", {"tokens": [1, 99999]}, 400, None, "tokens"),
    ("embeddings-input", "/v1/embeddings", {"input": []}, 400, None, "input"),
    ("embeddings-input-empty", "/v1/embeddings", {"input": ["w1", ""]}, 400, None, "input"),
    ("embeddings-input-mixed", "/v1/embeddings", {"input": ["w1", [5, 6]]}, 400, None, "input"),
    ("embeddings-format", "/v1/embeddings", {"input": "w1", "encoding_format": "int8"}, 400, None, "encoding_format"),
    ("embeddings-dimensions", "/v1/embeddings", {"input": "w1", "dimensions": 0}, 400, None, "dimensions"),
    ("embeddings-dimensions-large", "/v1/embeddings", {"input": "w1", "dimensions": 4096}, 400, None, "dimensions"),
    # as vLLM: only a model trained for Matryoshka embeddings (its config.json says so) cuts them
    ("embeddings-dimensions-not-matryoshka", "/v1/embeddings", {"input": "w1", "dimensions": 8}, 400,
     "unsupported_parameter", "dimensions"),
    ("embeddings-field", "/v1/embeddings", {"input": "w1", "temperature": 0}, 400, "unknown_parameter",
     "temperature"),
    ("embeddings-long", "/v1/embeddings", {"input": [[5] * (MAX_LEN + 1)]}, 400, "context_length_exceeded", "input"),
    ("embeddings-vocab", "/v1/embeddings", {"input": [[5, 99999]]}, 400, None, "input"),
    ("embeddings-user", "/v1/embeddings", {"input": "w1", "user": 5}, 400, None, "user"),
    ("best_of-below-n", "/v1/completions", {"prompt": "w1", "n": 3, "best_of": 2}, 400, None, "best_of"),
    ("best_of-stream", "/v1/completions", {"prompt": "w1", "best_of": 2, "stream": True}, 400, None, "best_of"),
    ("best_of-echo", "/v1/completions", {"prompt": "w1", "best_of": 2, "echo": True}, 400, None, "best_of"),
    ("best_of-chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "w1"}], "best_of": 2}, 400,
     "unsupported_parameter", "best_of"),
    ("suffix-type", "/v1/completions", {"prompt": "w1", "suffix": 5}, 400, None, "suffix"),
    ("suffix-echo", "/v1/completions", {"prompt": "w1", "suffix": "w2", "echo": True}, 400, None, "suffix"),
    ("suffix-ids", "/v1/completions", {"prompt": [4, 5], "suffix": "w2"}, 400, None, "suffix"),
    ("suffix-no-fim", "/v1/completions", {"prompt": "w1", "suffix": "w2"}, 400, "unsupported_parameter", "suffix"),
]


@pytest.mark.parametrize("path, body, status, code, param", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_requests_get_json_errors(server, path, body, status, code, param):
    headers = {"Authorization": f"Bearer {KEY}"}
    if isinstance(body, bytes):
        got, reply = server.request("POST", path, raw=body, headers=headers)
    else:
        got, reply = server.request("POST", path, body, headers=headers)
    assert got == status, reply
    error = reply["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert "Traceback" not in error["message"]
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    assert server.request("POST", "/v1/completions", {"prompt": "w1", "max_tokens": 2}, headers=headers)[0] == 200


def test_tokenize_and_detokenize(server, llm):
    """vLLM's /tokenize (a prompt with or without special tokens; messages rendered as a chat request is,
    with its template variables) and /detokenize; behind the API key like /v1."""
    headers = {"Authorization": f"Bearer {KEY}"}
    status, reply = server.request("POST", "/tokenize", {"prompt": "w1 w2"}, headers=headers)
    want = llm.tokenizer.encode("w1 w2")
    assert status == 200 and reply == {"count": len(want), "max_model_len": MAX_LEN, "tokens": want}
    _, plain = server.request("POST", "/tokenize", {"prompt": "w1 w2", "add_special_tokens": False}, headers=headers)
    assert plain["tokens"] == llm.tokenizer.encode("w1 w2", add_special_tokens=False) and plain["count"] == 2
    messages = [{"role": "user", "content": "w1 w2"}]
    for kwargs in ({}, {"enable_thinking": False}):
        status, reply = server.request("POST", "/tokenize", {"model": "tiny", "messages": messages,
                                                             "chat_template_kwargs": kwargs}, headers=headers)
        want = llm.chat(messages, greedy(1), chat_template_kwargs=kwargs)[0].prompt_token_ids
        assert status == 200 and reply["tokens"] == want and reply["count"] == len(want)
    status, reply = server.request("POST", "/detokenize", {"tokens": plain["tokens"]}, headers=headers)
    assert status == 200 and reply == {"prompt": "w1 w2"}
    for path in ("/tokenize", "/detokenize"):
        assert server.request("POST", path, {"prompt": "w1", "tokens": [1]})[0] == 401


def test_chat_text_parts_join_with_newlines(server, client):
    """A message whose content is a list of text parts is read as one text, its parts joined by newlines, as vLLM
    flattens them for a chat template that takes text: the prompt of ["w1 w2", "w3"] is that of "w1 w2\nw3"
    (chat completions and /tokenize alike), not of "w1 w2w3"."""
    headers = {"Authorization": f"Bearer {KEY}"}
    parts = [{"type": "text", "text": "w1 w2"}, {"type": "text", "text": "w3"}]
    prompts = {}
    for name, content in (("parts", parts), ("newline", "w1 w2\nw3"), ("glued", "w1 w2w3")):
        messages = [{"role": "user", "content": content}]
        status, reply = server.request("POST", "/tokenize", {"messages": messages}, headers=headers)
        r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=1,
                                           extra_body={"prompt_logprobs": 0})
        assert status == 200 and [int(next(iter(p))) for p in r.prompt_logprobs[1:]] == reply["tokens"][1:]
        prompts[name] = reply["tokens"]
    assert prompts["parts"] == prompts["newline"] != prompts["glued"]


def test_method_size_and_key_errors(server):
    status, reply = server.request("GET", "/v1/completions", headers={"Authorization": f"Bearer {KEY}"})
    assert status == 405 and reply["error"]["code"] == "method_not_allowed"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"}):
        status, reply = server.request("POST", "/v1/completions", {"prompt": "w1"}, headers=headers)
        assert status == 401 and reply["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0).models.list()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:  # 1 GB announced, nothing sent
        sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                     f"Content-Length: {1 << 30}\r\n\r\n".encode())
        reply = _read_until(sock, b"request_too_large").decode()
    assert reply.startswith("HTTP/1.1 413") and '"code":"request_too_large"' in reply
    # chunked (no Content-Length to refuse up front): refused once 16 MiB have come, not after the whole body
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                     f"Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, socket.timeout):
            for _ in range(64):  # 64 MiB, never finished: only a refusal mid-body answers
                sock.sendall(chunk)
        reply = _read_until(sock, b"request_too_large").decode()
    read = int(re.search(r"request body of more than 16777216 bytes \(at least (\d+) sent\) is over the limit of "
                         r"16777216", reply)[1])
    assert reply.startswith("HTTP/1.1 413") and 16 << 20 < read <= 17 << 20, reply
    status, _ = server.request("HEAD", "/health")
    assert status == 200
    for scheme in ("bearer", "BEARER"):  # the scheme is case-insensitive, the key is not
        assert server.request("GET", "/v1/models", headers={"Authorization": f"{scheme} {KEY}"})[0] == 200
    assert server.request("GET", "/v1/models", headers={"Authorization": f"bearer {KEY.upper()}x"})[0] == 401


def test_openai_client_sees_errors(client):
    with pytest.raises(openai.BadRequestError, match="temperature must be in"):
        client.completions.create(model="tiny", prompt="w1", temperature=5)
    with pytest.raises(openai.NotFoundError, match="model_not_found|does not exist"):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "w1"}])


def test_sigterm_ends_in_flight_requests_and_exits_cleanly(server):
    """Last in the module: it stops the module's server."""
    body = {"model": "tiny", "prompt": "w1", "max_tokens": MAX_LEN - 4, "ignore_eos": True, "stream": True}
    sock = _raw_request(server, "/v1/completions", body)
    received = _read_until(sock, b"data: ")
    server.proc.send_signal(signal.SIGTERM)
    received = _read_until(sock, b"[DONE]", received)
    sock.close()
    assert b"engine_stopped" in received and b"data: [DONE]" in received
    # uvicorn re-raises the signal once it has shut down: the process ends by SIGTERM, as a signalled one does
    assert server.stop(timeout=20) in (0, -signal.SIGTERM), server.output()
    assert "Traceback" not in server.output()


def test_speculative_server_equals_offline(start_server, model_dir, llm):
    """A server with speculative decoding (--num-speculative-tokens) answers as plain greedy decoding does,
    streamed or not, and counts its drafts in /metrics."""
    server = start_server("--model", model_dir, "--max-model-len", str(MAX_LEN), "--served-model-name", "tiny",
                          "--dtype", "float32", "--num-speculative-tokens", "4", "--prompt-lookup-min", "1")
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=60)
    prompts = ["w1 w2 w3 w1 w2 w3 w1 w2", " ".join(f"w{i % 6}" for i in range(24)), PROMPTS[1]]
    want = llm.generate(prompts, greedy(40))
    for prompt, w in zip(prompts, want):
        r = client.completions.create(model="tiny", prompt=prompt, max_tokens=40, temperature=0)
        assert r.choices[0].text == w.text
        chunks = client.completions.create(model="tiny", prompt=prompt, max_tokens=40, temperature=0, stream=True)
        assert "".join(c.choices[0].text for c in chunks if c.choices) == w.text
    # OpenAI's predicted outputs: the answer unchanged, the prediction's draft tokens in usage
    messages = [{"role": "user", "content": PROMPTS[2]}]
    answer = llm.chat(messages, greedy(40))[0]
    parts = [{"type": "text", "text": answer.text[:9]}, {"type": "text", "text": answer.text[9:]}]
    for prediction in (answer.text, parts):
        r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=40, temperature=0,
                                           prediction={"type": "content", "content": prediction})
        assert r.choices[0].message.content == answer.text
        details = r.usage.completion_tokens_details
        assert details.accepted_prediction_tokens >= 10 and details.rejected_prediction_tokens >= 0
    wrong = client.completions.create(model="tiny", prompt=prompts[2], max_tokens=40, temperature=0, stream=True,
                                      stream_options={"include_usage": True},
                                      extra_body={"prediction": {"type": "content", "content": "w7 w8 w9 w7 w8"}})
    chunks = list(wrong)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == want[2].text
    assert chunks[-1].usage.completion_tokens_details.accepted_prediction_tokens <= 5
    plain = client.chat.completions.create(model="tiny", messages=messages, max_tokens=4, temperature=0)
    assert plain.usage.completion_tokens_details is None  # no prediction: no such details
    m = _wait_for(server, lambda m: m["tritium:num_requests_running"] == 0)
    assert m["tritium:spec_decode_num_draft_tokens_total"] > 0
    assert 0 <= m["tritium:spec_decode_num_accepted_tokens_total"] <= m["tritium:spec_decode_num_draft_tokens_total"]



def test_wrong_method_trailing_slash_and_compressed_body(model_dir):
    """A 405 carries Allow with every method of the path (two routes for /v1/responses/{id}); "/v1/responses/" is
    a 404 naming the path without the slash, not a 307 that a client's POST does not follow; a gzip body is a
    415 naming the encoding, not a "malformed JSON" 400."""
    import gzip

    engine = AsyncLLMEngine(LLMEngine(model_dir, dtype=torch.float32, max_model_len=MAX_LEN))
    with TestClient(build_app(engine, model_name="tiny")) as app:
        reply = app.put("/v1/responses/resp_1")
        assert reply.status_code == 405 and reply.headers["allow"] == "DELETE, GET"
        error = reply.json()["error"]
        assert error["code"] == "method_not_allowed" and "DELETE, GET" in error["message"]
        reply = app.get("/v1/chat/completions")
        assert reply.status_code == 405 and reply.headers["allow"] == "POST"
        reply = app.post("/v1/completions/", json={"model": "tiny", "prompt": "w1"}, follow_redirects=False)
        assert reply.status_code == 404 and "without the trailing slash" in reply.json()["error"]["message"]
        assert "trailing" not in app.get("/nope").json()["error"]["message"]
        body = json.dumps({"model": "tiny", "prompt": "w1", "max_tokens": 2}).encode()
        reply = app.post("/v1/completions", content=gzip.compress(body),
                         headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
        assert reply.status_code == 415 and "'gzip' is not supported" in reply.json()["error"]["message"]
        reply = app.post("/v1/completions", content=body,
                         headers={"Content-Encoding": "identity", "Content-Type": "application/json"})
        assert reply.status_code == 200, reply.text
