"""GPU-only engine checks: CUDA-graph decode equals eager decode; KV cache sized from free memory."""

import pytest
import torch

from tritium import LLM, SamplingParams

from .conftest import PROMPTS

pytestmark = pytest.mark.gpu

MANY = PROMPTS + [f"w{i} w{i + 1} w{i + 2}" for i in range(60, 67)]  # 11 prompts: padded into bucket 16


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_cuda_graph_decode_equals_eager(tiny_models, backend):
    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=10)
    outs = {}
    for graphs in (False, True):
        llm = LLM(path, dtype=torch.float32, attention_backend=backend, cuda_graphs=graphs, max_num_seqs=16)
        assert bool(llm.engine.runner.graphs) == graphs
        outs[graphs] = [o.token_ids for o in llm.generate(MANY, params)]
    assert outs[True] == outs[False]


def test_kv_cache_sized_from_free_memory(tiny_models, monkeypatch):
    # The device's free memory as the engine reads it, fixed: other processes on the GPU (tests in other
    # pytest-xdist workers) allocate and free between any reading here and the engine's own.
    free, _ = torch.cuda.mem_get_info()
    assert free > 3 << 30, "needs 3 GiB of free GPU memory"
    seen = (3 << 30, 4 << 30)  # 3 of 4 GiB free: at utilization 0.5 the budget is 1 GiB less the reserve
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: seen)
    path, _ = tiny_models["qwen2"]
    llm = LLM(path, gpu_memory_utilization=0.5, cuda_graphs=False)
    cache_bytes = llm.engine.runner.kv_cache.numel() * llm.engine.runner.kv_cache.element_size()
    assert llm.engine.block_manager.num_blocks > 1000
    assert 0.25 * (1 << 30) < cache_bytes <= seen[0] - 0.5 * seen[1]
    assert llm.engine.config.dtype == torch.bfloat16
    assert len(llm.generate(["w1 w2"], SamplingParams(max_tokens=4))[0].token_ids) == 4


@pytest.mark.parametrize("num_prompts", [1, 3])
def test_gemv_decode_equals_cublas(tiny_models, num_prompts):
    """Decode through the Triton GEMV (graph buckets 1 and 4) gives F.linear's tokens (fp32)."""
    path, _ = tiny_models["qwen2"]  # QKV bias: the GEMV's bias path
    params = SamplingParams(max_tokens=12)
    outs = {}
    for linear in ("torch", "triton", "auto"):
        llm = LLM(path, dtype=torch.float32, linear_backend=linear, max_num_seqs=8)
        outs[linear] = [o.token_ids for o in llm.generate(PROMPTS[:num_prompts], params)]
        if linear == "auto":
            assert {r["m"] for r in llm.engine.model.linear.report} == {1, 2, 4}
    assert outs["triton"] == outs["torch"] == outs["auto"]


def test_settle_linears_keeps_the_faster_step(tiny_models):
    """A projection put on cuBLAS is tried on its GEMV in a whole decode graph; the faster stays, every graph
    is captured again and decode still gives cuBLAS's tokens."""
    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=12)
    ref = [o.token_ids for o in LLM(path, dtype=torch.float32, linear_backend="torch").generate(PROMPTS, params)]
    llm = LLM(path, dtype=torch.float32, linear_backend="auto", max_num_seqs=8)
    model, runner = llm.engine.model, llm.engine.runner
    linear = model.linear
    assert set(linear.best_gemv) >= {(m, *s) for m in (1, 2, 4) for s in model.projection_shapes()}
    assert {r["m"] for r in linear.chain_report} <= {1, 2, 4}
    shape = model.projection_shapes()[3]  # down_proj: its cuBLAS path runs SiLU-and-mul apart
    linear.choices[(1, *shape)] = None
    rows = runner.settle_linears((1, 8), rounds=3, replays=3)  # 8: no such tuned M, nothing to try
    assert [r["m"] for r in rows] == [1]
    assert rows[0]["switched"]["gemv"] == [list(shape)] and "no skinny" not in rows[0]["switched"]  # fp32
    assert rows[0]["kept"] in ("as tuned", "gemv") and set(rows[0]["graph_ms"]) == {"as tuned", "gemv"}
    want = None if rows[0]["kept"] == "as tuned" else linear.best_gemv[(1, *shape)]
    assert linear.choices[(1, *shape)] == want
    assert sorted(runner.graphs) == [1, 2, 4, 8] and linear.chain_report[-1] is rows[0]
    assert [o.token_ids for o in llm.generate(PROMPTS, params)] == ref


def test_settle_linears_tries_the_skinny_picks_runner_up(tiny_models):
    """bf16 (where the skinny GEMM runs): a projection on the skinny GEMM is tried on its runner-up in a whole decode
    graph (a GEMV at 2 rows, cuBLAS at 8), beside the cuBLAS projections on their GEMV; the fastest graph's choices
    stay, every graph is captured again and graph decode gives eager decode's tokens."""
    from tritium.ops.gemv import DEFAULT_CONFIG
    from tritium.ops.skinny import CONFIGS as SKINNY

    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.bfloat16, linear_backend="auto", max_num_seqs=8)
    model, runner, linear = llm.engine.model, llm.engine.runner, llm.engine.model.linear
    assert {r["m"] for r in linear.report} >= {1, 2, 4, 8}  # the skinny GEMM is timed up to the graphs' 8 rows
    shape = model.projection_shapes()[1]  # o_proj: plain
    runner_up = {2: DEFAULT_CONFIG, 8: None}
    for m, other in runner_up.items():
        linear.choices[(m, *shape)], linear.not_skinny[(m, *shape)] = SKINNY[0], other
    rows = runner.settle_linears((2, 8), rounds=3, replays=3)
    assert [r["m"] for r in rows] == [2, 8]
    for row in rows:
        m = row["m"]
        assert list(shape) in row["switched"]["no skinny"] and set(row["graph_ms"]) == {"as tuned", *row["switched"]}
        assert row["kept"] in row["graph_ms"]
        assert linear.choices[(m, *shape)] == (runner_up[m] if row["kept"] == "no skinny" else SKINNY[0])
    assert sorted(runner.graphs) == [1, 2, 4, 8]
    # batches of 2 and 8 that stay whole (no EOS): each decode step runs the settled choices of its row count,
    # in a graph and then eagerly
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    graphed = [[o.token_ids for o in llm.generate(MANY[:n], params)] for n in (2, 8)]
    runner.release_graphs()
    assert graphed == [[o.token_ids for o in llm.generate(MANY[:n], params)] for n in (2, 8)]


def test_linear_choices_recorded_for_the_next_start(tiny_models, tmp_path, monkeypatch):
    """linear_backend auto records what its start-up timing settled; a second start of the same model runs
    those kernels without timing anything and answers with the same tokens (bf16: the same kernels round
    alike); a damaged record is timed again and replaced; linear_cache=False neither reads nor writes one."""
    import json

    from tritium.engine.runner import ModelRunner
    from tritium.models.linear import LinearDispatch

    monkeypatch.setenv("TRITIUM_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "linear"
    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=16)
    kw = dict(dtype=torch.bfloat16, linear_backend="auto", max_num_seqs=4)
    with LLM(path, **kw) as first:
        want = [o.token_ids for o in first.generate(PROMPTS, params)]
        state = json.loads(json.dumps(first.engine.model.linear_state()))
    assert {r["m"] for r in state["linear"]["report"]} == {1, 2, 4}
    records = list(folder.iterdir())
    assert len(records) == 1

    def timed(*args, **kwargs):
        raise AssertionError("timed the projections although a record was there")

    with monkeypatch.context() as patch:
        patch.setattr(LinearDispatch, "tune", timed)
        patch.setattr(ModelRunner, "settle_linears", timed)
        with LLM(path, **kw) as second:
            assert json.loads(json.dumps(second.engine.model.linear_state())) == state
            assert second.engine.model.linear.restored
            assert [o.token_ids for o in second.generate(PROMPTS, params)] == want
    records[0].write_text("{damaged")
    with LLM(path, **kw) as third:
        assert third.engine.model.linear.report and not third.engine.model.linear.restored  # timed again
    assert json.loads(records[0].read_text())["state"]["linear"]["choices"]  # and replaced
    records[0].unlink()
    with LLM(path, linear_cache=False, **kw) as fourth:
        assert fourth.engine.model.linear.report
    assert list(folder.iterdir()) == []


def test_weight_prefetch_keeps_tokens(tiny_models):
    """Decode with L2 weight prefetching (side-stream branches in the CUDA graph) gives the same tokens."""
    from tritium.models.llama import PREFETCH_POINTS

    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=10)
    outs = {}
    for prefetch in (False, True):
        llm = LLM(path, dtype=torch.float32, weight_prefetch=prefetch, max_num_seqs=16)
        if prefetch and torch.cuda.get_device_capability()[0] >= 9 and torch.version.hip is None:
            assert llm.engine.config.weight_prefetch is True
            llm.engine.model.enable_prefetch({name: None for name in PREFETCH_POINTS})  # every point, whole weights
            llm.engine.runner.graphs.clear()
            llm.engine.runner.capture(16)
        outs[prefetch] = [o.token_ids for o in llm.generate(MANY, params)]
    assert outs[True] == outs[False]


def test_greedy_decode_windows_keep_tokens(tiny_models):
    """decode_steps > 1 (several graph replays per host sync, tokens fed on the device) gives the tokens
    of decode_steps=1: different lengths per request (windows cut by max_tokens), a stop string that ends
    one request inside a window, the context limit, and a sampled request in the batch (no window)."""
    path, _ = tiny_models["llama"]
    base = [SamplingParams(max_tokens=m) for m in (3, 17, 9, 30, 1, 12, 25, 8, 16, 5, 21)]
    one = LLM(path, dtype=torch.float32, decode_steps=1, max_num_seqs=16, max_model_len=48)
    ref = one.generate(MANY, base)
    stop_word = ref[3].text.split()[4]  # a word request 3 generates mid-window
    params = list(base)
    params[3] = SamplingParams(max_tokens=30, stop=[stop_word])
    ref = one.generate(MANY, params)
    assert ref[3].finish_reason == "stop"
    long_prompt = [" ".join(f"w{i % 50}" for i in range(40))]
    ref_long = one.generate(long_prompt, SamplingParams(max_tokens=30))
    sampled = SamplingParams(max_tokens=10, temperature=0.8, seed=3)
    ref_mixed = one.generate(MANY[:3], [base[1], sampled, base[3]])
    for steps in (8, 64):
        llm = LLM(path, dtype=torch.float32, decode_steps=steps, max_num_seqs=16, max_model_len=48)
        outs = llm.generate(MANY, params)
        assert [o.token_ids for o in outs] == [o.token_ids for o in ref]
        assert [o.text for o in outs] == [o.text for o in ref]
        assert [o.finish_reason for o in outs] == [o.finish_reason for o in ref]
        long = llm.generate(long_prompt, SamplingParams(max_tokens=30))[0]  # stops at the context (48)
        assert long.token_ids == ref_long[0].token_ids and long.finish_reason == "length"
        mixed = llm.generate(MANY[:3], [base[1], sampled, base[3]])
        assert [o.token_ids for o in mixed] == [o.token_ids for o in ref_mixed]



@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_window_pool_graph_decode_equals_eager(tmp_path, backend):
    """Gemma 3's windowed layers in a pool of their own (pages released behind the window): CUDA-graph decode
    windows (greedy_advance moving both pools' slots on the device) give the tokens of eager decode without
    such a pool."""
    from .conftest import WORDS, make_tiny_model
    make_tiny_model(str(tmp_path), "gemma3_text")
    prompts = [" ".join(WORDS[i:i + n]) for i, n in ((3, 40), (60, 31), (100, 52), (3, 44), (7, 9))]
    params = SamplingParams(max_tokens=40)
    outs = {}
    for pool in (0, 24):
        llm = LLM(str(tmp_path), dtype=torch.float32, attention_backend=backend, cuda_graphs=pool > 0,
                  max_num_seqs=8, num_blocks=64, num_window_blocks=pool, max_num_batched_tokens=32)
        assert (llm.engine.block_manager.window_pool is not None) == (pool > 0)
        assert bool(llm.engine.runner.graphs) == (pool > 0)
        outs[pool] = [o.token_ids for o in llm.generate(prompts, params)]
        assert llm.engine.scheduler.num_preemptions == 0
    assert outs[24] == outs[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fp8_kv_cache_graph_decode_equals_eager(tiny_models, dtype):
    """kv_cache_dtype="fp8" on a GPU: CUDA-graph decode windows (the QKV GEMV's epilogue writing fp8 pages,
    paged attention reading them) give eager decode's tokens, and the torch backend's over the same pages."""
    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=16)
    outs = {}
    for backend, graphs in (("triton", True), ("triton", False), ("torch", False)):
        llm = LLM(path, dtype=dtype, attention_backend=backend, op_backend=backend, cuda_graphs=graphs,
                  kv_cache_dtype="fp8", linear_backend="triton" if backend == "triton" else "torch", max_num_seqs=8)
        assert llm.engine.runner.kv_cache.dtype == torch.float8_e4m3fn
        outs[(backend, graphs)] = [o.token_ids for o in llm.generate(PROMPTS[:3], params)]
        # the scales measured at start-up on the GPU's kernels: the tiny model's values stay small (scale 1)
        report = llm.engine.model.kv_scale_report
        assert report and all(r["k_scale"] == r["v_scale"] == 1.0 and 0 < r["k_max"] < 112 for r in report)
    assert outs[("triton", True)] == outs[("triton", False)]
    if dtype == torch.float32:  # (bf16: the two backends' sums may round a near-tie apart)
        assert outs[("triton", False)] == outs[("torch", False)]
