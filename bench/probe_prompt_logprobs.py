"""Probe: what prompt log-probabilities cost (the lm-evaluation-harness log-likelihood request: prompt scored,
max_tokens 1, logprobs 1) against the same prompts' plain prefill, on a random-weight Llama-3-8B shape.

    PYTHONPATH=src python bench/probe_prompt_logprobs.py [--out FILE]

Anchors in the same run: the plain prefill (max_tokens 1, no scoring) and the LM head alone as one bf16
matmul over every prompt row (cuBLAS; the floor of what scoring adds besides the log-softmax and top-k).
``scored_k1_frozen``: the same scoring with the heap frozen (``gc.freeze``, as ``tritium serve`` runs);
``--chunks 512,1024``: the same with more LM-head rows a call, and one ``F.linear`` of each row count.
Five interleaved rounds, median seconds; ``--profile``: the scored run's kernels by time.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

import torch

from tritium.bench.common import header
from tritium.bench.engine_common import Bench, timed
from tritium.engine import SamplingParams
from tritium.engine import runner as runner_module

CASES = [(64, 512), (8, 2048), (1, 8000)]  # (prompts, tokens each)


def frozen(fn):
    """``fn()`` with every object alive now out of the cyclic collector's reach (as ``tritium serve`` runs)."""
    gc.freeze()
    try:
        return fn()
    finally:
        gc.unfreeze()


def chunked(size: int, fn):
    """``fn()`` with the LM head over ``size`` prompt rows a call."""
    saved, runner_module.PROMPT_LOGITS_CHUNK = runner_module.PROMPT_LOGITS_CHUNK, size
    try:
        return fn()
    finally:
        runner_module.PROMPT_LOGITS_CHUNK = saved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shape", default="llama3-8b", help="tiny: a smoke test on the CPU")
    parser.add_argument("--profile", action="store_true", help="print the scored run's kernels by time")
    parser.add_argument("--chunks", default="", help="more LM-head chunk sizes to time, e.g. 512,1024 (frozen, "
                        "k 1), and one F.linear of that many rows against the shipped chunk's")
    cli = parser.parse_args()
    cases = CASES if cli.shape != "tiny" else [(2, 24)]
    args = argparse.Namespace(model=None, shape=cli.shape, prompt_len=8192, new_tokens=8, max_model_len=8208,
                              kv_cache_gib=20.0 if cli.shape != "tiny" else 0.05)
    bench = Bench(args)
    llm = bench.llm("triton", max_num_seqs=64 if cli.shape != "tiny" else 4, max_num_batched_tokens=8192,
                    max_model_len=8208 if cli.shape != "tiny" else 64)
    head = bench.weights["lm_head.weight"]
    plain = SamplingParams(max_tokens=1, ignore_eos=True)
    scored = {k: SamplingParams(max_tokens=1, ignore_eos=True, logprobs=1, prompt_logprobs=k) for k in (1, 5)}
    results = []
    for n, length in cases:
        prompts = bench.prompts(n, 7, length)
        hidden = torch.randn(n * length, head.shape[1], device=bench.device, dtype=head.dtype)
        runs = {"plain": lambda: llm.generate(prompts, plain),
                "scored_k1": lambda: llm.generate(prompts, scored[1]),
                "scored_k5": lambda: llm.generate(prompts, scored[5]),
                "scored_k1_frozen": lambda: frozen(lambda: llm.generate(prompts, scored[1])),
                "lm_head_matmul": lambda: hidden @ head.T}
        sizes = [runner_module.PROMPT_LOGITS_CHUNK] + [int(c) for c in cli.chunks.split(",") if c]
        for c in sizes[1:]:
            runs[f"scored_k1_frozen_chunk{c}"] = (
                lambda c=c: chunked(c, lambda: frozen(lambda: llm.generate(prompts, scored[1]))))
        for c in sizes if cli.chunks else ():  # cuBLAS alone at each chunk's row count (the engine's F.linear)
            runs[f"lm_head_linear_rows{c}"] = lambda c=c: torch.nn.functional.linear(hidden[:c], head)
        for fn in runs.values():  # warm up (compiles)
            fn()
        times = {name: [] for name in runs}
        for _ in range(cli.rounds):
            for name, fn in runs.items():
                times[name].append(timed(fn, bench.device))
        med = {name: statistics.median(t) for name, t in times.items()}
        if cli.profile and bench.device.type == "cuda":  # where the scored run's extra time goes
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA,
                                                    torch.profiler.ProfilerActivity.CPU]) as prof:
                runs["scored_k1"]()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14), flush=True)
        out = llm.generate(prompts[:1], scored[1])[0]
        finite = all(lp is None or (lp.logprob <= 0 and lp.logprob == lp.logprob) for lp in out.prompt_logprobs)
        row = {"prompts": n, "tokens": length, **{f"{k}_s": v for k, v in med.items()},
               "scoring_overhead_k1": med["scored_k1"] / med["plain"] - 1,
               "scoring_overhead_k5": med["scored_k5"] / med["plain"] - 1,
               "scoring_overhead_k1_frozen": med["scored_k1_frozen"] / med["plain"] - 1,
               "extra_over_lm_head_matmul_k1": (med["scored_k1"] - med["plain"]) / med["lm_head_matmul"],
               "scored_tokens_per_s_k1": n * length / med["scored_k1"], "logprobs_finite_and_nonpositive": finite,
               "scored_entries": len(out.prompt_logprobs)}
        results.append(row)
        print(json.dumps(row), flush=True)
    doc = {"suite": "probe-prompt-logprobs", "header": header(), "shape": cli.shape, "cases": results,
           "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if cli.out:
        with open(cli.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
