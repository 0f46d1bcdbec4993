"""JSON mode through the server (``response_format={"type": "json_object"}``), with the official ``openai``
client over the app in-process: a tiny random Llama with a byte-level BPE tokenizer answers one JSON object
(or a prefix of one, cut at max_tokens), streamed or not, or one that a JSON schema accepts
(``json_schema``), and what cannot be honoured is a 400 naming the field."""

import json

import pytest
import torch

from engine.conftest import make_tiny_model, save_byte_bpe_tokenizer
from tritium.engine import AsyncLLMEngine, LLMEngine
from tritium.engine.json_mode import START, advance_bytes
from tritium.server import build_app

pytest.importorskip("fastapi", reason="needs the serve extra: pip install 'tritium[serve]'")
openai = pytest.importorskip("openai")
TestClient = pytest.importorskip("fastapi.testclient").TestClient
pytestmark = pytest.mark.timeout(120)
JSON = {"type": "json_object"}
_MODEL: list[str] = []  # the model's directory, once the fixture made it
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("json-model"))
    make_tiny_model(path, "llama", vocab_size=448)
    save_byte_bpe_tokenizer(path)
    _MODEL[:] = [path]
    engine = AsyncLLMEngine(LLMEngine(path, dtype=torch.float32, max_model_len=256))
    with TestClient(build_app(engine, model_name="tiny")) as http:
        yield openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http, max_retries=0)


def _json_or_cut(text: str, finish_reason: str) -> bool:
    if finish_reason == "stop":
        return isinstance(json.loads(text), dict)
    return finish_reason == "length" and advance_bytes(START, text.encode()) is not None


def ask(client, **kw):
    return client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "a b"}], **kw)


def test_answers_are_json_objects(client):
    """Greedy and sampled (n=3), streamed and not: each choice is a JSON object (finish reason stop) or a prefix
    of one cut at max_tokens; the stream's deltas join to the non-streamed answer."""
    r = ask(client, response_format=JSON, temperature=0, max_tokens=60)
    text, reason = r.choices[0].message.content, r.choices[0].finish_reason
    assert _json_or_cut(text, reason), (text, reason)
    chunks = ask(client, response_format=JSON, temperature=0, max_tokens=60, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    r = ask(client, response_format=JSON, temperature=1.0, seed=3, n=3, max_tokens=80)
    assert all(_json_or_cut(c.message.content, c.finish_reason) for c in r.choices), r.choices
    free = ask(client, temperature=0, max_tokens=60).choices[0].message.content
    assert advance_bytes(START, free.encode()) is None  # unconstrained, the random model writes no JSON


def test_answers_follow_a_json_schema(client):
    """``response_format`` json_schema (OpenAI's structured outputs): every finished answer has the schema's
    properties in order with their types."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"},
                                               "sunny": {"type": "boolean"}},
              "required": ["city", "n", "sunny"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "weather", "schema": schema, "strict": True}}
    r = ask(client, response_format=fmt, temperature=1.0, seed=5, n=4, max_tokens=120,
            logit_bias={str(i): 5 for i in _closing_tokens()})
    finished = [c.message.content for c in r.choices if c.finish_reason == "stop"]
    assert finished, [c.message.content for c in r.choices]
    for text in finished:
        value = json.loads(text)
        assert list(value) == ["city", "n", "sunny"] and isinstance(value["city"], str), value
        assert type(value["n"]) is int and type(value["sunny"]) is bool, value


def _closing_tokens() -> list[int]:
    """The test tokenizer's ids of '"', ',' and '}' (favoured so that random answers end within the budget)."""
    from tritium.engine.tokenizer import Tokenizer
    tok = Tokenizer.from_hf_dir(_MODEL[0])
    return [i for i in range(tok.vocab_size) if tok.token_bytes(i) in (b'"', b",", b"}")]


def test_what_cannot_be_honoured_is_a_400(client):
    for kw, param in ((dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}),
                       "response_format"),  # the root must be an object
                      (dict(response_format={"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}),
                       "response_format"),  # no name
                      (dict(response_format={"type": "json_schema", "json_schema": {
                          "name": "x", "schema": {"type": "object", "properties": {"d": {"type": "string",
                                                                                        "format": "date"}}}}}),
                       "response_format"),  # a format JSON mode cannot enforce
                      (dict(response_format={"type": "json_object", "strict": True}), "response_format"),
                      (dict(response_format="json"), "response_format"),
                      (dict(response_format=JSON, tools=[WEATHER]), "response_format")):
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, **kw)
        assert e.value.body["param"] == param, kw
    r = ask(client, response_format={"type": "text"}, temperature=0, max_tokens=4)  # still serving; text is text
    assert r.choices[0].finish_reason in ("stop", "length")
