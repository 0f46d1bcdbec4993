"""Probe (H100): split decode at batch 1 with more programs an SM: 2 warps, a register cap (ptxas
maxnreg), more splits; knobs the tuner does not sweep.

    PYTHONPATH=src python bench/probe_decode_occupancy.py OUT.json [seconds]

Cold as `bench attention` times decode (a graph over copies of the inputs, together 3x the L2). Every
candidate is checked against SDPA, timed once; the five best, the tree's pick and cuDNN dense are then
timed again in five interleaved rounds. Writes JSON after every case.
"""

import itertools
import json
import sys
import time

import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, launcher, paged_attention, select_attention_config
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cold_copies, _paged_batch, _rel_err,
                                     _sdpa, _sdpa_backends)
from tritium.bench.common import header, interleaved_ms, time_ms

CASES = [(1, 32768, 16), (1, 8192, 16), (1, 32768, 64), (4, 8192, 16)]
_pdl_launch = launcher.pdl_launch


def _with_maxnreg(maxnreg):
    def launch(device, pdl):
        opts = dict(_pdl_launch(device, pdl))
        if maxnreg:
            opts["maxnreg"] = maxnreg
        return opts
    return launch


def main(path: str, seconds: float) -> None:
    t_end = time.time() + seconds
    result = {"header": header(), "rows": []}
    cudnn = _sdpa_backends()["cudnn"]
    for batch, seq_len, block_size in CASES:
        if time.time() > t_end - 60:
            break
        nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
        copies = _cold_copies(nbytes)
        batches = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
        group = NUM_Q_HEADS // NUM_KV_HEADS
        out = torch.empty_like(batches[0][0]["q"])
        launcher.MAX_SPLITS = 128  # the probe's workspace holds 128 splits (the package caps them at 64)
        workspace = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, max_splits=128, device=out.device)
        hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
        dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
        tree = select_attention_config(num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS,
                                       num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=block_size,
                                       max_seqlen_q=1, max_seqlen_k=seq_len, dtype=out.dtype, device=out.device)

        def calls(cfg, maxnreg, first_only=False):
            def run():
                launcher.pdl_launch = _with_maxnreg(maxnreg)
                try:
                    return [paged_attention(**batches[c][0], **hints, out=out, workspace=workspace, config=cfg)
                            for c in range(1 if first_only else copies)]
                finally:
                    launcher.pdl_launch = _pdl_launch
            return run

        ref = _sdpa(_sdpa_backends()["flash"], *dense[0], False).reshape_as(out)
        row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies, tree=str(tree), sweep={})
        cands = [(tree, None)]
        for tile, splits, warps, stages, maxnreg in itertools.product(
                (32, 64), (32, 48, 64, 96, 128), (2, 4), (2, 3), (None, 96, 80)):
            cfg = AttentionConfig(block_m=tree.block_m, block_q=tree.block_q, tile_n=tile, num_splits=splits,
                                  num_warps=warps, num_stages=stages)
            cands.append((cfg, maxnreg))
        timed = []
        for cfg, maxnreg in cands:
            if time.time() > t_end - 40:
                break
            key = f"n{cfg.tile_n}-s{cfg.num_splits}-w{cfg.num_warps}-st{cfg.num_stages}-r{maxnreg or 0}"
            try:
                calls(cfg, maxnreg, first_only=True)()
                err = _rel_err(out, ref)
                if err > 2e-2:
                    row["sweep"][key] = f"rel err {err:.3g}"
                    continue
                ms = time_ms(calls(cfg, maxnreg), graph=True, rep_ms=30) / copies
            except Exception as e:  # noqa: BLE001 - a candidate that does not compile or fit is recorded
                row["sweep"][key] = f"{type(e).__name__}: {str(e)[:80]}"
                continue
            row["sweep"][key] = round(nbytes / ms / 1e9, 4)
            timed.append((ms, key, cfg, maxnreg))
        timed.sort(key=lambda t: t[0])
        fns = {"tree": calls(tree, None)}
        for ms, key, cfg, maxnreg in timed[:5]:
            fns[key] = calls(cfg, maxnreg)
        fns["cudnn"] = lambda: [_sdpa(cudnn, *dense[c], False) for c in range(copies)]
        ms, errors = interleaved_ms(fns, graph=True, rounds=5)
        row["final_tbs"] = {k: round(nbytes / (t / copies) / 1e9, 4) for k, t in ms.items()}
        row["errors"] = errors
        print(json.dumps({k: v for k, v in row.items() if k != "sweep"}), flush=True)
        result["rows"].append(row)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        del batches, dense
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 330)
