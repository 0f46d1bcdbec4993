"""Scratch probe (not kept): stream-K decode vs the tree's pick vs cuDNN, cold, TB/s."""
import json, math, os, sys, time
import torch
from tritium.bench.attention import (_paged_batch, _sdpa, _sdpa_backends, _cold_copies, _rel_err,
                                     NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM)
from tritium.bench.common import time_ms
from tritium.attention import paged_attention, AttentionWorkspace, select_attention_config, streamk

torch.manual_seed(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count
name = torch.cuda.get_device_name(0)
CASES = [(1, 8192, 16), (1, 32768, 16), (16, 4096, 16), (64, 2048, 16)]
if len(sys.argv) > 1:
    CASES = [tuple(int(x) for x in c.split("x")) for c in sys.argv[1].split(",")]
VARIANTS = [(64, 3, 8), (64, 3, 4), (128, 3, 4), (128, 2, 4), (32, 3, 4)]
PS = [1, 2, 3]
group = NUM_Q_HEADS // NUM_KV_HEADS
po, pl = streamk.part_shape(max(PS) * sms, group, HEAD_DIM)
part_out = torch.empty(po, device="cuda"); part_lse = torch.empty(pl, device="cuda"); pair_info = torch.empty(2 * 256 * 8, dtype=torch.int32, device="cuda")
scale = 1 / math.sqrt(HEAD_DIM)
results = []
out_dir = os.environ.get("OUT", "/tmp")
for (B, L, bs) in CASES:
    nbytes = B * L * NUM_KV_HEADS * HEAD_DIM * 4
    copies = _cold_copies(nbytes)
    batches = [_paged_batch(B, L, 1, bs) for _ in range(copies)]
    inputs, kd, vd = batches[0]
    q = inputs["q"]
    out = torch.empty_like(q)
    ws = AttentionWorkspace(B, NUM_Q_HEADS, HEAD_DIM, device=q.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=L)
    cfg = select_attention_config(num_tokens=B, num_seqs=B, num_q_heads=NUM_Q_HEADS, num_kv_heads=NUM_KV_HEADS,
                                  head_dim=HEAD_DIM, block_size=bs, max_seqlen_q=1, max_seqlen_k=L,
                                  dtype=q.dtype, device=q.device)
    ref = _sdpa(_sdpa_backends()["flash"], q.view(B, NUM_KV_HEADS, group, HEAD_DIM), kd, vd, False).reshape_as(q)
    row = dict(batch=B, seq_len=L, block_size=bs, copies=copies, tree=str(cfg))
    def cold(fn):
        return time_ms(lambda: [fn(c) for c in range(copies)], graph=True, rep_ms=100) / copies
    ms = cold(lambda c: paged_attention(**batches[c][0], **hints, out=out, workspace=ws))
    row["default_tbs"] = nbytes / ms / 1e9
    dense = [(b[0]["q"].view(B, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]
    ms = cold(lambda c: _sdpa(_sdpa_backends()["cudnn"], *dense[c], False))
    row["cudnn_tbs"] = nbytes / ms / 1e9
    sk = {}
    for (t, s, w) in VARIANTS:
        for p, pre, mg in [(p, pre, mg) for p in PS for pre in (True, False) for mg in (True, False)]:
            P = p * sms
            def call(c, t=t, s=s, w=w, P=P, pre=pre, mg=mg):
                streamk.launch(out, **batches[c][0], part_out=part_out, part_lse=part_lse, pair_info=pair_info, num_programs=P,
                               tile_n=t, block_m=16, num_warps=w, num_stages=s, scale=scale, _precheck=pre, _merge=mg)
            key = f"t{t}s{s}w{w}p{p}" + ("" if pre else "-nocheck") + ("" if mg else "-nomerge")
            try:
                out.fill_(float("nan"))
                call(0)
                err = _rel_err(out, ref) if mg else 0.0
                if not err < 2e-2:
                    sk[key] = f"err {err}"
                    continue
                ms = cold(call)
                sk[key] = round(nbytes / ms / 1e9, 4)
            except Exception as e:
                sk[key] = f"{type(e).__name__}: {str(e)[:80]}"
    row["streamk_tbs"] = sk
    best = max((v, k) for k, v in sk.items() if isinstance(v, float))
    row["best"] = best
    print(B, L, bs, "default %.3f cudnn %.3f best streamk %s" % (row["default_tbs"], row["cudnn_tbs"], best), flush=True)
    results.append(row)
    json.dump(dict(device=name, sms=sms, rows=results), open(os.path.join(out_dir, "streamk_probe.json"), "w"), indent=1)
