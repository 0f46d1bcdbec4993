"""A/B probe (H100): the tree's decode configuration with and without a 96-register cap
(``AttentionConfig.max_registers``), cold as `bench attention` times decode, cuDNN dense beside.

    PYTHONPATH=src python bench/probe_register_cap.py OUT.json [seconds] [rounds]
"""

import dataclasses
import json
import sys
import time

import torch

from tritium.attention import AttentionWorkspace, paged_attention, select_attention_config
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _rel_err, _sdpa, _sdpa_backends)
from tritium.bench.common import header, interleaved_ms

CASES = [(1, 8192), (16, 4096), (64, 2048), (1, 768), (4, 768), (1, 32768)]


def main(path: str, seconds: float, rounds: int) -> None:
    t_end = time.time() + seconds
    result = {"header": header(), "rows": []}
    for batch, seq_len in CASES:
        for block_size in (16, 64):
            if time.time() > t_end:
                break
            nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
            copies = _cold_copies(nbytes)
            batches = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
            group = NUM_Q_HEADS // NUM_KV_HEADS
            out = torch.empty_like(batches[0][0]["q"])
            workspace = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, device=out.device)
            hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
            dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
            tree = select_attention_config(num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS,
                                           num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=block_size,
                                           max_seqlen_q=1, max_seqlen_k=seq_len, dtype=out.dtype, device=out.device)
            capped = dataclasses.replace(tree, max_registers=96)
            ref = _sdpa(_sdpa_backends()["flash"], *dense[0], False).reshape_as(out)
            row = dict(batch=batch, seq_len=seq_len, block_size=block_size, config=_cfg_str(tree))
            for name, cfg in (("tree", tree), ("capped", capped)):
                paged_attention(**batches[0][0], **hints, out=out, workspace=workspace, config=cfg)
                row[f"rel_err_{name}"] = _rel_err(out, ref)
                assert row[f"rel_err_{name}"] < 2e-2, row
            cudnn = _sdpa_backends()["cudnn"]
            fns = {name: (lambda cfg=cfg: [paged_attention(**batches[c][0], **hints, out=out, workspace=workspace,
                                                           config=cfg) for c in range(copies)])
                   for name, cfg in (("tree", tree), ("capped", capped))}
            fns["cudnn"] = lambda: [_sdpa(cudnn, *dense[c], False) for c in range(copies)]
            ms, errors = interleaved_ms(fns, graph=True, rounds=rounds)
            for name, t in ms.items():
                row[f"{name}_us"] = round(t / copies * 1e3, 3)
            row["capped_vs_tree"] = round(ms["tree"] / ms["capped"], 4)
            if "cudnn" in ms:
                row["tree_vs_cudnn"] = round(ms["cudnn"] / ms["tree"], 4)
                row["capped_vs_cudnn"] = round(ms["cudnn"] / ms["capped"], 4)
            row["errors"] = errors
            print(json.dumps(row), flush=True)
            result["rows"].append(row)
            with open(path, "w") as f:
                json.dump(result, f, indent=1)
            del batches, dense
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 120,
         int(sys.argv[3]) if len(sys.argv) > 3 else 3)
