"""The Responses API (``/v1/responses``) with the official ``openai`` client over the app in-process.

The model is test_tools' chain model: its greedy answer is a fixed chain of words, a ``<tool_call>`` block
where tools are given, a ``<think>`` block first with ``thinking``. Checked: the output items (text, calls in
the order written, reasoning), streamed events (strictly ordered, accumulated by the client's own stream
helper to the same items as the non-streamed response), usage against the chat endpoint's and ``/tokenize``
(so ``instructions`` and ``previous_response_id`` reach the prompt as they should), the store (get, input items,
delete, ``store: false``, its bound; on disk: read back by a restarted server, locked, damaged files and
failed writes), cut-off answers, logprobs, and a 400 naming the Responses field for what
cannot be honoured.
"""

import json
import os

import pytest
import torch

from server.test_tools import ANSWER, WORDS, make_chain_model
from tritium.engine import AsyncLLMEngine, LLMEngine
from tritium.server import build_app

pytest.importorskip("fastapi", reason="needs the serve extra: pip install 'tritium[serve]'")
openai = pytest.importorskip("openai")
TestClient = pytest.importorskip("fastapi.testclient").TestClient
pytestmark = pytest.mark.timeout(180)

WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
TIME = {"type": "function", "name": "get_time"}
BOTH = [("get_weather", {"city": "Paris"}), ("get_time", {})]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("chain-model"))
    make_chain_model(path)
    engine = AsyncLLMEngine(LLMEngine(path, dtype=torch.float32, max_model_len=128))
    with TestClient(build_app(engine, model_name="chain", reasoning_parser="think", max_stored_responses=4)) as http:
        yield http


@pytest.fixture(scope="module")
def client(app):
    return openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=app, max_retries=0)


def create(client, **kw):
    kw.setdefault("temperature", 0)
    return client.responses.create(model="chain", input=kw.pop("input", "w2"), **kw)


def _items(response) -> list:
    """(type, what) of each output item: a message's text, a call's name and arguments, the reasoning."""
    out = []
    for item in response.output:
        if item.type == "message":
            assert [p.type for p in item.content] == ["output_text"]
            out.append(("message", item.content[0].text.strip()))
        elif item.type == "function_call":
            assert item.call_id.startswith("call_") and item.id.startswith("fc_")
            out.append(("function_call", (item.name, json.loads(item.arguments))))
        else:
            out.append((item.type, " ".join(c.text for c in item.content).strip()))
    return out


def _tokens(app, messages, **kw) -> int:
    r = app.post("/tokenize", json={"model": "chain", "messages": messages, **kw})
    assert r.status_code == 200, r.text
    return r.json()["count"]


def test_text_streamed_and_not(app, client):
    """A plain answer: one message; the stream's events are numbered 0.. in order, their deltas make the text,
    the client's accumulating helper agrees, and the response is kept as returned."""
    r = create(client)
    assert r.status == "completed" and r.output_text == "w2 w3" and _items(r) == [("message", "w2 w3")]
    assert r.output[0].status == "completed" and r.output[0].role == "assistant" and r.id.startswith("resp_")
    chat = client.chat.completions.create(model="chain", messages=[{"role": "user", "content": "w2"}], temperature=0)
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (
        chat.usage.prompt_tokens, chat.usage.completion_tokens, chat.usage.total_tokens)
    assert r.usage.output_tokens_details.reasoning_tokens == 0
    # every field openai-python's ResponseUsage requires (the client builds its objects without checking)
    from openai.types.responses import ResponseUsage
    usage = ResponseUsage.model_validate(r.usage.model_dump(exclude_unset=True))
    assert usage.input_tokens_details.cache_write_tokens == 0
    events = list(create(client, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events] == ["response.created", "response.in_progress", "response.output_item.added",
                                        "response.content_part.added", *["response.output_text.delta"] * (
                                            len(events) - 8), "response.output_text.done",
                                        "response.content_part.done", "response.output_item.done",
                                        "response.completed"]
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert text == "w2 w3" == final.output_text and events[-4].text == text and final.usage == r.usage
    ResponseUsage.model_validate(final.usage.model_dump(exclude_unset=True))
    with client.responses.stream(model="chain", input="w2", temperature=0) as stream:
        accumulated = stream.get_final_response()
    assert _items(accumulated) == _items(r)
    assert client.responses.retrieve(final.id).model_dump() == final.model_dump()


def test_calls_in_the_order_written(client):
    """With tools the answer is text, a call, text, a call: four items in that order, streamed the same;
    parallel_tool_calls false keeps the first call."""
    want = [("message", "Sure."), ("function_call", BOTH[0]), ("message", "again"), ("function_call", BOTH[1])]
    r = create(client, tools=[WEATHER, TIME])
    assert _items(r) == want and r.status == "completed" and [t.name for t in r.tools] == ["get_weather", "get_time"]
    with client.responses.stream(model="chain", input="w2", temperature=0, tools=[WEATHER, TIME]) as stream:
        events = list(stream)
        streamed = stream.get_final_response()
    assert _items(streamed) == want
    args = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [(e.name, json.loads(e.arguments)) for e in args] == BOTH
    assert _items(create(client, tools=[WEATHER, TIME], parallel_tool_calls=False)) == [
        ("message", "Sure."), ("function_call", BOTH[0]), ("message", "again")]
    assert _items(create(client, tools=[WEATHER], tool_choice="none")) == [("message", " ".join(ANSWER))]


def test_previous_response_and_instructions_reach_the_prompt(app, client):
    """A tool loop: the calls' outputs sent with previous_response_id continue the conversation, which the
    prompt holds whole (its token count is /tokenize's of the same chat conversation); the first response's
    instructions are not carried over, the new ones are."""
    first = create(client, tools=[WEATHER, TIME], instructions="w1")
    calls = [item for item in first.output if item.type == "function_call"]
    outputs = [{"type": "function_call_output", "call_id": c.call_id, "output": "w3"} for c in calls]
    second = create(client, previous_response_id=first.id, input=outputs, instructions="w3")
    history = [{"role": "user", "content": "w2"},
               {"role": "assistant", "content": first.output[0].content[0].text + first.output[2].content[0].text,
                "tool_calls": [{"id": c.call_id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}} for c in calls]},
               *[{"role": "tool", "tool_call_id": c.call_id, "content": "w3"} for c in calls]]
    assert first.usage.input_tokens == _tokens(app, [{"role": "system", "content": "w1"}, history[0]],
                                               tools=[{"type": "function", "function": {"name": t["name"]}}
                                                      for t in (WEATHER, TIME)])
    assert second.usage.input_tokens == _tokens(app, [{"role": "system", "content": "w3"}, *history])
    assert second.previous_response_id == first.id and second.output_text == "w2 w3"
    items = client.responses.input_items.list(second.id, order="asc")
    assert [(i.type, i.call_id, i.output) for i in items.data] == [("function_call_output", c.call_id, "w3")
                                                                   for c in calls]
    # the items sent back by hand give the same prompt as previous_response_id
    by_hand = create(client, instructions="w3", input=[{"role": "user", "content": "w2"},
                                                       *[i.model_dump() for i in first.output], *outputs])
    assert by_hand.usage.input_tokens == second.usage.input_tokens


def test_reasoning_item_and_cut_off(client):
    """With the reasoning parser the <think> block is a reasoning item before the message and the calls, its
    tokens counted; cut off by max_output_tokens the response is incomplete, its open item too."""
    kw = dict(tools=[WEATHER, TIME], extra_body={"chat_template_kwargs": {"thinking": True}})
    r = create(client, **kw)
    assert [t for t, _ in _items(r)] == ["reasoning", "message", "function_call", "message", "function_call"]
    assert _items(r)[0] == ("reasoning", "hmm") and r.usage.output_tokens_details.reasoning_tokens == 1
    with client.responses.stream(model="chain", input="w2", temperature=0, **kw) as stream:
        kinds = [e.type for e in stream]
        assert _items(stream.get_final_response()) == _items(r)
    assert "response.reasoning_text.delta" in kinds and "response.reasoning_text.done" in kinds
    cut = create(client, max_output_tokens=2, **kw)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    assert _items(cut) == [("reasoning", "hmm")] and cut.output[0].status == "incomplete"
    events = list(create(client, max_output_tokens=2, stream=True, **kw))
    assert events[-1].type == "response.incomplete" and _items(events[-1].response) == _items(cut)


def test_truncation_auto_and_counting_input_tokens(app, client):
    """A chained conversation past the context is a 400 (truncation disabled, the default) or, with truncation
    auto, answered from its last turns (the oldest dropped); input_tokens counts a request's prompt as a
    response's usage does, past the context too."""
    long = "w2 " * 50  # 50 tokens: two turns fit the 128-token context, three do not
    first = create(client, input=long)
    second = create(client, previous_response_id=first.id, input=long)
    with pytest.raises(openai.BadRequestError) as e:
        create(client, previous_response_id=second.id, input=long)
    assert (e.value.body["param"], e.value.body["code"]) == ("input", "context_length_exceeded")
    third = create(client, previous_response_id=second.id, input=long, truncation="auto")
    last_two = [{"role": "user", "content": long}, {"role": "assistant", "content": second.output_text},
                {"role": "user", "content": long}]
    assert third.truncation == "auto" and third.output_text == "w2 w3"
    assert third.usage.input_tokens == _tokens(app, last_two) == second.usage.input_tokens
    whole = [{"role": "user", "content": long}, {"role": "assistant", "content": first.output_text}, *last_two]
    counted = client.responses.input_tokens.count(model="chain", previous_response_id=second.id, input=long)
    assert counted.object == "response.input_tokens" and counted.input_tokens == _tokens(app, whole) > 128
    counted = client.responses.input_tokens.count(model="chain", input="w2", instructions="w1", tools=[WEATHER])
    asked = [{"role": "system", "content": "w1"}, {"role": "user", "content": "w2"}]
    tools = [{"type": "function", "function": {"name": "get_weather"}}]
    assert counted.input_tokens == _tokens(app, asked, tools=tools)
    with pytest.raises(openai.BadRequestError) as e:  # one turn longer than the context: nothing to drop
        create(client, input="w2 " * 200, truncation="auto")
    assert e.value.body["code"] == "context_length_exceeded"


def test_logprobs(client):
    r = create(client, include=["message.output_text.logprobs"], top_logprobs=2)
    logprobs = r.output[0].content[0].logprobs
    assert [lp.token for lp in logprobs[:2]] == ["w2", "w3"] and all(len(lp.top_logprobs) == 2 for lp in logprobs)
    assert all(lp.logprob <= 0 for lp in logprobs) and logprobs[0].top_logprobs[0].token == "w2"
    assert create(client).output[0].content[0].logprobs == []


def test_logprobs_of_text_held_back(tmp_path):
    """A token whose text the chat stream holds back (here "<": it may open a <think> block, or a call) has its
    log-probability in the text's, streamed or not, with the reasoning parser and the tool-call parser."""
    make_chain_model(str(tmp_path), words=[*WORDS, "<"], successors={"w1": "<", "go": "<", "<": "w2", "w2": "</s>"})
    engine = AsyncLLMEngine(LLMEngine(str(tmp_path), dtype=torch.float32, max_model_len=128))
    with TestClient(build_app(engine, model_name="chain", reasoning_parser="think")) as http:
        client = openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http, max_retries=0)
        for tools in ([], [TIME]):
            for stream in (False, True):
                r = create(client, include=["message.output_text.logprobs"], tools=tools, stream=stream)
                r = list(r)[-1].response if stream else r
                assert r.output_text == "< w2"
                assert [lp.token for lp in r.output[0].content[0].logprobs] == ["<", "w2"], (tools, stream)


def test_held_logprobs_go_with_what_the_tokens_became():
    """Log-probabilities held back with their text go to the next output text, not where the tokens became a
    call, or ended a reasoning block (its end and the blank space after it are not in the text)."""
    from tritium.server.responses import ResponseWriter

    def chunk(delta, *tokens):
        return {"choices": [{"index": 0, "delta": delta, "logprobs": {"content": [{"token": t} for t in tokens]}}]}

    writer = ResponseWriter({"id": "resp_1", "status": "in_progress", "output": []}, lambda text: 0, logprobs=True)
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    for c in [chunk({"content": ""}, "<think>"), chunk({"reasoning_content": "hmm"}, "hmm"),
              chunk({"content": ""}, "</think>"), chunk({"content": ""}, "\n"), chunk({"content": "Sure."}, "Sure."),
              chunk({"content": ""}, "<tool_call>"), chunk({"tool_calls": [call]}, "</tool_call>"),
              chunk({"content": ""}, " <"), chunk({"content": " <b"}, "b")]:
        writer.feed(c)
    writer.finish()
    output = writer.response["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call", "message"]
    assert [[lp["token"] for lp in item["content"][0]["logprobs"]] for item in (output[1], output[3])] == [
        ["Sure."], [" <", "b"]]


def test_the_store(app, client):
    """Kept responses are retrieved, listed and deleted; store false keeps nothing; the store keeps the most
    recently used (4 here)."""
    items = [{"role": "user", "content": "w2"}, {"type": "message", "role": "developer",
                                                 "content": [{"type": "input_text", "text": "w3"}]}]
    r = create(client, input=items, metadata={"k": "v"})
    assert r.metadata == {"k": "v"}
    page = client.responses.input_items.list(r.id)
    assert [i.role for i in page.data] == ["developer", "user"] and not page.has_more
    page = client.responses.input_items.list(r.id, order="asc", limit=1)
    assert [i.role for i in page.data] == ["user"] and page.has_more
    after = client.responses.input_items.list(r.id, order="asc", after=page.data[0].id)
    assert [i.role for i in after.data] == ["developer"] and not after.has_more
    client.responses.delete(r.id)
    for call in (lambda: client.responses.retrieve(r.id), lambda: client.responses.input_items.list(r.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    unkept = create(client, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unkept.id)
    with pytest.raises(openai.BadRequestError) as e:
        create(client, previous_response_id=unkept.id, input="w2")
    assert e.value.body["param"] == "previous_response_id"
    kept = [create(client).id for _ in range(5)]
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(kept[0])
    assert [client.responses.retrieve(k).id for k in kept[1:]] == kept[1:]
    assert app.get("/v1/responses/nope?stream=true").status_code == 400


@pytest.mark.parametrize("kw,param", [
    (dict(tools=[{"type": "web_search"}]), "tools"),
    (dict(tools=[{"type": "function", "name": "a b"}]), "tools"),
    (dict(input=[{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]), "input"),
    (dict(input=[{"type": "item_reference", "id": "msg_1"}]), "input"),
    (dict(input=[{"role": "tool", "content": "x"}]), "input"),
    (dict(input=[]), "input"),
    (dict(max_output_tokens=0), "max_output_tokens"),
    (dict(text={"format": {"type": "xml"}}), "text.format"),
    (dict(text={"format": {"type": "json_object"}}), "text.format"),  # this tokenizer cannot write JSON
    (dict(text={"format": {"type": "json_schema", "name": "x"}}), "text.format.schema"),
    (dict(text={"format": {"type": "json_schema", "schema": {"type": "object"}}}), "text.format.name"),
    (dict(input=[{"type": "function_call_output", "call_id": "nope", "output": "x"}]), "input"),
    (dict(input=[{"type": "function_call_output", "call_id": "c", "output": "x"},
                 {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]), "input"),
    (dict(tool_choice={"type": "function", "name": "get_time"}, tools=[WEATHER]), "tool_choice"),
    (dict(input="w2 " * 200), "input"),
    (dict(temperature=-1), "temperature"),
    (dict(extra_body={"background": True}), "background"),
    (dict(extra_body={"truncation": "middle"}), "truncation"),
    (dict(extra_body={"reasoning": {"effort": "high"}}), "reasoning"),
    (dict(extra_body={"include": ["nope"]}), "include"),
    (dict(extra_body={"n": 2}), "n"),
])
def test_what_cannot_be_honoured_is_a_400(client, kw, param):
    with pytest.raises(openai.BadRequestError) as e:
        create(client, **kw)
    assert e.value.body["param"] == param, e.value.body
    if param == "max_output_tokens" or param == "input" and "w2 w2" in str(kw):
        assert "max_output_tokens" in e.value.message or "input" in e.value.message
    assert create(client).output_text == "w2 w3"  # still serving


def test_reasoning_items_sent_back():
    """Reasoning items sent back are kept (so checked: their summary and content are lists of text parts) but not
    rendered: with nothing else (no message, instructions or previous response) the 400 says so, instead of
    chat's renamed "input must be a non-empty list of input"."""
    from tritium.server.errors import APIError
    from tritium.server.responses import ResponseStore, parse_responses

    reasoning = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]}
    with pytest.raises(APIError) as e:
        parse_responses({"input": [reasoning]}, ResponseStore(), "chain")
    assert e.value.param == "input" and "reasoning items only" in e.value.message
    parsed = parse_responses({"input": [reasoning], "instructions": "w1"}, ResponseStore(), "chain")
    assert parsed.chat["messages"] == [{"role": "system", "content": "w1"}] and parsed.items[0]["type"] == "reasoning"
    for bad in ({"summary": 5}, {"summary": [{"type": "summary_text"}]}, {"content": [{"type": "output_text",
                                                                                      "text": "x"}]}):
        with pytest.raises(APIError) as e:
            parse_responses({"input": [{**reasoning, **bad}, {"role": "user", "content": "w2"}]}, ResponseStore(),
                            "chain")
        assert e.value.param == "input" and e.value.message.startswith(f"input[0].{next(iter(bad))} must be a list")


def test_items_as_a_chat_conversation():
    """What the prompt is rendered from: the assistant's text and calls in a row are one turn, as chat returns
    an answer; outputs are tool messages; reasoning is left out; a developer message is a system one."""
    from tritium.server.responses import conversation, input_items

    items = input_items([{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"},
                         {"type": "reasoning", "summary": []},
                         {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
                         {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                         {"role": "assistant", "content": [{"type": "refusal", "refusal": "b"}]},
                         {"type": "function_call", "call_id": "c2", "name": "g", "arguments": '{"x":1}'},
                         {"type": "function_call_output", "call_id": "c1", "output": "one"},
                         {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text",
                                                                                      "text": "two"}]},
                         {"type": "function_call", "call_id": "c3", "name": "f", "arguments": "{}"}])
    assert len({i["id"] for i in items}) == len(items)
    calls = [{"id": c, "type": "function", "function": {"name": n, "arguments": a}}
             for c, n, a in (("c1", "f", "{}"), ("c2", "g", '{"x":1}'), ("c3", "f", "{}"))]
    assert conversation(items) == [
        {"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ab", "tool_calls": calls[:2]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "assistant", "content": None, "tool_calls": calls[2:]}]
    # one message's text parts joined by newlines, as a chat message's (and vLLM's)
    parts = [{"type": "input_text", "text": "x"}, {"type": "input_text", "text": "y"}]
    assert conversation(input_items([{"role": "user", "content": parts}])) == [{"role": "user", "content": "x\ny"}]


def test_a_failed_stream_ends_in_response_failed():
    """An error after the answer began (the engine stopped): the open item ends incomplete, the response
    failed with the error's code and message, the events still numbered in order."""
    from tritium.server.errors import APIError
    from tritium.server.responses import ResponseWriter

    writer = ResponseWriter({"id": "resp_1", "status": "in_progress", "output": []}, lambda text: 0)
    events = writer.start() + writer.feed({"choices": [{"index": 0, "delta": {"content": "half"}}]})
    events += writer.fail(APIError(503, "the engine stopped", type="server_error", code="engine_stopped"))
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[-3:]] == ["response.content_part.done", "response.output_item.done",
                                                "response.failed"]
    response = events[-1]["response"]
    assert response["status"] == "failed" and response["error"] == {"code": "engine_stopped",
                                                                    "message": "the engine stopped"}
    assert response["output"][0]["status"] == "incomplete" and response["output"][0]["content"][0]["text"] == "half"
    assert events[2]["item"]["content"] == [] and writer.done and writer.error.status == 503


def test_truncation_drops_whole_oldest_turns():
    """Each drop takes the oldest turn (up to the second user message), keeping the instructions and the
    leading developer messages, in the prompt and in what is kept alike; the last user turn is never dropped."""
    from tritium.server.responses import ResponseStore, drop_oldest_turn, parse_responses

    items = [{"role": "developer", "content": "d"}, {"role": "user", "content": "u1"},
             {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"},
             {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c", "output": "o"}, {"role": "user", "content": "u3"}]
    parsed = parse_responses({"input": items, "instructions": "i", "truncation": "auto"}, ResponseStore(), "m")
    assert parsed.truncate and drop_oldest_turn(parsed)
    assert [m["content"] for m in parsed.chat["messages"]] == ["i", "d", "u2", None, "o", "u3"]
    assert drop_oldest_turn(parsed) and [m["content"] for m in parsed.messages] == ["d", "u3"]
    assert not drop_oldest_turn(parsed) and [m["content"] for m in parsed.chat["messages"]] == ["i", "d", "u3"]


def _stored(text: str, pad: int = 0):
    from tritium.server.responses import Stored, _id

    return Stored({"id": _id("resp"), "object": "response", "output": [{"text": text + "x" * pad}]},
                  [{"type": "message", "role": "user", "content": text}], [{"role": "user", "content": text}])


def _files(path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.endswith(".json"))


def test_a_store_on_disk_outlives_its_process(tmp_path):
    """With a directory: each kept response is a file of this user only, read back by the next store in the order
    of last use (a get counts), within the new store's bounds (the least recently used beyond them are
    deleted, file and all); deleted and evicted responses leave no file."""
    from tritium.server.responses import ResponseStore

    path = tmp_path / "kept"
    store = ResponseStore(4, directory=path)
    assert store.directory == str(path) and (path.stat().st_mode & 0o777) == 0o700
    kept = [_stored(f"r{i}") for i in range(5)]
    for s in kept:
        assert store.put(s)
    assert _files(path) == sorted(f"{s.response['id']}.json" for s in kept[1:])  # r0 evicted
    assert all((path / f).stat().st_mode & 0o777 == 0o600 for f in _files(path))
    assert store.get(kept[1].response["id"]) is kept[1]  # r1 now the most recently used
    assert store.delete(kept[2].response["id"]) and not (path / f"{kept[2].response['id']}.json").exists()
    store.close()

    again = ResponseStore(2, directory=path)  # r3 was used least recently of r1, r3, r4
    assert list(again.entries) == [kept[4].response["id"], kept[1].response["id"]]
    assert _files(path) == sorted(f"{s.response['id']}.json" for s in (kept[1], kept[4]))
    back = again.get(kept[1].response["id"])
    assert (back.response, back.items, back.messages) == (kept[1].response, kept[1].items, kept[1].messages)
    assert again.bytes == sum(s.size for s in again.entries.values()) and not again.unreadable
    again.close()


def test_one_store_a_directory_and_clear_errors(tmp_path):
    """A second store on a directory in use is refused by name (so is a path that cannot be a directory); a
    closed store releases it, and the CLI's check says the same before a model loads."""
    from tritium.server.responses import ResponseStore, check_responses_dir

    store = ResponseStore(directory=tmp_path / "d")
    for opening in (lambda: ResponseStore(directory=tmp_path / "d", name="responses_dir"),
                    lambda: check_responses_dir(tmp_path / "d", "--responses-dir")):
        with pytest.raises(ValueError, match=r"(responses_dir|--responses-dir): .* is in use by another server"):
            opening()
    store.close()
    check_responses_dir(tmp_path / "d", "--responses-dir")
    ResponseStore(directory=tmp_path / "d").close()
    (tmp_path / "f").write_text("a file")
    with pytest.raises(ValueError, match="--responses-dir: .*cannot hold the stored responses"):
        check_responses_dir(tmp_path / "f", "--responses-dir")
    with pytest.raises(ValueError, match="directory must be a path"):
        ResponseStore(directory="")


def test_unreadable_files_and_failed_writes_lose_nothing_else(tmp_path, monkeypatch, caplog):
    """A damaged or foreign file is left where it is and named in a warning, the others read back; a write cut
    short leaves no partial file (a leftover one is removed at opening); a write that fails (disk full) keeps the
    response in memory and the request goes on."""
    import errno

    from tritium.server import responses

    store = responses.ResponseStore(directory=tmp_path)
    good = _stored("good")
    store.put(good)
    store.close()
    damaged = tmp_path / ("resp_" + "a" * 32 + ".json")
    damaged.write_text('{"response": {"id": "resp_')
    misnamed = tmp_path / ("resp_" + "b" * 32 + ".json")
    misnamed.write_text(json.dumps({"response": {"id": "resp_other"}, "items": [], "messages": []}))
    (tmp_path / "notes.txt").write_text("not ours")
    (tmp_path / (good.response["id"] + ".json.123.tmp")).write_text("{")
    with caplog.at_level("WARNING", logger="tritium.server.responses"):
        store = responses.ResponseStore(directory=tmp_path)
    assert list(store.entries) == [good.response["id"]]
    assert sorted(store.unreadable) == sorted([str(damaged), str(misnamed)])
    assert str(damaged) in caplog.text and str(misnamed) in caplog.text
    assert damaged.exists() and (tmp_path / "notes.txt").exists() and not list(tmp_path.glob("*.tmp"))

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(responses.os, "replace", full)
    late = _stored("late")
    with caplog.at_level("WARNING", logger="tritium.server.responses"):
        assert store.put(late)
    assert store.get(late.response["id"]) is late and "kept in memory only" in caplog.text
    assert not (tmp_path / f"{late.response['id']}.json").exists() and not list(tmp_path.glob("*.tmp"))
    store.close()


def test_a_restarted_server_continues_a_stored_response(tmp_path):
    """``responses_dir``: a response kept by one server is retrieved, listed and continued with
    ``previous_response_id`` by the next server on the directory, and its prompt is the same as on the first."""
    model = str(tmp_path / "model")
    os.makedirs(model)
    make_chain_model(model)
    kept = str(tmp_path / "responses")

    def serve():
        engine = AsyncLLMEngine(LLMEngine(model, dtype=torch.float32, max_model_len=128))
        return TestClient(build_app(engine, model_name="chain", responses_dir=kept))

    with serve() as first:
        client = openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=first, max_retries=0)
        r = create(client, input="w2")
        follow = create(client, input="w3", previous_response_id=r.id)
        with pytest.raises(ValueError, match="responses_dir: .* is in use"):
            build_app(AsyncLLMEngine(LLMEngine(model, dtype=torch.float32, max_model_len=128)), model_name="chain",
                      responses_dir=kept)
        first.app.state.server.stored.close()
    with serve() as second:
        client = openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=second, max_retries=0)
        back = client.responses.retrieve(r.id)
        assert back.model_dump() == r.model_dump()
        assert [i.role for i in client.responses.input_items.list(r.id).data] == ["user"]
        again = create(client, input="w3", previous_response_id=r.id)
        assert again.usage.input_tokens == follow.usage.input_tokens
        assert _items(again) == _items(follow)
        missing = second.get("/v1/responses/resp_" + "0" * 32)
        assert missing.status_code == 404 and kept in missing.json()["error"]["message"]
        second.app.state.server.stored.close()

