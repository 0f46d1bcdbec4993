"""A/B probe (stop 36): the decode chain with the RMSNorms inside the GEMVs, norm weights folded into the
QKV / gate-up weights at load (an engine built with fuse_norms=True), against the shipped engine: both built
in one process over the same random weights, batch-1 graphs timed in interleaved rounds (medians) at the
same context, then one CUPTI trace of each. Writes $OUT/fold_norms_probe.json.

    PYTHONPATH=src python3 bench/probe_fold_norms.py [rounds]
"""
import argparse
import json
import os
import sys

import torch

from tritium.bench.common import time_ms
from tritium.bench.engine import graph_inputs, set_graph_inputs
from tritium.bench.engine_ablate import add_arguments, trace_step
from tritium.bench.engine_common import Bench, batch1_step_ms, engine_generate

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
OUT = os.path.join(os.environ.get("OUT", "/tmp"), "fold_norms_probe.json")
parser = argparse.ArgumentParser()
add_arguments(parser)
args = parser.parse_args(["--kv-cache-gib", "4"])
bench = Bench(args)
engines = {}
for label, kw in (("shipped", {}), ("norms in GEMVs, folded", {"fuse_norms": True})):
    llm = bench.llm("triton", 1, **kw)
    step = batch1_step_ms(bench, engine_generate(llm), 1)
    engines[label] = (llm, graph_inputs(llm.engine.runner), step)
    print(label, "b1 step ms", step, "folded:", llm.engine.model.norms_folded, flush=True)
result = {"device": torch.cuda.get_device_name(0), "b1_step_ms": {k: v[2] for k, v in engines.items()},
          "tune": {k: v[0].engine.model.linear.report for k, v in engines.items()}}
times = {k: [] for k in engines}
for _ in range(ROUNDS):
    for label, (llm, inputs, _) in engines.items():
        runner = llm.engine.runner
        set_graph_inputs(runner, inputs)
        times[label].append(time_ms(runner.graphs[1].graph.replay))
result["graph_b1_ms"] = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
result["graph_b1_all"] = times
for k, v in result["graph_b1_ms"].items():
    print(f"  graph b1 {k:>26}: {v:.3f} ms  ({', '.join(f'{t:.3f}' for t in times[k])})", flush=True)
for label, (llm, inputs, _) in engines.items():
    set_graph_inputs(llm.engine.runner, inputs)
    result.setdefault("traces", {})[label] = trace_step(llm.engine)
json.dump(result, open(OUT, "w"), indent=1)
for r in result["tune"]["norms in GEMVs, folded"]:
    print("  tune", r["weight"], r["variant"], r["m"], r["choice"], r["best_tbs"], "cuBLAS", r["cublas_tbs"])
