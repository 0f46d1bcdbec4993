"""Probe (H100): does a decode configuration's gain in `bench attention` (attention calls back to back) hold
where a model runs it, after a GEMV? Each case is timed cold as a graph of (QKV-sized GEMV, attention) pairs
over rotating copies of the cache (two weight copies, 100 MB, so the GEMV streams from DRAM too), for the
tree's pick, 32-key 2-stage split configurations and the same under a 96-register cap; the GEMV chain
alone is timed in the same rounds, so each configuration's exposed attention time is the difference.

    PYTHONPATH=src python bench/probe_decode_chain.py OUT.json [rounds]
"""

import dataclasses
import json
import sys

import torch

from tritium.attention import AttentionWorkspace, paged_attention, select_attention_config
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _rel_err, _sdpa, _sdpa_backends)
from tritium.bench.common import header, interleaved_ms
from tritium.ops.gemv import gemv

# (batch, seq_len, block_size, 32-key split counts)
CASES = [(1, 8192, 16, (64,)), (1, 8192, 64, (64,)), (1, 32768, 16, (64,)), (1, 32768, 64, (64,)),
         (1, 768, 16, (24,)), (4, 768, 16, (12, 17)), (4, 8192, 16, (17, 33))]
HIDDEN, QKV = 4096, 6144


def _case(batch, seq_len, block_size, split_list, rounds, weights):
    nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
    copies = max(2, _cold_copies(nbytes))
    batches = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
    group = NUM_Q_HEADS // NUM_KV_HEADS
    out = torch.empty_like(batches[0][0]["q"])
    x = torch.randn(batch, HIDDEN, dtype=out.dtype, device=out.device)
    workspace = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, device=out.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
    dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
    tree = select_attention_config(num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS,
                                   num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=block_size,
                                   max_seqlen_q=1, max_seqlen_k=seq_len, dtype=out.dtype, device=out.device)
    cands = {"tree": tree}
    for splits in split_list:
        for cap in (None, 96):
            cfg = dataclasses.replace(tree, tile_n=32, num_stages=2, num_splits=splits, max_registers=cap,
                                      kernel="triton")
            cands[_cfg_str(cfg)] = cfg
    for name, cfg in cands.items():
        for c in range(copies):
            out.fill_(float("nan"))
            paged_attention(**batches[c][0], **hints, out=out, workspace=workspace, config=cfg)
            ref = _sdpa(_sdpa_backends()["flash"], *dense[c], False).reshape_as(out)
            err = _rel_err(out, ref)
            assert err < 2e-2 and not out.isnan().any(), (name, c, err)

    def chain(cfg):
        def fn():
            for c in range(copies):
                gemv(x, weights[c % 2])
                if cfg is not None:
                    paged_attention(**batches[c][0], **hints, out=out, workspace=workspace, config=cfg)
        return fn

    fns = {"gemv_only": chain(None), **{n: chain(c) for n, c in cands.items()}}
    ms, errors = interleaved_ms(fns, graph=True, rounds=rounds)
    base = ms.get("gemv_only")
    row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies, tree=_cfg_str(tree),
               errors=errors, chain_us={n: round(t / copies * 1e3, 3) for n, t in ms.items()})
    if base is not None:
        row["attention_exposed_us"] = {n: round((t - base) / copies * 1e3, 3) for n, t in ms.items()
                                       if n != "gemv_only"}
    print(json.dumps({k: row[k] for k in ("batch", "seq_len", "block_size", "tree", "chain_us")}), flush=True)
    return row


def main(path: str, rounds: int) -> None:
    weights = [torch.randn(QKV, HIDDEN, dtype=torch.bfloat16, device="cuda") for _ in range(2)]
    result = {"header": header(), "rows": []}
    for batch, seq_len, block_size, splits in CASES:
        result["rows"].append(_case(batch, seq_len, block_size, splits, rounds, weights))
        torch.cuda.empty_cache()
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
