"""Probe: the GEMV candidates (``CONFIGS``, both kernels) at M = 1, 2, 4 and a wider grid of configurations
of both kernels at M = 1 (``PROBE_SHAPES`` / ``PROBE_MS``: a subset;
``PROBE_FLAT_ONLY=1``: the flat kernel's grid only), on the Llama-3-8B layer projections, timed as LinearDispatch.tune times them (32
weights in turn, in a CUDA graph), against cuBLAS and a copy of the same bytes. Prints a table and writes
$OUT/gemv-probe-<gpu>.json. Run from the repo root with PYTHONPATH=src."""

import itertools
import json
import os
import time

import torch
import torch.nn.functional as F

from tritium.models.linear import _time_group
from tritium.ops.gemv import CONFIGS, GemvConfig, gemv

SHAPES = {"qkv_proj": (6144, 4096), "o_proj": (4096, 4096), "gate_up_proj": (28672, 4096), "down_proj": (4096, 14336)}
LAYERS = 32


def grid():
    out = list(CONFIGS)
    for n, k, w, st in itertools.product((1, 2, 4, 8, 16), (512, 1024, 2048, 4096), (4, 8), (1, 3)):
        cfg = GemvConfig(n, k, w, st)
        if 2048 <= n * k <= 16384 and cfg not in out and not os.environ.get("PROBE_FLAT_ONLY"):
            out.append(cfg)
    for n, k, w, st in itertools.product((1, 2, 4, 8), (256, 512, 1024, 2048, 4096), (2, 4, 8), (1, 3)):
        cfg = GemvConfig(n, k, w, st, flat=True)  # the flat kernel: 32-256 weight elements a thread a chunk
        if 1024 <= n * k <= 8192 and 32 <= n * k // (32 * w) <= 256 and cfg not in out:
            out.append(cfg)
    return out


def main():
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name().replace(" ", "-")
    cfgs = grid()
    res = {"gpu": gpu, "configs": [str(c) for c in cfgs], "shapes": {}}
    t0 = time.time()
    group, shape = [], None
    # PROBE_SHAPES=down_proj,o_proj PROBE_MS=1: a subset
    shapes = {k: v for k, v in SHAPES.items() if k in os.environ.get("PROBE_SHAPES", ",".join(SHAPES)).split(",")}
    ms = tuple(int(m) for m in os.environ.get("PROBE_MS", "1,2,4").split(","))
    for (name, (N, K)), m in itertools.product(shapes.items(), ms):
        if shape != (N, K):  # a projection's 32 weights, made once for its three row counts
            group, shape = [], (N, K)
            torch.cuda.empty_cache()
            group = [torch.randn(N, K, dtype=torch.bfloat16, device=dev) / 64 for _ in range(LAYERS)]
        nbytes = N * K * 2
        x = torch.randn(m, K, dtype=torch.bfloat16, device=dev)
        row = {"cublas": _time_group(lambda w: F.linear(x, w), group, 5) / LAYERS * 1e3,
               "copy": _time_group(lambda w: torch.empty_like(w).copy_(w), group[:8], 5) / 8 * 1e3 / 2}
        for cfg in (cfgs if m == 1 else CONFIGS):
            try:
                row[str(cfg)] = _time_group(lambda w, c=cfg: gemv(x, w, config=c), group, 5) / LAYERS * 1e3
            except Exception as e:
                row[str(cfg)] = None
                print(name, cfg, type(e).__name__, str(e)[:80], flush=True)
        best = sorted((v, k) for k, v in row.items() if v is not None and k not in ("cublas", "copy"))
        print(f"{name} {N}x{K} M={m}: cuBLAS {row['cublas']:.2f} us ({nbytes / row['cublas'] / 1e6:.2f} TB/s), "
              f"half a copy {row['copy']:.2f} us; best GEMVs:", flush=True)
        for v, k in best[:8]:
            print(f"   {k:>18} {v:7.2f} us  {nbytes / v / 1e6:.2f} TB/s", flush=True)
        shipped = min((row[str(c)], str(c)) for c in CONFIGS if row.get(str(c)) is not None)
        print(f"   shipped best {shipped[1]} {shipped[0]:.2f} us ({time.time() - t0:.0f} s)", flush=True)
        res["shapes"][f"{name} m={m}"] = {"n": N, "k": K, "m": m, "us": row}
    out = os.environ.get("OUT", ".")
    with open(f"{out}/gemv-probe-{gpu}.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
