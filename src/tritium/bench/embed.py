"""Embeddings: ``LLM.embed`` against transformers' forward pass of the same weights, and the matmul ceiling.

    python -m tritium.bench embed [--shape qwen3-0.6b|qwen3-8b|... | --model PATH] [--cases 1x512,64x512,...]
                                  [--chunk 8192] [--repeats 3] [--out FILE]

Random bf16 weights of ``--shape`` (default: Qwen3-Embedding-0.6B's shape, a Qwen3 model) unless ``--model``.
Each case ``NxL`` embeds N prompts of L random tokens (last-token pooling, not normalized) with tritium's engine
(paged prefill in chunks of ``--chunk`` tokens, Triton kernels) and with transformers (``model.model(ids)``: one
padded-free batch through SDPA and cuBLAS, the last token's final hidden state); both are checked against each
other (cosine similarity of every pair of vectors) before they are timed. Reported: tokens a second, the ratio to
transformers, and the model's matmul TFLOP/s against a large cuBLAS bf16 matmul timed in the same run (the
ceiling a prefill-bound workload can reach).
"""

from __future__ import annotations

import argparse
import gc
import statistics

import torch

from tritium.bench.args import integer
from tritium.bench.common import header, print_table
from tritium.bench.engine import transformers_model
from tritium.bench.engine_common import Bench, add_model_arguments, timed


def add_arguments(parser) -> None:
    add_model_arguments(parser, default_shape="qwen3-0.6b")
    parser.add_argument("--cases", type=_cases, default="1x512,64x512,256x128,16x2048",
                        help="N prompts x L tokens each (default 1x512,64x512,256x128,16x2048)")
    parser.add_argument("--chunk", type=integer(1), default=8192,
                        help="the engine's max_num_batched_tokens (default 8192)")
    parser.add_argument("--repeats", type=integer(1), default=3, help="timed runs a case (median)")
    parser.add_argument("--skip-transformers", action="store_true", help="no transformers anchor")


def _cases(text: str) -> list[tuple[int, int]]:
    """Option type of --cases: "64x512,1x24" -> [(64, 512), (1, 24)]."""
    try:
        cases = [tuple(int(v) for v in c.split("x")) for c in text.split(",") if c.strip()]
    except ValueError:
        cases = []
    if not cases or any(len(c) != 2 or min(c) < 1 for c in cases):
        raise argparse.ArgumentTypeError(f"expected N x L pairs >= 1 such as 64x512, got {text!r}")
    return cases


def _matmul_flops(cfg, tokens: int, length: int) -> float:
    """Matmul FLOPs of a prefill of ``tokens`` tokens in prompts of ``length``: the projections (2 per weight per
    token) and causal attention's two products (half of the full square)."""
    hq, hkv, d, h, f = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size,
                        cfg.intermediate_size)
    per_layer = 2 * tokens * (h * (hq + 2 * hkv) * d + hq * d * h + 3 * h * f)
    per_layer += 2 * 2 * tokens * length * hq * d / 2
    return per_layer * cfg.num_hidden_layers


def _ceiling_tflops(device) -> float:
    """A bf16 cuBLAS matmul of 8192 cubed, best of five: the rate the projections could reach."""
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
    a @ b
    best = min(timed(lambda: a @ b, device) for _ in range(5))
    return 2 * 8192 ** 3 / best / 1e12


def run(args) -> dict:
    bench = Bench(args)
    cases = args.cases
    cfg, device = bench.config, bench.device
    longest = max(length for _, length in cases)
    result = {"header": header(device if device.type == "cuda" else None), "suite": "embed", "shape": bench.label,
              "dtype": str(bench.dtype).removeprefix("torch."), "chunk": args.chunk, "cases": {}}
    if device.type == "cuda":
        result["cublas_bf16_tflops"] = ceiling = _ceiling_tflops(device)
    else:
        ceiling = None
    llm = bench.llm("triton", max(n for n, _ in cases), max_model_len=-(-longest // 16) * 16,
                    max_num_batched_tokens=args.chunk)
    hf = None if args.skip_transformers else transformers_model(bench)
    rows = []
    for n, length in cases:
        prompts = bench.prompts(n, 100 + n + length, length)
        ids = torch.tensor(prompts, device=device)
        ours = llm.embed(prompts, normalize=False)  # warm: compiles what these shapes need
        case = {"prompts": n, "tokens_each": length}
        times = [timed(lambda: llm.embed(prompts, normalize=False), device) for _ in range(args.repeats)]
        case["tritium_s"] = statistics.median(times)
        tokens = n * length
        case["tritium_tokens_per_s"] = tokens / case["tritium_s"]
        flops = _matmul_flops(cfg, tokens, length)
        case["tritium_tflops"] = flops / case["tritium_s"] / 1e12
        if ceiling:
            case["tritium_vs_cublas_ceiling"] = case["tritium_tflops"] / ceiling
        if hf is not None:
            with torch.no_grad():
                ref = hf.model(ids).last_hidden_state[:, -1].float()
                cos = torch.nn.functional.cosine_similarity(ours.to(device), ref, dim=-1)
                case["cosine_min"] = float(cos.min())

                def forward():
                    hf.model(ids)

                forward()
                times = [timed(forward, device) for _ in range(args.repeats)]
            case["transformers_s"] = statistics.median(times)
            case["transformers_tokens_per_s"] = tokens / case["transformers_s"]
            case["vs_transformers"] = case["transformers_s"] / case["tritium_s"]
        result["cases"][f"{n}x{length}"] = case
        rows.append({"case": f"{n}x{length}", "tok/s": case["tritium_tokens_per_s"], "TFLOP/s": case["tritium_tflops"],
                     "vs ceiling": case.get("tritium_vs_cublas_ceiling"),
                     "hf tok/s": case.get("transformers_tokens_per_s"), "vs hf": case.get("vs_transformers"),
                     "cos min": case.get("cosine_min")})
        print(f"  {n}x{length}: {case['tritium_tokens_per_s']:.0f} tokens/s"
              + (f", {case['vs_transformers']:.2f}x transformers (cos >= {case['cosine_min']:.4f})" if hf else ""),
              flush=True)
    print_table(rows, ["case", "tok/s", "TFLOP/s", "vs ceiling", "hf tok/s", "vs hf", "cos min"])
    del llm, hf
    gc.collect()
    return result
