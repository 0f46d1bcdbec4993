"""Engine benchmark: decode latency at batch 1 and throughput at batch 64 on a Llama-3-8B-shaped model.

    python -m tritium.bench engine [--out FILE] [--shape llama3-8b|tiny] [--systems tritium,sdpa,transformers]

Random bf16 weights are built once in GPU memory (same seed, same tensors for every system):

- ``tritium``: the engine with tritium's paged attention (CUDA graphs for decode).
- ``sdpa``: the same engine with PyTorch SDPA over gathered pages instead of tritium's attention.
- ``transformers``: Hugging Face ``LlamaForCausalLM.generate`` (SDPA attention) on the same tensors.

Batch 1: one prompt of ``--prompt-len`` tokens, ``--new-tokens`` greedy tokens; the decode step is
(time(N new tokens) - time(1 new token)) / (N - 1), so prefill is excluded. Batch 64: 64 such prompts,
output tokens per second end to end (prefill included) and decode steps per second. The ceiling is the
weight-read time: bytes of weights read per decode step / copy bandwidth measured in the same run.
``--shape tiny`` runs the same code on a small model (also on the CPU, as a smoke test).
"""

from __future__ import annotations

import gc
import time

import torch

from tritium.bench.common import cold_us, copy_bandwidth_tbs, header, print_table, time_ms

SHAPES = {
    "llama3-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=8192,
                      rope_theta=500000.0, rms_norm_eps=1e-5,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "tiny": dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, max_position_embeddings=1024, rope_theta=10000.0,
                 rms_norm_eps=1e-5),
}


def add_arguments(parser) -> None:
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b")
    parser.add_argument("--systems", default="tritium,sdpa,transformers",
                        help="comma-separated subset of tritium,sdpa,transformers")
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="batch-1 runs (median)")
    parser.add_argument("--kv-cache-gib", type=float, default=10.0)
    parser.add_argument("--max-model-len", type=int, default=None,
                        help="engine context (default: prompt + new tokens, rounded up to a page); decode graphs "
                             "are captured for it")
    parser.add_argument("--profile-host", action="store_true",
                        help="tritium: print a cProfile of one batch-1 generation (where the host time goes)")
    parser.add_argument("--ablate", action="store_true",
                        help="batch-1 graph time with each decode-chain fusion or PDL edge turned off (tritium)")
    parser.add_argument("--trace", action="store_true",
                        help="per-kernel time on the critical path of one batch-1 graph replay (tritium, CUPTI)")
    parser.add_argument("--prefetch-sweep", action="store_true",
                        help="tritium: also time the batch-1 CUDA graph under several weight-prefetch plans (GPU)")


def make_weights(cfg, dtype: torch.dtype, device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random Hugging Face-named weights (std 0.02, norms 1)."""
    g = torch.Generator(device=device).manual_seed(seed)
    h, i, q, kv = cfg.hidden_size, cfg.intermediate_size, cfg.q_size, cfg.kv_size

    def rnd(*shape):
        return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * 0.02).to(dtype)

    w = {"model.embed_tokens.weight": rnd(cfg.vocab_size, h), "model.norm.weight": torch.ones(h, dtype=dtype, device=device),
         "lm_head.weight": rnd(cfg.vocab_size, h)}
    for layer in range(cfg.num_hidden_layers):
        p = f"model.layers.{layer}."
        w.update({
            p + "input_layernorm.weight": torch.ones(h, dtype=dtype, device=device),
            p + "post_attention_layernorm.weight": torch.ones(h, dtype=dtype, device=device),
            p + "self_attn.q_proj.weight": rnd(q, h), p + "self_attn.k_proj.weight": rnd(kv, h),
            p + "self_attn.v_proj.weight": rnd(kv, h), p + "self_attn.o_proj.weight": rnd(h, q),
            p + "mlp.gate_proj.weight": rnd(i, h), p + "mlp.up_proj.weight": rnd(i, h),
            p + "mlp.down_proj.weight": rnd(h, i),
        })
    return w


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _prompts(n, length, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n, length), generator=g).tolist()


def bench_engine(cfg, weights, attention_backend, args, device, dtype) -> dict:
    from tritium.engine import LLM, SamplingParams

    max_len = args.prompt_len + args.new_tokens
    llm = LLM.from_weights(cfg, weights.items(), attention_backend=attention_backend, dtype=dtype, device=device,
                           max_model_len=args.max_model_len or -(-max_len // 16) * 16, max_num_seqs=max(args.batch, 1),
                           max_num_batched_tokens=4096, enable_prefix_caching=False,
                           kv_cache_memory=int(args.kv_cache_gib * 2**30))
    full = SamplingParams(max_tokens=args.new_tokens, ignore_eos=True)
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    llm.generate(_prompts(1, args.prompt_len, cfg.vocab_size, 99), SamplingParams(max_tokens=8, ignore_eos=True))
    step_ms = []
    for r in range(args.repeats):
        t_full = _timed(lambda: llm.generate(_prompts(1, args.prompt_len, cfg.vocab_size, 2 * r), full), device)
        t_one = _timed(lambda: llm.generate(_prompts(1, args.prompt_len, cfg.vocab_size, 2 * r + 1), one), device)
        step_ms.append((t_full - t_one) / (args.new_tokens - 1) * 1e3)
    step_ms.sort()
    # the batch-1 graph's inputs of the last decode step, rewound to leave room for the replays timed below
    b1_inputs = _graph_inputs(llm.runner) if 1 in llm.runner.graphs else None
    out = {"batch1_decode_ms": step_ms[len(step_ms) // 2], "batch1_decode_ms_all": step_ms,
           "weight_bytes": llm.model.weight_bytes(), "linear_backend": llm.engine_config.linear_backend,
           "linear_tuning": llm.model.linear.report}
    if getattr(args, "profile_host", False):
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        llm.generate(_prompts(1, args.prompt_len, cfg.vocab_size, 77), full)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        out["host_profile"] = buf.getvalue()
        print(out["host_profile"], flush=True)
    for row in llm.model.linear.report:
        print(f"  linear {row['weight']:>12} m={row['m']}: {row['choice']:>16}  {row['best_tbs']:.2f} TB/s "
              f"(cuBLAS {row['cublas_tbs']:.2f})", flush=True)
    # warm-up at full batch (prefill kernels compile here), then prefill alone, then the whole generation
    llm.generate(_prompts(args.batch, args.prompt_len, cfg.vocab_size, 3000), SamplingParams(max_tokens=2, ignore_eos=True))
    t_prefill = _timed(lambda: llm.generate(_prompts(args.batch, args.prompt_len, cfg.vocab_size, 2000), one), device)
    t_batch = _timed(lambda: llm.generate(_prompts(args.batch, args.prompt_len, cfg.vocab_size, 1000), full), device)
    out.update(batch_tokens_per_s=args.batch * args.new_tokens / t_batch, batch_seconds=t_batch,
               batch_prefill_seconds=t_prefill,
               batch_decode_step_ms=(t_batch - t_prefill) / (args.new_tokens - 1) * 1e3)
    # GPU time of one captured decode step; each replay moves its rows one token on (greedy_advance). Batch 1
    # starts ~70 tokens before the end of its last run; the larger batch's rows have their last run's
    # inputs (every sequence at max_len: rows stop there, see greedy_advance, and repeat that step).
    if llm.runner.graphs:
        for b in (1, args.batch):
            bucket = llm.runner.graph_bucket(b)
            if bucket is not None:
                graph, _ = llm.runner.graphs[bucket]
                if bucket == 1:
                    _set_graph_inputs(llm.runner, b1_inputs)
                out[f"graph_step_ms_b{bucket}"] = time_ms(graph.replay)
        out["weight_prefetch"] = llm.engine_config.weight_prefetch
        if getattr(args, "ablate", False) and device.type == "cuda" and attention_backend == "triton":
            out["ablation_graph_b1_ms"] = ablate(llm, b1_inputs)
            out["ablation_windows_b1_step_ms"] = ablate_windows(llm, args, cfg)
        if getattr(args, "trace", False) and device.type == "cuda" and attention_backend == "triton":
            _set_graph_inputs(llm.runner, b1_inputs)
            out["trace_b1"] = trace_step(llm)
        if getattr(args, "prefetch_sweep", False) and device.type == "cuda":
            out["prefetch_sweep"] = prefetch_sweep(llm)
    del llm
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


# (label, rope and KV write as two kernels, attention kernels launched with PDL (None: the engine's
# choice), no PDL anywhere, split-KV count (None: the engine's))
ABLATIONS = (
    ("as shipped", False, None, False, None),
    ("rope and KV write apart", True, None, False, None),
    ("attention with PDL", False, True, False, None),
    ("no PDL anywhere", False, None, True, None),
    ("attention 6 splits (2 tiles each)", False, None, False, 6),
    ("attention 3 splits", False, None, False, 3),
)


def ablate(llm, inputs: dict, rounds: int = 3) -> dict:
    """Median batch-1 graph replay time (ms) of each of ABLATIONS, captured again for each and timed in
    ``rounds`` interleaved rounds (slow drifts of clock or temperature hit every variant alike)."""
    import contextlib

    from tritium.runtime import pdl_disabled

    model, runner = llm.model, llm.runner
    fused, own_pdl, own_splits = model.rope_write_kv, model.attention.pdl, model.attention.num_splits
    times: dict[str, list[float]] = {label: [] for label, *_ in ABLATIONS}
    try:
        for _ in range(rounds):
            for label, apart, attn_pdl, no_pdl, splits in ABLATIONS:
                model.rope_write_kv = None if apart else fused
                model.attention.pdl = own_pdl if attn_pdl is None else attn_pdl
                model.attention.num_splits = own_splits if splits is None else splits
                runner.graphs.clear()
                with pdl_disabled() if no_pdl else contextlib.nullcontext():
                    runner.capture(1)
                _set_graph_inputs(runner, inputs)
                times[label].append(time_ms(runner.graphs[1][0].replay))
    finally:
        model.rope_write_kv, model.attention.pdl, model.attention.num_splits = fused, own_pdl, own_splits
        runner.graphs.clear()
        runner.capture(llm.engine_config.max_num_seqs)
        _set_graph_inputs(runner, inputs)
    res = {label: sorted(t)[len(t) // 2] for label, t in times.items()}
    for label, ms in res.items():
        print(f"  ablation {label:>26}: b1 graph {ms:.3f} ms  (all: {', '.join(f'{t:.3f}' for t in times[label])})",
              flush=True)
    return res


def ablate_windows(llm, args, cfg, rounds: int = 3) -> dict:
    """Median batch-1 decode step (ms, measured as the main figure: generations of N and 1 new tokens) with
    greedy windows pipelined (the next window queued before the host reads the one in flight) and not,
    interleaved over ``rounds``."""
    from tritium.engine import SamplingParams

    full = SamplingParams(max_tokens=args.new_tokens, ignore_eos=True)
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    variants = {"pipelined (shipped)": True, "not pipelined": False}
    times: dict[str, list[float]] = {v: [] for v in variants}
    try:
        for r in range(rounds):
            for v, pipelined in variants.items():
                llm.pipeline_windows = pipelined
                t_full = _timed(lambda: llm.generate(_prompts(1, args.prompt_len, cfg.vocab_size, 50 + r), full),
                                llm.device)
                t_one = _timed(lambda: llm.generate(_prompts(1, args.prompt_len, cfg.vocab_size, 60 + r), one),
                               llm.device)
                times[v].append((t_full - t_one) / (args.new_tokens - 1) * 1e3)
    finally:
        llm.pipeline_windows = True
    res = {v: sorted(t)[len(t) // 2] for v, t in times.items()}
    for v, ms in res.items():
        print(f"  windows {v:>22}: b1 step {ms:.3f} ms  (all: {', '.join(f'{t:.3f}' for t in times[v])})", flush=True)
    return res


GRAPH_INPUTS = ("ids", "pos", "slots", "block_table", "seq_lens", "stop")


def _graph_inputs(runner, room: int = 70) -> dict:
    """The batch-1 graph's inputs for timing: the last decode step of a full-length run moved back ``room``
    tokens (each replay advances one token; a fresh capture would time 1-token sequences instead), so
    replayed graphs run over that run's pages and context, and KV writes land in its (freed) pages."""
    bufs = runner.graphs[1][1]
    inputs = {k: bufs[k].clone() for k in GRAPH_INPUTS}
    pos = max(0, int(inputs["seq_lens"][0]) - 1 - room)
    page = int(inputs["block_table"][0, pos // runner.block_size])
    inputs["pos"][0] = pos
    inputs["seq_lens"][0] = pos + 1
    inputs["slots"][0] = page * runner.block_size + pos % runner.block_size
    inputs["stop"][0] = pos + room  # the row's last token: it stops there, as it did in the run
    return inputs


def _set_graph_inputs(runner, inputs: dict) -> None:
    bufs = runner.graphs[1][1]
    for k, v in inputs.items():
        bufs[k].copy_(v)
    torch.cuda.synchronize()


PROJECTIONS = ("qkv", "o_proj", "gate_up", "down")


def trace_step(llm, replays: int = 3) -> dict:
    """Kernel timeline of the batch-1 graph (CUPTI through torch.profiler), middle replay of ``replays``.

    A kernel's exposed time is how far it moves the end of the step: its end minus the latest end of the
    kernels before it (0 when it ends inside them). Summed by kernel (projections by their order in the
    layer, the last one lm_head) it says where the step's time goes beyond the weight reads.
    """
    import json
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    graph, bufs = llm.runner.graphs[1]
    out_seq_len = int(bufs["seq_lens"][0])
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    if not kernels or len(kernels) % replays:
        return {"error": f"{len(kernels)} kernels traced for {replays} replays"}
    n = len(kernels) // replays
    step = kernels[n: 2 * n] if replays > 2 else kernels[:n]
    nproj = sum(1 for e in step if _is_projection(e["name"]))
    by: dict[str, dict] = {}
    proj = 0
    latest_end = step[0]["ts"]
    for e in step:
        name = e["name"]
        if _is_projection(name):
            label = "lm_head" if proj == nproj - 1 else PROJECTIONS[proj % 4]
            proj += 1
        else:
            label = name.split("(")[0][:48]
        end = e["ts"] + e["dur"]
        row = by.setdefault(label, {"count": 0, "busy_us": 0.0, "exposed_us": 0.0})
        row["count"] += 1
        row["busy_us"] += e["dur"]
        row["exposed_us"] += max(0.0, end - latest_end)
        latest_end = max(latest_end, end)
    span = latest_end - step[0]["ts"]
    print(f"  trace: {n} kernels, step span {span / 1e3:.3f} ms (kernel start to kernel end), "
          f"context {out_seq_len}", flush=True)
    for label, row in sorted(by.items(), key=lambda kv: -kv[1]["exposed_us"]):
        print(f"    {label:>48}: x{row['count']:<4} exposed {row['exposed_us']:8.1f} us "
              f"({row['exposed_us'] / row['count']:6.2f} each)  busy {row['busy_us'] / row['count']:6.2f} each", flush=True)
    return {"kernels": n, "span_us": span, "seq_len": out_seq_len, "by_kernel": by}


def _is_projection(name: str) -> bool:
    return "gemv" in name or "gemm" in name or "nvjet" in name or "cutlass" in name


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


def prefetch_sweep(llm) -> dict:
    """Batch-1 graph replay time (ms) under each of PREFETCH_PLANS (the graph is captured again for each),
    plus a single o_proj read with and without a prefetch ahead of it. Restores the engine's own plan."""
    import torch.nn.functional as F

    from tritium.engine.prefetch import prefetch_l2

    model, runner = llm.model, llm.runner
    saved = (model.prefetcher, model.prefetch_plan)
    res = {"graph_b1_ms": {}}
    for label, plan, evict_last in PREFETCH_PLANS:
        try:
            if plan is None:
                model.prefetcher, model.prefetch_plan = None, {}
            else:
                model.enable_prefetch(plan, evict_last=evict_last)
            runner.graphs.clear()
            runner.capture(1)
            graph, _ = runner.graphs[1]
            res["graph_b1_ms"][label] = time_ms(graph.replay)
        except Exception as e:  # report and go on: the rest of the run still counts
            res["graph_b1_ms"][label] = None
            res.setdefault("errors", {})[label] = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"  prefetch {label}: FAILED {res['errors'][label]}", flush=True)
            continue
        print(f"  prefetch {label:>18}: b1 graph {res['graph_b1_ms'][label]:.3f} ms", flush=True)
    model.prefetcher, model.prefetch_plan = saved
    runner.graphs.clear()
    runner.capture(llm.engine_config.max_num_seqs)
    # one o_proj read after L2 was flushed, with and without prefetching it ~20 us before
    w = model.layers[0]["o_proj"]
    x = torch.randn(1, w.shape[1], dtype=w.dtype, device=w.device)
    flush = torch.empty(256 * MB, dtype=torch.uint8, device=w.device)
    gemv_cfg = model.linear.choices.get((1, w.shape[0], w.shape[1]))
    fns = {"cublas": lambda: F.linear(x, w)}
    if gemv_cfg is not None:
        from tritium.engine.gemv import gemv
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


def hf_rope_kwargs(theta: float, scaling: dict | None) -> dict:
    """Rope settings for a transformers config: ``rope_parameters`` (5.x) or ``rope_theta``/``rope_scaling`` (4.x)."""
    import transformers

    if int(transformers.__version__.split(".")[0]) >= 5:
        return {"rope_parameters": dict(scaling or {"rope_type": "default"}, rope_theta=theta)}
    return {"rope_theta": theta, "rope_scaling": scaling}


def bench_transformers(cfg, weights, args, device, dtype) -> dict:
    import transformers

    hf_cfg = transformers.LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings, rms_norm_eps=cfg.rms_norm_eps,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=0,
        **hf_rope_kwargs(cfg.rope_theta, cfg.rope_scaling))
    hf_cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(hf_cfg)
    model.load_state_dict(weights, strict=False, assign=True)
    with torch.device("cpu"):  # non-persistent rope buffers are not in the state dict: rebuild them
        model.model.rotary_emb = type(model.model.rotary_emb)(hf_cfg).to(device)
    model = model.to(dtype).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0

    def gen(n, new, seed):
        ids = torch.tensor(_prompts(n, args.prompt_len, cfg.vocab_size, seed), device=device)
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                           do_sample=False)

    gen(1, 8, 99)
    step_ms = []
    for r in range(args.repeats):
        t_full = _timed(lambda: gen(1, args.new_tokens, 2 * r), device)
        t_one = _timed(lambda: gen(1, 1, 2 * r + 1), device)
        step_ms.append((t_full - t_one) / (args.new_tokens - 1) * 1e3)
    step_ms.sort()
    gen(args.batch, 2, 3000)
    t_prefill = _timed(lambda: gen(args.batch, 1, 2000), device)
    t_batch = _timed(lambda: gen(args.batch, args.new_tokens, 1000), device)
    out = {"batch1_decode_ms": step_ms[len(step_ms) // 2], "batch1_decode_ms_all": step_ms,
           "batch_tokens_per_s": args.batch * args.new_tokens / t_batch, "batch_seconds": t_batch,
           "batch_prefill_seconds": t_prefill,
           "batch_decode_step_ms": (t_batch - t_prefill) / (args.new_tokens - 1) * 1e3}
    del model
    gc.collect()
    return out


def run(args) -> dict:
    from tritium.runtime import select_backend

    backend = select_backend()
    from tritium.engine.config import ModelConfig

    device = torch.device("cuda" if backend == "gpu" else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    cfg = ModelConfig(model_type="llama", **SHAPES[args.shape])
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - {"tritium", "sdpa", "transformers"}
    if unknown:
        raise ValueError(f"--systems: unknown {sorted(unknown)}; expected tritium, sdpa, transformers")
    result = {"header": header(device if device.type == "cuda" else None), "suite": "engine", "shape": args.shape,
              "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "batch": args.batch,
              "max_model_len": args.max_model_len,
              "dtype": str(dtype).replace("torch.", ""), "systems": {}}
    if device.type == "cuda":
        result["copy_bandwidth_tbs"] = copy_bandwidth_tbs()
    weights = make_weights(cfg, dtype, device)
    for name in systems:
        print(f"running {name} ...", flush=True)
        if name == "transformers":
            result["systems"][name] = bench_transformers(cfg, weights, args, device, dtype)
        else:
            result["systems"][name] = bench_engine(cfg, weights, "triton" if name == "tritium" else "torch", args,
                                                   device, dtype)
    _summarise(result)
    return result


def _summarise(result: dict) -> None:
    sysres = result["systems"]
    wbytes = next((r["weight_bytes"] for r in sysres.values() if "weight_bytes" in r), None)
    if wbytes and "copy_bandwidth_tbs" in result:
        result["weight_bytes"] = wbytes
        result["weight_read_ms"] = wbytes / (result["copy_bandwidth_tbs"] * 1e12) * 1e3
    rows = []
    for name, r in sysres.items():
        rows.append({"system": name, "b1 step ms": r["batch1_decode_ms"], "b1 graph ms": r.get("graph_step_ms_b1"),
                     f"b{result['batch']} tok/s": r["batch_tokens_per_s"],
                     f"b{result['batch']} step ms": r["batch_decode_step_ms"],
                     "prefill s": r["batch_prefill_seconds"]})
    ratios = {}
    t = sysres.get("tritium")
    if t:
        if "weight_read_ms" in result:
            ratios["batch1_step_over_weight_read"] = t["batch1_decode_ms"] / result["weight_read_ms"]
        if "sdpa" in sysres:
            ratios["batch1_speedup_vs_sdpa"] = sysres["sdpa"]["batch1_decode_ms"] / t["batch1_decode_ms"]
            ratios["batch_speedup_vs_sdpa"] = t["batch_tokens_per_s"] / sysres["sdpa"]["batch_tokens_per_s"]
        if "transformers" in sysres:
            ratios["batch_speedup_vs_transformers"] = t["batch_tokens_per_s"] / sysres["transformers"]["batch_tokens_per_s"]
            ratios["batch1_speedup_vs_transformers"] = sysres["transformers"]["batch1_decode_ms"] / t["batch1_decode_ms"]
    result["ratios"] = ratios
    # None: not measured in this run (a system left out with --systems, or no copy ceiling on the CPU)
    result["targets"] = {
        "batch1_within_15pct_of_weight_read": (ratios["batch1_step_over_weight_read"] <= 1.15
                                               if "batch1_step_over_weight_read" in ratios else None),
        "vs_sdpa_at_least_1x": (min(ratios["batch1_speedup_vs_sdpa"], ratios["batch_speedup_vs_sdpa"]) >= 1.0
                                if "batch_speedup_vs_sdpa" in ratios else None),
        "batch_vs_transformers_at_least_3x": (ratios["batch_speedup_vs_transformers"] >= 3.0
                                              if "batch_speedup_vs_transformers" in ratios else None),
    }
    h = result["header"]
    title = (f"engine: {result['shape']} {result['dtype']}, prompt {result['prompt_len']}, {result['new_tokens']} new "
             f"tokens | {h.get('gpu') or 'cpu'}, torch {h['torch']}, triton {h['triton']}, {h['date']}")
    if "weight_read_ms" in result:
        title += (f"\ncopy bandwidth {result['copy_bandwidth_tbs']:.2f} TB/s, weights {result['weight_bytes'] / 1e9:.2f} GB"
                  f" -> weight-read time {result['weight_read_ms']:.2f} ms")
    print_table(rows, list(rows[0]) if rows else [], title=title)
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    for k, v in result["targets"].items():
        print(f"target {k}: {'not measured' if v is None else 'met' if v else 'NOT met'}")
