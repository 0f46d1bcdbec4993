"""Probe: fused_moe's tiles swept cold on one GPU, both paths, at the bench's two shapes (which tiles and which path
where: the data behind ``tritium.ops.moe.moe_tiles``). Every candidate's output is checked against the default's.

    PYTHONPATH=src python3 bench/probe_moe.py --out probe-moe.json
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch

from tritium.bench.common import cold_us, header
from tritium.bench.moe import SHAPES
from tritium.ops.moe import MoeTiles, fused_moe, moe_route, moe_tiles

SLOT_UP = [(16, 128), (16, 256), (8, 256), (8, 512), (32, 128), (4, 512)]
SLOT_DOWN = [(8, 128, False), (8, 256, False), (16, 128, False), (16, 128, True), (32, 128, True), (16, 256, True),
             (32, 256, True), (64, 128, True)]
# (block_m, up_n, up_k, down_n, down_k, warps, stages)
SORTED = [(16, 64, 64, 64, 64, 4, 3), (16, 64, 128, 64, 128, 4, 3), (16, 32, 128, 32, 128, 4, 4),
          (32, 64, 64, 64, 64, 4, 3), (64, 64, 64, 64, 64, 4, 3), (64, 64, 64, 128, 64, 8, 3),
          (64, 128, 64, 128, 64, 8, 3), (128, 64, 64, 128, 64, 8, 3), (128, 64, 64, 128, 64, 8, 4),
          (128, 128, 64, 128, 64, 8, 3), (64, 64, 128, 64, 128, 8, 3)]
TOKENS = {"qwen3-30b-a3b": ([1, 2, 4, 8, 16, 32], [16, 32, 64, 256, 1024, 4096, 8192]),
          "mixtral-8x7b": ([1, 2, 4, 8], [4, 8, 16, 64, 256, 1024, 4096, 8192])}


def label(c: MoeTiles) -> str:
    return (f"{'slot' if not c.block_m else 'sorted'} m{c.block_m} up{c.up_n}x{c.up_k} "
            f"down{c.down_n}x{c.down_k}{'s' if c.down_per_slot else ''} w{c.num_warps} s{c.num_stages}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--shapes", default=",".join(TOKENS))
    args = ap.parse_args()
    dev = torch.device("cuda")
    flush = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
    result = {"header": header(dev), "shapes": {}}
    for name in args.shapes.split(","):
        H, I, E, k = SHAPES[name]
        g = torch.Generator(device=dev).manual_seed(0)
        w_gate_up = (torch.randn(E, 2 * I, H, generator=g, device=dev) * 0.02).bfloat16()
        w_down = (torch.randn(E, H, I, generator=g, device=dev) * 0.02).bfloat16()
        rows = []
        slot_ts, sorted_ts = TOKENS[name]
        for T in sorted(set(slot_ts) | set(sorted_ts)):
            x = torch.randn(T, H, generator=g, device=dev).bfloat16()
            weights, ids = moe_route(torch.randn(T, E, generator=g, device=dev), k, True)
            ref = fused_moe(x, w_gate_up, w_down, weights, ids).float()
            default = moe_tiles(T, k, H, I, E, x.dtype, dev)
            cands = []
            if T in slot_ts:
                cands += [MoeTiles(0, un, uk, dn, dk, 4, 1, per) for (un, uk), (dn, dk, per)
                          in itertools.product(SLOT_UP, SLOT_DOWN)]
            if T in sorted_ts:
                cands += [MoeTiles(*c[:5], num_warps=c[5], num_stages=c[6]) for c in SORTED]
            if default not in cands:
                cands.append(default)
            times = {}
            for c in cands:
                key = label(c)
                try:
                    out = fused_moe(x, w_gate_up, w_down, weights, ids, tiles=c).float()
                    err = ((out - ref).norm() / ref.norm()).item()
                    if not err < 2e-2:
                        times[key] = f"wrong: rel err {err:.2e}"
                        continue
                    times[key] = round(cold_us(lambda: fused_moe(x, w_gate_up, w_down, weights, ids, tiles=c),
                                               flush, args.repeats), 2)
                except Exception as e:  # out of resources and the like: recorded, the sweep goes on
                    times[key] = f"{type(e).__name__}: {str(e)[:80]}"
            ok = {kk: v for kk, v in times.items() if isinstance(v, float)}
            best = min(ok, key=ok.get)
            dkey = label(default)
            best_slot = min((kk for kk in ok if kk.startswith("slot")), key=ok.get, default=None)
            best_sorted = min((kk for kk in ok if kk.startswith("sorted")), key=ok.get, default=None)
            row = {"T": T, "best": best, "best_us": ok[best], "default": dkey, "default_us": times[dkey],
                   "best_slot": best_slot, "best_slot_us": ok.get(best_slot),
                   "best_sorted": best_sorted, "best_sorted_us": ok.get(best_sorted), "us": times}
            rows.append(row)
            print(f"{name} T={T}: default {times[dkey]} us ({dkey}); best {ok[best]} ({best}); "
                  f"slot {ok.get(best_slot)} ({best_slot}); sorted {ok.get(best_sorted)} ({best_sorted})", flush=True)
        result["shapes"][name] = rows
        del w_gate_up, w_down
        torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
