"""Probe (stop 36): decode configurations with 8 (and 2) warps a program, which neither the tuner's knobs
nor `bench attention --sweep` try (4 warps always), against the tree's pick and cuDNN, cold as `bench
attention` times decode, interleaved rounds. Writes $OUT/decode_warps_probe.json.

    PYTHONPATH=src python3 bench/probe_decode_warps.py [rounds]
"""
import dataclasses
import json
import os
import sys

import torch

from tritium.attention import AttentionWorkspace, paged_attention, select_attention_config
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cold_copies, _paged_batch, _rel_err,
                                     _sdpa, _sdpa_backends)
from tritium.bench.common import time_ms

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
OUT = os.path.join(os.environ.get("OUT", "/tmp"), "decode_warps_probe.json")
CASES = [(16, 4096, 16), (16, 4096, 64), (64, 2048, 16), (256, 1024, 16), (1, 8192, 16), (1, 32768, 16)]
torch.manual_seed(0)
rows = []
for batch, seq_len, bs in CASES:
    nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 4
    copies = _cold_copies(nbytes)
    batches = [_paged_batch(batch, seq_len, 1, bs) for _ in range(copies)]
    q = batches[0][0]["q"]
    out = torch.empty_like(q)
    ws = AttentionWorkspace(q.shape[0], NUM_Q_HEADS, HEAD_DIM, device=q.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
    base = select_attention_config(num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS,
                                   num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=bs, max_seqlen_q=1,
                                   max_seqlen_k=seq_len, dtype=q.dtype, device=q.device)
    cands = {"tree": base}
    for w in (8, 2):
        cands[f"tree w{w}"] = dataclasses.replace(base, num_warps=w)
    for n, st in ((128, 3), (128, 2), (64, 3), (64, 4)):
        c = dataclasses.replace(base, tile_n=n, num_stages=st, num_warps=8)
        cands.setdefault(f"n{n} st{st} w8 s{c.num_splits}", c)
    group = NUM_Q_HEADS // NUM_KV_HEADS
    ref = _sdpa(_sdpa_backends()["flash"], q.view(batch, NUM_KV_HEADS, group, HEAD_DIM), batches[0][1],
                batches[0][2], False).reshape_as(q)
    dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
    cudnn = _sdpa_backends()["cudnn"]
    row = dict(batch=batch, seq_len=seq_len, block_size=bs, copies=copies, tree=str(base), us={}, err={})
    for label, cfg in list(cands.items()):
        try:
            out.fill_(float("nan"))
            paged_attention(**batches[0][0], **hints, out=out, workspace=ws, config=cfg)
            row["err"][label] = _rel_err(out, ref)
            row["us"][label] = []
        except Exception as e:
            row["err"][label] = f"{type(e).__name__}: {str(e)[:120]}"
            del cands[label]
    row["us"]["cudnn"] = []
    for _ in range(ROUNDS):
        for label, cfg in cands.items():
            ms = time_ms(lambda: [paged_attention(**batches[c][0], **hints, out=out, workspace=ws, config=cfg)
                                  for c in range(copies)], graph=True, rep_ms=100) / copies
            row["us"][label].append(ms * 1e3)
        ms = time_ms(lambda: [_sdpa(cudnn, *dense[c], False) for c in range(copies)], graph=True, rep_ms=100) / copies
        row["us"]["cudnn"].append(ms * 1e3)
    med = {k: sorted(v)[len(v) // 2] for k, v in row["us"].items()}
    row["median_us"] = med
    row["vs_cudnn"] = {k: med["cudnn"] / v for k, v in med.items()}
    print(batch, seq_len, bs, base, " | ".join(f"{k} {v:.2f}us {row['vs_cudnn'][k]:.3f}x" for k, v in med.items()),
          flush=True)
    rows.append(row)
    json.dump(dict(device=torch.cuda.get_device_name(0), rows=rows), open(OUT, "w"), indent=1)
    del batches, dense
    torch.cuda.empty_cache()
