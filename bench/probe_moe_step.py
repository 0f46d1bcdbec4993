"""Probe: where a mixture-of-experts model's batch-1 decode step goes, kernel by kernel (CUPTI over graph
replays of the engine's batch-1 graph, ``engine-ablate``'s trace_step), grouped by kernel name: busy time and
exposed time (how far each kernel moves the step's end). Unlike ``engine-ablate``, the random weights are drawn
as the engine loads them (a 61 GB model is not held twice).

    PYTHONPATH=src python3 bench/probe_moe_step.py --shape qwen3-30b-a3b --out probe-moe-step.json
"""

from __future__ import annotations

import argparse
import json

from tritium.bench.common import header
from tritium.bench.engine import graph_inputs, set_graph_inputs
from tritium.bench.engine_ablate import trace_step
from tritium.bench.engine_common import Bench, add_model_arguments, batch1_step_ms, engine_generate


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
    trace = trace_step(engine, args.replays)  # kernels by name (a MoE layer's projections are not a dense one's)
    print(f"batch-1 step {step_ms[len(step_ms) // 2]:.3f} ms")
    with open(args.out, "w") as f:
        json.dump({"header": header(bench.device), "shape": bench.label, "batch1_step_ms": step_ms, **trace,
                   "weight_bytes": engine.model.weight_bytes()}, f, indent=1)


if __name__ == "__main__":
    main()
