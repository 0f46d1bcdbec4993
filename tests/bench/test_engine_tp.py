"""Smoke test of ``python -m tritium.bench engine --tp 2`` on a tiny model (CPU, Triton interpreter): every
engine of the plan builds, measures, closes, and the JSON holds each figure. The GPU run is
bench/gpu_engine_tp.sh."""

import json
import math
import os
import subprocess
import sys

import pytest

from tritium.bench.common import header
from tritium.runtime import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="CPU smoke test (the GPU run is bench/gpu_engine_tp.sh)")

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def _bench(out, *extra, timeout=150):
    """``python -m tritium.bench engine --tp 2`` on the tiny model under the interpreter, JSON to ``out``."""
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "tritium.bench", "engine", "--tp", "2", "--shape", "tiny", "--prompt-len", "8",
           "--new-tokens", "2", "--batch", "2", "--repeats", "1", "--kv-cache-gib", "0.01", "--out", str(out), *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def test_engine_tp_tiny_runs_every_engine(tmp_path):
    out = tmp_path / "engine-tp.json"
    proc = _bench(out, "--comm", "tritium,torch", "--prefill-len", "16", "--trace")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["complete"] and not r["errors"] and (r["tp"], r["shape"], r["scaling_shape"]) == (2, "tiny", "tiny")
    for comm in ("tritium", "torch"):
        e = r["engines"][comm]
        assert (e["tensor_parallel_size"], e["comm"]) == (2, comm)
        assert e["max_model_len"] >= 17  # room for the prefill prompt
        for key in ("batch_tokens_per_s", "prefill_ms", "weight_bytes"):
            assert e[key] > 0, (comm, key)
        # step times are differences of two timed generations: on a loaded CPU they can come out <= 0
        for key in ("batch1_decode_ms", "batch_decode_step_ms"):
            assert isinstance(e[key], float) and math.isfinite(e[key]), (comm, key)
        assert "no GPU" in e["trace"]["error"]  # --trace: CUPTI on GPUs only
    tp1, tp2 = r["scaling"]["tp1"], r["scaling"]["tp2"]
    assert (tp1["tensor_parallel_size"], tp1["comm"], tp2["tensor_parallel_size"], tp2["comm"]) == (1, None, 2, "torch")
    assert all(math.isfinite(e["batch1_decode_ms"]) for e in (tp1, tp2))
    # each rank holds a shard: about half the TP=1 model's bytes (the norms are whole on every rank)
    assert 0.45 < tp2["weight_bytes"] / tp1["weight_bytes"] < 0.55
    # the A/B engines with the one-launch row-parallel layers (fp32 here: they take the unfused path)
    for fused in (r["engines"]["tritium-fused-rows"], r["scaling"]["tp2-fused-rows"]):
        assert fused["comm"] == "tritium" and math.isfinite(fused["batch1_decode_ms"])
    for key in ("tritium_vs_torch_batch1", "tritium_vs_torch_batch", "tritium_vs_torch_prefill",
                "scaling_tp2_over_tp1", "fused_rows_vs_unfused_batch1", "scaling_tp2_fused_rows_over_tp1"):
        assert math.isfinite(r["ratios"][key]), key
    assert r["targets"] and all(v is None for v in r["targets"].values())  # no targets on the CPU
    assert "target scaling_tp2_over_tp1_at_most_0.62: not measured" in proc.stdout
    assert [m["what"] for m in r["timeline"]][-1] == "tiny tp2 fuse_row_parallel=True: closed"


def test_engine_tp_resume_measures_only_what_is_missing(tmp_path):
    """--resume continues a run cut short: the engines its JSON holds are kept as they are, a failed one and the
    missing ones are measured; another run's settings, or no JSON, are refused by name."""
    out = tmp_path / "engine-tp.json"
    proc = _bench(out, "--parts", "scaling", "--comm", "torch", "--resume")
    assert proc.returncode != 0 and "does not exist" in proc.stderr
    tp1 = {"build_seconds": 1.0, "tensor_parallel_size": 1, "comm": None, "weight_bytes": 1000,
           "batch1_decode_ms": 7.5}
    cut = {"header": header(None), "suite": "engine", "mode": "tensor-parallel", "tp": 2, "shape": "tiny",
           "model": None, "scaling_shape": "tiny", "prompt_len": 8, "new_tokens": 2, "batch": 2, "prefill_len": 2048,
           "repeats": 1, "kv_cache_gib": 0.01, "dtype": "float32", "parts": ["scaling"], "comms": ["torch"],
           "engines": {}, "prefill_variants": {}, "scaling": {"tp1": tp1, "tp2": {"batch1_decode_ms": -1.0}},
           "errors": {"scaling/tp2": "RuntimeError: lost"}, "complete": False,
           "timeline": [{"t_s": 0.0, "what": "first call"}]}
    out.write_text(json.dumps(cut))
    proc = _bench(out, "--parts", "scaling", "--comm", "torch", "--prompt-len", "16", "--resume")
    assert proc.returncode != 0 and "prompt_len 8 there, 16 now" in proc.stderr
    assert json.loads(out.read_text()) == cut  # a refused resume writes nothing
    proc = _bench(out, "--parts", "scaling", "--comm", "torch", "--resume")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["complete"] and not r["errors"] and r["scaling"]["tp1"] == tp1  # kept, not measured again
    tp2 = r["scaling"]["tp2"]
    assert (tp2["tensor_parallel_size"], tp2["comm"]) == (2, "torch") and math.isfinite(tp2["batch1_decode_ms"])
    assert r["ratios"]["scaling_tp2_over_tp1"] == tp2["batch1_decode_ms"] / 7.5
    whats = [m["what"] for m in r["timeline"]]
    assert whats[0] == "first call" and "scaling/tp1: kept from the run resumed" in whats
    assert "tiny tp1: building" not in whats and "tiny tp2: building" in whats
    assert len(r["resumed"]) == 1 and r["header"] == cut["header"]


def test_trace_summary_of_graph_launches():
    """A step's kernels are those of one cudaGraphLaunch (by correlation id); exposed time counts only what
    moves the step's end (overlapped kernels expose nothing), projections labelled by their order."""
    from tritium.bench.engine_common import graph_launch_kernels, summarize_step

    def kernel(name, ts, dur, corr):
        return {"cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"correlation": corr}}

    events = [{"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 0, "dur": 1, "args": {"correlation": 7}},
              {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 1, "args": {"correlation": 8}},
              {"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 50, "dur": 1, "args": {"correlation": 9}},
              kernel("gemv_kernel(x)", 10, 5, 7), kernel("all_reduce_kernel", 15, 4, 7),
              kernel("rms_norm", 16, 2, 7),  # inside all_reduce's time: nothing exposed
              kernel("gemv_kernel(y)", 19, 6, 7), kernel("eager_copy", 30, 3, 8), kernel("gemv_kernel(z)", 60, 2, 9)]
    launches = graph_launch_kernels(events)
    assert [[e["name"] for e in g] for g in launches] == [
        ["gemv_kernel(x)", "all_reduce_kernel", "rms_norm", "gemv_kernel(y)"], ["gemv_kernel(z)"]]
    summary = summarize_step(launches[0])
    by = summary["by_kernel"]
    assert summary["span_us"] == 15 and summary["kernels"] == 4
    assert by["qkv"]["exposed_us"] == 5 and by["lm_head"]["exposed_us"] == 6  # the last projection: lm_head
    assert by["all_reduce_kernel"]["exposed_us"] == 4 and by["rms_norm"]["exposed_us"] == 0
    assert sum(r["exposed_us"] for r in by.values()) == summary["span_us"]


def test_trace_labels_with_fused_row_parallel_layers():
    """With fuse_row_parallel the row-parallel projections are one-launch GEMM + all-reduce + RMSNorm
    kernels: they keep their place in the layer's order (o_proj, down), so qkv and gate_up keep theirs."""
    from tritium.bench.engine_common import summarize_step

    names = ["_gemv_kernel", "_paged_attention_kernel", "_matmul_all_reduce_lamport_kernel", "_gemv_kernel",
             "_matmul_all_reduce_lamport_kernel"] * 2 + ["_gemv_kernel"]
    step = [{"name": n, "ts": 10 * i, "dur": 1 + i} for i, n in enumerate(names)]
    by = summarize_step(step)["by_kernel"]
    assert {k: v["count"] for k, v in by.items()} == {"qkv": 2, "_paged_attention_kernel": 2, "o_proj": 2,
                                                      "gate_up": 2, "down": 2, "lm_head": 1}
    assert by["lm_head"]["busy_us"] == len(names)


def test_trace_labels_with_qkv_rope():
    """With fuse_qkv_rope the QKV projection is the _qkv_rope_kernel: it keeps the qkv place in the layer's
    order (labelled as such), so o_proj, gate_up and down keep theirs."""
    from tritium.bench.engine_common import summarize_step

    names = ["_rms_norm_kernel", "_qkv_rope_kernel", "_paged_attention_kernel", "_merge_splits_kernel",
             "_gemv_kernel", "_rms_norm_kernel", "_gemv_kernel", "_gemv_kernel"] * 2 + ["_gemv_kernel"]
    step = [{"name": n, "ts": 10 * i, "dur": 1 + i} for i, n in enumerate(names)]
    by = summarize_step(step)["by_kernel"]
    assert {k: v["count"] for k, v in by.items()} == {
        "_rms_norm_kernel": 4, "qkv (+ rope, KV write)": 2, "_paged_attention_kernel": 2, "_merge_splits_kernel": 2,
        "o_proj": 2, "gate_up": 2, "down": 2, "lm_head": 1}


def test_trace_labels_with_skinny_projections():
    """Steps of 2-32 rows run some projections on the skinny GEMM (beside cuBLAS and its split-K reduction): they
    keep their place in the layer's order, so every projection keeps its label."""
    from tritium.bench.engine_common import summarize_step

    names = ["_rms_norm_kernel", "_qkv_rope_kernel", "_paged_attention_kernel", "_skinny_kernel",
             "_rms_norm_kernel", "_skinny_kernel", "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT",
             "void cublasLt::splitKreduce_kernel<32, 16, int, float>"] * 2 + ["_skinny_kernel"]
    step = [{"name": n, "ts": 10 * i, "dur": 1 + i} for i, n in enumerate(names)]
    by = summarize_step(step)["by_kernel"]
    assert {k: v["count"] for k, v in by.items()} == {
        "_rms_norm_kernel": 4, "qkv (+ rope, KV write)": 2, "_paged_attention_kernel": 2, "o_proj": 2,
        "gate_up": 2, "down": 2, "void cublasLt::splitKreduce_kernel<32, 16, int, ": 2, "lm_head": 1}
