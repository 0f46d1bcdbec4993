"""``kv_cache_dtype="fp8"``: keys and values stored as float8_e4m3fn (saturated, scale 1). The Triton path (its
KV writes: write_kv_cache, the fused rope + write, the QKV GEMV's epilogue; paged attention reading fp8) gives
the torch path's tokens (SDPA over the same values dequantized), twice the pages fit one budget, and the
answers stay near the 32-bit cache's."""

import os

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine.config import EngineConfig
from tritium.runtime import interpreting

from .conftest import PROMPTS, WORDS, make_tiny_model

PARAMS = SamplingParams(max_tokens=8, prompt_logprobs=1, logprobs=1)
LONG = PROMPTS + [" ".join(WORDS[i:i + 40]) for i in (20, 90)]


def _run(path, backend, linear="torch", **kw):
    llm = LLM(path, dtype=torch.float32, attention_backend=backend, op_backend=backend,
              linear_backend=linear if backend == "triton" else "torch", kv_cache_memory=8 << 20, **kw)
    # three at a time: decode batches of <= 4 rows, which the QKV GEMV (its epilogue writing the pages) runs
    outs = llm.generate(LONG[:3], PARAMS) + llm.generate(LONG[3:], PARAMS)
    # prompt tokens' log-probabilities (keys written in prefill), then the generated ones' (written in decode)
    return llm, [o.token_ids for o in outs], [[lp.logprob for lp in o.prompt_logprobs[1:] + o.logprobs]
                                              for o in outs]


@pytest.mark.parametrize("model_type", ["llama", "gemma3_text"])
def test_fp8_kv_cache_triton_equals_torch(tmp_path, model_type):
    """Llama (the QKV GEMV writes rope'd keys into fp8 pages in decode, the fused rope + write kernel in
    prefill) and Gemma 3 (head norms in the rope kernel; its windowed layers in a window pool, fp8 too):
    the Triton engine's tokens are the torch engine's, prompt log-probabilities within float sums' reach; near
    the fp32 cache's, and not all equal to them (the cache is fp8)."""
    make_tiny_model(str(tmp_path), model_type)
    # Llama's decode through the Triton GEMV (whose epilogue writes the pages); Gemma's QKV never takes it
    linear = "triton" if model_type == "llama" else "torch"
    fp8, tok8, lp8 = _run(str(tmp_path), "triton", linear, kv_cache_dtype="fp8", num_window_blocks=None)
    runner = fp8.engine.runner
    assert runner.kv_cache.dtype == torch.float8_e4m3fn
    if model_type == "gemma3_text":
        assert runner.window_cache is not None and runner.window_cache.dtype == torch.float8_e4m3fn
    _, tok_t, lp_t = _run(str(tmp_path), "torch", kv_cache_dtype="fp8")
    assert tok8 == tok_t
    # the two paths' fp32 keys may differ by an ulp (a GPU's FMA contraction; under the interpreter, numpy's sums
    # against torch's, which depend on the CPU's vector width), which the rounding to fp8 can turn into one fp8
    # step of a value (seen: 6.4e-4 nats on the H200, 3.5e-4 in 2 of 47 on a CPU); so all agree within 5e-3,
    # and under the interpreter nearly all within float sums' reach
    for a, b in zip(lp8, lp_t):
        assert a == pytest.approx(b, abs=5e-3)
    diffs = [abs(a - b) for x, y in zip(lp8, lp_t) for a, b in zip(x, y)]
    if interpreting():
        assert sum(d > 2e-4 for d in diffs) <= len(diffs) // 10, diffs
    full, tok32, lp32 = _run(str(tmp_path), "torch")
    assert full.engine.runner.kv_cache.dtype == torch.float32
    diffs = [abs(a - b) for x, y in zip(lp8, lp32) for a, b in zip(x, y)]
    # e4m3 keeps 3 mantissa bits (~2% RMS error a value): these peaky tiny models move by 0.12 nats on average
    # (largest 0.81) out of |log p| ~ 7; garbage pages would move them by nats
    assert 0 < sum(diffs) / len(diffs) < 0.25 and max(diffs) < 1.5
    # the same budget holds four times the pages of an fp32 cache (twice those of a 16-bit one)
    assert fp8.engine.block_manager.num_blocks + 1 >= 4 * (full.engine.block_manager.num_blocks + 1) - 4


def test_fp8_kv_cache_config_errors():
    with pytest.raises(ValueError, match="kv_cache_dtype must be one of 'auto', 'fp8', got 'fp16'"):
        EngineConfig(kv_cache_dtype="fp16").validate()
    with pytest.raises(ValueError, match="kv_cache_scales must be one of 'auto', 'checkpoint', got 'max'"):
        EngineConfig(kv_cache_dtype="fp8", kv_cache_scales="max").validate()
    with pytest.raises(ValueError, match="kv_cache_dtype='fp8' is not supported with context parallelism"):
        EngineConfig(kv_cache_dtype="fp8", context_parallel_size=2).validate()
    assert EngineConfig(kv_cache_dtype="fp8").kv_dtype(torch.bfloat16) == torch.float8_e4m3fn
    assert EngineConfig().kv_dtype(torch.bfloat16) == torch.bfloat16


def _add_tensors(path, tensors: dict) -> None:
    """Add ``tensors`` to the tiny checkpoint's safetensors file (as an FP8-KV checkpoint carries its scales)."""
    from safetensors.torch import load_file, save_file
    file = os.path.join(path, "model.safetensors")
    save_file({**load_file(file), **tensors}, file, metadata={"format": "pt"})


def test_fp8_kv_checkpoint_scales(tmp_path):
    """An FP8-KV checkpoint's per-layer scales (llm-compressor's k_scale / v_scale, an older kv_scale, AutoFP8's
    k/v projections' output_scale): a 32-bit cache loads and ignores them; an fp8 cache stores x / scale and
    reads it back times the scale, the Triton engine as the torch one, and the scales change the answer from
    scale 1's. A scale that is not one positive number is refused by name."""
    path = str(tmp_path)
    make_tiny_model(path, "llama")
    plain = LLM(path, dtype=torch.float32, kv_cache_memory=8 << 20).generate(LONG[:3], PARAMS)
    _, tok1, lp1 = _run(path, "torch", kv_cache_dtype="fp8")
    _add_tensors(path, {"model.layers.0.self_attn.k_scale": torch.tensor(0.004),
                        "model.layers.0.self_attn.v_scale": torch.tensor([0.03]),
                        "model.layers.1.self_attn.k_proj.output_scale": torch.tensor(2.0),
                        "model.layers.1.self_attn.v_proj.output_scale": torch.tensor(0.5)})
    llm = LLM(path, dtype=torch.float32, kv_cache_memory=8 << 20)
    layers = llm.engine.model.layers
    assert layers[0].kv_scale.tolist() == pytest.approx([0.004, 0.03]) and layers[1].kv_scale.tolist() == [2.0, 0.5]
    assert [o.token_ids for o in llm.generate(LONG[:3], PARAMS)] == [o.token_ids for o in plain]
    assert layers[1].load("self_attn.kv_scale", torch.tensor(0.25)) and layers[1].kv_scale.tolist() == [0.25, 0.25]
    fp8, tok8, lp8 = _run(path, "triton", "triton", kv_cache_dtype="fp8")
    _, tok_t, lp_t = _run(path, "torch", kv_cache_dtype="fp8")
    assert tok8 == tok_t
    tol = 2e-4 if interpreting() else 5e-3
    for a, b in zip(lp8, lp_t):
        assert a == pytest.approx(b, abs=tol)
    assert max(abs(a - b) for x, y in zip(lp8, lp1) for a, b in zip(x, y)) > 0.01  # k / 0.004 saturates
    _add_tensors(path, {"model.layers.1.self_attn.v_scale": torch.tensor(-1.0)})
    with pytest.raises(ValueError, match=r"model.layers.1.self_attn.v_scale|self_attn.v_scale: a KV-cache scale"):
        LLM(path, dtype=torch.float32, kv_cache_memory=8 << 20)


def _lp_diff(a, b) -> float:
    """Mean absolute difference of two runs' log-probabilities."""
    diffs = [abs(x - y) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b)]
    return sum(diffs) / len(diffs)


def test_fp8_kv_scales_calibrated(tmp_path):
    """Without checkpoint scales, kv_cache_scales="auto" measures each layer's keys and values on one fixed prefill
    at start-up. The tiny model's stay far below 448: scale 1, the same answer as "checkpoint". The same model
    reparametrized so that its keys and values reach ~7,000 (k and v projections x1000, q and o / 1000: the same
    function in exact arithmetic): scale 1 saturates them (log-probabilities off by > 1 nat on average), the
    calibrated scales (~60) keep the fp8 cache as close to the 32-bit one as the original model's; every start
    measures the same scales; checkpoint scales are kept."""
    from safetensors.torch import load_file, save_file

    path = str(tmp_path)
    make_tiny_model(path, "llama")
    _, _, lp32 = _run(path, "torch")
    small, tok_auto, lp_auto = _run(path, "torch", kv_cache_dtype="fp8")
    rows = small.engine.model.kv_scale_report
    assert len(rows) == len(small.engine.model.layers) == 2
    assert all(r["k_from"] == r["v_from"] == "calibrated" and r["k_scale"] == r["v_scale"] == 1.0
               and 1 < r["k_max"] < 112 and 1 < r["v_max"] < 112 for r in rows)
    _, tok_one, lp_one = _run(path, "torch", kv_cache_dtype="fp8", kv_cache_scales="checkpoint")
    assert (tok_one, lp_one) == (tok_auto, lp_auto)
    base = _lp_diff(lp_auto, lp32)
    file = os.path.join(path, "model.safetensors")
    tensors = load_file(file)
    for name in list(tensors):
        if name.endswith(("k_proj.weight", "v_proj.weight")):
            tensors[name] = tensors[name] * 1000
        elif name.endswith(("q_proj.weight", "o_proj.weight")):
            tensors[name] = tensors[name] / 1000
    save_file(tensors, file, metadata={"format": "pt"})
    _, _, lp32_big = _run(path, "torch")
    assert _lp_diff(lp32_big, lp32) < 1e-3  # the same function
    _, _, lp_sat = _run(path, "torch", kv_cache_dtype="fp8", kv_cache_scales="checkpoint")
    big, _, lp_cal = _run(path, "torch", kv_cache_dtype="fp8")
    rows = big.engine.model.kv_scale_report
    assert all(3000 < r["k_max"] < 20000 and r["k_scale"] == pytest.approx(4 * r["k_max"] / 448) for r in rows)
    assert all(r["v_scale"] == pytest.approx(4 * r["v_max"] / 448) for r in rows)
    assert [s for layer in big.engine.model.layers for s in layer.kv_scale.tolist()] == pytest.approx(
        [s for r in rows for s in (r["k_scale"], r["v_scale"])])
    assert _lp_diff(lp_sat, lp32_big) > 0.8 and _lp_diff(lp_cal, lp32_big) < base + 0.05
    # another start with the same kernels measures the same bits; with the Triton kernels (a GPU's default), the
    # same scales up to float sums' order
    again = LLM(path, dtype=torch.float32, attention_backend="torch", op_backend="torch", linear_backend="torch",
                kv_cache_memory=8 << 20, kv_cache_dtype="fp8")
    assert again.engine.model.kv_scale_report == rows
    kernels = LLM(path, dtype=torch.float32, attention_backend="triton", op_backend="triton",
                  kv_cache_memory=8 << 20, kv_cache_dtype="fp8").engine.model.kv_scale_report
    assert [(r["k_from"], r["v_from"]) for r in kernels] == [("calibrated", "calibrated")] * len(rows)
    fields = ("k_max", "v_max", "k_scale", "v_scale")
    assert [r[f] for r in kernels for f in fields] == pytest.approx([r[f] for r in rows for f in fields], rel=1e-5)
    # a checkpoint scale for layer 0's keys: kept; the rest measured
    _add_tensors(path, {"model.layers.0.self_attn.k_scale": torch.tensor(50.0)})
    mixed = LLM(path, dtype=torch.float32, kv_cache_memory=8 << 20, kv_cache_dtype="fp8").engine.model
    first = mixed.kv_scale_report[0]
    assert (first["k_from"], first["k_scale"], first["v_from"]) == ("checkpoint", 50.0, "calibrated")
    assert mixed.layers[0].kv_scale.tolist() == pytest.approx([50.0, rows[0]["v_scale"]])
