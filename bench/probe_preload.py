"""A/B probe (H100): the attention kernel's K/V before its PDL wait (``launcher.PRELOAD_FIRST_TILE``): none
(0), the first key tile in registers where ``launcher.preload_arg`` asks for it (1, shipped), the first 256
keys' rows asked of L2 (3, the experiment), on the decode anchors cold as `bench attention` times them
(cuDNN dense beside) and in the engine's batch-1 decode graph and step.

    PYTHONPATH=src python bench/probe_preload.py OUT.json [rounds] [--no-engine]
"""

import argparse
import json
import sys

import torch

from tritium.attention import AttentionWorkspace, launcher, paged_attention, select_attention_config
from tritium.bench import engine_ablate
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _rel_err, _sdpa, _sdpa_backends)
from tritium.bench.common import header, interleaved_ms, time_ms
from tritium.bench.engine import graph_inputs, set_graph_inputs
from tritium.bench.engine_common import Bench, batch1_step_ms, engine_generate

CASES = [(1, 8192, 16), (1, 8192, 64), (1, 32768, 16), (1, 32768, 64), (1, 768, 16), (4, 768, 16),
         (16, 4096, 64), (64, 2048, 64), (256, 1024, 64)]
VARIANTS = {"none": 0, "shipped": 1, "l2": 3}


def attention_rows(rounds: int) -> list[dict]:
    rows = []
    for batch, seq_len, block_size in CASES:
        nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
        copies = _cold_copies(nbytes)
        batches = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
        group = NUM_Q_HEADS // NUM_KV_HEADS
        out = torch.empty_like(batches[0][0]["q"])
        workspace = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, device=out.device)
        hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
        dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
        cfg = select_attention_config(num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS,
                                      num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=block_size,
                                      max_seqlen_q=1, max_seqlen_k=seq_len, dtype=out.dtype, device=out.device)
        row = dict(batch=batch, seq_len=seq_len, block_size=block_size, config=_cfg_str(cfg), copies=copies)
        for c in range(copies):  # every copy against SDPA flash, both ways
            ref = _sdpa(_sdpa_backends()["flash"], *dense[c], False).reshape_as(out)
            for name, pre in VARIANTS.items():
                launcher.PRELOAD_FIRST_TILE = pre
                out.fill_(float("nan"))
                paged_attention(**batches[c][0], **hints, out=out, workspace=workspace, config=cfg)
                err = _rel_err(out, ref)
                assert err < 2e-2 and not out.isnan().any(), (row, name, c, err)
        row["rel_err"] = err

        def call(pre):
            def fn():
                launcher.PRELOAD_FIRST_TILE = pre  # read at launch: the captured graph keeps it
                for c in range(copies):
                    paged_attention(**batches[c][0], **hints, out=out, workspace=workspace, config=cfg)
            return fn

        fns = {name: call(pre) for name, pre in VARIANTS.items()}
        cudnn = _sdpa_backends()["cudnn"]
        fns["cudnn"] = lambda: [_sdpa(cudnn, *dense[c], False) for c in range(copies)]
        ms, errors = interleaved_ms(fns, graph=True, rounds=rounds)
        launcher.PRELOAD_FIRST_TILE = 1
        for name, t in ms.items():
            row[f"{name}_us"] = round(t / copies * 1e3, 3)
            if name != "cudnn":
                row[f"{name}_tbs"] = round(nbytes / (t / copies * 1e-3) / 1e12, 4)
        for name in VARIANTS:
            if name != "none":
                row[f"{name}_vs_none"] = round(ms["none"] / ms[name], 4)
        if "cudnn" in ms:
            for name in VARIANTS:
                row[f"{name}_vs_cudnn"] = round(ms["cudnn"] / ms[name], 4)
        row["errors"] = errors
        print(json.dumps(row), flush=True)
        rows.append(row)
        del batches, dense
        torch.cuda.empty_cache()
    return rows


def engine_rows(rounds: int) -> dict:
    parser = argparse.ArgumentParser()
    engine_ablate.add_arguments(parser)
    args = parser.parse_args([])
    bench = Bench(args)
    llm = bench.llm("triton", 1)
    engine = llm.engine
    runner = engine.runner
    generate = engine_generate(llm)
    batch1_step_ms(bench, generate, 1)
    inputs = graph_inputs(runner)
    graph = {name: [] for name in VARIANTS}
    for r in range(rounds):
        for name, pre in (VARIANTS.items() if r % 2 == 0 else list(VARIANTS.items())[::-1]):
            launcher.PRELOAD_FIRST_TILE = pre
            runner.capture(1)
            set_graph_inputs(runner, inputs)
            graph[name].append(time_ms(runner.graphs[1].graph.replay))
    step = {}
    for name, pre in VARIANTS.items():  # the whole step (windows, host work), every graph captured again
        launcher.PRELOAD_FIRST_TILE = pre
        runner.capture()
        step[name] = batch1_step_ms(bench, generate, 3)
    launcher.PRELOAD_FIRST_TILE = 1
    res = {"graph_b1_ms": {k: sorted(v)[len(v) // 2] for k, v in graph.items()}, "graph_b1_all": graph,
           "step_b1_ms": step}
    print(json.dumps(res), flush=True)
    return res


def main(path: str, rounds: int, engine: bool) -> None:
    result = {"header": header(), "attention": attention_rows(rounds)}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    if engine:
        result["engine"] = engine_rows(rounds)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5, "--no-engine" not in sys.argv)
