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
        assert bool(llm.runner.graphs) == graphs
        outs[graphs] = [o.token_ids for o in llm.generate(MANY, params)]
    assert outs[True] == outs[False]


def test_kv_cache_sized_from_free_memory(tiny_models):
    path, _ = tiny_models["qwen2"]
    free_before, total = torch.cuda.mem_get_info()
    llm = LLM(path, gpu_memory_utilization=0.5, cuda_graphs=False)
    cache_bytes = llm.runner.kv_cache.numel() * llm.runner.kv_cache.element_size()
    assert llm.block_manager.num_blocks > 1000
    assert cache_bytes <= free_before - 0.5 * total
    assert llm.engine_config.dtype == torch.bfloat16
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
            assert {r["m"] for r in llm.model.linear.report} == {1, 2, 4}
    assert outs["triton"] == outs["torch"] == outs["auto"]


def test_weight_prefetch_keeps_tokens(tiny_models):
    """Decode with L2 weight prefetching (side-stream branches in the CUDA graph) gives the same tokens."""
    from tritium.engine.model import PREFETCH_POINTS

    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=10)
    outs = {}
    for prefetch in (False, True):
        llm = LLM(path, dtype=torch.float32, weight_prefetch=prefetch, max_num_seqs=16)
        if prefetch and torch.cuda.get_device_capability()[0] >= 9 and torch.version.hip is None:
            assert llm.engine_config.weight_prefetch is True
            llm.model.enable_prefetch({name: None for name in PREFETCH_POINTS})  # every point, whole weights
            llm.runner.graphs.clear()
            llm.runner.capture(16)
        outs[prefetch] = [o.token_ids for o in llm.generate(MANY, params)]
    assert outs[True] == outs[False]
