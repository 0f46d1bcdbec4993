"""Where a decode step with LoRA adapters spends its time (GPU): the kernel timeline of the decode graph (CUPTI
through torch.profiler) of the plain engine, of a LoRA engine's adapter graph and of its plain graph, at each batch;
and the engine's step with the adapters' launches with and without PDL (graphs captured again).

    PYTHONPATH=src python bench/probe_lora_step.py [--batches 1,16] [--rank 16] [--out FILE]
"""

import argparse
import functools
import gc
import json
import os
import tempfile

import torch

import tritium.models.lora as model_lora
from tritium.bench import lora as bench_lora
from tritium.bench.common import header, time_ms
from tritium.bench.engine_ablate import trace_graph
from tritium.bench.engine_common import Bench, add_model_arguments, summarize_step
from tritium.engine import LoRARequest, SamplingParams


def trace(graph, replays: int = 3) -> dict:
    step = trace_graph(graph, replays)
    if isinstance(step, str):
        return {"error": step}
    return {**summarize_step(step), "replay_ms": time_ms(graph.replay)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    add_model_arguments(ap)
    ap.set_defaults(new_tokens=64)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    bench = Bench(args)
    res = {"header": header(bench.device), "rank": args.rank, "plain": {}, "lora": {}, "lora_plain_graph": {},
           "steps": {}}
    llm = bench.llm("triton", max(batches))
    params = SamplingParams(max_tokens=4, ignore_eos=True)
    for b in batches:
        llm.generate(bench.prompts(b, b), params)
        print(f"plain engine b{b}", flush=True)
        res["plain"][b] = trace(llm.engine.runner.graphs[b].graph)
        res["steps"][f"b{b}-plain"] = bench_lora._engine_case(bench, llm, b, [None], args.repeats)
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "a0")
        bench_lora.write_adapter(path, bench.config, args.rank, 0)
        llm = bench.llm("triton", max(batches), enable_lora=True, max_loras=4, max_lora_rank=args.rank)
        lora = LoRARequest("a0", path)
        llm.engine.load_lora(lora.name, lora.path)
        for b in batches:
            llm.generate(bench.prompts(b, b), params, lora_request=[lora] * b)
            entry = llm.engine.runner.graphs[b]
            print(f"LoRA engine b{b}, adapter graph", flush=True)
            res["lora"][b] = trace(entry.graph)
            print(f"LoRA engine b{b}, plain graph", flush=True)
            res["lora_plain_graph"][b] = trace(entry.plain)
            res["steps"][f"b{b}-one-adapter"] = bench_lora._engine_case(bench, llm, b, [lora], args.repeats)
        # the adapters' launches without PDL
        orig = model_lora.lora_apply
        model_lora.lora_apply = functools.partial(orig, pdl=False)
        try:
            llm.engine.runner.capture()
            for b in batches:
                res["steps"][f"b{b}-one-adapter-nopdl"] = bench_lora._engine_case(bench, llm, b, [lora], args.repeats)
        finally:
            model_lora.lora_apply = orig
    print(json.dumps(res["steps"], indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
