"""Probe: does a head-major page layout read faster in cold decode than the shipped token-major one?

The cache is [num_blocks, block_size, num_kv_heads, head_dim] (token-major within a page): one program
(one KV head) reads 256-byte rows 2 KiB apart. Head-major pages ([num_blocks, num_kv_heads, block_size,
head_dim], passed as a permuted view so the kernel is unchanged) give each head a contiguous 4 KiB run
per page of 16. Same kernel, same configuration, same block tables; cold as `bench attention` (graphs
rotating over copies of 3x the L2), interleaved rounds with cuDNN dense beside them.

    PYTHONPATH=src python bench/probe_kv_layout.py OUT.json [rounds]
"""

import json
import sys

import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, paged_attention
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _rel_err, _sdpa, _sdpa_backends, decode_config)
from tritium.bench.common import header, interleaved_ms

CASES = [(1, 8192, 16), (1, 8192, 64), (1, 32768, 16), (16, 4096, 16), (64, 2048, 16), (1, 768, 16),
         (128, 8192, 16)]


def head_major(cache: torch.Tensor) -> torch.Tensor:
    """The same values in head-major pages, returned as a [blocks, block_size, heads, D] view."""
    blocks, bs, heads, d = cache.shape
    hm = torch.empty(blocks, heads, bs, d, dtype=cache.dtype, device=cache.device)
    hm.permute(0, 2, 1, 3).copy_(cache)
    return hm.permute(0, 2, 1, 3)


def candidates(base: AttentionConfig, batch: int) -> dict:
    out = {"tree": None}
    if batch == 1:
        for tile_n, splits, stages in ((32, 64, 2), (64, 32, 2), (64, 17, 3), (128, 17, 3), (128, 32, 2)):
            out[f"n{tile_n}-s{splits}-st{stages}"] = AttentionConfig(
                block_m=base.block_m, block_q=base.block_q, tile_n=tile_n, num_splits=splits, num_warps=4,
                num_stages=stages)
    return out


def run_case(batch, seq_len, block_size, rounds):
    nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
    copies = _cold_copies(nbytes)
    tm = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
    hm = [dict(b[0], k_cache=head_major(b[0]["k_cache"]), v_cache=head_major(b[0]["v_cache"])) for b in tm]
    q = tm[0][0]["q"]
    group = NUM_Q_HEADS // NUM_KV_HEADS
    out = torch.empty_like(q)
    ws = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, device=q.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
    base = decode_config(batch, seq_len, block_size, q)
    q_dense = q.view(batch, NUM_KV_HEADS, group, HEAD_DIM)
    ref = _sdpa(_sdpa_backends()["flash"], q_dense, tm[0][1], tm[0][2], False).reshape_as(q)
    row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies, tree=_cfg_str(base))
    fns = {}
    for cname, cfg in candidates(base, batch).items():
        for lname, batches in (("token", [b[0] for b in tm]), ("head", hm)):
            def call(inp, cfg=cfg):
                return paged_attention(**inp, **hints, out=out, workspace=ws, config=cfg)
            out.fill_(float("nan"))
            err = _rel_err(call(batches[0]), ref)
            row[f"err_{lname}_{cname}"] = err
            if not err < 2e-2:
                raise RuntimeError(f"{lname} {cname} B={batch} L={seq_len}: rel err {err}")
            fns[f"{lname}_{cname}"] = lambda batches=batches, call=call: [call(b) for b in batches]
    dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in tm]
    cudnn = _sdpa_backends()["cudnn"]
    fns["cudnn"] = lambda: [_sdpa(cudnn, *dense[c], False) for c in range(copies)]
    ms, errors = interleaved_ms(fns, graph=True, rounds=rounds)
    row["errors"] = errors
    row["tbs"] = {name: round(nbytes / (t / copies) / 1e9, 3) for name, t in ms.items()}
    print(batch, seq_len, block_size, json.dumps(row["tbs"]), flush=True)
    return row


def main(path: str, rounds: int) -> None:
    result = dict(header(), probe="kv_layout", rounds=rounds, rows=[])
    for case in CASES:
        result["rows"].append(run_case(*case, rounds))
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
