"""Where a batch-64 decode step's GPU time goes, bf16 vs W8A8 (``quantization="fp8-dynamic"``): CUPTI kernel
times (torch.profiler) over a generate call of 64 random 512-token prompts, prefill excluded by profiling
only after the first tokens; kernels summed by name. Usage: PYTHONPATH=src python bench/probe_fp8_step.py
[--systems bf16,fp8-dynamic] [--out FILE]"""

import argparse
import gc
import json
import time

import torch
from torch.profiler import ProfilerActivity, profile

from tritium.bench.engine_common import Bench, add_model_arguments, chrome_events
from tritium.engine import SamplingParams


def main():
    p = argparse.ArgumentParser()
    add_model_arguments(p)
    p.add_argument("--systems", default="fp8-dynamic,bf16")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    bench = Bench(args)
    prompts = bench.prompts(64, seed=1)
    result = {}
    for system in args.systems.split(","):
        kw = {} if system == "bf16" else {"quantization": system}
        llm = bench.llm("triton", 64, **kw)
        short = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)
        longer = SamplingParams(max_tokens=34, temperature=0.0, ignore_eos=True)
        llm.generate(prompts, short)  # compile, capture
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            llm.generate(prompts, short)
            torch.cuda.synchronize()
        base = _by_name(chrome_events(prof))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            llm.generate(prompts, longer)
            torch.cuda.synchronize()
        full = _by_name(chrome_events(prof))
        # wall clock of the 32 extra steps, and how many steps ran eagerly (not from a captured graph)
        runner = llm.engine.runner
        eager = [0]
        step = runner._greedy_step

        def counted(*a, **k):
            eager[0] += 1
            return step(*a, **k)
        runner._greedy_step = counted
        t0 = time.perf_counter()
        llm.generate(prompts, short)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        llm.generate(prompts, longer)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        runner._greedy_step = step
        wall = {"wall_ms_per_decode_step": round(((t2 - t1) - (t1 - t0)) / 32 * 1e3, 3), "eager_steps": eager[0],
                "graphs": sorted(runner.graphs)}
        print(system, wall, flush=True)
        # 32 more decode steps in the longer call: the per-step cost of each kernel
        per_step = {k: round((full[k] - base.get(k, 0.0)) / 32, 2) for k in full}
        per_step = dict(sorted(per_step.items(), key=lambda kv: -kv[1])[:25])
        result[system] = {"us_per_decode_step": per_step, "total_us_per_step": round(sum(per_step.values()), 1),
                          **wall}
        print(system, json.dumps(result[system], indent=1), flush=True)
        llm.close()
        del llm
        gc.collect()
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


def _by_name(events) -> dict:
    out: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "kernel":
            name = e["name"].split("(")[0][:80]
            out[name] = out.get(name, 0.0) + e["dur"]
    return out


if __name__ == "__main__":
    main()
