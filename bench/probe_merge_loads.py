"""A/B probe (branch ab/merge-parallel-loads): the split merge loading its partials after the log-sum-exps
(shipped) vs with them (launcher.MERGE_PARALLEL_LOADS), cold as `bench attention` times decode, interleaved
rounds, one process. Writes $OUT/merge_loads_probe.json.

    PYTHONPATH=src python3 bench/probe_merge_loads.py [rounds]
"""
import json
import os
import sys

import torch

from tritium.attention import AttentionWorkspace, launcher, paged_attention, select_attention_config
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cold_copies, _paged_batch, _rel_err,
                                     _sdpa, _sdpa_backends)
from tritium.bench.common import time_ms

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
# (batch, context, page size): the benchmark's split anchors and the engine's batch-1 / batch-4 contexts
DECODE = [(1, 8192, 16), (1, 8192, 64), (1, 32768, 16), (1, 768, 16), (4, 768, 16), (4, 8192, 16), (16, 4096, 16)]
torch.manual_seed(0)
rows = []
for batch, seq_len, bs in DECODE:
    nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 4
    copies = _cold_copies(nbytes)
    batches = [_paged_batch(batch, seq_len, 1, bs) for _ in range(copies)]
    inputs, kd, vd = batches[0]
    q = inputs["q"]
    out = torch.empty_like(q)
    ws = AttentionWorkspace(q.shape[0], NUM_Q_HEADS, HEAD_DIM, device=q.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
    cfg = select_attention_config(num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS,
                                  num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=bs, max_seqlen_q=1,
                                  max_seqlen_k=seq_len, dtype=q.dtype, device=q.device)

    def call(c):
        return paged_attention(**batches[c][0], **hints, out=out, workspace=ws, config=cfg)

    group = NUM_Q_HEADS // NUM_KV_HEADS
    ref = _sdpa(_sdpa_backends()["flash"], q.view(batch, NUM_KV_HEADS, group, HEAD_DIM), kd, vd, False)
    row = dict(batch=batch, seq_len=seq_len, block_size=bs, config=str(cfg), copies=copies, shipped=[], parallel=[])
    for flag in (False, True):
        launcher.MERGE_PARALLEL_LOADS = flag
        out.fill_(float("nan"))
        call(0)
        row[f"rel_err_{'parallel' if flag else 'shipped'}"] = _rel_err(out, ref.reshape_as(out))
    for _ in range(ROUNDS):
        for flag in (False, True):
            launcher.MERGE_PARALLEL_LOADS = flag
            ms = time_ms(lambda: [call(c) for c in range(copies)], graph=True, rep_ms=100) / copies
            row["parallel" if flag else "shipped"].append(ms * 1e3)
    launcher.MERGE_PARALLEL_LOADS = False
    med = {k: sorted(row[k])[len(row[k]) // 2] for k in ("shipped", "parallel")}
    row["ratio_parallel_over_shipped"] = med["parallel"] / med["shipped"]
    row.update({f"{k}_tbs": nbytes / v / 1e6 for k, v in med.items()})
    print(batch, seq_len, bs, cfg.num_splits, "splits: shipped %.2f us parallel %.2f us ratio %.4f" % (
        med["shipped"], med["parallel"], row["ratio_parallel_over_shipped"]),
        "errs", row["rel_err_shipped"], row["rel_err_parallel"], flush=True)
    rows.append(row)
    json.dump(dict(device=torch.cuda.get_device_name(0), rows=rows),
              open(os.path.join(os.environ.get("OUT", "/tmp"), "merge_loads_probe.json"), "w"), indent=1)
