"""Engine benchmark: decode latency at batch 1 and throughput at batch 64.

    python -m tritium.bench engine [--out FILE] [--shape llama3-8b|tiny | --model PATH] [--systems ...]

The model is a Llama-3-8B-shaped decoder with random bf16 weights built once in GPU memory (same seed,
same tensors for every system), or, with ``--model``, a user's checkpoint (Hugging Face directory or GGUF
file, loaded by each system; prompts are random token ids of its vocabulary):

- ``tritium``: the engine with tritium's paged attention (CUDA graphs for decode).
- ``sdpa``: the same engine with PyTorch SDPA over gathered pages instead of tritium's attention.
- ``transformers``: Hugging Face ``LlamaForCausalLM.generate`` (SDPA attention) on the same weights.

Batch 1: one prompt of ``--prompt-len`` tokens, ``--new-tokens`` greedy tokens; the decode step is
(time(N new tokens) - time(1 new token)) / (N - 1), so prefill is excluded. Batch 64: 64 such prompts,
output tokens per second end to end (prefill included) and decode steps per second. The ceiling is the
weight-read time: bytes of weights read per decode step / copy bandwidth measured in the same run.
``--shape tiny`` runs the same code on a small model (also on the CPU, as a smoke test). Ablations of
the decode chain and a kernel trace are the ``engine-ablate`` suite.
"""

from __future__ import annotations

import gc
import os
import time

import torch

from tritium.bench.common import copy_bandwidth_tbs, header, print_table, time_ms
from tritium.engine import LLM, SamplingParams
from tritium.engine.llm_engine import load_checkpoint
from tritium.models.config import ModelConfig
from tritium.runtime import interpreting

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
SYSTEMS = ("tritium", "sdpa", "transformers")


def add_model_arguments(parser) -> None:
    """The model and engine options this suite shares with ``engine-ablate``."""
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b",
                        help="random-weight model shape (default llama3-8b)")
    parser.add_argument("--model", default=None, help="a checkpoint instead: Hugging Face directory or .gguf file")
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--kv-cache-gib", type=float, default=10.0)
    parser.add_argument("--max-model-len", type=int, default=None,
                        help="engine context (default: prompt + new tokens, rounded up to a page); decode graphs "
                             "are captured for it")


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ",".join(SYSTEMS))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="batch-1 runs (median)")
    parser.add_argument("--profile-host", action="store_true",
                        help="tritium: print a cProfile of one batch-1 generation (where the host time goes)")


class Bench:
    """The model under test: random weights of a shape, built once, or a checkpoint path."""

    def __init__(self, args):
        self.args = args
        self.device = torch.device("cpu" if interpreting() else "cuda")
        self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        if args.model is not None:
            _, self.config, _, _ = load_checkpoint(args.model)  # reads the config only; weights stay lazy
            self.weights = None
            self.label = os.path.basename(os.path.normpath(args.model))
        else:
            self.config = ModelConfig(model_type="llama", **SHAPES[args.shape])
            self.weights = make_weights(self.config, self.dtype, self.device)
            self.label = args.shape

    def llm(self, attention_backend: str, max_num_seqs: int, tokenizer=None, **engine_kwargs) -> LLM:
        """The engine over this model; ``tokenizer`` (random weights only) turns its tokens into text;
        ``engine_kwargs`` are further EngineConfig fields."""
        args = self.args
        max_len = args.prompt_len + args.new_tokens
        kw = dict(attention_backend=attention_backend, dtype=self.dtype, device=self.device,
                  max_model_len=args.max_model_len or -(-max_len // 16) * 16, max_num_seqs=max(max_num_seqs, 1),
                  max_num_batched_tokens=4096, enable_prefix_caching=False,
                  kv_cache_memory=int(args.kv_cache_gib * 2**30), **engine_kwargs)
        if self.weights is None:
            return LLM(args.model, **kw)
        return LLM.from_weights(self.config, self.weights.items(), tokenizer, **kw)

    def prompts(self, n: int, seed: int) -> list[list[int]]:
        g = torch.Generator().manual_seed(seed)
        return torch.randint(0, self.config.vocab_size, (n, self.args.prompt_len), generator=g).tolist()


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


def batch1_step_ms(bench: Bench, generate, repeats: int) -> list[float]:
    """Decode step times (ms, sorted): (time of N new tokens - time of 1) / (N - 1), ``repeats`` times;
    ``generate(prompts, max_tokens)`` runs one greedy generation."""
    n = bench.args.new_tokens
    generate(bench.prompts(1, 99), 8)
    times = []
    for r in range(repeats):
        t_full = _timed(lambda: generate(bench.prompts(1, 2 * r), n), bench.device)
        t_one = _timed(lambda: generate(bench.prompts(1, 2 * r + 1), 1), bench.device)
        times.append((t_full - t_one) / (n - 1) * 1e3)
    return sorted(times)


def engine_generate(llm: LLM):
    return lambda prompts, n: llm.generate(prompts, SamplingParams(max_tokens=n, ignore_eos=True))


def bench_engine(bench: Bench, attention_backend: str) -> dict:
    args, device = bench.args, bench.device
    llm = bench.llm(attention_backend, args.batch)
    engine = llm.engine
    generate = engine_generate(llm)
    step_ms = batch1_step_ms(bench, generate, args.repeats)
    # the batch-1 graph's inputs of the last decode step, rewound to leave room for the replays timed below
    b1_inputs = graph_inputs(engine.runner) if 1 in engine.runner.graphs else None
    out = {"batch1_decode_ms": step_ms[len(step_ms) // 2], "batch1_decode_ms_all": step_ms,
           "weight_bytes": engine.model.weight_bytes(), "linear_backend": engine.config.linear_backend,
           "linear_tuning": engine.model.linear.report}
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
    for row in engine.model.linear.report:
        print(f"  linear {row['weight']:>12} m={row['m']}: {row['choice']:>16}  {row['best_tbs']:.2f} TB/s "
              f"(cuBLAS {row['cublas_tbs']:.2f})", flush=True)
    # warm-up at full batch (prefill kernels compile here), then prefill alone, then the whole generation
    generate(bench.prompts(args.batch, 3000), 2)
    t_prefill = _timed(lambda: generate(bench.prompts(args.batch, 2000), 1), device)
    t_batch = _timed(lambda: generate(bench.prompts(args.batch, 1000), args.new_tokens), device)
    out.update(batch_tokens_per_s=args.batch * args.new_tokens / t_batch, batch_seconds=t_batch,
               batch_prefill_seconds=t_prefill,
               batch_decode_step_ms=(t_batch - t_prefill) / (args.new_tokens - 1) * 1e3)
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
    else:
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
        model.load_state_dict(bench.weights, strict=False, assign=True)
        with torch.device("cpu"):  # non-persistent rope buffers are not in the state dict: rebuild them
            model.model.rotary_emb = type(model.model.rotary_emb)(hf_cfg).to(device)
    model = model.to(dtype).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
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
    generate(bench.prompts(args.batch, 3000), 2)
    t_prefill = _timed(lambda: generate(bench.prompts(args.batch, 2000), 1), device)
    t_batch = _timed(lambda: generate(bench.prompts(args.batch, 1000), args.new_tokens), device)
    out = {"batch1_decode_ms": step_ms[len(step_ms) // 2], "batch1_decode_ms_all": step_ms,
           "batch_tokens_per_s": args.batch * args.new_tokens / t_batch, "batch_seconds": t_batch,
           "batch_prefill_seconds": t_prefill,
           "batch_decode_step_ms": (t_batch - t_prefill) / (args.new_tokens - 1) * 1e3}
    del model
    gc.collect()
    return out


def run(args) -> dict:
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"--systems: unknown {sorted(unknown)}; expected some of {', '.join(SYSTEMS)}")
    bench = Bench(args)
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
        else:
            result["systems"][name] = bench_engine(bench, "triton" if name == "tritium" else "torch")
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
