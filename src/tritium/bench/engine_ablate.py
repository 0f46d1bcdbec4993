"""Decode-chain ablations of the engine: what each fusion, PDL edge and pipelining choice buys.

    python -m tritium.bench engine-ablate [--out FILE] [--shape llama3-8b | --model PATH] [--trace] [--prefetch-sweep]

Builds tritium's engine on the ``engine`` suite's model (GPU only), runs one batch-1 generation, then:

- the batch-1 decode graph captured again under each of ABLATIONS (engine options: ``fuse_qkv_rope``,
  ``fuse_rope_kv_write``, ``fuse_swiglu``, ``fuse_norms``, ``attention_pdl``, ``pdl``, ``attention_num_splits``), timed in
  interleaved rounds on the inputs of that generation's last steps (its real context);
- the batch-1 decode step with greedy windows pipelined and not (``pipeline_windows``);
- ``--trace``: one graph replay recorded with CUPTI, each kernel's time on the step's critical path;
- ``--prefetch-sweep``: the graph under several L2 weight-prefetch plans, and one o_proj read cold and
  prefetched.

Every variant is set through the engine's public options and graphs are captured again
(``LlamaModel.set_options``, ``LlamaModel.enable_prefetch``, ``ModelRunner.capture``); nothing is patched.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from tritium.bench.args import integer
from tritium.bench.common import cold_us, header, time_ms
from tritium.bench.engine import graph_inputs, set_graph_inputs
from tritium.bench.engine_common import (Bench, add_model_arguments, batch1_step_ms, chrome_events, engine_generate,
                                         summarize_step)
from tritium.engine import LLM, LLMEngine
from tritium.ops import gemv, prefetch_l2

# (label, the model options that differ from the engine's)
ABLATIONS = (
    ("as shipped", {}),
    ("rope and KV write in one kernel after the QKV GEMV", {"fuse_qkv_rope": False}),
    ("rope and KV write apart", {"fuse_rope_kv_write": False}),
    ("SiLU-and-mul in the down GEMV, not the gate/up one", {"fuse_swiglu": False}),
    ("norms inside the GEMVs", {"fuse_norms": True}),
    ("attention without PDL", {"attention_pdl": False}),
    ("no PDL anywhere", {"pdl": False}),
    ("attention 6 splits (2 tiles each)", {"attention_num_splits": 6}),
    ("attention 3 splits", {"attention_num_splits": 3}),
)
NEEDS_GPU = "CUDA graphs, PDL and CUPTI"


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--rounds", type=integer(1), default=3, help="interleaved rounds of every variant (median)")
    parser.add_argument("--trace", action="store_true",
                        help="per-kernel time on the critical path of one batch-1 graph replay (CUPTI)")
    parser.add_argument("--prefetch-sweep", action="store_true",
                        help="the batch-1 graph under several weight-prefetch plans")


def ablate(engine: LLMEngine, inputs: dict, rounds: int) -> dict:
    """Median batch-1 graph replay time (ms) of each of ABLATIONS, captured again for each and timed in
    ``rounds`` interleaved rounds (slow drifts of clock or temperature hit every variant alike)."""
    model, runner = engine.model, engine.runner
    shipped = model.options
    times: dict[str, list[float]] = {label: [] for label, _ in ABLATIONS}
    try:
        for _ in range(rounds):
            for label, change in ABLATIONS:
                model.set_options(dataclasses.replace(shipped, **change))
                runner.capture(1)
                set_graph_inputs(runner, inputs)
                times[label].append(time_ms(runner.graphs[1].graph.replay))
    finally:
        model.set_options(shipped)
        runner.capture()
        set_graph_inputs(runner, inputs)
    res = {label: sorted(t)[len(t) // 2] for label, t in times.items()}
    for label, ms in res.items():
        print(f"  ablation {label:>34}: b1 graph {ms:.3f} ms  (all: {', '.join(f'{t:.3f}' for t in times[label])})",
              flush=True)
    return res


def ablate_windows(llm: LLM, bench: Bench, rounds: int) -> dict:
    """Median batch-1 decode step (ms, measured as the engine suite's main figure) with greedy windows
    pipelined (the next window queued before the host reads the one in flight) and not, interleaved."""
    variants = {"pipelined (shipped)": True, "not pipelined": False}
    times: dict[str, list[float]] = {v: [] for v in variants}
    try:
        for _ in range(rounds):
            for v, pipelined in variants.items():
                llm.engine.pipeline_windows = pipelined
                times[v] += batch1_step_ms(bench, engine_generate(llm), 1)
    finally:
        llm.engine.pipeline_windows = True
    res = {v: sorted(t)[len(t) // 2] for v, t in times.items()}
    for v, ms in res.items():
        print(f"  windows {v:>22}: b1 step {ms:.3f} ms  (all: {', '.join(f'{t:.3f}' for t in times[v])})", flush=True)
    return res


def trace_graph(graph: torch.cuda.CUDAGraph, replays: int = 3) -> list[dict] | str:
    """The kernels (Chrome-trace events, by start) of one replay of ``graph``, the middle one of ``replays`` traced
    (CUPTI through torch.profiler); a message where the kernels traced do not split into the replays."""
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    kernels = sorted((e for e in chrome_events(prof) if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    if not kernels or len(kernels) % replays:
        return f"{len(kernels)} kernels traced for {replays} replays"
    n = len(kernels) // replays
    return kernels[n: 2 * n] if replays > 2 else kernels[:n]


def trace_step(engine: LLMEngine, replays: int = 3, rows: int = 1) -> dict:
    """Kernel timeline of the decode graph of ``rows`` rows (:func:`trace_graph`):
    :func:`tritium.bench.engine_common.summarize_step` of its kernels."""
    entry = engine.runner.graphs[rows]
    out_seq_len = int(entry.bufs.seq_lens[0])
    step = trace_graph(entry.graph, replays)
    if isinstance(step, str):
        return {"error": step}
    return {**summarize_step(step, f"context {out_seq_len}", by_order=not engine.model.config.num_experts),
            "seq_len": out_seq_len}


MB = 1 << 20
# (label, plan or None for no prefetching, evict_last)
PREFETCH_PLANS = (
    ("none", None, False),
    ("o", {"o_proj": None}, False),
    ("o evict_last", {"o_proj": None}, True),
    ("o + 8MB others", {"o_proj": None, "gate_up_proj": 8 * MB, "down_proj": 8 * MB, "qkv_proj": 8 * MB}, False),
    ("o + 16MB others", {"o_proj": None, "gate_up_proj": 16 * MB, "down_proj": 16 * MB, "qkv_proj": 16 * MB}, False),
    ("o + qkv", {"o_proj": None, "qkv_proj": None}, False),
    ("o + 32MB others", {"o_proj": None, "gate_up_proj": 32 * MB, "down_proj": 32 * MB, "qkv_proj": None,
                         "lm_head": 32 * MB}, False),
)


def prefetch_sweep(engine: LLMEngine) -> dict:
    """Batch-1 graph replay time (ms) under each of PREFETCH_PLANS (the graph is captured again for each),
    plus a single o_proj read with and without a prefetch ahead of it. Restores the engine's own plan."""
    model, runner = engine.model, engine.runner
    saved_plan = dict(model.prefetch_plan)
    res = {"graph_b1_ms": {}}
    for label, plan, evict_last in PREFETCH_PLANS:
        try:
            model.enable_prefetch(plan or {}, evict_last=evict_last)
            runner.capture(1)
            res["graph_b1_ms"][label] = time_ms(runner.graphs[1].graph.replay)
        except Exception as e:  # report and go on: the rest of the run still counts
            res["graph_b1_ms"][label] = None
            res.setdefault("errors", {})[label] = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"  prefetch {label}: FAILED {res['errors'][label]}", flush=True)
            continue
        print(f"  prefetch {label:>18}: b1 graph {res['graph_b1_ms'][label]:.3f} ms", flush=True)
    model.enable_prefetch(saved_plan)
    runner.capture()
    # one o_proj read after L2 was flushed, with and without prefetching it ~20 us before
    w = model.layers[0].o_proj.weight
    x = torch.randn(1, w.shape[1], dtype=w.dtype, device=w.device)
    flush = torch.empty(256 * MB, dtype=torch.uint8, device=w.device)
    gemv_cfg = model.linear.choices.get((1, w.shape[0], w.shape[1]))
    fns = {"cublas": lambda: F.linear(x, w)}
    if gemv_cfg is not None:
        fns["gemv"] = lambda: gemv(x, w, config=gemv_cfg)
    for name, fn in fns.items():
        for pre in ("cold", "prefetched", "prefetched evict_last"):
            def before(pre=pre):
                if pre != "cold":
                    prefetch_l2(w, evict_last=pre.endswith("evict_last"))
                torch.cuda._sleep(40_000)  # ~20 us at 2 GHz

            us = cold_us(fn, flush, 20, before)
            res[f"o_proj_us_{name}_{pre.replace(' ', '_')}"] = us
            print(f"  o_proj {name} {pre}: {us:.1f} us", flush=True)
    return res


def run(args) -> dict:
    bench = Bench(args)
    llm = bench.llm("triton", 1)
    engine = llm.engine
    step_ms = batch1_step_ms(bench, engine_generate(llm), 1)
    inputs = graph_inputs(engine.runner)
    result = {"header": header(bench.device), "suite": "engine-ablate", "shape": bench.label, "model": args.model,
              "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "batch1_decode_ms": step_ms[0],
              "ablation_graph_b1_ms": ablate(engine, inputs, args.rounds),
              "ablation_windows_b1_step_ms": ablate_windows(llm, bench, args.rounds)}
    if args.trace:
        set_graph_inputs(engine.runner, inputs)
        result["trace_b1"] = trace_step(engine)
    if args.prefetch_sweep:
        result["prefetch_sweep"] = prefetch_sweep(engine)
    return result
