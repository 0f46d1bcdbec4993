"""How often prompt-lookup drafts are accepted on real text: a real chat model (default: SmolLM2-135M-Instruct, the
package's default model; ``--model`` for another) answering prompts of four kinds, greedy, with speculative
decoding on; per kind the drafts, the draft tokens accepted, and the tokens a step of its sequence yields. Runs on
the CPU (acceptance does not depend on the device; the GPU's cost of a step by draft length is the ``speculative``
bench suite's).

    PYTHONPATH=src python bench/probe_spec_acceptance.py [--model PATH] [--k 4] [--decode-steps 8]
        [--max-tokens 256] [--costs bench/results/speculative-NVIDIA-H200.json] [--fixed-drafts] [--predict]
        [--out FILE]

``--predict``: the prompts that rewrite a given text (the code edits, the extract that repeats the document) pass
that text as their predicted output (``SamplingParams.prediction``, OpenAI's ``prediction``).

``predicted_speedup``: the batch-1 time of the same tokens on the GPU of ``--costs`` (a Llama-3-8B shape), plain
decoding against this run's steps: each step that verified a draft at that suite's cost of a draft of the
measured length nearest above the kind's mean draft, every other token at its plain step (in a window) or at
``--single-ms`` (planned alone).
"""

import argparse
import dataclasses
import json
import time

import torch

from tritium import LLM, SamplingParams

CODE = '''def merge_intervals(intervals):
    intervals = sorted(intervals, key=lambda x: x[0])
    merged = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def total_length(intervals):
    return sum(end - start for start, end in merge_intervals(intervals))
'''

DOC = ("The Rhine is a river that begins in the Swiss canton of Graubunden in the southeastern Swiss Alps. It forms "
       "part of the Swiss-Liechtenstein, Swiss-Austrian and Swiss-German borders, then flows through the Rhineland "
       "and eventually empties into the North Sea in the Netherlands. It is the second-longest river in Central and "
       "Western Europe, after the Danube, at about 1,230 km, with an average discharge of about 2,900 cubic metres "
       "per second. The Rhine and the Danube formed much of the northern inland frontier of the Roman Empire.")

PROMPTS = {
    "code edit": [f"Add type hints and a docstring to every function below. Return the whole code.\n\n{CODE}",
                  "Rename the function merge_intervals to merge in the code below and return the whole code.\n\n"
                  + CODE],
    "quote / extract": [f"Copy the sentence of this text that gives the river's length, word for word.\n\n{DOC}",
                        f"List every country named in this text, then repeat the text.\n\n{DOC}"],
    "summarise": [f"Summarise this text in three sentences.\n\n{DOC}"],
    "open chat": ["Write a short story about a lighthouse keeper who finds a message in a bottle.",
                  "What are the pros and cons of electric cars?"],
}


# --predict: each prompt's predicted output (None: none), the text it rewrites
PREDICTIONS = {"code edit": [CODE, CODE], "quote / extract": [None, DOC]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=None)
    ap.add_argument("--k", type=int, default=4, help="num_speculative_tokens")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--decode-steps", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="> 0: sampled answers (drafts verified by rejection sampling; not compared with plain ones)")
    ap.add_argument("--costs", default="bench/results/speculative-NVIDIA-H200.json")
    ap.add_argument("--single-ms", type=float, default=4.26,
                    help="a batch-1 step planned by the host without a draft (one graph replay and a sync; H200, "
                         "Llama-3-8B shape, measured in stop 72 when speculation planned every step)")
    ap.add_argument("--seed", type=int, default=1, help="the sampled requests' seed (with --temperature)")
    ap.add_argument("--fixed-drafts", action="store_true",
                    help="every draft found verified whole (Scheduler.adaptive_drafts False: no back-off)")
    ap.add_argument("--predict", action="store_true",
                    help="pass the text a prompt rewrites as its predicted output (SamplingParams.prediction)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    llm = LLM(args.model, dtype=torch.float32, num_speculative_tokens=args.k, max_model_len=2048,
              decode_steps=args.decode_steps)
    with open(args.costs) as f:
        cases = json.load(f)["cases"]["b1"]
    plain_ms = cases["plain"]["ms_per_step"]
    plain = LLM(args.model, dtype=torch.float32, max_model_len=2048)
    engine = llm.engine
    engine.scheduler.adaptive_drafts = not args.fixed_drafts
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature,
                            seed=args.seed if args.temperature else None)
    result = {"model": args.model or "SmolLM2-135M-Instruct (default)", "k": args.k, "decode_steps": args.decode_steps,
              "predict": args.predict,
              "temperature": args.temperature, "adaptive_drafts": not args.fixed_drafts,
              "costs": {"file": args.costs, "plain_ms": plain_ms}, "kinds": {}}
    for kind, prompts in PROMPTS.items():
        d0, a0, n0, s0 = engine.num_draft_tokens, engine.num_accepted_tokens, engine.num_drafts, engine.num_steps
        w0 = engine.num_window_steps
        t0 = time.perf_counter()
        # one at a time: the costs are batch 1's, and a window step then yields one token
        predicted = PREDICTIONS.get(kind, [None] * len(prompts)) if args.predict else [None] * len(prompts)
        outs = [llm.chat([{"role": "user", "content": p}], dataclasses.replace(params, prediction=pred))[0]
                for p, pred in zip(prompts, predicted)]
        seconds = time.perf_counter() - t0
        want = outs if args.temperature else [plain.chat([{"role": "user", "content": p}], params)[0] for p in prompts]
        tokens = sum(len(o.token_ids) for o in outs)
        drafted, accepted = engine.num_draft_tokens - d0, engine.num_accepted_tokens - a0
        row = {"prompts": len(prompts), "tokens": tokens, "drafts": engine.num_drafts - n0, "draft_tokens": drafted,
               "accepted_tokens": accepted, "acceptance": accepted / drafted if drafted else None,
               "accepted_per_draft": accepted / (engine.num_drafts - n0) if engine.num_drafts > n0 else None,
               "steps": engine.num_steps - s0, "cpu_seconds": seconds,
               "same_as_plain": [o.token_ids == w.token_ids for o, w in zip(outs, want)],
               "accepted_prediction_tokens": sum(o.accepted_prediction_tokens for o in outs),
               "rejected_prediction_tokens": sum(o.rejected_prediction_tokens for o in outs)}
        # tokens a sequence gets from a step that verifies a draft (1 + accepted), and the share of its tokens
        # that came from drafts
        row["draft_share_of_tokens"] = accepted / tokens if tokens else None
        drafts, windowed = row["drafts"], engine.num_window_steps - w0
        row["window_steps"] = windowed
        # the rest: steps planned by the host without a draft (prefill's first tokens among them)
        single = max(0, tokens - drafts - accepted - windowed)
        # a verification step at the cost of the measured draft length nearest above this kind's mean one
        mean = drafted / drafts if drafts else 0
        lengths = sorted(int(c[6:]) for c in cases if c.startswith("draft-"))
        step_ms = cases[f"draft-{next((d for d in lengths if d >= mean), lengths[-1])}"]["ms_per_step"]
        row["mean_draft"] = mean
        row["predicted_speedup"] = tokens * plain_ms / (drafts * step_ms + single * args.single_ms
                                                        + windowed * plain_ms)
        result["kinds"][kind] = row
        print(f"{kind:16s} tokens {tokens:4d}  drafts {row['drafts']:4d}  accepted {accepted:4d} of {drafted:4d} "
              f"({(row['acceptance'] or 0):.2f})  {accepted / max(1, row['drafts']):.2f} a draft, "
              f"{row['draft_share_of_tokens']:.2f} of tokens from drafts, predicted {row['predicted_speedup']:.2f}x, "
              f"prediction {row['accepted_prediction_tokens']} / {row['rejected_prediction_tokens']}, "
              f"same as plain {row['same_as_plain']}",
              flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
