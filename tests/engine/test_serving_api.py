"""What the server builds on, without HTTP: ``LLM.chat``, ``LLM.generate_stream``, penalties and logprobs in
``SamplingParams``, and :class:`AsyncLLMEngine` (a background thread stepping the engine, a stream per request,
aborts that free pages, the bounded queue, shutdown)."""

import asyncio
import functools
import time

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine import AsyncLLMEngine, EngineStoppedError, QueueFullError, RequestTooLargeError
from tritium.engine.chat import encode_chat, normalize_messages
from tritium.engine.sampling import apply_penalties, sample, token_logprobs

from .conftest import HANG_BOUND_S, PROMPTS

pytestmark = pytest.mark.timeout(HANG_BOUND_S)


@pytest.fixture(scope="module")
def llm(tiny_models):
    path, _ = tiny_models["llama"]
    return LLM(path, dtype=torch.float32, max_model_len=128)


def _all_pages_free(llm) -> bool:
    blocks = llm.engine.block_manager
    return blocks.num_free_blocks == blocks.num_blocks and llm.engine.kv_cache_usage == 0.0


# -- chat and streaming in the Python API ------------------------------------------------------------------------
def test_chat_one_conversation_or_many(llm):
    a = [{"role": "system", "content": "w1"}, {"role": "user", "content": "w2 w3"}]
    b = [{"role": "user", "content": [{"type": "text", "text": "w4"}, {"type": "text", "text": "w5"}]}]
    params = SamplingParams(max_tokens=6)
    # a chat answer's text stands alone (continuation=False); generate() continues the prompt's text
    alone = SamplingParams(max_tokens=6, continuation=False)
    want = llm.generate([encode_chat(llm.tokenizer, a), encode_chat(llm.tokenizer, b)], alone)
    assert [o.text for o in llm.chat(a, params)] == [want[0].text]
    continued = llm.generate([encode_chat(llm.tokenizer, a)], params)[0]
    assert continued.token_ids == want[0].token_ids and continued.text.lstrip(" ") == want[0].text
    assert [o.text for o in llm.chat([a, b], params)] == [o.text for o in want]
    assert normalize_messages(b) == [{"role": "user", "content": "w4\nw5"}]  # parts joined by newlines, as vLLM
    assert normalize_messages([{"role": "developer", "content": "x"}])[0]["role"] == "system"


def test_chat_continues_the_final_message(llm, monkeypatch):
    """continue_final_message: the prompt is the conversation cut right after the last (assistant) message's
    text, so the answer continues it; add_generation_prompt=False leaves out the generation prompt."""
    # w1 / w2 open a user / assistant turn, w9 closes a turn
    monkeypatch.setattr(llm.tokenizer, "chat_template", "{% for m in messages %}{{ m['role'] == 'user' and 'w1' or "
                        "'w2' }} {{ m['content'] | trim }} w9 {% endfor %}{% if add_generation_prompt %}w2 {% endif %}")
    conv = [{"role": "user", "content": "w3"}, {"role": "assistant", "content": "w4 w5 "}]
    enc = functools.partial(llm.tokenizer.encode, add_special_tokens=False)
    assert encode_chat(llm.tokenizer, conv, add_generation_prompt=False, continue_final_message=True) == enc(
        "w1 w3 w9 w2 w4 w5")
    assert encode_chat(llm.tokenizer, conv, add_generation_prompt=False) == enc("w1 w3 w9 w2 w4 w5 w9")
    assert encode_chat(llm.tokenizer, conv) == enc("w1 w3 w9 w2 w4 w5 w9 w2")
    params = SamplingParams(max_tokens=5)
    out = llm.chat(conv, params, continue_final_message=True)[0]  # add_generation_prompt defaults to False then
    assert out.prompt_token_ids == enc("w1 w3 w9 w2 w4 w5")
    assert out.text == llm.generate([enc("w1 w3 w9 w2 w4 w5")], params)[0].text
    with pytest.raises(ValueError, match="cannot both be true"):
        llm.chat(conv, params, continue_final_message=True, add_generation_prompt=True)
    with pytest.raises(ValueError, match=r"messages\[0\].role must be 'assistant' to be continued"):
        llm.chat(conv[:1], params, continue_final_message=True)
    with pytest.raises(ValueError, match="continue_final_message must be true or false"):
        encode_chat(llm.tokenizer, conv, continue_final_message="yes")
    monkeypatch.setattr(llm.tokenizer, "chat_template", "{% for m in messages %}{{ m['role'] }} {% endfor %}")
    with pytest.raises(ValueError, match="does not write the last assistant message's text"):
        llm.chat(conv, params, continue_final_message=True)


@pytest.mark.parametrize("messages, message", [
    ([], "messages must be a non-empty list of messages"),
    ([{"role": "robot", "content": "hi"}], r"messages\[0\].role must be one of system, user, assistant, tool, got 'robot'"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": 5}],
     r"messages\[1\].content must be a string or a list of text parts, got 5"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
     r"messages\[0\].content\[0\] must be a text part .* got type 'image_url'"),
    ([{"role": "user", "content": [{"type": "text"}]}],
     r"messages\[0\].content\[0\] is a text part whose 'text' must be a string, got None"),
    ([{"role": "user", "content": "a", "tool_calls": []}], r"messages\[0\].tool_calls is not supported on a user message"),
    (["hello"], r"messages\[0\] must be a non-empty list of messages, got 'hello'"),
    ([{"role": "user", "content": "a", "name": {"a": 1}}], r"messages\[0\].name must be a string, got"),
], ids=["empty", "role", "content-type", "image", "text-missing", "tool_calls", "string", "name"])
def test_chat_errors_name_the_field(llm, messages, message):
    with pytest.raises(ValueError, match=message):
        llm.chat(messages, SamplingParams(max_tokens=2)) if messages else normalize_messages(messages)


@pytest.mark.parametrize("kwargs, message", [
    ([("enable_thinking", False)], "chat_template_kwargs must be an object of template variables, got list"),
    ({"bos_token": "x"}, "chat_template_kwargs: 'bos_token' is set by the server"),
    ({"strftime_now": "x"}, "chat_template_kwargs: 'strftime_now' is set by the server"),  # (the date function)
    ({"tools": 5}, "chat_template_kwargs: 'tools' is chat's tools argument .*: pass the tools as tools"),
    ({"not a name": 1}, "chat_template_kwargs: 'not a name' is not a template variable name"),
], ids=["list", "reserved", "date-function", "tools", "name"])
def test_chat_template_kwargs_are_checked(llm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        llm.chat([{"role": "user", "content": "w1"}], SamplingParams(max_tokens=2), chat_template_kwargs=kwargs)


def test_a_failing_chat_template_is_a_value_error(llm, monkeypatch):
    """A template that breaks on a conversation or on the variables it is given raises ValueError (a server's
    400), not Jinja's own exception."""
    monkeypatch.setattr(llm.tokenizer, "chat_template", "{{ messages[0].content + ' ' + depth }}")
    with pytest.raises(ValueError, match="chat template: UndefinedError"):
        llm.chat([{"role": "user", "content": "w1"}], SamplingParams(max_tokens=2))
    out = llm.chat([{"role": "user", "content": "w1"}], SamplingParams(max_tokens=2), chat_template_kwargs={"depth": "w2"})
    assert out[0].prompt_token_ids == llm.tokenizer.encode("w1 w2", add_special_tokens=False)


def test_generate_stream_equals_generate_and_aborts_when_left(llm):
    for prompt in PROMPTS:
        want = llm.generate([prompt], SamplingParams(max_tokens=12))[0]
        deltas = list(llm.generate_stream(prompt, SamplingParams(max_tokens=12)))
        assert "".join(deltas) == want.text and len(deltas) > 1
        assert llm.last_output.token_ids == want.token_ids
        assert llm.stats["generated_tokens"] == 12 and llm.stats["finish_reason"] == "length"
    stream = llm.generate_stream(PROMPTS[1], SamplingParams(max_tokens=100, ignore_eos=True))
    next(stream)
    assert not _all_pages_free(llm)
    stream.close()  # the caller leaves the loop: the request is aborted, its pages freed at once
    assert _all_pages_free(llm)
    while llm.engine.has_unfinished():
        llm.engine.step()
    assert _all_pages_free(llm)


def test_generate_stream_reports_prefill_progress(tiny_models):
    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, max_model_len=128, max_num_batched_tokens=16)
    seen = []
    prompt = " ".join(f"w{i}" for i in range(40))
    text = "".join(llm.generate_stream(prompt, SamplingParams(max_tokens=3), on_prefill=lambda d, t: seen.append((d, t))))
    assert seen == [(16, 40), (32, 40), (40, 40)]  # chunks of the 16-token budget
    assert text == llm.generate([prompt], SamplingParams(max_tokens=3))[0].text


# -- penalties and logprobs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(presence_penalty=2.5), r"presence_penalty must be a number in \[-2, 2\], got 2.5"),
    (dict(frequency_penalty="x"), r"frequency_penalty must be a number in \[-2, 2\], got 'x'"),
    (dict(logprobs=21), r"logprobs must be None or an int in \[0, 20\], got 21"),
    (dict(logprobs=True), r"logprobs must be None or an int in \[0, 20\], got True"),
])
def test_penalty_and_logprob_params_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


def test_penalties_lower_repeated_tokens():
    logits = torch.zeros(2, 6)
    params = [SamplingParams(presence_penalty=0.5, frequency_penalty=0.25), SamplingParams()]
    out = apply_penalties(logits, params, [[1, 1, 3], [1]])
    assert out[0].tolist() == [0, -1.0, 0, -0.75, 0, 0]  # token 1: 0.5 + 2 * 0.25; token 3: 0.5 + 0.25
    assert out[1].tolist() == [0] * 6 and logits.eq(0).all()  # rows without penalties, the input: untouched
    # greedy with a penalty picks the best token not yet repeated
    assert sample(torch.tensor([[0.0, 3.0, 2.5]]), [SamplingParams(presence_penalty=1.0)], [None], [[1]]) == [2]
    with pytest.raises(ValueError, match="need histories"):
        sample(logits, params, [None, None])


def test_repetition_penalty_over_prompt_and_answer():
    """transformers' rule: seen tokens (prompt or answer) have positive logits divided, negative multiplied;
    greedy rows with it are sampled on the host (not device_greedy)."""
    logits = torch.tensor([[2.0, -1.0, 4.0, 1.0, 0.0], [2.0, -1.0, 4.0, 1.0, 0.0]])
    params = [SamplingParams(repetition_penalty=2.0), SamplingParams(repetition_penalty=2.0, presence_penalty=0.5)]
    out = apply_penalties(logits, params, [[2], [2, 2]], prompts=[[1, 3], [0]])
    assert out[0].tolist() == [2.0, -2.0, 2.0, 0.5, 0.0]
    assert out[1].tolist() == [1.0, -1.0, 2.0 - 0.5, 1.0, 0.0]  # then presence on the answer's token
    assert not params[0].device_greedy and SamplingParams(repetition_penalty=1.0).device_greedy
    assert sample(logits[:1], params[:1], [None], [[2]], [[1, 3]]) == [0]  # 4 -> 2 ties 2: the first
    with pytest.raises(ValueError, match="repetition penalty need the prompts"):
        sample(logits[:1], params[:1], [None], [[2]])


def test_stop_token_ids_and_min_tokens(llm):
    """A stop token ends the answer where it is drawn (kept, as EOS is), in device greedy windows too; with
    min_tokens it cannot be drawn before that many tokens, and the answer then runs past it."""
    prompt = PROMPTS[1]
    plain = llm.generate([prompt], SamplingParams(max_tokens=12))[0].token_ids
    stop = plain[3]
    assert SamplingParams(stop_token_ids=[stop]).device_greedy
    got = llm.generate([prompt], SamplingParams(max_tokens=12, stop_token_ids=[stop]))[0]
    cut = plain.index(stop) + 1
    assert got.token_ids == plain[:cut] and got.finish_reason == "stop"
    # the stop token's text is left out of the answer unless include_stop_str_in_output (vLLM's rule); the text
    # continues the prompt's (its last token decoded first)
    tok = llm.tokenizer
    last = tok.encode(prompt, add_special_tokens=False)[-1:]

    def text(ids):
        return tok.decode(last + ids)[len(tok.decode(last)):]
    assert got.text == text(plain[:cut - 1]) and got.text != text(plain[:cut])
    kept = llm.generate([prompt], SamplingParams(max_tokens=12, stop_token_ids=[stop], include_stop_str_in_output=True))
    assert kept[0].token_ids == got.token_ids and kept[0].text == text(plain[:cut])
    params = SamplingParams(max_tokens=12, stop_token_ids=[stop], min_tokens=cut + 2)
    assert not params.device_greedy  # sampled on the host, where the ban is applied
    late = llm.generate([prompt], params)[0]
    assert stop not in late.token_ids[:cut + 2] and len(late.token_ids) >= cut + 2
    assert late.finish_reason == "length" or late.token_ids[-1] == stop
    assert late.token_ids.count(stop) <= 1
    assert got.stop_reason == stop  # vLLM's: the stop token that ended it
    assert llm.generate([prompt], SamplingParams(max_tokens=12))[0].stop_reason is None


def test_stop_reason_and_included_stop_strings(llm):
    """stop_reason names the stop string that ended an answer; include_stop_str_in_output keeps it in the text."""
    prompt = PROMPTS[3]
    full = llm.generate([prompt], SamplingParams(max_tokens=16))[0].text
    word = full.split()[3]
    cut = llm.generate([prompt], SamplingParams(max_tokens=16, stop=["never", word]))[0]
    assert cut.finish_reason == "stop" and cut.stop_reason == word and word not in cut.text
    kept = llm.generate([prompt], SamplingParams(max_tokens=16, stop=["never", word],
                                                 include_stop_str_in_output=True))[0]
    assert kept.text == cut.text + word and kept.stop_reason == word and kept.token_ids == cut.token_ids
    # min_tokens (vLLM's rule): the stop string made whole by the 4th token no longer ends the answer before 5
    late = llm.generate([prompt], SamplingParams(max_tokens=16, stop=["never", word],
                                                 min_tokens=len(cut.token_ids) + 1))[0]
    assert len(late.token_ids) > len(cut.token_ids) + 1 and late.text.startswith(cut.text + word)
    with pytest.raises(ValueError, match="include_stop_str_in_output must be True or False"):
        SamplingParams(include_stop_str_in_output=1)


def test_engine_repetition_penalty_matches_transformers(llm, tiny_models):
    """Greedy answers with a repetition penalty (and with min_p, which greedy ignores) equal transformers'
    generate with the same penalty, and differ from the unpenalised answer."""
    hf_model = tiny_models["llama"][1]
    for prompt in PROMPTS[:3]:
        ids = llm.engine.encode(prompt)
        got = llm.generate([ids], SamplingParams(max_tokens=12, repetition_penalty=1.8, min_p=0.2))[0]
        with torch.no_grad():
            want = hf_model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                     max_new_tokens=12, do_sample=False, repetition_penalty=1.8, pad_token_id=0)
        assert got.token_ids == want[0, len(ids):].tolist()
    plain = llm.generate([PROMPTS[2]], SamplingParams(max_tokens=12))[0]
    assert llm.generate([PROMPTS[2]], SamplingParams(max_tokens=12, repetition_penalty=1.8))[0].token_ids != \
        plain.token_ids


def test_token_logprobs_are_the_model_distribution():
    torch.manual_seed(0)
    logits = torch.randn(3, 10)
    params = [SamplingParams(logprobs=3), SamplingParams(), SamplingParams(logprobs=0)]
    out = token_logprobs(logits, [4, 0, 7], params)
    ref = logits.log_softmax(-1)
    assert out[1] is None
    assert out[0].token_id == 4 and out[0].logprob == pytest.approx(ref[0, 4].item())
    top = ref[0].topk(3)
    assert [t for t, _ in out[0].top] == top.indices.tolist()
    assert [v for _, v in out[0].top] == pytest.approx(top.values.tolist())
    assert out[2].top == [] and out[2].logprob == pytest.approx(ref[2, 7].item())


def test_engine_logprobs_and_penalties(llm):
    want = llm.generate(PROMPTS, SamplingParams(max_tokens=8))
    got = llm.generate(PROMPTS, SamplingParams(max_tokens=8, logprobs=2))  # sampled on the host every step
    for w, g in zip(want, got):
        assert g.token_ids == w.token_ids
        assert [lp.token_id for lp in g.logprobs] == g.token_ids
        assert all(lp.top[0][0] == lp.token_id and lp.top[0][1] == pytest.approx(lp.logprob) for lp in g.logprobs)
    assert want[0].logprobs is None
    penalised = llm.generate([PROMPTS[2]], SamplingParams(max_tokens=30, presence_penalty=2.0))[0]
    assert len(set(penalised.token_ids)) > len(set(llm.generate([PROMPTS[2]], SamplingParams(max_tokens=30))[0].token_ids)) \
        or len(set(penalised.token_ids)) == 30


# -- the async engine ------------------------------------------------------------------------------------------
def _ids(llm, prompt):
    return llm.engine.encode(prompt)


def test_async_engine_streams_equal_generate(llm):
    params = SamplingParams(max_tokens=10)
    want = {f"r{i}": o for i, o in enumerate(llm.generate(PROMPTS, params))}
    engine = AsyncLLMEngine(llm.engine)
    engine.start()

    async def run():
        streams = [engine.submit([(f"r{i}", _ids(llm, p), params)]) for i, p in enumerate(PROMPTS)]
        together = engine.submit([("a", _ids(llm, PROMPTS[0]), params), ("b", _ids(llm, PROMPTS[1]), params)])

        async def collect(stream):
            texts, finals = {}, {}
            async for out in stream:
                texts[out.request_id] = texts.get(out.request_id, "") + out.text_delta
                if out.finished:
                    finals[out.request_id] = out
            return texts, finals

        return await asyncio.gather(*(collect(s) for s in streams + [together]))

    try:
        results = asyncio.run(run())
    finally:
        engine.shutdown()
    for texts, finals in results:
        for rid, out in finals.items():
            ref = want.get(rid) or want[{"a": "r0", "b": "r1"}[rid]]
            assert out.token_ids == ref.token_ids and texts[rid] == ref.text
    assert len(results[-1][1]) == 2
    assert _all_pages_free(llm)


def test_async_engine_stop_ends_streams_during_a_long_step(llm):
    """stop() (a server's SIGTERM) ends every open stream at once, while the engine thread is still busy (here a
    3 s call; a long prefill chunk on a CPU), not once that step is over: uvicorn's grace period is 10 s."""
    engine = AsyncLLMEngine(llm.engine)

    async def run():
        engine.start()
        stream = engine.submit([("s", _ids(llm, "w1"), SamplingParams(max_tokens=100, ignore_eos=True))])
        it = stream.__aiter__()
        await it.__anext__()
        busy = asyncio.ensure_future(engine.call(lambda _: time.sleep(3) or "slept"))
        await asyncio.sleep(0.3)  # the engine thread is inside the call
        start = time.monotonic()
        engine.stop()
        with pytest.raises(EngineStoppedError, match="shutting down"):
            while True:
                await it.__anext__()
        assert time.monotonic() - start < 1.5
        assert await busy == "slept"

    try:
        asyncio.run(run())
    finally:
        engine.shutdown()
    assert not engine.running
    while llm.engine.has_unfinished():  # the aborts of a stopped loop take effect at the engine's next step
        llm.engine.step()
    assert _all_pages_free(llm)


def test_async_engine_queue_counts_requests_beyond_free_slots(tiny_models):
    """max_queue bounds the requests that wait beyond the running batch's free slots: on an idle engine of 2 slots
    and a queue of 2, 4 requests are taken at once (2 start, 2 wait), a fifth is refused until some end, and a
    request of more sequences than slots + queue is refused as too large, never as "try again"."""
    path, _ = tiny_models["llama"]
    small = LLM(path, dtype=torch.float32, max_model_len=64, max_num_seqs=2)
    engine = AsyncLLMEngine(small.engine, max_queue=2)
    long = SamplingParams(max_tokens=50, ignore_eos=True)

    async def run():
        engine.start()
        with pytest.raises(RequestTooLargeError, match=r"5 sequences .* 2 running \(--max-num-seqs\) \+ 2 waiting"):
            engine.submit([(f"big{i}", _ids(small, "w1"), long) for i in range(5)])
        first = engine.submit([(f"a{i}", _ids(small, "w1"), long) for i in range(4)])
        with pytest.raises(QueueFullError, match="waiting for .* free slots .* the queue holds 2 more"):
            engine.submit([("b", _ids(small, "w1"), long)])
        async for _ in first:  # the engine has taken them: its stats count them
            break
        first.abort()
        for _ in range(500):  # the engine thread applies the aborts before its next step
            if engine.stats.num_running == engine.stats.num_waiting == 0:
                break
            await asyncio.sleep(0.01)
        outs = [out async for out in engine.submit([("c", _ids(small, "w1"), SamplingParams(max_tokens=3))])]
        assert outs[-1].finished and len(outs[-1].token_ids) == 3

    try:
        asyncio.run(run())
    finally:
        engine.shutdown()
    assert _all_pages_free(small)


def test_async_engine_abort_queue_and_shutdown(llm):
    engine = AsyncLLMEngine(llm.engine, max_queue=2)
    with pytest.raises(ValueError, match="max_queue must be an int >= 1 or None, got 0"):
        AsyncLLMEngine(llm.engine, max_queue=0)

    async def run():
        with pytest.raises(EngineStoppedError, match="not running"):
            engine.submit([("x", _ids(llm, "w1"), SamplingParams())])
        engine.start()
        long = SamplingParams(max_tokens=100, ignore_eos=True)
        stream = engine.submit([("a", _ids(llm, PROMPTS[1]), long)])
        async for out in stream:
            if out.new_token_ids:
                break  # leaving the loop aborts the request (once the loop's iterator is closed)
        await asyncio.sleep(0.01)
        assert stream.aborted
        for _ in range(200):  # the engine thread applies the abort before its next step
            if engine.stats.num_running == 0 and engine.stats.kv_cache_usage == 0:
                break
            await asyncio.sleep(0.01)
        assert engine.stats.num_running == 0 and engine.stats.kv_cache_usage == 0
        stream = engine.submit([("b", _ids(llm, PROMPTS[1]), long)])
        engine.stop()
        with pytest.raises(EngineStoppedError, match="shutting down"):
            async for _ in stream:
                pass

    try:
        asyncio.run(run())
    finally:
        engine.shutdown()
    assert not engine.running
    while llm.engine.has_unfinished():
        llm.engine.step()
    assert _all_pages_free(llm)
