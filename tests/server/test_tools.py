"""Tool calls through the server, with the official ``openai`` client over the app in-process.

The model is made to call a tool: a tiny Llama whose attention and MLP outputs are zero, so each next token
depends on the last one only; orthonormal embeddings and an lm_head that maps token t to a chosen successor
make its greedy answer a fixed chain. Its template (hermes format, recognised from ``<tool_call>`` in it)
ends a prompt with ``go`` where tools are given, whose chain is a ``<tool_call>`` block; without tools, with
``w1``, whose chain is plain text; with ``thinking`` (or ``opened``: the prompt ends in ``<think>``) a
``<think>`` block comes first. Non-streamed and streamed answers give the same calls, content and
reasoning, ``finish_reason`` is ``tool_calls``, ``parallel_tool_calls: false`` keeps the first,
``tool_choice: none`` returns the text as written, the reasoning parser returns the block as
``reasoning_content``, and what cannot be honoured is a 400 naming the field.
"""

import json
import os

import pytest
import torch

from tritium.engine import AsyncLLMEngine, LLMEngine
from tritium.server import build_app

pytest.importorskip("fastapi", reason="needs the serve extra: pip install 'tritium[serve]'")
openai = pytest.importorskip("openai")
TestClient = pytest.importorskip("fastapi.testclient").TestClient
pytestmark = pytest.mark.timeout(120)

CALL = ['<tool_call>', '{"name":', '"get_weather",', '"arguments":', '{"city":', '"Paris"}}', '</tool_call>']
# a second block of other tokens (a token has one successor): '<tool_call>{"name":' is one word
SECOND = ['<tool_call>{"name":', '"get_time",', '"arguments":{}}</tool_call>']
ANSWER = ["Sure.", *CALL, "again", *SECOND]  # after "go", then </s>
THINK = ["<think>", "hmm", "</think>"]  # after "th" (or a prompt ending in <think>), then ANSWER
WORDS = ["<unk>", "<s>", "</s>", "go", "th", "w1", "w2", "w3", *ANSWER, *THINK]
TEMPLATE = ("{# hermes format: <tool_call> #}{% for m in messages %}{{ m.content }} {% endfor %}"
            "{% if tools %}{% if opened %}<think>{% elif thinking %}th{% else %}go{% endif %}{% else %}w1{% endif %}")
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
TIME = {"type": "function", "function": {"name": "get_time"}}


def _successors() -> dict[str, str]:
    chain, think = ["go", *ANSWER, "</s>"], ["th", *THINK, ANSWER[0]]
    return {**dict(zip(chain, chain[1:])), **dict(zip(think, think[1:])), "w1": "w2", "w2": "w3", "w3": "</s>"}


def make_chain_model(path: str, words=None, successors=None, template=TEMPLATE, specials=()) -> None:
    """A model whose greedy answer follows ``successors`` (token -> next token; default: the hermes chain
    above) over ``words``; ``specials``: more special (control) tokens."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    words = words or WORDS
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens(["<unk>", "<s>", "</s>", *specials])  # not in answers' text (unless asked for)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "chat_template": template}, f)
    hidden = 32
    config = transformers.LlamaConfig(vocab_size=len(words), hidden_size=hidden, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=128, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                      tie_word_embeddings=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).float().eval()
    embed = torch.linalg.qr(torch.randn(hidden, hidden))[0][:len(words)]  # orthonormal rows
    head = torch.zeros(len(words), hidden)
    for a, b in (successors or _successors()).items():
        head[vocab[b]] += 20 * embed[vocab[a]]
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(embed)
        model.lm_head.weight.copy_(head)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    model.save_pretrained(path, safe_serialization=True)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("chain-model"))
    make_chain_model(path)
    return path


def _client(path, **app_kw):
    engine = AsyncLLMEngine(LLMEngine(path, dtype=torch.float32, max_model_len=128))
    with TestClient(build_app(engine, model_name="chain", **app_kw)) as http:
        yield openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http, max_retries=0)


@pytest.fixture(scope="module")
def client(model_path):
    yield from _client(model_path)


@pytest.fixture(scope="module")
def thinking_client(model_path):
    yield from _client(model_path, reasoning_parser="think")


def ask(client, **kw):
    return client.chat.completions.create(model="chain", messages=[{"role": "user", "content": "w2"}],
                                          temperature=0, **kw)


def test_the_model_answers_its_chain(client):
    assert ask(client).choices[0].message.content == "w2 w3"
    r = ask(client, tools=[WEATHER], tool_choice="none")
    assert r.choices[0].message.content == " ".join(ANSWER) and r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason == "stop"


def _calls(calls) -> list:
    assert all(t.type == "function" and t.id.startswith("call_") for t in calls) and len({t.id for t in calls}) == len(calls)
    return [(t.function.name, json.loads(t.function.arguments)) for t in calls]


BOTH = [("get_weather", {"city": "Paris"}), ("get_time", {})]


@pytest.mark.parametrize("parallel", [None, False])
def test_calls_non_streamed_and_streamed(client, parallel):
    kw = dict(tools=[WEATHER, TIME]) if parallel is None else dict(tools=[WEATHER, TIME], parallel_tool_calls=parallel)
    want = BOTH if parallel is None else BOTH[:1]
    choice = ask(client, **kw).choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content.split() == ["Sure.", "again"]
    assert _calls(choice.message.tool_calls) == want
    chunks = list(ask(client, stream=True, **kw))
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    deltas = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
    assert content.split() == ["Sure.", "again"] and "tool_call" not in content
    assert _calls(deltas) == want and [t.index for t in deltas] == list(range(len(want)))
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])


def test_cut_off_inside_a_call(client):
    """max_tokens inside the second block: the first is a call, the second's text is not one and stays in
    the content as written; finish_reason stays length."""
    choice = ask(client, tools=[WEATHER, TIME], max_tokens=11).choices[0]
    assert choice.finish_reason == "length" and _calls(choice.message.tool_calls) == BOTH[:1]
    assert choice.message.content.split() == ["Sure.", "again", '<tool_call>{"name":', '"get_time",']
    chunks = list(ask(client, tools=[WEATHER, TIME], max_tokens=11, stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert content.split() == choice.message.content.split()
    assert chunks[-1].choices[0].finish_reason == "length"


def test_what_cannot_be_honoured_is_a_400(client):
    for kw, param in ((dict(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_time"}}),
                       "tool_choice"),
                      (dict(tool_choice="auto"), "tool_choice"),
                      (dict(tool_choice="required"), "tool_choice"),
                      (dict(tools=[{"type": "function", "function": {"name": "a b"}}]), "tools"),
                      (dict(tools=[WEATHER], parallel_tool_calls="yes"), "parallel_tool_calls")):
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, **kw)
        assert e.value.body["param"] == param, kw
    # a forced call is held to JSON by JSON mode, which this word-level tokenizer cannot write
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        with pytest.raises(openai.BadRequestError, match="lacks one-byte tokens"):
            ask(client, tools=[WEATHER], tool_choice=choice)
    assert ask(client).choices[0].message.content == "w2 w3"  # still serving


def test_a_template_without_a_known_format_needs_the_parser_named(tmp_path):
    """A model whose template shows no tool-call format: tools are a 400 naming --tool-call-parser, unless
    the server is told the format (then they are parsed)."""
    make_chain_model(str(tmp_path))
    with open(tmp_path / "tokenizer_config.json", "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "chat_template": TEMPLATE.split("#}", 1)[1]}, f)
    for parser in (None, "hermes"):
        engine = AsyncLLMEngine(LLMEngine(str(tmp_path), dtype=torch.float32, max_model_len=128))
        with TestClient(build_app(engine, model_name="chain", tool_parser=parser)) as http:
            client = openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http, max_retries=0)
            if parser is None:
                with pytest.raises(openai.BadRequestError, match="--tool-call-parser"):
                    ask(client, tools=[WEATHER])
                assert ask(client, tools=[WEATHER], tool_choice="none").choices[0].message.content == " ".join(ANSWER)
            else:
                assert _calls(ask(client, tools=[WEATHER, TIME]).choices[0].message.tool_calls) == BOTH
    with pytest.raises(ValueError, match="tool_parser must be one of hermes, llama3_json, mistral, pythonic or None"):
        build_app(engine, model_name="chain", tool_parser="xml")


def _streamed(chunks) -> tuple[str, str, list]:
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks)
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    return reasoning, content, [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]


@pytest.mark.parametrize("how", ["answer opens", "prompt opens"])
def test_reasoning_apart_from_content_and_calls(thinking_client, client, how):
    """With the reasoning parser, <think> ... </think> is reasoning_content whether the answer opens the block
    or the template (the prompt ends in <think>); the calls after it are parsed; streamed the same. Without
    the parser the block stays in the content, the calls are still parsed."""
    kw = dict(tools=[WEATHER, TIME], extra_body={"chat_template_kwargs": {
        "thinking": True} if how == "answer opens" else {"opened": True}})
    message = ask(thinking_client, **kw).choices[0].message
    assert message.reasoning_content.split() == ["hmm"] and message.content.split() == ["Sure.", "again"]
    assert _calls(message.tool_calls) == BOTH
    reasoning, content, calls = _streamed(list(ask(thinking_client, stream=True, **kw)))
    assert reasoning == message.reasoning_content and content.split() == ["Sure.", "again"]
    assert "think" not in content and _calls(calls) == BOTH
    plain = ask(client, **kw).choices[0].message
    assert getattr(plain, "reasoning_content", None) is None and _calls(plain.tool_calls) == BOTH
    want = (["<think>"] if how == "answer opens" else []) + ["hmm", "</think>", "Sure.", "again"]
    assert plain.content.split() == want


def test_reasoning_cut_off_and_absent(thinking_client):
    """Cut off while thinking: all reasoning, content null; an answer without a block: content only."""
    kw = dict(tools=[WEATHER], extra_body={"chat_template_kwargs": {"thinking": True}})
    choice = ask(thinking_client, max_tokens=2, **kw).choices[0]
    assert choice.finish_reason == "length" and choice.message.reasoning_content.split() == ["hmm"]
    assert choice.message.content is None and choice.message.tool_calls is None
    chunks = list(ask(thinking_client, max_tokens=2, stream=True, **kw))
    reasoning, content, calls = _streamed(chunks)
    assert reasoning.split() == ["hmm"] and content == "" and calls == []
    assert all(c.choices[0].delta.content is None for c in chunks)  # null, as not streamed: never ""
    message = ask(thinking_client).choices[0].message
    assert message.content == "w2 w3" and message.reasoning_content is None
    reasoning, content, _ = _streamed(list(ask(thinking_client, stream=True)))
    assert reasoning == "" and content == "w2 w3"


def test_several_choices_parse_each_their_own(thinking_client):
    """n=2 (one prompt, two choices; greedy so both are the same chain), streamed: each choice's reasoning,
    content and calls come whole under its own index."""
    kw = dict(tools=[WEATHER, TIME], n=2, extra_body={"chat_template_kwargs": {"thinking": True}})
    r = ask(thinking_client, **kw)
    assert [c.index for c in r.choices] == [0, 1]
    for c in r.choices:
        assert c.message.reasoning_content.split() == ["hmm"] and _calls(c.message.tool_calls) == BOTH
    chunks = list(ask(thinking_client, stream=True, **kw))
    for index in (0, 1):
        mine = [c for c in chunks if c.choices and c.choices[0].index == index]
        reasoning, content, calls = _streamed(mine)
        assert reasoning.split() == ["hmm"] and content.split() == ["Sure.", "again"] and _calls(calls) == BOTH
        assert [t.index for t in calls] == [0, 1] and mine[-1].choices[0].finish_reason == "tool_calls"


def test_skip_special_tokens(client):
    """vLLM's skip_special_tokens: false writes special tokens out (here the EOS the chain runs through with
    ignore_eos), but never the EOS that ends an answer; streamed the same."""
    r = ask(client, extra_body={"skip_special_tokens": False})
    assert r.choices[0].message.content == "w2 w3" and r.choices[0].finish_reason == "stop"
    kw = dict(max_tokens=5, extra_body={"ignore_eos": True})
    plain = ask(client, **kw).choices[0].message.content
    written = ask(client, **{**kw, "extra_body": {"ignore_eos": True, "skip_special_tokens": False}})
    words = written.choices[0].message.content.split()
    assert words[:3] == ["w2", "w3", "</s>"]  # greedy past the EOS: the same tokens, the special ones written
    assert [w for w in words if w not in ("<unk>", "<s>", "</s>")] == plain.split()
    chunks = list(ask(client, stream=True, **{**kw, "extra_body": {"ignore_eos": True, "skip_special_tokens": False}}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == written.choices[0].message.content


MISTRAL_CALL = ["Sure.", "[TOOL_CALLS]", "get_weather", "[ARGS]", '{"city":', '"Paris"}']  # after "go", then </s>


def test_mistral_v11_calls_in_control_tokens(tmp_path):
    """Mistral v11+ writes ``[TOOL_CALLS]name[ARGS]{...}`` in control tokens, which detokenizing drops: the
    server keeps them in the text of requests it parses for mistral calls, and the call comes back, streamed
    or not; without tools the answer's text is as ever (control tokens left out)."""
    words = ["<unk>", "<s>", "</s>", "go", "w1", "w2", "w3", *MISTRAL_CALL]
    chain = ["go", *MISTRAL_CALL, "</s>"]
    template = ("{# mistral format: [TOOL_CALLS] #}{% for m in messages %}{{ m.content }} {% endfor %}"
                "{% if tools %}go{% else %}w1{% endif %}")
    make_chain_model(str(tmp_path), words, {**dict(zip(chain, chain[1:])), "w1": "w2", "w2": "w3", "w3": "</s>"},
                     template, specials=["[TOOL_CALLS]", "[ARGS]"])
    for client in _client(str(tmp_path)):
        choice = ask(client, tools=[WEATHER]).choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content == "Sure."
        assert [(t.function.name, json.loads(t.function.arguments)) for t in choice.message.tool_calls] == \
            [("get_weather", {"city": "Paris"})] and len(choice.message.tool_calls[0].id) == 9
        _, content, deltas = _streamed(list(ask(client, tools=[WEATHER], stream=True)))
        assert content.strip() == "Sure." and [t.function.name for t in deltas] == ["get_weather"]
        assert ask(client).choices[0].message.content == "w2 w3"
        # tool_choice none: not parsed, the control tokens left out of the text as with any request
        plain = ask(client, tools=[WEATHER], tool_choice="none").choices[0].message.content
        assert plain.split() == ["Sure.", "get_weather", '{"city":', '"Paris"}'], plain


def test_a_call_only_answer_has_null_content(tmp_path):
    """An answer that is one call and nothing else: content null, streamed too (every delta's content null, as
    OpenAI streams calls: a client that joins the deltas ends with null, not ""); an empty answer (cut by a
    stop string at once) is "" both ways."""
    chain = ["go", *CALL, "</s>"]
    make_chain_model(str(tmp_path), successors={**dict(zip(chain, chain[1:])), "w1": "w2", "w2": "w3", "w3": "</s>"})
    for client in _client(str(tmp_path)):
        choice = ask(client, tools=[WEATHER]).choices[0]
        assert choice.message.content is None and choice.finish_reason == "tool_calls"
        assert _calls(choice.message.tool_calls) == BOTH[:1]
        chunks = list(ask(client, tools=[WEATHER], stream=True))
        assert chunks[0].choices[0].delta.role == "assistant" and chunks[-1].choices[0].finish_reason == "tool_calls"
        assert all(c.choices[0].delta.content is None for c in chunks), [c.choices[0].delta for c in chunks]
        assert _calls(_streamed(chunks)[2]) == BOTH[:1]
        empty = ask(client, tools=[WEATHER], stop=["<tool_call>"]).choices[0]
        assert empty.message.content == "" and empty.message.tool_calls is None
        contents = [c.choices[0].delta.content for c in ask(client, tools=[WEATHER], stop=["<tool_call>"], stream=True)]
        assert "" in contents and not any(contents), contents
        plain = list(ask(client, stream=True))  # no tools: the role chunk's content "", as OpenAI's
        assert plain[0].choices[0].delta.content == "" and _streamed(plain)[1] == "w2 w3"
