"""Tensor-parallel engine benchmark (issue 16): ``python -m tritium.bench engine --tp N``.

    python -m tritium.bench engine --tp 2 [--shape llama3-70b|tiny | --model PATH] [--comm tritium,torch]
        [--scaling-shape llama3-8b|tiny|none] [--parts decode,prefill,scaling] [--prefill-len 2048] [--trace]
        [--out FILE]

Random weights (:class:`~tritium.models.weights.RandomWeights`, seed 0: every engine draws the same tensors,
each rank only its shard), bf16 on GPUs (fp32 on the CPU). One engine at a time: each is closed (its
worker processes gone, its memory released) before the next one starts.

- ``decode``: ``--shape`` (default llama3-70b) at TP=N, one engine per ``--comm`` (tritium's collectives on
  the symmetric heap; torch.distributed's, NCCL). Batch-1 decode step by the ``engine`` suite's method
  ((time of N new tokens - time of 1) / (N - 1), prompt ``--prompt-len``, median of ``--repeats``);
  ``--batch`` prompts: output tokens per second and the decode step. Ceiling: each rank's weight-read time,
  its shard's bytes (rank 0's; ranks hold equal shards) / the copy bandwidth measured in this run.
- ``prefill``: in the same engines, one prompt of ``--prefill-len`` tokens with max_tokens=1, the
  ``generate`` call timed warm (median of ``--repeats``). Floor: one rank's FLOPs / the bf16 matmul rate
  measured in this run. :data:`PREFILL_VARIANTS` adds engines measured on prefill alone.
- ``--trace``: one batch-1 decode step of each ``--shape`` engine traced on rank 0 (CUPTI), each kernel's
  exposed time on the step's critical path (:func:`decode_trace`), for the note of a missed target.
- ``scaling``: ``--scaling-shape`` (default llama3-8b; ``--model``: the same checkpoint) at TP=1 and at
  TP=N (comm auto), batch-1 step.

Targets (TP=2): batch-1 step <= 1.12x the weight-read time (comm tritium); tritium over torch >= 1.15x at
batch 1 and >= 1.0x at ``--batch`` (tokens per second); TP2 / TP1 batch-1 step of the scaling model <= 0.62.
With ``--out`` the JSON is rewritten after each engine (``"complete": false`` until the end), so a run
cut short keeps what it measured; ``--resume`` continues it: the engines that file holds (same GPU and
settings) are kept, only the rest are built and measured, and the JSON names each call's date and
ceilings (``resumed``). The whole suite takes 7-8 minutes on 2x H200 with a warm Triton cache (six
engine builds of 45-85 s, start-up tuning and graph capture included), more than one call of a device
machine may run. ``--shape tiny`` runs everything on a small model, also on the CPU
(``TRITON_INTERPRET=1``) as a smoke test.
"""

from __future__ import annotations

import datetime
import gc
import json
import time
import traceback

import torch
from torch.profiler import ProfilerActivity, profile

from tritium.bench.args import UsageError, integer, name_list
from tritium.bench.common import copy_bandwidth_tbs, header, matmul_tflops, print_table
from tritium.bench.engine_common import (SHAPES, Bench, batch1_step_ms, batch_throughput, check_shape, chrome_events,
                                         engine_generate, graph_launch_kernels, summarize_step, timed)
from tritium.bench.jsonio import save_json
from tritium.models.config import ModelConfig

PARTS = ("decode", "prefill", "scaling")
COMMS = ("tritium", "torch", "auto")
# Engines measured on prefill alone (``--parts prefill``): label -> engine kwargs beside tensor_parallel_size
# (e.g. a fused-vs-bulk switch of the prefill collectives). Each is one more engine build of the model.
PREFILL_VARIANTS: dict[str, dict] = {}
# NOTE: targets of issue 16 (2x H200, Llama-3-70B TP=2, Llama-3-8B TP=1 vs TP=2)
TARGET_STEP_OVER_WEIGHT_READ = 1.12
TARGET_B1_SPEEDUP_VS_TORCH = 1.15
TARGET_BATCH_SPEEDUP_VS_TORCH = 1.0
TARGET_TP2_OVER_TP1 = 0.62


def add_arguments(parser) -> None:
    """The ``engine`` suite's tensor-parallel options (read when ``--tp`` > 1)."""
    g = parser.add_argument_group("tensor parallel (--tp N > 1: tritium.bench.engine_tp)")
    g.add_argument("--tp", type=integer(1), default=1,
                   help="tensor-parallel size: GPUs one model is sharded over (default 1: the single-GPU suite)")
    g.add_argument("--comm", type=name_list(COMMS), default="tritium,torch",
                   help="comma-separated collectives of the --shape engines, each one engine: " + ",".join(COMMS))
    g.add_argument("--prefill-len", type=integer(1), default=2048, help="prompt tokens of the prefill measurement")
    g.add_argument("--scaling-shape", choices=sorted(SHAPES) + ["none"], default=None,
                   help="model of the TP=1 vs TP=N comparison (default llama3-8b; tiny with --shape tiny)")
    g.add_argument("--parts", type=name_list(PARTS), default=",".join(PARTS),
                   help="comma-separated subset of " + ",".join(PARTS))
    g.add_argument("--trace", action="store_true",
                   help="also trace one batch-1 decode step of each --shape engine on rank 0 (CUPTI): each "
                        "kernel's exposed time on the step's critical path")
    g.add_argument("--resume", action="store_true",
                   help="continue the run whose JSON is --out (cut short: \"complete\": false): keep the "
                        "engines it holds, measure only the others (same GPU and settings, else an error)")


class Clock:
    """Wall-clock marks of the run, printed as they happen and kept for the JSON."""

    def __init__(self):
        self.start = time.monotonic()
        self.marks: list[dict] = []

    def mark(self, what: str) -> None:
        t = time.monotonic() - self.start
        self.marks.append({"t_s": round(t, 1), "what": what})
        print(f"[{datetime.datetime.now():%H:%M:%S} +{t:6.1f} s] {what}", flush=True)


# -- measurements on a built engine: (bench, llm) -> dict ------------------------------------------------------

def decode_batch1(bench: Bench, llm) -> dict:
    steps = batch1_step_ms(bench, engine_generate(llm), bench.args.repeats)
    return {"batch1_decode_ms": steps[len(steps) // 2], "batch1_decode_ms_all": steps}


def decode_batch(bench: Bench, llm) -> dict:
    return batch_throughput(bench, engine_generate(llm))


def decode_trace(bench: Bench, llm, new_tokens: int = 24) -> dict:
    """One batch-1 generation recorded on rank 0 (CUPTI through torch.profiler; the other ranks run the same
    steps untraced): the kernels of the middle decode-graph launch, summarised by
    :func:`~tritium.bench.engine_common.summarize_step`. The collectives' kernels show what the ranks wait
    for each other."""
    if bench.device.type != "cuda":
        return {"trace": {"error": "no GPU: nothing to trace (decode steps run without CUDA graphs)"}}
    generate = engine_generate(llm)
    prompt = bench.prompts(1, 5000)
    generate(prompt, new_tokens)  # warm
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        generate(prompt, new_tokens)
        torch.cuda.synchronize()
    launches = graph_launch_kernels(chrome_events(prof))
    if not launches:
        return {"trace": {"error": "no CUDA-graph launch traced (CPU, or graphs off)"}}
    counts = [len(g) for g in launches]
    decode = [g for g in launches if len(g) == max(set(counts), key=counts.count)]  # the decode step's graph
    return {"trace": summarize_step(decode[len(decode) // 2], f"{len(decode)} decode launches traced")}


def prefill(bench: Bench, llm) -> dict:
    """One prompt of ``--prefill-len`` tokens, max_tokens=1: the ``generate`` call's time (ms), warm."""
    args, generate = bench.args, engine_generate(llm)
    generate(bench.prompts(1, 4000, args.prefill_len), 1)  # warm-up: kernels compile for this length
    times = []
    for r in range(args.repeats):
        prompt = bench.prompts(1, 4001 + r, args.prefill_len)
        times.append(timed(lambda: generate(prompt, 1), bench.device) * 1e3)
    times.sort()
    return {"prefill_ms": times[len(times) // 2], "prefill_ms_all": times, "prefill_tokens": args.prefill_len}


def measure_engine(bench: Bench, clock: Clock, label: str, measures, **engine_kwargs) -> dict:
    """Build one engine (``engine_kwargs``: EngineConfig fields over :meth:`Bench.llm`'s), run each of
    ``measures``, close it, and release rank 0's memory before returning what they measured."""
    clock.mark(f"{label}: building")
    t0 = time.perf_counter()
    llm = bench.llm("triton", bench.args.batch, **engine_kwargs)
    try:
        cfg, engine = llm.engine.config, llm.engine
        out = {"build_seconds": time.perf_counter() - t0, "tensor_parallel_size": cfg.tensor_parallel_size,
               "comm": engine.parallel.comm_kind if engine.parallel is not None else None,
               "weight_bytes": engine.model.weight_bytes(), "linear_backend": cfg.linear_backend,
               "max_model_len": cfg.max_model_len, "num_blocks": cfg.num_blocks,
               "torch_all_reduce_from": getattr(engine.parallel, "torch_all_reduce_from", None)}
        del engine
        clock.mark(f"{label}: built in {out['build_seconds']:.1f} s (comm {out['comm']}, "
                   f"{out['weight_bytes'] / 1e9:.3g} GB of weights per rank)")
        for measure in measures:
            measured = measure(bench, llm)
            out.update(measured)
            # in the log before the engine closes: a teardown that fails or hangs keeps what was measured
            clock.mark(f"{label}: {measure.__name__} done " + json.dumps(
                {k: round(v, 4) if isinstance(v, float) else v for k, v in measured.items() if not k.endswith("_all")}))
    finally:
        llm.close()
        del llm
        gc.collect()
        if bench.device.type == "cuda":
            torch.cuda.empty_cache()
    if bench.device.type == "cuda":
        out["rank0_allocated_gib_after_close"] = round(torch.cuda.memory_allocated() / 2**30, 2)
    clock.mark(f"{label}: closed")
    return out


def prefill_variant(bench: Bench, clock: Clock, label: str, **engine_kwargs) -> dict:
    """An engine of ``engine_kwargs`` measured on prefill alone (:data:`PREFILL_VARIANTS`)."""
    return measure_engine(bench, clock, label, [prefill], **engine_kwargs)


def prefill_flops(cfg, tokens: int, tp: int) -> float:
    """One rank's FLOPs for the prefill of one ``tokens``-token prompt: the projections (2 * tokens * weight
    elements), causal attention (QK^T and PV over tokens^2 / 2 pairs, per query head) and the LM head on
    the last token, divided by ``tp``."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    proj = h * (cfg.q_size + 2 * cfg.kv_size) + cfg.q_size * h + 3 * h * i
    attention = 2 * 2 * (tokens * tokens / 2) * cfg.head_dim * cfg.num_attention_heads
    return (cfg.num_hidden_layers * (2 * tokens * proj + attention) + 2 * h * cfg.vocab_size) / tp


# -- the run ---------------------------------------------------------------------------------------------------

def run(args) -> dict:
    n, parts, comms = args.tp, args.parts, args.comm
    shape = args.shape or "llama3-70b"
    scaling_shape = args.scaling_shape or ("tiny" if shape == "tiny" else "llama3-8b")
    if args.resume and not args.out:
        raise UsageError("--resume needs --out: the JSON of the run to continue")
    clock = Clock()
    bench = Bench(args, shape=shape, lazy=True)
    if "scaling" in parts and scaling_shape != "none" and args.model is None:
        check_shape(scaling_shape, "--scaling-shape")
    device = bench.device
    if device.type == "cuda" and torch.cuda.device_count() < n:
        raise UsageError(f"--tp {n} needs {n} GPUs, {torch.cuda.device_count()} visible")
    decode_len = args.max_model_len or _pages(args.prompt_len + args.new_tokens)
    result = {"header": header(device if device.type == "cuda" else None), "suite": "engine",
              "mode": "tensor-parallel", "tp": n, "shape": bench.label, "model": args.model,
              "scaling_shape": None if scaling_shape == "none" else (bench.label if args.model else scaling_shape),
              "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "batch": args.batch,
              "prefill_len": args.prefill_len, "repeats": args.repeats, "kv_cache_gib": args.kv_cache_gib,
              "dtype": str(bench.dtype).replace("torch.", ""), "parts": parts, "comms": comms,
              "engines": {}, "prefill_variants": {}, "scaling": {}, "errors": {}, "complete": False}
    if device.type == "cuda":
        result["copy_bandwidth_tbs"] = copy_bandwidth_tbs()
        result["matmul_tflops"] = matmul_tflops()
        torch.cuda.empty_cache()
        clock.mark(f"ceilings: copy {result['copy_bandwidth_tbs']:.2f} TB/s, bf16 matmul "
                   f"{result['matmul_tflops']:.0f} TFLOP/s (cuda:0)")

    if args.resume:
        result = _resumed(result, args, clock)

    def attempt(section: str, key: str, fn, *a, **kw) -> None:
        """Run one engine's measurement into ``result[section][key]``; an error is recorded and the run goes
        on with the next engine. The JSON so far is written after each. An engine that a resumed run's JSON
        already holds is kept, not measured again."""
        if key in result[section]:
            clock.mark(f"{section}/{key}: kept from the run resumed")
            return
        try:
            result[section][key] = fn(*a, **kw)
        except Exception as e:
            traceback.print_exc()
            result["errors"][f"{section}/{key}"] = f"{type(e).__name__}: {e}"
            clock.mark(f"{section}/{key}: FAILED ({type(e).__name__})")
        _derive(result)
        result["timeline"] = clock.marks
        _save(result, args.out)

    # the model at TP=N, one engine per comm: decode and prefill in the same engine
    measures = [m for part, ms in (("decode", (decode_batch1, decode_batch)), ("prefill", (prefill,)))
                if part in parts for m in ms] + ([decode_trace] if args.trace else [])
    if measures:
        max_len = max(decode_len, _pages(args.prefill_len + 1) if "prefill" in parts else 0)
        for comm in comms:
            attempt("engines", comm, measure_engine, bench, clock, f"{bench.label} tp{n} comm={comm}",
                    measures, tensor_parallel_size=n, comm=comm, max_model_len=max_len)
        if "tritium" in comms and "decode" in parts:  # the one-launch row-parallel layers on (A/B, batch 1)
            attempt("engines", "tritium-fused-rows", measure_engine, bench, clock,
                    f"{bench.label} tp{n} comm=tritium, fuse_row_parallel=True", [decode_batch1],
                    tensor_parallel_size=n, comm="tritium", fuse_row_parallel=True, max_model_len=decode_len)
    if "prefill" in parts:
        for label, kwargs in PREFILL_VARIANTS.items():
            kwargs = {"tensor_parallel_size": n, "max_model_len": _pages(args.prefill_len + 1), **kwargs}
            attempt("prefill_variants", label, prefill_variant, bench, clock, f"prefill {label}", **kwargs)
    del bench
    gc.collect()
    # TP=1 vs TP=N of the scaling model, batch 1
    if "scaling" in parts and scaling_shape != "none":
        small = Bench(args, shape=scaling_shape, lazy=True)
        for size in (1, n):
            attempt("scaling", f"tp{size}", measure_engine, small, clock, f"{small.label} tp{size}",
                    [decode_batch1], tensor_parallel_size=size, comm="auto", max_model_len=decode_len)
        if "tritium" in comms:  # the one-launch row-parallel layers at the small shape (A/B)
            attempt("scaling", f"tp{n}-fused-rows", measure_engine, small, clock,
                    f"{small.label} tp{n} fuse_row_parallel=True", [decode_batch1], tensor_parallel_size=n,
                    comm="tritium", fuse_row_parallel=True, max_model_len=decode_len)
    _derive(result)
    result["complete"] = True
    result["timeline"] = clock.marks
    _save(result, args.out)
    _print(result)
    if result["errors"]:
        raise SystemExit(f"engine --tp {n}: {len(result['errors'])} engine(s) failed: "
                         + "; ".join(f"{k}: {v}" for k, v in result["errors"].items()))
    return result


# What a resumed run must share with the run it continues: its settings and the GPU.
RESUME_KEYS = ("tp", "shape", "model", "scaling_shape", "prompt_len", "new_tokens", "batch", "prefill_len", "repeats",
               "kv_cache_gib", "dtype")


def _resumed(fresh: dict, args, clock: Clock) -> dict:
    """The JSON at ``args.out`` (a run cut short) made the result of this run: its engines kept, its failed
    ones dropped (measured again), the parts and comms asked for now added, this call's date and ceilings
    appended to ``resumed``. UsageError where there is nothing to resume or the run was of other settings."""
    try:
        with open(args.out) as f:
            old = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"--resume: {args.out} does not exist; run without --resume to start") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"--resume: {args.out} is not JSON ({e}); run without --resume to start over") from None
    if old.get("mode") != "tensor-parallel":
        raise UsageError(f"--resume: {args.out} is not a tensor-parallel engine run (mode {old.get('mode')!r})")
    differ = [f"{k} {old.get(k)!r} there, {fresh[k]!r} now" for k in RESUME_KEYS if old.get(k) != fresh[k]]
    gpu, old_gpu = fresh["header"].get("gpu"), old.get("header", {}).get("gpu")
    if gpu != old_gpu:
        differ.append(f"gpu {old_gpu!r} there, {gpu!r} now")
    if differ:
        raise UsageError(f"--resume: {args.out} is a run of other settings ({'; '.join(differ)}); give the same "
                         f"options, or run without --resume to start over")
    failed = {tuple(key.split("/", 1)) for key in old.get("errors", {})}
    result = dict(old, complete=False, errors={})
    for section in ("engines", "prefill_variants", "scaling"):
        result[section] = {k: v for k, v in old.get(section, {}).items() if (section, k) not in failed}
    result["parts"] = list(dict.fromkeys([*old.get("parts", []), *fresh["parts"]]))
    result["comms"] = list(dict.fromkeys([*old.get("comms", []), *fresh["comms"]]))
    call = {"date": fresh["header"].get("date")}
    call.update({k: fresh[k] for k in ("copy_bandwidth_tbs", "matmul_tflops") if k in fresh})
    result["resumed"] = [*old.get("resumed", []), call]
    kept = sum(len(result[s]) for s in ("engines", "prefill_variants", "scaling"))
    clock.marks[:0] = old.get("timeline", [])
    clock.mark(f"resumed {args.out}: {kept} engine(s) kept, ceilings of the first call kept ({call})")
    return result


def _pages(tokens: int) -> int:
    """``tokens`` rounded up to whole KV pages of 16."""
    return -(-tokens // 16) * 16


def _save(result: dict, path: str | None) -> None:
    if path:
        save_json(result, path, indent=1)


def _ratio(a, b):
    return a / b if a is not None and b else None


def _derive(result: dict) -> None:
    """Ceilings of each engine, the ratios between engines, the targets (None: not measured)."""
    n, copy_tbs, mm = result["tp"], result.get("copy_bandwidth_tbs"), result.get("matmul_tflops")
    shape_cfg = SHAPES.get(result["shape"])
    for r in [*result["engines"].values(), *result["prefill_variants"].values(), *result["scaling"].values()]:
        if copy_tbs:
            r["weight_read_ms"] = r["weight_bytes"] / (copy_tbs * 1e12) * 1e3
            r["batch1_over_weight_read"] = _ratio(r.get("batch1_decode_ms"), r["weight_read_ms"])
        if mm and shape_cfg and "prefill_ms" in r:
            flops = prefill_flops(ModelConfig(model_type="llama", **shape_cfg), r["prefill_tokens"],
                                  r["tensor_parallel_size"])
            r["prefill_floor_ms"] = flops / (mm * 1e12) * 1e3
            r["prefill_tflops_per_rank"] = flops / (r["prefill_ms"] * 1e-3) / 1e12
    eng, sc = result["engines"], result["scaling"]
    tri, tor = eng.get("tritium", {}), eng.get("torch", {})
    ratios = {
        "batch1_over_weight_read": {c: r.get("batch1_over_weight_read") for c, r in eng.items()},
        "tritium_vs_torch_batch1": _ratio(tor.get("batch1_decode_ms"), tri.get("batch1_decode_ms")),
        "fused_rows_vs_unfused_batch1": _ratio(tri.get("batch1_decode_ms"),
                                               eng.get("tritium-fused-rows", {}).get("batch1_decode_ms")),
        "tritium_vs_torch_batch": _ratio(tri.get("batch_tokens_per_s"), tor.get("batch_tokens_per_s")),
        "tritium_vs_torch_batch_step": _ratio(tor.get("batch_decode_step_ms"), tri.get("batch_decode_step_ms")),
        "tritium_vs_torch_prefill": _ratio(tor.get("prefill_ms"), tri.get("prefill_ms")),
        f"scaling_tp{n}_over_tp1": _ratio(sc.get(f"tp{n}", {}).get("batch1_decode_ms"),
                                          sc.get("tp1", {}).get("batch1_decode_ms")),
        f"scaling_tp{n}_fused_rows_over_tp1": _ratio(sc.get(f"tp{n}-fused-rows", {}).get("batch1_decode_ms"),
                                                     sc.get("tp1", {}).get("batch1_decode_ms")),
    }
    result["ratios"] = ratios

    def at_most(v, limit):
        return None if v is None else v <= limit

    def at_least(v, limit):
        return None if v is None else v >= limit

    # None: not measured in this run (a part or comm left out, an engine that failed) or on the CPU, where
    # the targets mean nothing (interpreted kernels)
    targets = {
        f"batch1_within_{round((TARGET_STEP_OVER_WEIGHT_READ - 1) * 100)}pct_of_weight_read":
            at_most(ratios["batch1_over_weight_read"].get("tritium"), TARGET_STEP_OVER_WEIGHT_READ),
        f"tritium_vs_torch_batch1_at_least_{TARGET_B1_SPEEDUP_VS_TORCH}x":
            at_least(ratios["tritium_vs_torch_batch1"], TARGET_B1_SPEEDUP_VS_TORCH),
        f"tritium_vs_torch_batch_at_least_{TARGET_BATCH_SPEEDUP_VS_TORCH}x":
            at_least(ratios["tritium_vs_torch_batch"], TARGET_BATCH_SPEEDUP_VS_TORCH),
        f"scaling_tp2_over_tp1_at_most_{TARGET_TP2_OVER_TP1}":
            at_most(ratios[f"scaling_tp{n}_over_tp1"], TARGET_TP2_OVER_TP1) if n == 2 else None,
    }
    on_gpu = result["header"].get("gpu") is not None
    result["targets"] = targets if on_gpu else dict.fromkeys(targets)


def _print(result: dict) -> None:
    n, copy_tbs, mm = result["tp"], result.get("copy_bandwidth_tbs"), result.get("matmul_tflops")
    eng, sc, ratios = result["engines"], result["scaling"], result["ratios"]
    rows, b = [], result["batch"]
    for section, label in ((eng, result["shape"]), (result["prefill_variants"], "prefill"),
                           (sc, result["scaling_shape"])):
        for key, r in section.items():
            rows.append({"engine": f"{label} {key}", "tp": r["tensor_parallel_size"], "comm": r["comm"],
                         "b1 step ms": r.get("batch1_decode_ms"), "weight-read ms": r.get("weight_read_ms"),
                         "b1/read": r.get("batch1_over_weight_read"), f"b{b} tok/s": r.get("batch_tokens_per_s"),
                         f"b{b} step ms": r.get("batch_decode_step_ms"), "prefill ms": r.get("prefill_ms"),
                         "prefill floor ms": r.get("prefill_floor_ms"), "build s": r["build_seconds"]})
    h = result["header"]
    title = (f"engine --tp {n}: {result['shape']} {result['dtype']}, prompt {result['prompt_len']}, "
             f"{result['new_tokens']} new tokens, batch {result['batch']}, prefill {result['prefill_len']} | "
             f"{h.get('gpu') or 'cpu'} x{h.get('gpu_count') or n}, torch {h['torch']}, triton {h['triton']}, "
             f"{h['date']}")
    if copy_tbs:
        title += f"\ncopy bandwidth {copy_tbs:.2f} TB/s, bf16 matmul {mm:.0f} TFLOP/s (cuda:0)"
    print_table(rows, list(rows[0]) if rows else [], title=title)
    for k, v in ratios.items():
        if isinstance(v, dict):
            for c, x in v.items():
                print(f"{k} [{c}]: {'-' if x is None else f'{x:.3f}'}")
        else:
            print(f"{k}: {'-' if v is None else f'{v:.3f}'}")
    for k, v in result["targets"].items():
        print(f"target {k}: {'not measured' if v is None else 'met' if v else 'NOT met'}")
