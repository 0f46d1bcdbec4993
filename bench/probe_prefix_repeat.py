"""Greedy answers of one chat request sent three times to one engine (the default model): the first a
prefix-cache miss, the others hits (their prompt's full pages reused). Per setting (prefix cache on / off,
logprobs asked or not: two decode paths), where the token streams part, the two top log-probabilities' gap
at that token, and how far apart the sampled tokens' log-probabilities are before it.

    python bench/probe_prefix_repeat.py [OUT.json]      # N=20 tokens (env N); bench/gpu_default_model.sh
"""
import gc
import json
import os
import sys

import torch
from tritium import LLM, SamplingParams

CHAT = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Say hello in Japanese."}]
N = int(os.environ.get("N", "20"))


def run(llm, logprobs):
    h0 = llm.engine.block_manager.hits
    o = llm.chat(CHAT, SamplingParams(max_tokens=N, logprobs=2 if logprobs else None))[0]
    lps = [(lp.logprob, lp.top) for lp in o.logprobs] if logprobs else None
    return dict(ids=o.token_ids, text=o.text, lps=lps, hit_tokens=llm.engine.block_manager.hits - h0)


def compare(a, b):
    n = next((i for i, (x, y) in enumerate(zip(a["ids"], b["ids"])) if x != y), None)
    out = dict(first_diff=n, hit_tokens=b["hit_tokens"], same_text=a["text"] == b["text"])
    if a["lps"] and b["lps"]:
        m = n if n is not None else min(len(a["lps"]), len(b["lps"]))
        out["max_abs_logprob_diff_before"] = max((abs(a["lps"][i][0] - b["lps"][i][0]) for i in range(m)), default=0.0)
        if n is not None:
            top = a["lps"][n][1]
            out["top2_gap_at_diff"] = top[0][1] - top[1][1] if len(top) > 1 else None
    return out


res = dict(device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
for cache in (True, False):
    llm = LLM(enable_prefix_caching=cache)
    for lp in (True, False):
        runs = [run(llm, lp) for _ in range(3)]
        key = f"prefix_cache={cache} logprobs={lp}"
        res[key] = dict(texts=[r["text"] for r in runs], miss_vs_hit=compare(runs[0], runs[1]),
                        hit_vs_hit=compare(runs[1], runs[2]))
        print(key, json.dumps(res[key], ensure_ascii=False), flush=True)
    llm.close()
    del llm
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1, ensure_ascii=False)
