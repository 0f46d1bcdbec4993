"""Probe: B=1 decode with smaller programs or deeper pipelines than the tuner's candidates.

The tuner's decode candidates are 32-key tiles at 2 stages and 64/128-key tiles at 2-3 stages, all with 4
warps. At B=1 L=8192 the tree's 32-key x 64 splits x 2 stages reads at 1.84 TB/s (H100) where a plain read
of the same bytes reaches 2.45; ncu had DRAM at 56% of peak with 4 programs an SM (register bound). This
screens 16/32/64-key tiles x 2-4 stages x 1/2/4 warps x 32/64 splits once (cold, as `bench attention`),
then times the six best, the tree's pick and cuDNN in five interleaved rounds.

    PYTHONPATH=src python bench/probe_decode_depth.py OUT.json
"""

import itertools
import json
import sys

import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, paged_attention
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _rel_err, _sdpa, _sdpa_backends, decode_config)
from tritium.bench.common import header, interleaved_ms

CASES = [(1, 8192, 16), (1, 32768, 16), (1, 768, 16)]


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
    cands = {"tree": None}
    for tile_n, stages, warps, splits in itertools.product((16, 32, 64), (2, 3, 4), (1, 2, 4), (32, 64)):
        if splits * tile_n > seq_len:
            continue
        cands[f"n{tile_n}-st{stages}-w{warps}-s{splits}"] = AttentionConfig(
            block_m=base.block_m, block_q=base.block_q, tile_n=tile_n, num_splits=splits, num_warps=warps,
            num_stages=stages)
    fns, errs = {}, {}
    for name, cfg in cands.items():
        def call(inp, cfg=cfg):
            return paged_attention(**inp, **hints, out=out, workspace=ws, config=cfg)
        try:
            out.fill_(float("nan"))
            err = _rel_err(call(batches[0][0]), ref)
        except Exception as e:
            errs[name] = f"{type(e).__name__}: {str(e)[:120]}"
            continue
        if not err < 2e-2:
            errs[name] = f"rel err {err}"
            continue
        fns[name] = lambda call=call: [call(b[0]) for b in batches]
    screen, more = interleaved_ms(fns, graph=True, rounds=1, rep_ms=40)
    errs.update(more)
    best = sorted((t, n) for n, t in screen.items() if n != "tree")[:6]
    final = {n: fns[n] for _, n in best}
    final["tree"] = fns["tree"]
    dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
    cudnn = _sdpa_backends()["cudnn"]
    final["cudnn"] = lambda: [_sdpa(cudnn, *d, False) for d in dense]
    ms, more = interleaved_ms(final, graph=True, rounds=5)
    errs.update(more)
    tbs = lambda t: round(nbytes / (t / copies) / 1e9, 3)  # noqa: E731
    row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies, tree=_cfg_str(base),
               screen_tbs={n: tbs(t) for n, t in sorted(screen.items(), key=lambda x: x[1])},
               final_tbs={n: tbs(t) for n, t in ms.items()}, errors=errs)
    print(batch, seq_len, block_size, "tree", _cfg_str(base), json.dumps(row["final_tbs"]), flush=True)
    print("  screen top 12:", list(row["screen_tbs"].items())[:12], flush=True)
    print("  errors:", len(errs), list(errs.items())[:3], flush=True)
    return row


def main(path):
    result = dict(header(), probe="decode_depth", rows=[])
    for case in CASES:
        result["rows"].append(run_case(*case))
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
