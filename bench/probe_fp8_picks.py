"""Probe: the H100 tree's fp8-cache picks that re-timed slower than the hand rules, with the fp16 dots (today's
kernel) and with the bf16 dots the sweep was timed on.

The H100 sweep's fp8 workloads were timed before the fp8 kernel's dots moved to fp16 (abf92a2, stop 70). Re-timed
on today's kernel (stop 88, ``--confirm --kv-dtype fp8``), 15 of 374 fp8 held-out picks were > 3% slower than the
hand rules where the sweep had 3. This times, for the slowest ``--top`` of them, the pick, the hand rules and the
sweep's best, cold as the sweep times them (``sweep_workload``), once per kernel variant, each variant in its own
process (a Triton kernel's dependencies are hashed at its first compile):

- ``fp16_dots``: the kernel as it is;
- ``bf16_dots``: ``kernels._dot_q`` replaced by the identity (q stays bf16, fp8 K/V convert to bf16: the kernel of
  the sweep).

    PYTHONPATH=src python bench/probe_fp8_picks.py CONFIRM.json OUT.json [--top 8] [--repeats 4]
"""

import argparse
import json
import os
import subprocess
import sys

VARIANTS = ("fp16_dots", "bf16_dots")


def run_variant(variant: str, names: list[str], keys: dict, repeats: int) -> dict:
    import torch
    import triton

    from tritium.attention import kernels
    if variant == "bf16_dots":
        @triton.jit
        def _same_q(q, k_cache_ptr):
            return q

        kernels._dot_q = _same_q
    from tritium.runtime import num_sms
    from tritium.tune import attention as sweep_mod
    from tritium.tune.trees import key_knobs

    with open(os.path.join("bench", "results", "tuning", "attention-NVIDIA-H100.json")) as f:
        records = {r["name"]: r for r in json.load(f)["records"]}
    device = torch.device("cuda")
    sms = num_sms(device)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    out = {}
    for name in names:
        w = sweep_mod.Workload(**records[name]["workload"])
        rec = sweep_mod.sweep_workload(w, device, sms, l2, check=True, repeats=repeats,
                                       candidates=[key_knobs(k) for k in keys[name]])
        out[name] = dict(times_ms=rec["times_ms"], runs_ms=rec.get("runs_ms", {}), rel_err=rec.get("rel_err"))
        print(variant, name, {k: round(v * 1e3, 1) if v else None for k, v in rec["times_ms"].items()}, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("confirm")
    ap.add_argument("out")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one process a variant
    args = ap.parse_args()
    with open(args.confirm) as f:
        recs = sorted(json.load(f)["records"], key=lambda r: -r["vs_hand"])[:args.top]
    names = [r["name"] for r in recs]
    keys = {r["name"]: list(dict.fromkeys([r["pick"], "hand", r["best"]])) for r in recs}
    if args.variant:
        with open(args.out, "w") as f:
            json.dump(run_variant(args.variant, names, keys, args.repeats), f)
        return 0
    result = dict(workloads=names, keys=keys, confirm={r["name"]: r["times_ms"] for r in recs})
    for variant in VARIANTS:
        part = args.out + f".{variant}"
        subprocess.run([sys.executable, __file__, args.confirm, part, "--top", str(args.top), "--repeats",
                        str(args.repeats), "--variant", variant], check=True)
        with open(part) as f:
            result[variant] = json.load(f)
        os.remove(part)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for name in names:
        print(name)
        for variant in VARIANTS:
            t = result[variant][name]["times_ms"]
            hand = t.get("hand")
            print(f"  {variant:10s}", "  ".join(f"{k} {v * 1e3:.1f} us ({v / hand:.3f}x hand)" for k, v in t.items()
                                            if v and hand))
    return 0


if __name__ == "__main__":
    sys.exit(main())
