"""W8A8 with and without ``fuse_act_quant`` (the RMSNorms and the SiLU-and-mul writing fp8 rows instead of a
quantization launch before three of a layer's four projections), bf16 as the anchor: batch-1 decode step,
batch-64 decode step and 64 x 512 prefill, one engine per dtype, the two W8A8 variants switched by
``LlamaModel.set_options`` + ``ModelRunner.capture`` and timed in interleaved rounds. A check first: the
greedy tokens of each variant, and of the shipped one run again, against the shipped one's. JSON is written after each system.
Usage: PYTHONPATH=src python bench/probe_fp8_fusion.py [--rounds 3] [--systems fp8-dynamic,bf16] [--out FILE]"""

import argparse
import dataclasses
import gc
import json

import torch

from tritium.bench.engine_common import Bench, add_model_arguments, batch1_step_ms, batch_throughput, engine_generate
from tritium.engine import SamplingParams


def measure(bench: Bench, generate) -> dict:
    b1 = batch1_step_ms(bench, generate, repeats=3)
    tp = batch_throughput(bench, generate)
    return {"b1_step_ms": round(b1[len(b1) // 2], 4), "b64_decode_step_ms": round(tp["batch_decode_step_ms"], 4),
            "b64_prefill_s": round(tp["batch_prefill_seconds"], 4), "b64_tokens_per_s": round(tp["batch_tokens_per_s"])}


def main():
    p = argparse.ArgumentParser()
    add_model_arguments(p)
    p.add_argument("--systems", default="fp8-dynamic,bf16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    args.new_tokens = min(args.new_tokens, 128)
    bench = Bench(args)
    result: dict = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "new_tokens": args.new_tokens, "batch": args.batch}

    def save():
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)

    for system in args.systems.split(","):
        kw = {} if system == "bf16" else {"quantization": system}
        llm = bench.llm("triton", args.batch, **kw)
        generate = engine_generate(llm)
        model, runner = llm.engine.model, llm.engine.runner
        variants = {"as shipped": model.options}
        if system == "fp8-dynamic":
            variants["quantization launches (fuse_act_quant off)"] = dataclasses.replace(model.options,
                                                                                         fuse_act_quant=False)
        tokens = {}
        greedy = SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True)
        def switch(opts):
            model.set_options(opts)
            if torch.cuda.is_available():
                runner.capture()

        # the shipped variant twice: W8A8's split-K matmul sums by fp32 atomics, so two runs of one variant may
        # differ in the last bits, and a random-weight model's near-tied logits turn that into other tokens
        for label, opts in [*variants.items(), ("as shipped, again", model.options)]:
            switch(opts)
            tokens[label] = [o.token_ids for o in llm.generate(bench.prompts(4, 7), greedy)]
        same = {label: t == tokens["as shipped"] for label, t in tokens.items() if label != "as shipped"}
        print(system, "greedy tokens the same as the shipped variant's:", same, flush=True)
        runs: dict[str, list[dict]] = {label: [] for label in variants}
        for r in range(args.rounds):
            for label, opts in variants.items():
                switch(opts)
                runs[label].append(measure(bench, generate))
                print(system, label, r, runs[label][-1], flush=True)
        medians = {label: {k: sorted(m[k] for m in ms)[len(ms) // 2] for k in ms[0]} for label, ms in runs.items()}
        result[system] = {"same_tokens_as_shipped": same, "median": medians, "rounds": runs}
        print(system, json.dumps(medians), flush=True)
        save()
        llm.close()
        del llm, model, runner
        gc.collect()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
