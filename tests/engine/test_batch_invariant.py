"""``batch_invariant=True``: a request's tokens and log-probabilities have the same bits whatever runs beside
it, however its prompt is chunked, whether its prefix came from the cache.

The same request (greedy, with the log-probabilities of its tokens and the top 3 at each position) is run
alone, in batches with other requests of other lengths that join at other steps, under a token budget that
chunks its prompt, after a request that leaves its prefix in the cache, and with a KV cache so small that
it is preempted and recomputed; every run must give the first run's floats exactly. Under the interpreter
with the row-independent dot of ``tritium.testing.row_dot`` (numpy's BLAS is not row-independent; a GPU's
MMA is).
"""

import pytest
import torch

from tritium import LLMEngine, SamplingParams
from tritium.runtime import interpreting
from tritium.testing.row_dot import row_independent_dot

pytestmark = pytest.mark.skipif(not interpreting() and not torch.cuda.is_available(),
                                reason="batch_invariant runs Triton kernels: a GPU or TRITON_INTERPRET=1")

TARGET = [5, 9, 14, 3, 22, 31, 7, 40, 41, 12, 8, 19, 27, 33, 6, 50, 51, 52, 60, 61]
OTHERS = {"b": [17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31], "c": [70], "d": [90, 91, 92, 93, 94, 95, 96]}
PARAMS = SamplingParams(max_tokens=6, temperature=0.0, logprobs=3, ignore_eos=True)


@pytest.fixture(autouse=True)
def _row_dot():
    with row_independent_dot():
        yield


def _engine(path, **kw):
    kw.setdefault("max_num_seqs", 4)
    kw.setdefault("num_blocks", 32)
    return LLMEngine(path, batch_invariant=True, block_size=16, max_model_len=128,
                     cuda_graphs=torch.cuda.is_available(), **kw)


def _run(engine, schedule, params=PARAMS) -> dict:
    """``schedule``: {step index: [(request id, prompt ids)]}; returns {request id: (token ids, [(logprob,
    top)] per token)} once every request is done."""
    outs, step = {}, 0
    while step <= max(schedule) or engine.has_unfinished():
        for rid, prompt in schedule.get(step, []):
            engine.add_request(rid, prompt, params)
        for out in engine.step():
            if out.finished:
                outs[out.request_id] = (list(out.token_ids), [(lp.logprob, lp.top) for lp in out.logprobs])
        step += 1
    return outs


def test_a_request_gets_the_same_floats_in_any_batch(tiny_models):
    path, _ = tiny_models["llama"]
    alone = _run(_engine(path), {0: [("a", TARGET)]})["a"]
    assert len(alone[0]) == PARAMS.max_tokens and all(len(top) == 3 for _, top in alone[1])
    runs = {
        "with three others from the start": (_engine(path), {0: [("b", OTHERS["b"]), ("a", TARGET),
                                                                   ("c", OTHERS["c"]), ("d", OTHERS["d"])]}),
        "others joining mid-way": (_engine(path), {0: [("a", TARGET)], 1: [("b", OTHERS["b"])],
                                                   3: [("c", OTHERS["c"]), ("d", OTHERS["d"])]}),
        "its prompt chunked beside decodes": (_engine(path, max_num_batched_tokens=7),
                                              {0: [("c", OTHERS["c"])], 1: [("a", TARGET), ("d", OTHERS["d"])]}),
    }
    for what, (engine, schedule) in runs.items():
        got = _run(engine, schedule)["a"]
        assert got == alone, f"{what}: {got} != alone {alone}"
    engine = _engine(path)
    _run(engine, {0: [("first", TARGET[:17] + [99, 98])]})  # leaves TARGET's first page in the prefix cache
    cached = _run(engine, {0: [("a", TARGET)]})["a"]
    assert engine.block_manager.hits >= 16
    assert cached == alone, f"prefix-cache hit: {cached} != alone {alone}"
    # 4 pages for requests that need 6 together: some are preempted and their tokens recomputed as prompt
    engine = _engine(path, num_blocks=4, enable_prefix_caching=False)
    got = _run(engine, {0: [("a", TARGET), ("b", OTHERS["b"]), ("c", OTHERS["c"]), ("d", OTHERS["d"])]})["a"]
    assert engine.scheduler.num_preemptions > 0
    assert got == alone, f"preempted and recomputed: {got} != alone {alone}"


def test_a_seeded_sampled_request_gets_the_same_tokens_in_any_batch(tiny_models):
    """Seeded sampling (temperature, top-k, top-p) draws each row from its own generator: the sampled tokens
    and their log-probabilities do not depend on the batch either."""
    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=6, temperature=0.9, top_k=20, top_p=0.95, seed=11, logprobs=2,
                            ignore_eos=True)
    alone = _run(_engine(path), {0: [("a", TARGET)]}, params)["a"]
    greedy = _run(_engine(path), {0: [("a", TARGET)]})["a"]
    assert alone[0] != greedy[0], "the sampled request drew the greedy tokens: the test would not see a draw"
    beside = _run(_engine(path), {0: [("b", OTHERS["b"]), ("a", TARGET)], 2: [("c", OTHERS["c"])]}, params)["a"]
    assert beside == alone, f"beside others: {beside} != alone {alone}"


def test_batch_invariant_rejects_what_it_cannot_honour(tiny_models):
    path, _ = tiny_models["llama"]
    for kw, match in ((dict(attention_backend="torch"), "attention_backend='torch'"),
                      (dict(linear_backend="auto"), "linear_backend='auto'"),
                      (dict(tensor_parallel_size=2), "tensor_parallel_size=2")):
        with pytest.raises(ValueError, match=match):
            LLMEngine(path, batch_invariant=True, **kw)
    with pytest.raises(TypeError, match="batch_invariant must be True or False"):
        LLMEngine(path, batch_invariant="yes")


def test_w8a8_request_gets_the_same_floats_in_any_batch(tiny_models):
    """``quantization="fp8-dynamic"`` with ``batch_invariant``: each row of x is quantized on its own and the
    W8A8 product runs one tile at every row count, so a request's floats do not depend on its batch either."""
    path, _ = tiny_models["llama"]
    alone = _run(_engine(path, quantization="fp8-dynamic"), {0: [("a", TARGET)]})["a"]
    beside = _run(_engine(path, quantization="fp8-dynamic", max_num_batched_tokens=7),
                  {0: [("b", OTHERS["b"]), ("a", TARGET)], 2: [("c", OTHERS["c"]), ("d", OTHERS["d"])]})["a"]
    assert beside == alone, f"beside others, chunked: {beside} != alone {alone}"
    assert alone != _run(_engine(path), {0: [("a", TARGET)]})["a"]  # the activations were quantized
