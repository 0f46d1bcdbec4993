"""Probe: decode through the warp-specialised Gluon kernel (tritium.attention.hopper), cold.

B=16 L=4096 decode runs one Triton program an SM (128 programs) at 0.93-0.96x cuDNN on the H200: the
program's loads and its math take turns, so its SM is not kept streaming. The Gluon kernel's loader warps
keep STAGES 128-key K/V tiles in flight by TMA whatever the consumers do; decode is causal prefill of one
token, which it serves (a 128-row Q block holding one token's 4 query heads: the wgmmas are mostly padding,
but cheap against the reads). Times the tree's Triton pick, the Gluon grid and persistent kernels and cuDNN
in five interleaved rounds (graphs over copies of the cache that together are 3x the L2).

    PYTHONPATH=src python bench/probe_gluon_decode.py OUT.json
"""

import json
import sys

import torch

from tritium.attention import AttentionWorkspace, hopper, paged_attention
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _rel_err, _sdpa, _sdpa_backends, decode_config)
from tritium.bench.common import header, interleaved_ms

CASES = [(16, 4096, 16), (16, 4096, 64), (32, 4096, 16), (64, 2048, 16), (8, 8192, 16), (16, 8192, 16),
         (128, 1024, 16)]


def run_case(batch, seq_len, block_size):
    nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
    copies = _cold_copies(nbytes)
    batches = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
    q = batches[0][0]["q"]
    out = torch.empty_like(q)
    ws = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, device=q.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
    base = decode_config(batch, seq_len, block_size, q)
    group = NUM_Q_HEADS // NUM_KV_HEADS
    ref = _sdpa(_sdpa_backends()["flash"], q.view(batch, NUM_KV_HEADS, group, HEAD_DIM), batches[0][1],
                batches[0][2], False).reshape_as(q)

    def tree(inp):
        return paged_attention(**inp, **hints, out=out, workspace=ws, config=base)

    def gluon(inp, persistent):
        hopper.launch(out, inp["q"], inp["k_cache"], inp["v_cache"], inp["block_table"], inp["seq_lens"],
                      inp["cu_seqlens_q"], scale=HEAD_DIM ** -0.5,
                      max_kv_len=inp["block_table"].shape[1] * block_size, persistent=persistent)
        return out

    calls = {"tree": tree, "gluon-grid": lambda i: gluon(i, False), "gluon-persistent": lambda i: gluon(i, True)}
    fns, errs = {}, {}
    for name, call in calls.items():
        try:
            out.fill_(float("nan"))
            err = _rel_err(call(batches[0][0]), ref)
        except Exception as e:
            errs[name] = f"{type(e).__name__}: {str(e)[:160]}"
            continue
        if not err < 2e-2:
            errs[name] = f"rel err {err}"
            continue
        fns[name] = lambda call=call: [call(b[0]) for b in batches]
    dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
    cudnn = _sdpa_backends()["cudnn"]
    fns["cudnn"] = lambda: [_sdpa(cudnn, *d, False) for d in dense]
    ms, more = interleaved_ms(fns, graph=True, rounds=5)
    errs.update(more)
    tbs = lambda t: round(nbytes / (t / copies) / 1e9, 3)  # noqa: E731
    row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies, tree=_cfg_str(base),
               final_tbs={n: tbs(t) for n, t in sorted(ms.items(), key=lambda x: x[1])}, errors=errs)
    print(batch, seq_len, block_size, "tree", _cfg_str(base), json.dumps(row["final_tbs"]), errs, flush=True)
    return row


def main(path):
    result = dict(header(), probe="gluon_decode", rows=[])
    for case in CASES:
        result["rows"].append(run_case(*case))
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
