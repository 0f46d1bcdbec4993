"""What the engine suites share: the model under test and how a generation is timed.

- :data:`SHAPES`: random-weight model shapes (Llama-3 8B and 70B, a tiny one for the CPU).
- :class:`Bench`: the model of a run (random weights built once, drawn lazily by each engine, or a
  checkpoint) and the engines over it (:meth:`Bench.llm`).
- :func:`batch1_step_ms`, :func:`batch_throughput`: the batch-1 decode step and the batched throughput of a
  ``generate(prompts, max_tokens)`` callable (an engine's, or another system's).

Used by the ``engine`` (single GPU), ``engine --tp N`` (:mod:`tritium.bench.engine_tp`) and ``engine-ablate``
suites.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import torch

from tritium.bench.args import UsageError, integer, no_gpu_reason, positive
from tritium.engine import LLM, SamplingParams
from tritium.engine.llm_engine import load_checkpoint
from tritium.models.config import ModelConfig
from tritium.models.hub import resolve_model
from tritium.models.weights import RandomWeights
from tritium.runtime import interpreting

_LLAMA3_ROPE = dict(max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                    rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
SHAPES = {
    "llama3-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=128, **_LLAMA3_ROPE),
    # Llama-3.2-1B (the `draft` suite's draft model; untied here: a step reads the same bytes)
    "llama3.2-1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                        num_attention_heads=32, num_key_value_heads=8, head_dim=64, **_LLAMA3_ROPE),
    # tensor-parallel runs (--tp): 141 GB of bf16 weights, half on each of 2 GPUs
    "llama3-70b": dict(vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                       num_attention_heads=64, num_key_value_heads=8, head_dim=128, **_LLAMA3_ROPE),
    # Qwen3-8B: query/key head norms, rope theta 1e6, 36 layers
    "qwen3-8b": dict(model_type="qwen3", qk_norm=True, vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                     num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                     max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6),
    # Qwen3-Embedding-0.6B (the `embed` suite's default): a 28-layer Qwen3 of hidden size 1024
    "qwen3-0.6b": dict(model_type="qwen3", qk_norm=True, vocab_size=151669, hidden_size=1024, intermediate_size=3072,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                       max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6),
    # mixtures of experts: Qwen3-30B-A3B (128 experts of 768, 8 a token; 61 GB of bf16 weights, 6.7 GB read a
    # batch-1 step) and Mixtral-8x7B (8 experts of 14336, 2 a token; 93 GB, 28 GB a step)
    "qwen3-30b-a3b": dict(model_type="qwen3_moe", qk_norm=True, vocab_size=151936, hidden_size=2048,
                          intermediate_size=6144, num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4,
                          head_dim=128, max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                          num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=True),
    "mixtral-8x7b": dict(model_type="mixtral", vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                         max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-5, num_experts=8,
                         num_experts_per_tok=2, moe_intermediate_size=14336),
    # Qwen1.5-MoE-A2.7B (Qwen2-MoE): 60 experts of 1408, 4 a token, and a shared expert of 5632; QKV bias
    "qwen1.5-moe-a2.7b": dict(model_type="qwen2_moe", attention_bias=True, vocab_size=151936, hidden_size=2048,
                              intermediate_size=5632, num_hidden_layers=24, num_attention_heads=16,
                              num_key_value_heads=16, head_dim=128, max_position_embeddings=8192, rope_theta=1000000.0,
                              rms_norm_eps=1e-6, num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
                              norm_topk_prob=False, shared_expert_intermediate_size=5632),
    # Gemma 3 12B: sandwich norms, GeGLU, head_dim 256, a window of 1024 keys on five layers of six (rope base
    # 1e4 there, 1e6 scaled by 8 on the others); tied embeddings of 262k tokens
    "gemma-3-12b": dict(model_type="gemma3_text", qk_norm=True, vocab_size=262208, hidden_size=3840,
                        intermediate_size=15360, num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=8,
                        head_dim=256, max_position_embeddings=131072, rope_theta=1000000.0,
                        rope_scaling={"rope_type": "linear", "factor": 8.0}, rope_local_theta=10000.0,
                        rms_norm_eps=1e-6, sliding_window=1024, tie_word_embeddings=True,
                        layer_types=tuple("full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                          for i in range(48)),
                        hidden_act="gelu_tanh", norm_weight_offset=1.0, sandwich_norms=True,
                        embedding_multiplier=3840 ** 0.5, query_pre_attn_scalar=256),
    "tiny": dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, max_position_embeddings=1024, rope_theta=10000.0,
                 rms_norm_eps=1e-5),
}


def add_model_arguments(parser, default_shape: str | None = "llama3-8b") -> None:
    """The model and engine options of the ``engine`` and ``engine-ablate`` suites."""
    default = default_shape or "llama3-8b; llama3-70b with --tp > 1"
    parser.add_argument("--shape", choices=sorted(SHAPES), default=default_shape,
                        help=f"random-weight model shape (default {default})")
    parser.add_argument("--model", default=None, help="a checkpoint instead: Hugging Face directory or .gguf file")
    parser.add_argument("--prompt-len", type=integer(1), default=512)
    # (a decode step is timed as (N new tokens - 1) / (N - 1))
    parser.add_argument("--new-tokens", type=integer(2), default=256)
    parser.add_argument("--kv-cache-gib", type=positive, default=10.0)
    parser.add_argument("--max-model-len", type=integer(1), default=None,
                        help="engine context (default: prompt + new tokens, rounded up to a page); decode graphs "
                             "are captured for it")


def check_shape(shape: str, option: str = "--shape", instead: str = "--model PATH") -> None:
    """UsageError for random weights of ``shape`` (given as ``option``) on the CPU (no GPU, or TRITON_INTERPRET=1),
    unless it is the tiny one: the other shapes are GPU-sized (a Llama-3-8B: 32 GB of fp32 weights), and every
    kernel would run under the interpreter. Checked before any weight is drawn."""
    if interpreting() and shape != "tiny":
        raise UsageError(f"{option} {shape}: a GPU-sized model, and {no_gpu_reason()}; on the CPU use {option} tiny "
                         f"or {instead}")


class Bench:
    """The model under test: random weights of a shape, built once, or a checkpoint path."""

    def __init__(self, args, shape: str | None = None, lazy: bool = False):
        """``shape``: a key of SHAPES (default ``args.shape``), unless ``args.model`` names a checkpoint.
        ``lazy``: the random weights as a :class:`RandomWeights` source, drawn while each engine (each
        tensor-parallel rank: its shard) loads them, instead of a full model built here once."""
        self.args = args
        self.device = torch.device("cpu" if interpreting() else "cuda")
        self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        if args.model is not None:
            try:
                path, hub_name = resolve_model(args.model)  # a Hub name: its local copy, for every engine below
                _, self.config, _, _ = load_checkpoint(path)  # reads the config only; weights stay lazy
            except (OSError, ValueError) as e:
                raise UsageError(f"--model {args.model}: {e}") from None
            self.weights = None
            self.label = hub_name or os.path.basename(os.path.normpath(path))
            args.model = path
        else:
            shape = shape or args.shape
            check_shape(shape)
            self.config = ModelConfig(**{"model_type": "llama", **SHAPES[shape]})
            if lazy:  # the same seed for every engine
                self.weights = RandomWeights(self.config, str(self.dtype).removeprefix("torch."), seed=0)
            else:
                self.weights = make_weights(self.config, self.dtype, self.device)
            self.label = shape

    def llm(self, attention_backend: str, max_num_seqs: int, tokenizer=None, **engine_kwargs) -> LLM:
        """The engine over this model; ``tokenizer`` (random weights only) turns its tokens into text;
        ``engine_kwargs`` are further EngineConfig fields (they override the defaults below)."""
        args = self.args
        max_len = args.prompt_len + args.new_tokens
        kw = dict(attention_backend=attention_backend, dtype=self.dtype, device=self.device,
                  max_model_len=args.max_model_len or -(-max_len // 16) * 16, max_num_seqs=max(max_num_seqs, 1),
                  max_num_batched_tokens=4096, enable_prefix_caching=False,
                  kv_cache_memory=int(args.kv_cache_gib * 2**30))
        kw.update(engine_kwargs)
        if self.weights is None:
            return LLM(args.model, **kw)
        weights = self.weights
        if isinstance(weights, dict):
            weights = weights.items()
        elif kw.get("tensor_parallel_size", 1) == 1:  # one rank loads the source itself
            weights = weights.iter(self.device)
        return LLM.from_weights(self.config, weights, tokenizer, **kw)

    def prompts(self, n: int, seed: int, length: int | None = None) -> list[list[int]]:
        """``n`` random prompts of ``length`` tokens (default ``--prompt-len``)."""
        g = torch.Generator().manual_seed(seed)
        return torch.randint(0, self.config.vocab_size, (n, length or self.args.prompt_len), generator=g).tolist()


def make_weights(cfg, dtype: torch.dtype, device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random Hugging Face-named weights (std 0.02, norms 1)."""
    if cfg.num_experts or cfg.sandwich_norms:  # (RandomWeights knows the experts' and Gemma's names)
        return {name: t.materialize() for name, t in RandomWeights(cfg, str(dtype).removeprefix("torch."), seed)
                .iter(device)}
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
        if cfg.qk_norm:
            w.update({p + f"self_attn.{x}_norm.weight": torch.ones(cfg.head_dim, dtype=dtype, device=device)
                      for x in "qk"})
    return w


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device) -> float:
    """Seconds of ``fn()``, the device synchronised before and after."""
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
        t_full = timed(lambda: generate(bench.prompts(1, 2 * r), n), bench.device)
        t_one = timed(lambda: generate(bench.prompts(1, 2 * r + 1), 1), bench.device)
        times.append((t_full - t_one) / (n - 1) * 1e3)
    return sorted(times)


def batch_throughput(bench: Bench, generate) -> dict:
    """``--batch`` prompts generating ``--new-tokens`` each: output tokens per second end to end (prefill
    included), and the decode step, (time of the generation - time of its prefill alone) / (N - 1).
    A first generation at full batch warms up (prefill kernels compile there)."""
    args, device = bench.args, bench.device
    generate(bench.prompts(args.batch, 3000), 2)
    t_prefill = timed(lambda: generate(bench.prompts(args.batch, 2000), 1), device)
    t_batch = timed(lambda: generate(bench.prompts(args.batch, 1000), args.new_tokens), device)
    return {"batch_tokens_per_s": args.batch * args.new_tokens / t_batch, "batch_seconds": t_batch,
            "batch_prefill_seconds": t_prefill,
            "batch_decode_step_ms": (t_batch - t_prefill) / (args.new_tokens - 1) * 1e3}


def engine_generate(llm: LLM):
    return lambda prompts, n: llm.generate(prompts, SamplingParams(max_tokens=n, ignore_eos=True))


# -- kernel traces (CUPTI through torch.profiler) --------------------------------------------------------------
PROJECTIONS = ("qkv", "o_proj", "gate_up", "down")


def chrome_events(prof) -> list[dict]:
    """The events of a finished ``torch.profiler.profile`` (its Chrome trace)."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)["traceEvents"]
    finally:
        os.unlink(path)


def graph_launch_kernels(events: list[dict]) -> list[list[dict]]:
    """The kernels of each CUDA-graph launch in a trace, launches in order: a graph's kernels carry the
    correlation id of the ``cudaGraphLaunch`` that ran them."""
    launches = {e["args"]["correlation"] for e in events
                if e.get("cat") == "cuda_runtime" and "GraphLaunch" in e.get("name", "") and "args" in e}
    groups: dict[int, list[dict]] = {}
    for e in events:
        corr = e.get("args", {}).get("correlation")
        if e.get("cat") == "kernel" and corr in launches:
            groups.setdefault(corr, []).append(e)
    ordered = [sorted(g, key=lambda e: e["ts"]) for g in groups.values()]
    return sorted(ordered, key=lambda g: g[0]["ts"])


def summarize_step(step: list[dict], what: str = "", *, by_order: bool = True) -> dict:
    """Where one step's time goes, from its kernels (``ts``/``dur`` in us, ordered by start).

    A kernel's exposed time is how far it moves the end of the step: its end minus the latest end of the
    kernels before it (0 when it ends inside them). Summed by kernel (projections by their order in a dense
    layer, the last one lm_head; ``by_order=False``: every kernel by its name, as for a mixture of experts,
    whose layers run other projections) it says where the step's time goes beyond the weight reads.
    """
    nproj = sum(1 for e in step if by_order and _is_projection(e["name"]))
    by: dict[str, dict] = {}
    proj = 0
    latest_end = step[0]["ts"]
    for e in step:
        name = e["name"]
        if by_order and _is_projection(name):
            label = "lm_head" if proj == nproj - 1 else PROJECTIONS[proj % 4]
            if "qkv_rope" in name:  # fuse_qkv_rope: the QKV GEMV with rope and the KV write inside
                label += " (+ rope, KV write)"
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
    print(f"  trace: {len(step)} kernels, step span {span / 1e3:.3f} ms (kernel start to kernel end)"
          + (f", {what}" if what else ""), flush=True)
    for label, row in sorted(by.items(), key=lambda kv: -kv[1]["exposed_us"]):
        print(f"    {label:>48}: x{row['count']:<4} exposed {row['exposed_us']:8.1f} us "
              f"({row['exposed_us'] / row['count']:6.2f} each)  busy {row['busy_us'] / row['count']:6.2f} each",
              flush=True)
    return {"kernels": len(step), "span_us": span, "by_kernel": by}


def _is_projection(name: str) -> bool:
    """A kernel of a projection (Triton GEMV or GEMM, cuBLAS); ``matmul_all_reduce`` is the one-launch
    row-parallel layer (``fuse_row_parallel``: o_proj / down with their all-reduce, residual add and
    RMSNorm), ``qkv_rope`` the QKV GEMV with rope inside (``fuse_qkv_rope``) and ``skinny`` the skinny GEMM
    of 2-32 rows, so the labels by order in the layer stay right with them."""
    return any(k in name for k in ("gemv", "gemm", "nvjet", "cutlass", "matmul_all_reduce", "qkv_rope", "skinny"))
