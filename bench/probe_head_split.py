"""Probe: decode with a KV head's query heads spread over more programs (``AttentionConfig.head_split``).

GQA packing puts a KV head's whole query group in one program, so B=16 decode has 16 x 8 = 128 programs (one
an SM, 4 of the H200's 132 idle) and reads at 0.93-0.96x cuDNN, while B=64 L=2048 (512 programs) reaches the
copy ceiling; more programs by split-KV pay for a merge. With head_split h each of h programs takes group / h
query heads and reads the same K/V, the second reads from L2 when they run together (they are neighbours
in the grid): h times the programs without a merge, for h times the L2-to-SM traffic. Screens head_split
1/2/4 x 32/64/128-key tiles x 2/3 stages x split counts once (cold, as `bench attention` times decode),
then times the six best, the tree's pick and cuDNN in five interleaved rounds.

    PYTHONPATH=src python bench/probe_head_split.py OUT.json
"""

import itertools
import json
import sys

import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, paged_attention
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _rel_err, _sdpa, _sdpa_backends, decode_config)
from tritium.bench.common import header, interleaved_ms

CASES = [(16, 4096, 16), (16, 4096, 64), (1, 8192, 16), (1, 32768, 16), (64, 2048, 16), (4, 8192, 16),
         (1, 768, 16)]


def candidates(batch, seq_len, base):
    cands = {"tree": base}
    for hs, tile_n, stages, splits in itertools.product((1, 2, 4), (32, 64, 128), (2, 3), (1, 2, 4, 8, 16, 32, 64)):
        programs = batch * NUM_KV_HEADS * hs * splits
        if not 100 <= programs <= 1100 or splits * tile_n > seq_len:
            continue
        cands[f"h{hs}-n{tile_n}-st{stages}-s{splits}"] = AttentionConfig(
            block_m=16, block_q=1, tile_n=tile_n, num_splits=splits, num_warps=4, num_stages=stages, head_split=hs)
    return cands


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
    fns, errs = {}, {}
    for name, cfg in candidates(batch, seq_len, base).items():
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
    best_h1 = sorted((t, n) for n, t in screen.items() if n.startswith("h1-"))[:1]
    final.update({n: fns[n] for _, n in best_h1})
    dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
    cudnn = _sdpa_backends()["cudnn"]
    final["cudnn"] = lambda: [_sdpa(cudnn, *d, False) for d in dense]
    ms, more = interleaved_ms(final, graph=True, rounds=5)
    errs.update(more)
    tbs = lambda t: round(nbytes / (t / copies) / 1e9, 3)  # noqa: E731
    row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies, tree=_cfg_str(base),
               screen_tbs={n: tbs(t) for n, t in sorted(screen.items(), key=lambda x: x[1])},
               final_tbs={n: tbs(t) for n, t in sorted(ms.items(), key=lambda x: x[1])}, errors=errs)
    print(batch, seq_len, block_size, "tree", _cfg_str(base), json.dumps(row["final_tbs"]), flush=True)
    print("  screen top 10:", list(row["screen_tbs"].items())[:10], flush=True)
    print("  errors:", len(errs), list(errs.items())[:3], flush=True)
    return row


def main(path):
    result = dict(header(), probe="head_split", rows=[])
    for case in CASES:
        result["rows"].append(run_case(*case))
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
