"""Greedy decode windows (several steps per host sync, the next token fed on the device, the next window
queued before the host reads the one in flight) give the tokens of one step per sync. Without CUDA
graphs the windows run eagerly, so this runs on the CPU too."""

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine.runner import ModelRunner

from .conftest import PROMPTS

MANY = PROMPTS + [f"w{i} w{i + 1} w{i + 2}" for i in range(60, 67)]
BASE = [SamplingParams(max_tokens=m) for m in (3, 17, 9, 30, 1, 12, 25, 8, 16, 5, 21)]


@pytest.fixture
def launches(monkeypatch):
    """Counts of first and continued windows launched."""
    counts = {"start": 0, "continue": 0}
    start, cont = ModelRunner.start_window, ModelRunner.continue_window

    def counted_start(self, *a, **kw):
        counts["start"] += 1
        return start(self, *a, **kw)

    def counted_continue(self, *a, **kw):
        counts["continue"] += 1
        return cont(self, *a, **kw)

    monkeypatch.setattr(ModelRunner, "start_window", counted_start)
    monkeypatch.setattr(ModelRunner, "continue_window", counted_continue)
    return counts


def _llm(path, steps, **kw):
    kw.setdefault("max_num_seqs", 16)
    kw.setdefault("max_model_len", 48)
    return LLM(path, dtype=torch.float32, decode_steps=steps, **kw)


@pytest.fixture(scope="module")
def reference(tiny_models):
    """decode_steps=1 outputs: the batch with a stop string mid-generation, a prompt run into the context
    limit, and a batch with a sampled request."""
    path, _ = tiny_models["llama"]
    one = _llm(path, 1)
    ref = one.generate(MANY, BASE)
    stop_word = ref[3].text.split()[4]  # a word request 3 generates mid-window
    params = list(BASE)
    params[3] = SamplingParams(max_tokens=30, stop=[stop_word])
    out = {"params": params, "batch": one.generate(MANY, params)}
    assert out["batch"][3].finish_reason == "stop"
    out["long_prompt"] = [" ".join(f"w{i % 50}" for i in range(40))]
    out["long"] = one.generate(out["long_prompt"], SamplingParams(max_tokens=30))[0]
    out["sampled"] = SamplingParams(max_tokens=10, temperature=0.8, seed=3)
    out["mixed"] = one.generate(MANY[:3], [BASE[1], out["sampled"], BASE[3]])
    return out


@pytest.mark.parametrize("steps", [4, 64])
def test_windows_keep_tokens(tiny_models, reference, launches, steps):
    path, _ = tiny_models["llama"]
    llm = _llm(path, steps)
    outs = llm.generate(MANY, reference["params"])
    assert [o.token_ids for o in outs] == [o.token_ids for o in reference["batch"]]
    assert [o.text for o in outs] == [o.text for o in reference["batch"]]
    assert [o.finish_reason for o in outs] == [o.finish_reason for o in reference["batch"]]
    # rows stop on the device at their own last token: windows run past the soonest finisher (one
    # window of 64 holds every request's decode) and are continued across it
    if steps == 64:
        assert launches["start"] == 1
    else:
        assert launches["continue"] > 0
    long = llm.generate(reference["long_prompt"], SamplingParams(max_tokens=30))[0]  # stops at the context
    assert long.token_ids == reference["long"].token_ids and long.finish_reason == "length"
    mixed = llm.generate(MANY[:3], [BASE[1], reference["sampled"], BASE[3]])
    assert [o.token_ids for o in mixed] == [o.token_ids for o in reference["mixed"]]


def test_single_request_continues_windows(tiny_models, reference, launches):
    """One request of 30 tokens in windows of 4: one first window, the rest continued from the device."""
    path, _ = tiny_models["llama"]
    llm = _llm(path, 4)
    prompt = MANY[3]
    want = _llm(path, 1).generate([prompt], SamplingParams(max_tokens=30))[0].token_ids
    got = llm.generate([prompt], SamplingParams(max_tokens=30))[0].token_ids
    assert got == want
    assert launches["start"] == 1
    assert launches["continue"] >= 5


def test_stop_inside_a_continued_window_keeps_the_others(tiny_models, reference, launches):
    """A request that stops while the next window is queued: its later tokens are dropped, the others
    keep theirs from that window."""
    path, _ = tiny_models["llama"]
    batch = reference["batch"]
    params = [SamplingParams(max_tokens=30), reference["params"][3], SamplingParams(max_tokens=30)]
    prompts = [MANY[1], MANY[3], MANY[6]]
    want = _llm(path, 1).generate(prompts, params)
    got = _llm(path, 4).generate(prompts, params)
    assert [o.token_ids for o in got] == [o.token_ids for o in want]
    assert got[1].finish_reason == "stop" and got[1].token_ids == batch[3].token_ids
    assert launches["continue"] > 0


@pytest.mark.parametrize("num_blocks", [4, 6])
def test_windows_under_a_tiny_kv_budget(tiny_models, num_blocks):
    """Pages run out: windows shrink to single steps or stop being continued, and preemption still gives
    every request its tokens."""
    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=20)
    want = _llm(path, 1).generate(PROMPTS, params)
    llm = _llm(path, 8, num_blocks=num_blocks, max_num_batched_tokens=64)
    got = llm.generate(PROMPTS, params)
    assert [o.token_ids for o in got] == [o.token_ids for o in want]


def test_triton_kernels_in_windows(tiny_models, launches):
    """Tritium's attention, ops and greedy_advance kernel (interpreter on the CPU) in continued windows."""
    path, _ = tiny_models["qwen2"]
    params = SamplingParams(max_tokens=9)
    kw = dict(attention_backend="triton", op_backend="triton", max_num_seqs=4, max_model_len=64)
    if not torch.cuda.is_available():
        from tritium.runtime import interpreting
        if not interpreting():
            pytest.skip("needs the Triton interpreter")
    want = [o.token_ids for o in _llm(path, 1, **kw).generate(PROMPTS[:2], params)]
    got = [o.token_ids for o in _llm(path, 4, **kw).generate(PROMPTS[:2], params)]
    assert got == want
    assert launches["continue"] > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_request_mixes(tiny_models, seed):
    """Random batches (greedy requests of 1-40 tokens, some with a stop string taken from their own
    output, a sampled request now and then) under random engine limits (context, batch, KV pages, token
    budget, prefix cache): windows of 3 and 64 give the tokens, texts and finish reasons of one step per
    sync, through preemption and chunked prefill."""
    import random

    path, _ = tiny_models["llama"]
    rng = random.Random(seed)
    prompts = [" ".join(f"w{rng.randrange(250)}" for _ in range(rng.randint(1, 30))) for _ in range(rng.randint(2, 8))]
    params = [SamplingParams(max_tokens=rng.randint(1, 40), temperature=0.7, seed=rng.randrange(100))
              if rng.random() < 0.15 else SamplingParams(max_tokens=rng.randint(1, 40)) for _ in prompts]
    kw = dict(max_model_len=rng.choice([48, 64, 96]), max_num_seqs=rng.choice([2, 4, 16]),
              num_blocks=rng.choice([6, 10, None]), max_num_batched_tokens=rng.choice([16, 64, 256]),
              enable_prefix_caching=rng.random() < 0.5)
    kw = {k: v for k, v in kw.items() if v is not None}
    first = _llm(path, 1, **kw).generate(prompts, params)
    for i, out in enumerate(first):
        words = out.text.split()
        if len(words) > 3 and params[i].greedy and rng.random() < 0.5:
            params[i] = SamplingParams(max_tokens=params[i].max_tokens, stop=[words[2]])
    want = _llm(path, 1, **kw).generate(prompts, params)
    for steps in (3, 64):
        got = _llm(path, steps, **kw).generate(prompts, params)
        assert [o.token_ids for o in got] == [o.token_ids for o in want], (steps, kw)
        assert [o.text for o in got] == [o.text for o in want]
        assert [o.finish_reason for o in got] == [o.finish_reason for o in want]


def test_row_stops_at_its_last_token(tiny_models):
    """A request of 5 tokens in a window of up to 8 steps: the first token comes from the prefill, the
    window computes inputs at positions P .. P+3 (P: prompt length) and the row stops once it has sampled
    position P+4, its last token: no input (and no cache write) at P+4, however long the window."""
    path, _ = tiny_models["llama"]
    llm = _llm(path, 8)
    out = llm.generate([MANY[1]], SamplingParams(max_tokens=5))[0]
    assert len(out.token_ids) == 5 and out.finish_reason == "length"
    p = len(out.prompt_token_ids)
    bufs = llm.engine.runner.window_buffers(1)
    assert int(bufs.pos[0]) == p + 3 and int(bufs.seq_lens[0]) == p + 4
    assert int(bufs.slots[0]) == -1 and int(bufs.stop[0]) == p + 4
