"""Engine benchmark: decode latency at batch 1 and throughput at batch 64.

    python -m tritium.bench engine [--out FILE] [--shape llama3-8b|qwen3-8b|qwen3-30b-a3b|mixtral-8x7b|
                                   qwen1.5-moe-a2.7b|gemma-3-12b|tiny | --model PATH] [--systems ...]
    python -m tritium.bench engine --tp N [--shape llama3-70b|tiny] [--comm tritium,torch]   (tensor parallel)

The model is a Llama-3-8B-shaped decoder with random bf16 weights built once in GPU memory (same seed,
same tensors for every system), or, with ``--model``, a user's checkpoint (Hugging Face directory or GGUF
file, loaded by each system; prompts are random token ids of its vocabulary):

- ``tritium``: the engine with tritium's paged attention (CUDA graphs for decode).
- ``sdpa``: the same engine with PyTorch SDPA over gathered pages instead of tritium's attention.
- ``transformers``: Hugging Face ``LlamaForCausalLM.generate`` (``Qwen3ForCausalLM`` for ``--shape qwen3-8b``,
  ``Gemma3ForCausalLM`` for ``gemma-3-12b``; SDPA attention) on the same weights.
- ``tritium-invariant`` (not in the default list): the engine with ``batch_invariant=True``.
- ``tritium-fp8`` (not in the default list): the engine with ``quantization="fp8"`` (the same weights
  quantized at load: weight-only FP8); its batch-1 step is compared with its own weight read.
- ``tritium-fp8-dynamic`` (not in the default list): ``quantization="fp8-dynamic"`` (the same fp8 weights,
  activations quantized per token: W8A8).
- ``tritium-kv-fp8`` (not in the default list): ``kv_cache_dtype="fp8"`` (keys and values stored in fp8: half
  the KV bytes a decode step reads, twice the pages in ``--kv-cache-gib``).
- ``tritium-int4`` (not in the default list): ``quantization="int4"`` (the same weights quantized at load to
  4-bit codes in groups of 128: weight-only int4); its batch-1 step is compared with its own weight read.

Each tritium system also answers one greedy request with its tokens' log-probabilities alone and then
beside 16 other requests of other lengths (``invariance``: how many of its tokens and log-probabilities
came out with the same bits); ``batch_invariant=True`` must give all of them.

Batch 1: one prompt of ``--prompt-len`` tokens, ``--new-tokens`` greedy tokens; the decode step is
(time(N new tokens) - time(1 new token)) / (N - 1), so prefill is excluded. Batch 64: 64 such prompts,
output tokens per second end to end (prefill included) and decode steps per second. The ceiling is the
weight-read time: bytes of weights read per decode step / copy bandwidth measured in the same run (a mixture of
experts: the router and ``num_experts_per_tok`` experts a layer, what a batch-1 step reads).
``--shape tiny`` runs the same code on a small model (also on the CPU, as a smoke test). Ablations of
the decode chain and a kernel trace are the ``engine-ablate`` suite. ``--tp N`` (N > 1) measures the
engine sharded over N GPUs instead: :mod:`tritium.bench.engine_tp`.
"""

from __future__ import annotations

import gc
import os

import torch

from tritium.bench import engine_tp
from tritium.bench.args import UsageError, integer, name_list
from tritium.bench.common import copy_bandwidth_tbs, header, print_table, time_ms
from tritium.bench.engine_common import (SHAPES, Bench, add_model_arguments, batch1_step_ms, batch_throughput,
                                         engine_generate)
from tritium.bench.engine_common import make_weights  # noqa: F401 (where tests/models/test_weights.py finds it)
from tritium.engine import SamplingParams

SYSTEMS = ("tritium", "sdpa", "transformers", "tritium-invariant", "tritium-fp8", "tritium-fp8-dynamic",
           "tritium-int4", "tritium-kv-fp8")
DEFAULT_SYSTEMS = SYSTEMS[:3]


def add_arguments(parser) -> None:
    add_model_arguments(parser, default_shape=None)
    parser.add_argument("--systems", type=name_list(SYSTEMS), default=",".join(DEFAULT_SYSTEMS),
                        help="comma-separated subset of " + ",".join(SYSTEMS) + " (default: the first three)")
    parser.add_argument("--batch", type=integer(1), default=64)
    parser.add_argument("--repeats", type=integer(1), default=3, help="batch-1 runs (median)")
    parser.add_argument("--profile-host", action="store_true",
                        help="tritium: print a cProfile of one batch-1 generation (where the host time goes)")
    engine_tp.add_arguments(parser)


def invariance(bench: Bench, llm, new_tokens: int = 32, others: int = 16) -> dict:
    """One greedy request with its log-probabilities, alone and then beside ``others`` requests of other
    lengths: how many of its tokens and log-probabilities have the same bits both times."""
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, logprobs=1, ignore_eos=True)
    target = bench.prompts(1, 5)[0]
    g = torch.Generator().manual_seed(6)
    lengths = torch.randint(8, bench.args.prompt_len + 1, (others,), generator=g).tolist()
    batch = [bench.prompts(1, 100 + i, n)[0] for i, n in enumerate(lengths)]
    alone = llm.generate([target], params)[0]
    mixed = llm.generate(batch[:others // 2] + [target] + batch[others // 2:], params)[others // 2]
    same_tokens = sum(a == b for a, b in zip(alone.token_ids, mixed.token_ids))
    same_logprobs = sum(a.logprob == b.logprob for a, b in zip(alone.logprobs, mixed.logprobs))
    first = next((i for i, (a, b) in enumerate(zip(alone.logprobs, mixed.logprobs)) if a.logprob != b.logprob), None)
    return {"tokens": new_tokens, "same_tokens": same_tokens, "same_logprobs": same_logprobs,
            "first_logprob_difference_at": first, "others": others,
            "max_abs_logprob_difference": max(abs(a.logprob - b.logprob) for a, b in zip(alone.logprobs, mixed.logprobs))}


def bench_engine(bench: Bench, attention_backend: str, **engine_kwargs) -> dict:
    args, device = bench.args, bench.device
    llm = bench.llm(attention_backend, args.batch, **engine_kwargs)
    engine = llm.engine
    generate = engine_generate(llm)
    step_ms = batch1_step_ms(bench, generate, args.repeats)
    # the batch-1 graph's inputs of the last decode step, rewound to leave room for the replays timed below
    b1_inputs = graph_inputs(engine.runner) if 1 in engine.runner.graphs else None
    out = {"batch1_decode_ms": step_ms[len(step_ms) // 2], "batch1_decode_ms_all": step_ms,
           "weight_bytes": engine.model.weight_bytes(), "linear_backend": engine.config.linear_backend,
           "linear_tuning": engine.model.linear.report, "linear_chain": engine.model.linear.chain_report,
           "linear_rejected": engine.model.linear.rejected,
           "linear_from_record": engine.model.linear.restored,  # timed by an earlier start (linear_cache)
           "kv_cache_dtype": str(engine.runner.kv_cache.dtype).removeprefix("torch."),
           "kv_pages": engine.block_manager.num_blocks}
    if args.profile_host:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        generate(bench.prompts(1, 77), args.new_tokens)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        out["host_profile"] = buf.getvalue()
        print(out["host_profile"], flush=True)
    for row in engine.model.linear.report:  # (int4 rows time the int4 GEMVs only: no cuBLAS figure)
        cublas = f"(cuBLAS {row['cublas_tbs']:.2f})" if "cublas_tbs" in row else f"({row.get('variant')})"
        print(f"  linear {row['weight']:>12} m={row['m']}: {row['choice']:>16}  {row['best_tbs']:.2f} TB/s {cublas}",
              flush=True)
    for row in engine.model.linear.chain_report:
        print(f"  linear chain m={row['m']}: graph {row['graph_ms']}, kept {row['kept']}", flush=True)
    out["invariance"] = invariance(bench, llm)
    print(f"  invariance: {out['invariance']}", flush=True)
    out.update(batch_throughput(bench, generate))
    # GPU time of one captured decode step; each replay moves its rows one token on (greedy_advance). Batch 1
    # starts ~70 tokens before the end of its last run; the larger batch's rows have their last run's
    # inputs (every sequence at max_len: rows stop there, see greedy_advance, and repeat that step).
    runner = engine.runner
    if runner.graphs:
        for b in (1, args.batch):
            bucket = runner.graph_bucket(b)
            if bucket is not None:
                if bucket == 1:
                    set_graph_inputs(runner, b1_inputs)
                out[f"graph_step_ms_b{bucket}"] = time_ms(runner.graphs[bucket].graph.replay)
        out["weight_prefetch"] = engine.config.weight_prefetch
    del llm, engine, runner
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


GRAPH_INPUTS = ("ids", "pos", "slots", "block_table", "seq_lens", "stop")


def graph_inputs(runner, room: int = 70) -> dict:
    """The batch-1 graph's inputs for timing: the last decode step of a full-length run moved back ``room``
    tokens (each replay advances one token; a fresh capture would time 1-token sequences instead), so
    replayed graphs run over that run's pages and context, and KV writes land in its (freed) pages."""
    bufs = runner.graphs[1].bufs
    inputs = {k: getattr(bufs, k).clone() for k in GRAPH_INPUTS}
    pos = max(0, int(inputs["seq_lens"][0]) - 1 - room)
    page = int(inputs["block_table"][0, pos // runner.block_size])
    inputs["pos"][0] = pos
    inputs["seq_lens"][0] = pos + 1
    inputs["slots"][0] = page * runner.block_size + pos % runner.block_size
    inputs["stop"][0] = pos + room  # the row's last token: it stops there, as it did in the run
    return inputs


def set_graph_inputs(runner, inputs: dict) -> None:
    bufs = runner.graphs[1].bufs
    for k, v in inputs.items():
        getattr(bufs, k).copy_(v)
    torch.cuda.synchronize()


def hf_rope_kwargs(theta: float, scaling: dict | None) -> dict:
    """Rope settings for a transformers config: ``rope_parameters`` (5.x) or ``rope_theta``/``rope_scaling`` (4.x)."""
    import transformers

    if int(transformers.__version__.split(".")[0]) >= 5:
        return {"rope_parameters": dict(scaling or {"rope_type": "default"}, rope_theta=theta)}
    return {"rope_theta": theta, "rope_scaling": scaling}


def transformers_model(bench: Bench):
    """transformers' model of the same weights (SDPA attention), in eval mode on the bench's device."""
    import transformers

    cfg, device, dtype = bench.config, bench.device, bench.dtype
    if bench.weights is None:
        path = bench.args.model
        kw = {"gguf_file": os.path.basename(path)} if path.endswith(".gguf") else {}
        model = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.dirname(path) if kw else path, dtype=dtype, attn_implementation="sdpa", **kw).to(device)
    elif cfg.model_type == "gemma3_text":
        hf_cfg = transformers.Gemma3TextConfig(
            vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
            num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
            num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
            max_position_embeddings=cfg.max_position_embeddings, rms_norm_eps=cfg.rms_norm_eps,
            sliding_window=cfg.sliding_window, layer_types=list(cfg.layer_types),
            query_pre_attn_scalar=cfg.query_pre_attn_scalar, tie_word_embeddings=True, bos_token_id=None,
            eos_token_id=None, pad_token_id=0,
            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": cfg.rope_local_theta},
                             "full_attention": dict(cfg.rope_scaling or {"rope_type": "default"},
                                                    rope_theta=cfg.rope_theta)})
        model = _meta_model(transformers.Gemma3ForCausalLM, hf_cfg, bench.weights, device)
        model.model.embed_tokens.embed_scale = torch.tensor(cfg.hidden_size ** 0.5, device=device)  # a buffer
    else:
        config_cls, model_cls = ((transformers.Qwen3Config, transformers.Qwen3ForCausalLM) if cfg.model_type == "qwen3"
                                 else (transformers.LlamaConfig, transformers.LlamaForCausalLM))
        hf_cfg = config_cls(
            vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
            num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
            num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
            max_position_embeddings=cfg.max_position_embeddings, rms_norm_eps=cfg.rms_norm_eps,
            tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=0,
            **hf_rope_kwargs(cfg.rope_theta, cfg.rope_scaling))
        model = _meta_model(model_cls, hf_cfg, bench.weights, device)
    model = model.to(dtype).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def _meta_model(model_cls, hf_cfg, weights: dict, device):
    """``model_cls(hf_cfg)`` built on the meta device over ``weights`` (SDPA attention, tied weights tied)."""
    hf_cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = model_cls(hf_cfg)
    model.load_state_dict(weights, strict=False, assign=True)
    if hf_cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    with torch.device("cpu"):  # non-persistent rope buffers are not in the state dict: rebuild them
        model.model.rotary_emb = type(model.model.rotary_emb)(hf_cfg).to(device)
    return model


def bench_transformers(bench: Bench) -> dict:
    args, device = bench.args, bench.device
    model = transformers_model(bench)

    def generate(prompts, new):
        ids = torch.tensor(prompts, device=device)
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                           do_sample=False)

    step_ms = batch1_step_ms(bench, generate, args.repeats)
    out = {"batch1_decode_ms": step_ms[len(step_ms) // 2], "batch1_decode_ms_all": step_ms,
           **batch_throughput(bench, generate)}
    del model
    gc.collect()
    return out


def run(args) -> dict:
    if args.tp > 1:
        return engine_tp.run(args)
    args.shape = args.shape or "llama3-8b"
    systems = args.systems
    experts = args.model is None and SHAPES[args.shape].get("num_experts", 0) > 0
    if experts and "transformers" in systems:
        raise UsageError(f"--systems: transformers is not run on the random mixture-of-experts shape {args.shape!r} "
                         f"(its experts are stacked differently); leave it out or pass --model")
    # a mixture of experts' random weights (61-93 GB) drawn as each engine loads them, not held twice
    bench = Bench(args, lazy=experts)
    device = bench.device
    result = {"header": header(device if device.type == "cuda" else None), "suite": "engine", "shape": bench.label,
              "model": args.model, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "batch": args.batch, "max_model_len": args.max_model_len,
              "dtype": str(bench.dtype).replace("torch.", ""), "systems": {}}
    if device.type == "cuda":
        result["copy_bandwidth_tbs"] = copy_bandwidth_tbs()
    for name in systems:
        print(f"running {name} ...", flush=True)
        if name == "transformers":
            result["systems"][name] = bench_transformers(bench)
        elif name == "tritium-invariant":
            result["systems"][name] = bench_engine(bench, "triton", batch_invariant=True)
        elif name == "tritium-kv-fp8":
            result["systems"][name] = bench_engine(bench, "triton", kv_cache_dtype="fp8")
        elif name in ("tritium-fp8", "tritium-fp8-dynamic", "tritium-int4"):
            result["systems"][name] = bench_engine(bench, "triton", quantization=name.removeprefix("tritium-"))
        else:
            result["systems"][name] = bench_engine(bench, "triton" if name == "tritium" else "torch")
        r = result["systems"][name]  # as it goes: a run cut short still shows the systems it finished
        print(f"  {name}: batch-1 step {r['batch1_decode_ms']:.3f} ms, batch {args.batch} "
              f"{r['batch_tokens_per_s']:.0f} tok/s, prefill {r['batch_prefill_seconds']:.3f} s", flush=True)
    _summarise(result)
    return result


def _summarise(result: dict) -> None:
    sysres = result["systems"]
    wbytes = sysres.get("tritium", {}).get("weight_bytes") or next(
        (r["weight_bytes"] for n, r in sysres.items() if "weight_bytes" in r
         and not n.startswith(("tritium-fp8", "tritium-int4"))),
        None)
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
        for system, key in (("tritium-fp8", "fp8"), ("tritium-fp8-dynamic", "fp8_dynamic"), ("tritium-int4", "int4")):
            fp8 = sysres.get(system)
            if fp8 is None:
                continue
            ratios[f"{key}_batch1_speedup"] = t["batch1_decode_ms"] / fp8["batch1_decode_ms"]
            ratios[f"{key}_batch_tokens_per_s_ratio"] = fp8["batch_tokens_per_s"] / t["batch_tokens_per_s"]
            ratios[f"{key}_prefill_speedup"] = t["batch_prefill_seconds"] / fp8["batch_prefill_seconds"]
            if "copy_bandwidth_tbs" in result:
                ratios[f"{key}_batch1_step_over_its_weight_read"] = fp8["batch1_decode_ms"] / (
                    fp8["weight_bytes"] / (result["copy_bandwidth_tbs"] * 1e12) * 1e3)
        if "sdpa" in sysres:
            ratios["batch1_speedup_vs_sdpa"] = sysres["sdpa"]["batch1_decode_ms"] / t["batch1_decode_ms"]
            ratios["batch_speedup_vs_sdpa"] = t["batch_tokens_per_s"] / sysres["sdpa"]["batch_tokens_per_s"]
        if "transformers" in sysres:
            ratios["batch_speedup_vs_transformers"] = t["batch_tokens_per_s"] / sysres["transformers"]["batch_tokens_per_s"]
            ratios["batch1_speedup_vs_transformers"] = sysres["transformers"]["batch1_decode_ms"] / t["batch1_decode_ms"]
        inv = sysres.get("tritium-invariant")
        if inv:
            ratios["invariant_batch1_step_over_tritium"] = inv["batch1_decode_ms"] / t["batch1_decode_ms"]
            ratios["invariant_batch_throughput_over_tritium"] = inv["batch_tokens_per_s"] / t["batch_tokens_per_s"]
            ratios["invariant_prefill_over_tritium"] = inv["batch_prefill_seconds"] / t["batch_prefill_seconds"]
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
