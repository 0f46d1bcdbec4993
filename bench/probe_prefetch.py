"""A/B probe (stop 36): L2 prefetch before the PDL wait, in the GEMV (ModelOptions.gemv_prefetch) and in decode
attention (launcher.KV_PREFETCH), on the engine's batch-1 graph (interleaved rounds, medians, plus a CUPTI
trace of each variant) and on `bench attention`'s cold decode cases. Writes $OUT/prefetch_probe.json.

    PYTHONPATH=src python3 bench/probe_prefetch.py [rounds]
"""
import argparse
import dataclasses
import json
import os
import sys

import torch

from tritium.attention import AttentionWorkspace, launcher, paged_attention, select_attention_config
from tritium.bench.attention import HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cold_copies, _paged_batch
from tritium.bench.common import time_ms
from tritium.bench.engine import graph_inputs, set_graph_inputs
from tritium.bench.engine_ablate import add_arguments, trace_step
from tritium.bench.engine_common import Bench, batch1_step_ms, engine_generate

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
OUT = os.path.join(os.environ.get("OUT", "/tmp"), "prefetch_probe.json")
result = {"device": torch.cuda.get_device_name(0)}


def save():
    json.dump(result, open(OUT, "w"), indent=1)


# -- attention, cold (as bench attention times decode) --
DECODE = [(1, 8192, 16), (1, 8192, 64), (1, 32768, 16), (16, 4096, 16), (64, 2048, 16), (1, 768, 16)]
torch.manual_seed(0)
rows = []
for batch, seq_len, bs in DECODE:
    nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 4
    copies = _cold_copies(nbytes)
    batches = [_paged_batch(batch, seq_len, 1, bs) for _ in range(copies)]
    q = batches[0][0]["q"]
    out = torch.empty_like(q)
    ws = AttentionWorkspace(q.shape[0], NUM_Q_HEADS, HEAD_DIM, device=q.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
    cfg = select_attention_config(num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS,
                                  num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=bs, max_seqlen_q=1,
                                  max_seqlen_k=seq_len, dtype=q.dtype, device=q.device)
    ref = None
    row = dict(batch=batch, seq_len=seq_len, block_size=bs, config=str(cfg), copies=copies, us={})
    variants = {"off": (0, 32 << 20), "normal": (1, 32 << 20), "evict_last": (2, 32 << 20),
                "normal 16MB": (1, 16 << 20), "evict_last 8MB": (2, 8 << 20)}
    for label, (flag, budget) in variants.items():
        launcher.KV_PREFETCH, launcher.KV_PREFETCH_BUDGET = flag, budget
        out.fill_(float("nan"))
        paged_attention(**batches[0][0], **hints, out=out, workspace=ws, config=cfg)
        if ref is None:
            ref = out.clone()
        row.setdefault("max_abs_diff", {})[label] = (out.float() - ref.float()).abs().max().item()
        row["us"][label] = []
    for _ in range(ROUNDS):
        for label, (flag, budget) in variants.items():
            launcher.KV_PREFETCH, launcher.KV_PREFETCH_BUDGET = flag, budget
            ms = time_ms(lambda: [paged_attention(**batches[c][0], **hints, out=out, workspace=ws, config=cfg)
                                  for c in range(copies)], graph=True, rep_ms=100) / copies
            row["us"][label].append(ms * 1e3)
    launcher.KV_PREFETCH, launcher.KV_PREFETCH_BUDGET = 0, 32 << 20
    med = {k: sorted(v)[len(v) // 2] for k, v in row["us"].items()}
    row["median_us"] = med
    row["tbs"] = {k: nbytes / v / 1e6 for k, v in med.items()}
    print(batch, seq_len, bs, cfg.num_splits, "splits:", " ".join(f"{k} {v:.2f}" for k, v in med.items()),
          "diff", row["max_abs_diff"], flush=True)
    rows.append(row)
    result["attention"] = rows
    save()
    del batches
    torch.cuda.empty_cache()

# -- engine, batch-1 graph --
parser = argparse.ArgumentParser()
add_arguments(parser)
args = parser.parse_args([])
bench = Bench(args)
llm = bench.llm("triton", 1)
engine = llm.engine
batch1_step_ms(bench, engine_generate(llm), 1)
inputs = graph_inputs(engine.runner)
model, runner = engine.model, engine.runner
shipped = model.options
VARIANTS = [
    ("shipped", {}, 0),
    ("qkv rope", {"fuse_qkv_rope": True}, 0),
    ("kv prefetch normal", {}, 1),
    ("kv prefetch evict_last", {}, 2),
    ("o prefetch evict_last", {"gemv_prefetch": ("o_proj",), "gemv_prefetch_evict_last": True}, 0),
    ("o prefetch evict_last + kv evict_last", {"gemv_prefetch": ("o_proj",), "gemv_prefetch_evict_last": True}, 2),
    ("qkv rope + kv evict_last", {"fuse_qkv_rope": True}, 2),
]
times = {label: [] for label, _, _ in VARIANTS}
for _ in range(ROUNDS):
    for label, change, kv in VARIANTS:
        launcher.KV_PREFETCH = kv
        model.set_options(dataclasses.replace(shipped, **change))
        runner.capture(1)
        set_graph_inputs(runner, inputs)
        times[label].append(time_ms(runner.graphs[1].graph.replay))
result["engine_graph_b1_ms"] = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
result["engine_graph_b1_all"] = times
for k, v in result["engine_graph_b1_ms"].items():
    print(f"  engine {k:>40}: {v:.3f} ms  ({', '.join(f'{t:.3f}' for t in times[k])})", flush=True)
save()
result["traces"] = {}
for label, change, kv in VARIANTS:
    launcher.KV_PREFETCH = kv
    model.set_options(dataclasses.replace(shipped, **change))
    runner.capture(1)
    set_graph_inputs(runner, inputs)
    tr = trace_step(engine)
    result["traces"][label] = tr
    by = tr.get("by_kernel", {})
    print(f"  trace {label:>40}: span {tr.get('span_us', 0):.0f} us;",
          ", ".join(f"{k[:18]} {v['exposed_us'] / v['count']:.2f}" for k, v in by.items() if v["count"] >= 32), flush=True)
    save()
launcher.KV_PREFETCH = 0
