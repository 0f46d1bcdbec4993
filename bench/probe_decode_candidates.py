"""Probe (H100/H200): after the first-tile preload (stop 42), are the trees' decode picks still the best on the
benchmark's decode anchors, and does the L2 variant of the preload (``launcher.PRELOAD_FIRST_TILE = 3``) pay?
Each anchor, timed cold as `bench attention` times it: a grid of candidates (tiles, stages, splits, a register
cap, preload mode) once each, then the six fastest, the tree's pick under both modes and cuDNN dense in
interleaved rounds. Outputs are checked against SDPA flash for every candidate before timing.

    PYTHONPATH=src python bench/probe_decode_candidates.py OUT.json [rounds]
"""

import dataclasses
import json
import sys

import torch

from tritium.attention import AttentionWorkspace, launcher, paged_attention, select_attention_config
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _rel_err, _sdpa, _sdpa_backends)
from tritium.bench.common import header, interleaved_ms, time_ms

# (batch, seq_len, block_size, splits to try)
CASES = [(1, 8192, 16, (16, 32, 64)), (1, 8192, 64, (17, 33, 64)), (1, 32768, 16, (17, 33, 64)),
         (1, 32768, 64, (17, 33, 64)), (1, 768, 16, (12, 24)), (4, 768, 16, (6, 12, 24)),
         (16, 4096, 16, (1, 2)), (16, 4096, 64, (1, 2))]
# (tile_n, num_stages, max_registers, preload modes): mode 1 is the shipped policy (`launcher.preload_arg`),
# 2 forces the register preload where the kernel allows it, 3 the L2 variant.
SHAPES = [(32, 2, None, (1, 3)), (32, 2, 96, (1, 3)), (32, 3, None, (1, 2, 3)), (32, 4, None, (1, 2)),
          (64, 2, None, (1, 3)), (64, 3, None, (1, 3)), (128, 2, None, (1,)), (128, 3, None, (1,))]


def _case(batch, seq_len, block_size, split_list, rounds):
    nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
    copies = _cold_copies(nbytes)
    batches = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
    group = NUM_Q_HEADS // NUM_KV_HEADS
    out = torch.empty_like(batches[0][0]["q"])
    workspace = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, device=out.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
    dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
    refs = [_sdpa(_sdpa_backends()["flash"], *d, False).reshape_as(out) for d in dense]
    tree = select_attention_config(num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS,
                                   num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=block_size,
                                   max_seqlen_q=1, max_seqlen_k=seq_len, dtype=out.dtype, device=out.device)
    cands = {f"tree|p1": (tree, 1), f"tree|p3": (tree, 3)}
    for tile, stages, cap, modes in SHAPES:
        for splits in split_list:
            if tile >= 128 and splits > 2 or tile < 128 and batch >= 16 and stages < 3 and splits == 1:
                continue
            cfg = dataclasses.replace(tree, tile_n=tile, num_stages=stages, num_splits=splits, max_registers=cap,
                                      kernel="triton")
            for mode in modes:
                if splits == 1 and mode != 1:
                    continue
                cands[f"{_cfg_str(cfg)}|p{mode}"] = (cfg, mode)

    def call(cfg, mode):
        def fn():
            launcher.PRELOAD_FIRST_TILE = mode  # read at launch: a captured graph keeps it
            for c in range(copies):
                paged_attention(**batches[c][0], **hints, out=out, workspace=workspace, config=cfg)
        return fn

    row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies, tree=_cfg_str(tree),
               errors={}, once_us={})
    fns = {}
    for name, (cfg, mode) in cands.items():
        try:
            for c in range(copies):
                launcher.PRELOAD_FIRST_TILE = mode
                out.fill_(float("nan"))
                paged_attention(**batches[c][0], **hints, out=out, workspace=workspace, config=cfg)
                err = _rel_err(out, refs[c])
                if not err < 2e-2 or out.isnan().any():
                    raise AssertionError(f"rel_err {err}")
            fns[name] = call(cfg, mode)
            row["once_us"][name] = round(time_ms(fns[name], graph=True, rep_ms=60) / copies * 1e3, 3)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is reported, not fatal
            row["errors"][name] = f"{type(e).__name__}: {str(e)[:160]}"
        finally:
            launcher.PRELOAD_FIRST_TILE = 1
    best = sorted(row["once_us"], key=row["once_us"].get)[:6]
    final = {n: fns[n] for n in dict.fromkeys(best + ["tree|p1", "tree|p3"]) if n in fns}
    cudnn = _sdpa_backends()["cudnn"]
    final["cudnn"] = lambda: [_sdpa(cudnn, *dense[c], False) for c in range(copies)]
    ms, errors = interleaved_ms(final, graph=True, rounds=rounds)
    launcher.PRELOAD_FIRST_TILE = 1
    row["errors"].update(errors)
    row["final_us"] = {n: round(t / copies * 1e3, 3) for n, t in sorted(ms.items(), key=lambda kv: kv[1])}
    row["final_tbs"] = {n: round(nbytes / (t / copies * 1e-3) / 1e12, 4) for n, t in ms.items() if n != "cudnn"}
    if "cudnn" in ms:
        row["vs_cudnn"] = {n: round(ms["cudnn"] / t, 4) for n, t in ms.items() if n != "cudnn"}
    print(json.dumps({k: row[k] for k in ("batch", "seq_len", "block_size", "tree", "final_tbs")}), flush=True)
    return row


def main(path: str, rounds: int) -> None:
    result = {"header": header(), "rows": []}
    for batch, seq_len, block_size, splits in CASES:
        result["rows"].append(_case(batch, seq_len, block_size, splits, rounds))
        torch.cuda.empty_cache()
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
