"""Probe: the QKV projection of Llama-3-8B (32 q + 2 x 8 kv heads of 128, K = 4096) at M = 1, 2, 4 as the
decode step runs it: the GEMV with rope and the KV write inside (``qkv_rope_write_kv``, its 3-D and flat
kernels, every candidate of ``CONFIGS`` whose rows split into rope pairs), the plain GEMV, and cuBLAS
followed by the rope + KV-write kernel; each timed as LinearDispatch.tune times (32 weights in turn, in a
CUDA graph). Checks each rope candidate against the GEMV then ``rope_write_kv`` first. Prints a table and
writes $OUT/qkv-rope-probe-<gpu>.json. Run from the repo root with PYTHONPATH=src."""

import json
import os
import time

import torch
import torch.nn.functional as F

from tritium import ops
from tritium.models.linear import _time_group
from tritium.models.rope import rope_cos_sin, rope_inv_freq
from tritium.ops.gemv import CONFIGS, gemv
from tritium.ops.qkv_rope import qkv_rope_write_kv, supports

HQ, HKV, D, K, LAYERS = 32, 8, 128, 4096, 32


def main():
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name().replace(" ", "-")
    n = (HQ + 2 * HKV) * D
    group = [torch.randn(n, K, dtype=torch.bfloat16, device=dev) / 64 for _ in range(LAYERS)]
    cos_sin = rope_cos_sin(rope_inv_freq(D, 500000.0, None, None), 4096, 1.0).to(dev)
    kc = torch.zeros(64, 16, HKV, D, dtype=torch.bfloat16, device=dev)
    vc = torch.zeros_like(kc)
    res = {"gpu": gpu, "n": n, "k": K, "rows": {}}
    t0 = time.time()
    for m in (1, 2, 4):
        x = torch.randn(m, K, dtype=torch.bfloat16, device=dev)
        pos = torch.randint(0, 4096, (m,), device=dev)
        slots = torch.arange(m, device=dev) + 7

        def cublas_rope(w):
            y = F.linear(x, w)
            ops.rope_write_kv(y[:, :HQ * D].view(m, HQ, D), y[:, HQ * D:(HQ + HKV) * D].view(m, HKV, D),
                              y[:, (HQ + HKV) * D:].view(m, HKV, D), pos, cos_sin, kc, vc, slots)
            return y

        row = {"cublas+rope": _time_group(cublas_rope, group, 5) / LAYERS * 1e3,
               "cublas": _time_group(lambda w: F.linear(x, w), group, 5) / LAYERS * 1e3}
        want = cublas_rope(group[0]).float()
        for cfg in CONFIGS:
            if cfg.block_k > K:
                continue
            row[f"plain {cfg}"] = _time_group(lambda w, c=cfg: gemv(x, w, config=c), group, 5) / LAYERS * 1e3
            if not supports(cfg, D):
                continue

            def rope(w, c=cfg):
                return qkv_rope_write_kv(x, w, None, pos, cos_sin, kc, vc, slots, num_q_heads=HQ,
                                         num_kv_heads=HKV, config=c)
            err = ((rope(group[0]).float() - want).norm() / want.norm()).item()
            if not err < 2e-2:
                print(f"M={m} rope {cfg}: relative error {err:.2e}: not timed", flush=True)
                row[f"rope {cfg}"] = None
                continue
            row[f"rope {cfg}"] = _time_group(rope, group, 5) / LAYERS * 1e3
        best = sorted((v, k) for k, v in row.items() if v is not None)
        print(f"M={m}: ({time.time() - t0:.0f} s)", flush=True)
        for kind in ("rope", "plain", "cublas"):
            top = [(v, k) for v, k in best if k.startswith(kind)][:4]
            print("   " + "  ".join(f"{k} {v:.2f}" for v, k in top), flush=True)
        res["rows"][f"m={m}"] = row
    with open(f"{os.environ.get('OUT', '.')}/qkv-rope-probe-{gpu}.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
