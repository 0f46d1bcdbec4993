"""Probe: do causal prefill calls gain from handing Q blocks out heaviest first across the batch?

Slot order (the kernel's ORDER 0) gives each sequence's blocks, last (heaviest) first, one sequence and KV
head after another: a batch of several long prompts ends each wave in short blocks. ORDER 1 hands out the
whole batch's blocks by level (keys seen) within each KV head, ORDER 2 with the KV heads innermost
(``_heaviest_first``); ORDER 3 ranks the blocks of batches of prompts of one length
without a search (``_rank_order``; other batches take slot order). Same kernel, same configurations: for each
workload of the committed sweep listed below, the hand rules, the tree's pick and the sweep's three fastest
Triton candidates, each under the orders, timed as the sweep times them (``time_calls``: graphs of >= 8
calls), in interleaved rounds.
The orders must give the same bits (the arithmetic of a block does not depend on when it runs).

    PYTHONPATH=src [PROBE_ORDERS=0,1] python bench/probe_prefill_order.py OUT.json [rounds] [name-regex]
"""

import dataclasses
import json
import os
import re
import sys
import time

import torch

from tritium.attention import AttentionConfig, launcher, select_attention_config
from tritium.bench.common import header
from tritium.runtime import num_sms
from tritium.tune.attention import Workload, _calls, build_inputs, gpu_slug, time_calls
from tritium.tune.trees import HAND

ORDERS = tuple(int(o) for o in os.environ.get("PROBE_ORDERS", "0,1,2").split(","))
# The two slow held-out picks (twins: 512 programs of 4k-token prompts), their neighbours in programs and
# prompt length, D=128 prefill on the Triton kernel, and mixed batches.
NAMES = [
    "prefill-B2-P2x4096-L4096-D64-G4-K2-bs64-bf16",
    "prefill-B4-P4x4096-L4096-D64-G4-K1-bs64-bf16",
    "prefill-B4-P4x4096-L4096-D64-G4-K2-bs64-bf16",
    "prefill-B8-P8x4096-L4096-D64-G4-K2-bs16-bf16",
    "prefill-B2-P2x8192-L8192-D64-G4-K1-bs64-bf16",
    "prefill-B2-P2x8192-L8192-D64-G4-K8-bs16-bf16",
    "prefill-B4-P4x4096-L4096-D64-G4-K8-bs64-fp8",
    "prefill-B8-P8x2048-L2048-D128-G4-K8-bs16-bf16",
    "prefill-B4-P4x8192-L8192-D128-G4-K8-bs16-bf16",
    "prefill-B16-P16x512-L512-D128-G4-K1-bs64-bf16",
    "prefill-B2-P2x1024-L1024-D128-G4-K1-bs64-bf16",
    "mixed-B128-P1x128-L2048-D128-G4-K2-bs64-bf16",
    "mixed-B32-P1x2048-L2048-D128-G8-K2-bs16-bf16",
    "prefill-B16-P16x256-L256-D128-G4-K1-bs64-bf16",
    "prefill-B8-P8x1024-L1024-D128-G1-K1-bs16-bf16",
    "prefill-B4-P4x512-L512-D128-G4-K8-bs64-bf16",
    "mixed-B8-P1x512-L8192-D128-G8-K1-bs64-bf16",
    "mixed-B128-P1x2048-L8192-D128-G4-K1-bs16-bf16",
]


# Candidates (block_m, tile_n, num_warps, num_stages) where the sweep of this GPU lacks the workload.
FIXED = [(128, 64, 8, 2), (128, 64, 8, 3), (64, 128, 4, 2)]
NAME = re.compile(r"(prefill|mixed)-B(\d+)-P(\d+)x(\d+)-L(\d+)-D(\d+)-G(\d+)-K(\d+)-bs(\d+)-(bf16|fp8)$")


def workload_of(name: str) -> Workload:
    m = NAME.match(name)
    if not m:
        raise ValueError(f"not a prefill-family workload name: {name}")
    b, p, q, ctx, d, g, k, bs = (int(x) for x in m.groups()[1:9])
    return Workload(num_seqs=b, num_prefill=p, q_len=q, context=ctx, head_dim=d, group=g, num_kv_heads=k,
                    block_size=bs, kv_dtype=m.group(10))


def configs_for(record: dict | None, w: Workload, sms: int, device) -> dict:
    """hand, tree and the sweep's three fastest Triton candidates (else FIXED): name -> AttentionConfig."""
    out = {"hand": w.config(HAND, sms)}
    inputs_like = dict(num_tokens=w.num_tokens, num_seqs=w.num_seqs, num_q_heads=w.num_q_heads,
                       num_kv_heads=w.num_kv_heads, head_dim=w.head_dim, block_size=w.block_size,
                       max_seqlen_q=w.max_seqlen_q, max_seqlen_k=w.context,
                       dtype=torch.bfloat16, device=device,
                       kv_dtype=torch.float8_e4m3fn if w.kv_dtype == "fp8" else torch.bfloat16)
    tree = select_attention_config(**inputs_like)
    if tree.kernel == "triton":
        out["tree"] = tree
    if record is None:
        for knobs in FIXED:
            cfg = w.config(knobs, sms)
            if cfg not in out.values():
                out["-".join(map(str, knobs))] = cfg
        return out
    times = {k: v for k, v in record["times_ms"].items() if v is not None and k != "hand"}
    for key in sorted(times, key=times.get):
        cfg = AttentionConfig(*record["configs"][key])
        if cfg.kernel != "triton" or cfg in out.values():
            continue
        out[key] = cfg
        if len(out) >= 5:
            break
    return out


def main() -> None:
    path = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    pattern = re.compile(sys.argv[3]) if len(sys.argv) > 3 else None
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    sms = num_sms(device)
    sweep = json.load(open(f"bench/results/tuning/attention-{gpu_slug(torch.cuda.get_device_name())}.json"))
    records = {r["name"]: r for r in sweep["records"]}
    result = dict(header=header(), what=__doc__.split("\n")[0], rounds=rounds, workloads=[])
    names = [n for n in NAMES if pattern is None or pattern.search(n)]
    t_start = time.perf_counter()
    for name in names:
        rec = records.get(name)
        w = workload_of(name)
        inputs = build_inputs(w, device)
        configs = configs_for(rec, w, sms, device)
        row = dict(name=name, configs={k: dataclasses.astuple(c) for k, c in configs.items()}, ms={},
                   sweep_ms={k: rec["times_ms"].get(k) for k in configs} if rec else None, same_bits={})
        for key, cfg in configs.items():  # compile every variant, check the bits
            ref = None
            for order in ORDERS:
                launcher.ORDER = order
                out = torch.full_like(inputs["q"], float("nan"))
                _calls(w, inputs, cfg, out, None)[0]()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                if ref is None:
                    ref = out
                    if torch.isnan(out).any():
                        raise RuntimeError(f"{name} {key}: NaN in the output of order 0")
                else:
                    same = torch.equal(out, ref)
                    row["same_bits"][f"{key}/o{order}"] = same
                    if not same:
                        print(f"{name} {key} order {order}: output differs from order 0", flush=True)
        times = {(k, o): [] for k in configs for o in ORDERS}
        keys = list(times)
        for r in range(rounds):
            for key, order in keys if r % 2 == 0 else keys[::-1]:
                launcher.ORDER = order
                out = torch.empty_like(inputs["q"])
                times[(key, order)].append(time_calls(_calls(w, inputs, configs[key], out, None)))
        launcher.ORDER = 0
        for (key, order), t in times.items():
            row["ms"][f"{key}/o{order}"] = sorted(t)[len(t) // 2]
        hand0 = row["ms"]["hand/o0"]
        best = {o: min(row["ms"][f"{k}/o{o}"] for k in configs) for o in ORDERS}
        row["best_vs_hand_o0"] = {o: round(best[o] / hand0, 4) for o in ORDERS}
        result["workloads"].append(row)
        print(f"{name} ({time.perf_counter() - t_start:.0f} s): " + " ".join(
            f"{k}:" + "/".join(f"{row['ms'][f'{k}/o{o}'] / hand0:.3f}" for o in ORDERS) for k in configs), flush=True)
        json.dump(result, open(path, "w"), indent=1)
    json.dump(result, open(path, "w"), indent=1)


if __name__ == "__main__":
    main()
