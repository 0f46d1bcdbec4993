"""Long contexts with sliding windows: the window pool (``num_window_blocks``) against every layer keeping every
page, on one KV-cache budget.

    python -m tritium.bench engine-window [--shape gemma-3-12b] [--prompt-len 8192] [--new-tokens 256]
                                          [--batch 16] [--kv-cache-gib 16] [--out FILE]

The same random-weight model (Gemma 3 12B's shape: 40 of 48 layers see their last 1,024 keys) in two
engines with the same ``--kv-cache-gib``: ``num_window_blocks=0``, every layer's pages kept for the whole
sequence (the anchor: the engine before the pool), and the default, the windowed layers' pages in a pool of
their own, released behind the window. For each: its pages and the tokens they hold; ``--batch`` prompts of
``--prompt-len`` random tokens generating ``--new-tokens`` each in one run (seconds, output tokens per second,
the most sequences that ran at once, preemptions); and the batch-1 decode step at that context,
(time(N new tokens) - time(1)) / (N - 1), which the pool should not slow (the windowed layers read the same
keys, from another tensor). ``--shape tiny`` runs it on the CPU as a smoke test (no window there: the
pool's sizes are then 0).
"""

from __future__ import annotations

import gc

import torch

from tritium.bench.args import integer
from tritium.bench.common import header, print_table
from tritium.bench.engine_common import Bench, add_model_arguments, timed
from tritium.engine import SamplingParams
from tritium.engine.runner import window_layers

SYSTEMS = {"every-page": dict(num_window_blocks=0), "window-pool": dict(num_window_blocks=None)}


def add_arguments(parser) -> None:
    add_model_arguments(parser, default_shape="gemma-3-12b")
    parser.set_defaults(prompt_len=8192, new_tokens=256, kv_cache_gib=16.0)
    parser.add_argument("--batch", type=integer(1), default=16, help="prompts in the long-context run (max_num_seqs)")
    parser.add_argument("--b1-tokens", type=integer(2), default=64, help="tokens of the batch-1 decode timing")


def long_run(engine, prompts, new_tokens: int, tag: str = "long") -> dict:
    """Every prompt at once through the engine core: seconds, output tokens/s, the most sequences running
    in one step, preemptions."""
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    preempted = engine.scheduler.num_preemptions
    seen = {"peak": 0, "produced": 0}

    def run():
        for i, p in enumerate(prompts):
            engine.add_request(f"{tag}-{i}", p, params)
        while engine.has_unfinished():
            for out in engine.step():
                seen["produced"] += len(out.new_token_ids)
            seen["peak"] = max(seen["peak"], len(engine.scheduler.running))
    seconds = timed(run, engine.device)
    return {"seconds": seconds, "output_tokens": seen["produced"], "output_tokens_per_s": seen["produced"] / seconds,
            "peak_running": seen["peak"], "preemptions": engine.scheduler.num_preemptions - preempted}


def b1_step_ms(llm, prompt, tokens: int, device, repeats: int = 3) -> float:
    """Median over ``repeats`` of (time(tokens new) - time(1 new)) / (tokens - 1) for one prompt."""
    def run(n):
        return timed(lambda: llm.generate([prompt], SamplingParams(max_tokens=n, ignore_eos=True)), device)
    run(tokens)  # warm-up
    steps = sorted((run(tokens) - run(1)) / (tokens - 1) * 1e3 for _ in range(repeats))
    return steps[len(steps) // 2]


def run(args) -> dict:
    bench = Bench(args)
    device = bench.device
    cfg = bench.config
    max_len = -(-(args.prompt_len + args.new_tokens) // 16) * 16
    result = {"header": header(device if device.type == "cuda" else None), "suite": "engine-window",
              "shape": bench.label, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "batch": args.batch, "kv_cache_gib": args.kv_cache_gib,
              "window": max((cfg.layer_window(i) or 0) for i in range(cfg.num_hidden_layers)) or None,
              "systems": {}}
    prompts = bench.prompts(args.batch, 11)
    for name, kw in SYSTEMS.items():
        print(f"running {name} ...", flush=True)
        llm = bench.llm("triton", args.batch, max_model_len=max_len, **kw)
        engine = llm.engine
        blocks, runner = engine.block_manager, engine.runner
        windowed = len(window_layers(engine.model)) if blocks.window_pool is not None else 0
        r = {"num_blocks": blocks.num_blocks, "num_window_blocks": engine.config.num_window_blocks,
             "windowed_layers": windowed,
             "tokens_every_layer": blocks.num_blocks * engine.config.block_size,
             "kv_cache_bytes": runner.kv_cache.nbytes + (0 if runner.window_cache is None
                                                         else runner.window_cache.nbytes)}
        print(f"  {name}: {r['num_blocks']} pages ({r['tokens_every_layer']} tokens) for "
              f"{cfg.num_hidden_layers - windowed} layers, {r['num_window_blocks']} window pages for {windowed}; "
              f"{r['kv_cache_bytes'] / 2**30:.2f} GiB", flush=True)
        long_run(engine, bench.prompts(2, 12, min(256, args.prompt_len)), 4, "warm")  # compiles the first steps
        r["long"] = long_run(engine, prompts, args.new_tokens)
        print(f"  {name}: {args.batch} x {args.prompt_len} + {args.new_tokens}: {r['long']['seconds']:.2f} s, "
              f"{r['long']['output_tokens_per_s']:.0f} tok/s, at most {r['long']['peak_running']} running, "
              f"{r['long']['preemptions']} preemptions", flush=True)
        r["b1_step_ms"] = b1_step_ms(llm, prompts[0], args.b1_tokens, device)
        print(f"  {name}: batch-1 step at {args.prompt_len} tokens {r['b1_step_ms']:.3f} ms", flush=True)
        result["systems"][name] = r
        del llm, engine, blocks, runner
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    base, pool = result["systems"]["every-page"], result["systems"]["window-pool"]
    result["pool_vs_every_page"] = {
        "full_layer_tokens": pool["tokens_every_layer"] / base["tokens_every_layer"],
        "long_run_tokens_per_s": pool["long"]["output_tokens_per_s"] / base["long"]["output_tokens_per_s"],
        "b1_step": pool["b1_step_ms"] / base["b1_step_ms"]}
    rows = [{"system": n, "pages": r["num_blocks"], "window pages": r["num_window_blocks"],
             "tokens": r["tokens_every_layer"], "long s": r["long"]["seconds"],
             "long tok/s": r["long"]["output_tokens_per_s"], "peak running": r["long"]["peak_running"],
             "preempted": r["long"]["preemptions"], "b1 step ms": r["b1_step_ms"]}
            for n, r in result["systems"].items()]
    print_table(rows, list(rows[0]))
    print(f"window pool / every page: {result['pool_vs_every_page']}", flush=True)
    return result
