"""Speculative decoding by prompt lookup: what a verification step costs and what it buys.

    python -m tritium.bench speculative [--shape llama3-8b|... | --model PATH] [--drafts 1,2,3,4,5,7]
                                        [--batches 1,8] [--new-tokens N] [--out FILE]

One engine (``num_speculative_tokens`` = the largest draft; random bf16 weights of ``--shape`` unless
``--model``), greedy requests of ``--prompt-len`` random tokens generating ``--new-tokens`` each, at each batch
size of ``--batches``. Each case times a generation of N tokens and one of 1 token on other prompts of the same
length: per decode step ``(t(N) - t(1)) / steps`` and per output token ``(t(N) - t(1)) / (B (N - 1))``.
The drafts are chosen here, to separate the cost of verifying from how often a text repeats itself:

- ``plain``: speculation off (greedy decode windows of ``decode_steps`` CUDA-graph steps: the anchor);
- ``no-draft``: speculation on, no draft found (greedy windows, each planned from the host's state after the
  last: what looking costs where the text never repeats);
- ``draft-d``: a draft of d tokens every step, all wrong (one token a step; drafts that do not back off,
  ``Scheduler.adaptive_drafts`` False): the cost of a step of ``1 + d`` tokens a sequence, which does not
  depend on how many are accepted;
- ``lookup``: the prompt-lookup drafts themselves (what the random model's text gives; ``--model`` for a real
  one).

A step of ``draft-d`` whose sequences accept ``a`` draft tokens on average yields ``1 + a`` tokens a sequence:
``speedup(d, a) = (1 + a) * plain step / draft-d step``. Each case reports ``speedup_all_accepted`` (a = d) and
``break_even_accepted``, the ``a`` at which it pays (a random-weight model's logits are nearly flat: a draft of
its own greedy continuation stops agreeing at the first bf16 near-tie between a step of one row and one of
several, so acceptance is not measured on it; the CPU measures it on a real model, bench/NOTES.md).
"""

from __future__ import annotations

import contextlib
import gc

from tritium.bench.args import int_list, integer
from tritium.bench.common import header, print_table
from tritium.bench.engine_common import Bench, add_model_arguments, engine_generate, timed
from tritium.engine.speculative import NgramIndex


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    parser.set_defaults(new_tokens=128)
    parser.add_argument("--drafts", type=int_list(1, 16), default="1,2,3,4,5,7",
                        help="draft lengths d (default 1,2,3,4,5,7)")
    parser.add_argument("--batches", type=int_list(1), default="1,8", help="batch sizes (default 1,8)")
    parser.add_argument("--repeats", type=integer(1), default=3, help="timed runs a case (median)")


@contextlib.contextmanager
def drafts(propose):
    """Every sequence's drafts from ``propose(tokens, k)`` instead of the prompt lookup."""
    original = NgramIndex.propose
    NgramIndex.propose = lambda self, tokens, k: propose(tokens, k)
    try:
        yield
    finally:
        NgramIndex.propose = original


def _case(bench, llm, batch: int, k: int, repeats: int) -> dict:
    """Time ``repeats`` generations at ``batch`` with the scheduler's draft bound ``k`` (0: speculation off)."""
    engine, n, generate = llm.engine, bench.args.new_tokens, engine_generate(llm)
    engine.scheduler.num_speculative_tokens = k
    generate(bench.prompts(batch, 1000 + batch), 6)  # compiles what this case's shapes need, untimed
    per_step, per_token, steps_all, drafted, accepted = [], [], [], 0, 0
    for r in range(repeats):
        d0, a0, s0 = engine.num_draft_tokens, engine.num_accepted_tokens, engine.num_steps
        t_full = timed(lambda: generate(bench.prompts(batch, 10 * r + batch), n), bench.device)
        steps = engine.num_steps - s0
        drafted += engine.num_draft_tokens - d0
        accepted += engine.num_accepted_tokens - a0
        s1 = engine.num_steps
        t_one = timed(lambda: generate(bench.prompts(batch, 10 * r + batch + 5), 1), bench.device)
        # decode steps of the full run: its steps less the prefill's (those of the one-token run)
        decode_steps = max(1, steps - (engine.num_steps - s1))
        per_step.append((t_full - t_one) / decode_steps * 1e3)
        per_token.append((t_full - t_one) / (batch * (n - 1)) * 1e3)
        steps_all.append(decode_steps)
    mid = repeats // 2
    return {"ms_per_step": sorted(per_step)[mid], "ms_per_token": sorted(per_token)[mid],
            "ms_per_token_all": sorted(per_token), "decode_steps": sorted(steps_all)[mid],
            "tokens_per_step": batch * (n - 1) / sorted(steps_all)[mid], "draft_tokens": drafted,
            "accepted_tokens": accepted, "acceptance": accepted / drafted if drafted else None}


def run(args) -> dict:
    bench = Bench(args)
    draft_lens, batches = args.drafts, args.batches
    kmax = max(draft_lens)
    result = {"header": header(bench.device if bench.device.type == "cuda" else None), "suite": "speculative",
              "shape": bench.label, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "dtype": str(bench.dtype).removeprefix("torch."), "cases": {}}
    # room for every sequence's whole draft in one decode graph
    llm = bench.llm("triton", max(batches) * (1 + kmax), num_speculative_tokens=kmax, prompt_lookup_min=2,
                    prompt_lookup_max=4)
    engine = llm.engine
    vocab = bench.config.vocab_size
    engine_generate(llm)(bench.prompts(max(batches), 7), 8)  # warm: the first steps compile what warm-up did not
    rows = []
    for batch in batches:
        cases = result["cases"][f"b{batch}"] = {}
        cases["plain"] = _case(bench, llm, batch, 0, args.repeats)  # the anchor
        with drafts(lambda tokens, k: []):
            cases["no-draft"] = _case(bench, llm, batch, kmax, args.repeats)
        engine.scheduler.adaptive_drafts = False  # every draft verified whole, however often it is rejected
        for d in draft_lens:
            with drafts(lambda tokens, k, d=d: [(tokens[-1] + 1 + i) % vocab for i in range(min(k, d))]):
                cases[f"draft-{d}"] = c = _case(bench, llm, batch, d, args.repeats)
            # a step's draft tokens a sequence, as run (the largest decode graph may hold less than every draft)
            c["draft_per_seq"] = c["draft_tokens"] / (c["decode_steps"] * args.repeats * batch)
            c["speedup_all_accepted"] = (1 + c["draft_per_seq"]) * cases["plain"]["ms_per_step"] / c["ms_per_step"]
            c["break_even_accepted"] = c["ms_per_step"] / cases["plain"]["ms_per_step"] - 1
        engine.scheduler.adaptive_drafts = True
        cases["lookup"] = _case(bench, llm, batch, kmax, args.repeats)
        base = cases["plain"]["ms_per_token"]
        for name, c in cases.items():
            c["speedup_per_token"] = base / c["ms_per_token"]
            rows.append({"batch": batch, "case": name, "ms/step": c["ms_per_step"], "ms/token": c["ms_per_token"],
                         "tokens/step": c["tokens_per_step"], "draft": c.get("draft_per_seq"),
                         "accepted": c["acceptance"],
                         "vs plain": c["speedup_per_token"], "all accepted": c.get("speedup_all_accepted"),
                         "break-even": c.get("break_even_accepted")})
            print(f"  b{batch} {name}: {c['ms_per_token']:.3f} ms/token, {c['tokens_per_step']:.2f} tokens/step",
                  flush=True)
    print_table(rows, ["batch", "case", "ms/step", "ms/token", "tokens/step", "draft", "accepted", "vs plain",
                       "all accepted", "break-even"])
    del llm, engine
    gc.collect()
    return result
