"""Engine starts with and without the linear-choice record (EngineConfig.linear_cache), Llama-3-8B shape with
random bf16 weights on one GPU: start-up seconds, the time the projections' timing took, whether the
choices equal the recording start's, greedy tokens of 4 prompts (32 tokens), and the batch-1 decode step.
MODEL=<checkpoint> instead (bench/gpu_default_model.sh: the default GGUF, LINEAR_PROBE=1), plus a greedy
chat answer of 20 tokens (the request whose answer two starts had rounded differently, bench/NOTES.md).

Starts, in order, in one process, with an empty $TRITIUM_CACHE_DIR of their own:
  record   linear_cache on, nothing recorded: times the projections and records them
  restore  linear_cache on: runs the record's kernels, no timing
  fresh-1, fresh-2   linear_cache off: time the projections again (how often two timings disagree)

    python bench/probe_linear_cache.py [OUT.json]      # SHAPE=tiny: a smoke run (on the CPU: nothing timed)
"""
import argparse
import gc
import json
import logging
import os
import sys
import tempfile
import time

import torch

from tritium import SamplingParams
from tritium.bench.engine_common import Bench, batch1_step_ms, engine_generate

os.environ["TRITIUM_CACHE_DIR"] = tempfile.mkdtemp(prefix="tritium-cache-")
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
CHAT = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Say hello in Japanese."}]
args = argparse.Namespace(model=os.environ.get("MODEL"), shape=os.environ.get("SHAPE", "llama3-8b"), prompt_len=128, new_tokens=64, kv_cache_gib=4.0,
                          max_model_len=None)
bench = Bench(args)
prompts = bench.prompts(4, 7)
rows = []
for label, cache in (("record", True), ("restore", True), ("fresh-1", False), ("fresh-2", False)):
    t0 = time.perf_counter()
    llm = bench.llm("triton", 4, linear_cache=cache)
    start_s = time.perf_counter() - t0
    state = json.loads(json.dumps(llm.engine.model.linear_state()))
    tokens = [o.token_ids for o in llm.generate(prompts, SamplingParams(max_tokens=32, ignore_eos=True))]
    step = batch1_step_ms(bench, engine_generate(llm), 3)
    chat = llm.chat(CHAT, SamplingParams(max_tokens=20))[0].text if args.model else None
    choices = {tuple(r[:3]): r[3] for r in state["linear"]["choices"]}
    rows.append(dict(start=label, linear_cache=cache, start_s=round(start_s, 2), b1_step_ms=[round(s, 4) for s in step],
                     choices=state["linear"]["choices"], chain=state["linear"]["chain_report"], tokens=tokens,
                     chat=chat))
    first = rows[0]
    ref = {tuple(r[:3]): r[3] for r in first["choices"]}
    rows[-1]["choices_as_recorded"] = choices == ref
    rows[-1]["differing_choices"] = [list(k) for k in ref if choices.get(k) != ref[k]]
    rows[-1]["tokens_as_recorded"] = tokens == first["tokens"]
    rows[-1]["chat_as_recorded"] = chat == first["chat"]
    print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("choices", "tokens", "chain")}), flush=True)
    llm.close()
    del llm
    gc.collect()
    torch.cuda.empty_cache()
records = os.listdir(os.path.join(os.environ["TRITIUM_CACHE_DIR"], "linear"))
out = dict(gpu=torch.cuda.get_device_name(), model=args.model or args.shape, records=len(records), starts=rows)
path = sys.argv[1] if len(sys.argv) > 1 else "linear_cache.json"
with open(path, "w") as f:
    json.dump(out, f, indent=1)
print("records:", len(records), "->", path)
