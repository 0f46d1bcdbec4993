"""A/B probe (H100): the engine's batch-1 decode graph and step under two attention trees, the committed one and
an older module given as a file (interleaved rounds, one process, every graph captured again per variant).

    PYTHONPATH=src python bench/probe_tree_engine.py OLD_TREE.py OUT.json [rounds]
"""

import argparse
import importlib.util
import json
import sys

from tritium.attention import tuned
from tritium.bench import engine_ablate
from tritium.bench.common import header, time_ms
from tritium.bench.engine import graph_inputs, set_graph_inputs
from tritium.bench.engine_common import Bench, batch1_step_ms, engine_generate


def main(old_path: str, path: str, rounds: int) -> None:
    spec = importlib.util.spec_from_file_location("old_tree", old_path)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    shipped = tuned.for_device
    variants = {"new": shipped, "old": lambda name: old}
    parser = argparse.ArgumentParser()
    engine_ablate.add_arguments(parser)
    bench = Bench(parser.parse_args([]))
    llm = bench.llm("triton", 1)
    runner = llm.engine.runner
    generate = engine_generate(llm)
    batch1_step_ms(bench, generate, 1)
    inputs = graph_inputs(runner)
    graph = {name: [] for name in variants}
    for r in range(rounds):
        for name, fn in (variants.items() if r % 2 == 0 else list(variants.items())[::-1]):
            tuned.for_device = fn
            runner.capture(1)
            set_graph_inputs(runner, inputs)
            graph[name].append(time_ms(runner.graphs[1].graph.replay))
    step = {}
    for name, fn in variants.items():
        tuned.for_device = fn
        runner.capture()
        step[name] = batch1_step_ms(bench, generate, 3)
    tuned.for_device = shipped
    res = {"header": header(), "graph_b1_ms": {k: sorted(v)[len(v) // 2] for k, v in graph.items()},
           "graph_b1_all": graph, "step_b1_ms": step}
    print(json.dumps(res), flush=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5)
