"""Speculative decoding with a draft model: what a draft window and its verification cost, and what they buy.

    python -m tritium.bench draft [--shape llama3-8b] [--draft-shape llama3.2-1b] [--drafts 2,4,6]
                                  [--batches 1,8] [--new-tokens N] [--out FILE]

One engine (random bf16 weights of ``--shape``, with ``speculative_model``: random weights of ``--draft-shape``),
greedy requests of ``--prompt-len`` random tokens generating ``--new-tokens`` each, timed as the ``speculative``
suite does (per decode step and per output token, the prefill's share taken out). Per batch size:

- ``plain``: speculation off (greedy decode windows of ``decode_steps`` CUDA-graph steps: the anchor);
- ``verify-d``: a draft of d tokens every step chosen on the host, all wrong, the draft model idle: what a
  verification step of ``1 + d`` rows a sequence costs;
- ``model-d``: the draft model's drafts of d tokens every step (``Scheduler.adaptive_drafts`` False): its greedy
  window of ``d`` CUDA-graph steps, then the verification. ``draft_ms`` = model-d's step less verify-d's: the
  draft model's share.

Random weights draft nothing the model accepts (their logits are nearly flat), so acceptance is not measured
here: a step whose sequences accept ``a`` draft tokens on average yields ``1 + a``, and each case reports
``speedup(a) = (1 + a) * plain step / model-d step`` with every token accepted and at per-token acceptance rates
``p`` of 0.5-0.9 (``a = p + p^2 + ... + p^d``: a draft stops at its first rejection), and the ``a`` at which it
breaks even.
"""

from __future__ import annotations

import contextlib
import gc

from tritium.bench.args import UsageError, int_list, integer
from tritium.bench.common import header, print_table
from tritium.bench.engine_common import SHAPES, Bench, add_model_arguments, check_shape, engine_generate
from tritium.bench.speculative import _case, drafts
from tritium.engine.runner import replay_ms
from tritium.models.config import ModelConfig

RATES = (0.5, 0.6, 0.7, 0.8, 0.9)


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    parser.set_defaults(new_tokens=128)
    parser.add_argument("--draft-shape", choices=sorted(SHAPES), default="llama3.2-1b",
                        help="the draft model's random-weight shape (default llama3.2-1b)")
    parser.add_argument("--draft-model", default=None,
                        help="a draft checkpoint instead (Hugging Face directory or .gguf file; needed with --model)")
    parser.add_argument("--drafts", type=int_list(1, 16), default="2,4,6", help="draft lengths d (default 2,4,6)")
    parser.add_argument("--batches", type=int_list(1), default="1,8", help="batch sizes (default 1,8)")
    parser.add_argument("--repeats", type=integer(1), default=3, help="timed runs a case (median)")


@contextlib.contextmanager
def host_drafts(engine):
    """The engine's drafts chosen on the host (prompt lookup's path) instead of by its draft model."""
    drafter = engine.drafter
    engine.drafter, engine.scheduler.model_drafts = None, False
    try:
        yield
    finally:
        engine.drafter, engine.scheduler.model_drafts = drafter, True


def expected_accepted(rate: float, d: int) -> float:
    """Draft tokens accepted on average from a draft of ``d`` when each is accepted with probability ``rate``
    given the ones before it."""
    return sum(rate ** j for j in range(1, d + 1))


def run(args) -> dict:
    draft_lens, batches = args.drafts, args.batches
    kmax = max(draft_lens)
    if args.draft_model is None:  # the draft's options checked before any weight is drawn
        if args.model is not None:
            raise UsageError("--model: give its draft model as --draft-model")
        check_shape(args.draft_shape, "--draft-shape", "--draft-model PATH")
        draft_config = ModelConfig(**{"model_type": "llama", **SHAPES[args.draft_shape]})
        vocab = SHAPES[args.shape]["vocab_size"]
        if draft_config.vocab_size > vocab:
            raise UsageError(f"--draft-shape {args.draft_shape}: a vocabulary of {draft_config.vocab_size} tokens, "
                             f"more than --shape's {vocab}")
    bench = Bench(args)
    if args.draft_model is not None:
        draft = dict(speculative_model=args.draft_model)
    else:
        draft = dict(draft=(draft_config, Bench(args, shape=args.draft_shape).weights.items()))
    result = {"header": header(bench.device if bench.device.type == "cuda" else None), "suite": "draft",
              "shape": bench.label, "draft": args.draft_model or args.draft_shape, "prompt_len": args.prompt_len,
              "new_tokens": args.new_tokens, "dtype": str(bench.dtype).removeprefix("torch."), "cases": {}}
    llm = bench.llm("triton", max(batches) * (1 + kmax), num_speculative_tokens=kmax, **draft)
    del draft
    engine = llm.engine
    vocab = bench.config.vocab_size
    engine_generate(llm)(bench.prompts(max(batches), 7), 8)  # warm: the first steps compile what warm-up did not
    rows = []
    for batch in batches:
        cases = result["cases"][f"b{batch}"] = {}
        cases["plain"] = _case(bench, llm, batch, 0, args.repeats)  # the anchor
        plain_step = cases["plain"]["ms_per_step"]
        engine.scheduler.adaptive_drafts = False  # every draft verified whole, however often it is rejected
        for d in draft_lens:
            with host_drafts(engine), drafts(lambda tokens, k, d=d: [(tokens[-1] + 1 + i) % vocab
                                                                     for i in range(min(k, d))]):
                cases[f"verify-{d}"] = v = _case(bench, llm, batch, d, args.repeats)
            drafter = engine.drafter
            w0, s0, u0 = drafter.num_windows, drafter.num_steps, drafter.num_catch_up_tokens
            cases[f"model-{d}"] = c = _case(bench, llm, batch, d, args.repeats)
            c["draft_windows"] = drafter.num_windows - w0
            c["draft_steps"] = drafter.num_steps - s0
            c["draft_catch_up_tokens"] = drafter.num_catch_up_tokens - u0  # the prompts, and after whole drafts
            c["draft_per_seq"] = c["draft_tokens"] / (c["decode_steps"] * args.repeats * batch)
            c["draft_ms"] = c["ms_per_step"] - v["ms_per_step"]
            c["speedup_all_accepted"] = (1 + c["draft_per_seq"]) * plain_step / c["ms_per_step"]
            c["speedup_at_rate"] = {str(p): (1 + expected_accepted(p, d)) * plain_step / c["ms_per_step"]
                                    for p in RATES}
            c["break_even_accepted"] = c["ms_per_step"] / plain_step - 1
        engine.scheduler.adaptive_drafts = True
        for name, c in cases.items():
            at = c.get("speedup_at_rate", {})
            rows.append({"batch": batch, "case": name, "ms/step": c["ms_per_step"], "ms/token": c["ms_per_token"],
                         "draft ms": c.get("draft_ms"), "all accepted": c.get("speedup_all_accepted"),
                         "p=0.6": at.get("0.6"), "p=0.8": at.get("0.8"), "break-even": c.get("break_even_accepted")})
            print(f"  b{batch} {name}: {c['ms_per_step']:.3f} ms/step", flush=True)
    print_table(rows, ["batch", "case", "ms/step", "ms/token", "draft ms", "all accepted", "p=0.6", "p=0.8",
                       "break-even"])
    # a decode step's graph replayed alone (device time), the model's and the draft model's: what the engine's
    # steps add on the host
    result["graph_ms"] = {}
    for name, runner in (("model", engine.runner), ("draft", engine.drafter.runner)):
        for b in batches:
            bucket = runner.graph_bucket(b) if runner.graphs else None
            if bucket is not None:
                result["graph_ms"][f"{name}-b{b}"] = ms = replay_ms(runner.graphs[bucket].graph, 50)
                print(f"  {name} graph b{b} (bucket {bucket}): {ms:.3f} ms a replay", flush=True)
    del llm, engine
    gc.collect()
    return result
