"""Probe: where a mixture-of-experts model's batch-1 decode step goes, kernel by kernel (CUPTI over graph
replays of the engine's batch-1 graph), grouped by kernel name: busy time and exposed time (how far each kernel
moves the step's end), as bench/NOTES.md's decode-chain traces count them.

    PYTHONPATH=src python3 bench/probe_moe_step.py --shape qwen3-30b-a3b --out probe-moe-step.json
"""

from __future__ import annotations

import argparse
import json

import torch
from torch.profiler import ProfilerActivity, profile

from tritium.bench.common import header
from tritium.bench.engine import graph_inputs, set_graph_inputs
from tritium.bench.engine_common import Bench, add_model_arguments, batch1_step_ms, chrome_events, engine_generate


def main():
    ap = argparse.ArgumentParser()
    add_model_arguments(ap, default_shape="qwen3-30b-a3b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--replays", type=int, default=5)
    args = ap.parse_args()
    bench = Bench(args, lazy=True)
    llm = bench.llm("triton", 1)
    engine = llm.engine
    step_ms = batch1_step_ms(bench, engine_generate(llm), 3)
    set_graph_inputs(engine.runner, graph_inputs(engine.runner))
    graph = engine.runner.graphs[1].graph
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.replays):
            graph.replay()
        torch.cuda.synchronize()
    kernels = sorted((e for e in chrome_events(prof) if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    n = len(kernels) // args.replays
    step = kernels[2 * n: 3 * n]
    by: dict[str, dict] = {}
    latest = step[0]["ts"]
    for e in step:
        label = e["name"].split("(")[0][:60]
        end = e["ts"] + e["dur"]
        row = by.setdefault(label, {"count": 0, "busy_us": 0.0, "exposed_us": 0.0})
        row["count"] += 1
        row["busy_us"] += e["dur"]
        row["exposed_us"] += max(0.0, end - latest)
        latest = max(latest, end)
    span = step[-1]["ts"] + step[-1]["dur"] - step[0]["ts"]
    rows = sorted(by.items(), key=lambda kv: -kv[1]["exposed_us"])
    print(f"batch-1 step {step_ms[len(step_ms) // 2]:.3f} ms; traced replay {span / 1e3:.3f} ms, {len(step)} kernels")
    for name, r in rows:
        print(f"  {name:60s} x{r['count']:4d}  busy {r['busy_us'] / 1e3:7.3f} ms  "
              f"exposed {r['exposed_us'] / 1e3:7.3f} ms")
    with open(args.out, "w") as f:
        json.dump({"header": header(bench.device), "shape": bench.label, "batch1_step_ms": step_ms,
                   "replay_us": span, "kernels": len(step), "by_kernel": dict(rows),
                   "weight_bytes": engine.model.weight_bytes()}, f, indent=1)


if __name__ == "__main__":
    main()
