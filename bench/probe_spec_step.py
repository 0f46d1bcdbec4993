"""Where a speculative verification step's time goes (GPU): the decode graph of each row count replayed alone
(the device's cost of a step of that many rows), against the step as the engine runs it (drafts all wrong,
``tritium.bench.speculative``'s cases), and the host's functions over the draft steps (cProfile).

    PYTHONPATH=src python bench/probe_spec_step.py [--batches 1,4,16] [--drafts 1,3] [--out FILE]

Step - graph = what the host adds: a verification step ends in a sync (the host must see the argmax before it
plans the next step), which a plain decode window pipelines away.
"""

import argparse
import cProfile
import io
import json
import pstats

import torch

from tritium.bench import speculative as spec
from tritium.bench.common import header
from tritium.bench.engine_ablate import trace_step
from tritium.bench.engine_common import Bench, add_model_arguments, engine_generate
from tritium.engine.runner import replay_ms


def _best_unsplit(linear, key, pick):
    """The fastest candidate that is not split-K in the tuning report's row for ``key`` = (M, N, K), the one whose
    choice was ``pick``: its config (None: cuBLAS)."""
    from tritium.ops.gemv import CONFIGS
    from tritium.ops.skinny import CONFIGS as SKINNY
    by_name = {str(c): c for c in CONFIGS + SKINNY}
    row = [r for r in linear.report if (r["m"], r["n"], r["k"]) == key and r["choice"] == str(pick)][-1]
    name = min((k for k in row["us_per_call"] if "-sk" not in k), key=row["us_per_call"].get)
    return None if name == "cublas" else by_name[name]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    add_model_arguments(ap)
    ap.set_defaults(new_tokens=96)
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--drafts", default="1,3")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--trace", default="", help="row counts whose decode graph is traced by kernel (e.g. 1,2,4)")
    ap.add_argument("--no-steps", action="store_true", help="only the graphs (and traces)")
    ap.add_argument("--ab-skinny", action="store_true",
                    help="time the graphs again with the skinny GEMM's picks on cuBLAS (4 interleaved rounds)")
    ap.add_argument("--ab-split", action="store_true",
                    help="time the graphs again with the split-K picks on the fastest unsplit candidate timed")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    draft_lens = [int(d) for d in args.drafts.split(",")]
    kmax = max(draft_lens)
    bench = Bench(args)
    llm = bench.llm("triton", max(batches) * (1 + kmax), num_speculative_tokens=kmax)
    engine = llm.engine
    vocab = bench.config.vocab_size
    engine_generate(llm)(bench.prompts(max(batches), 7), 8)
    result = {"header": header(bench.device if bench.device.type == "cuda" else None), "graph_ms": {}, "steps": {},
              "host_profile": {}}
    # 1. the device's cost by row count: each captured decode graph replayed alone (20 back to back, 5 rounds)
    runner = engine.runner
    for b in sorted(runner.graphs):
        ts = sorted(replay_ms(runner.graphs[b].graph, 20) for _ in range(5))
        result["graph_ms"][b] = ts[2]
        print(f"graph {b:4d} rows: {ts[2]:.3f} ms", flush=True)
    if (args.ab_skinny or args.ab_split) and runner.graphs:
        from tritium.ops.skinny import SkinnyConfig
        linear = engine.model.linear
        tuned = dict(linear.choices)
        if args.ab_skinny:  # the graphs with every skinny pick put back on cuBLAS, interleaved
            label = "cublas"
            other = {k: (None if isinstance(v, SkinnyConfig) else v) for k, v in tuned.items()}
        else:  # every split-K pick on the fastest unsplit candidate its tuning timed (what it ran before split-K)
            label = "unsplit"
            other = {k: (_best_unsplit(linear, k, v) if isinstance(v, SkinnyConfig) and v.split_k > 1 else v)
                     for k, v in tuned.items()}
        ab = result[f"{label}_ab"] = {"as tuned": {}, label: {}}
        for r in range(4):
            for name, choices in (("as tuned", tuned), (label, other)) if r % 2 == 0 else \
                    ((label, other), ("as tuned", tuned)):
                linear.choices = dict(choices)
                runner.capture()
                for b in sorted(runner.graphs):
                    ab[name].setdefault(b, []).append(replay_ms(runner.graphs[b].graph, 20))
        linear.choices = tuned
        runner.capture()
        for b in sorted(runner.graphs):
            t_, o_ = (sorted(ab[k][b])[len(ab[k][b]) // 2] for k in ("as tuned", label))
            print(f"ab {b:4d} rows: as tuned {t_:.3f} ms, {label} {o_:.3f} ms ({t_ / o_:.3f}x)", flush=True)
        picks = sorted((k, str(v), str(other[k])) for k, v in tuned.items() if other[k] != v)
        result[f"{label}_picks"] = picks
        print(f"picks changed for {label}:", picks, flush=True)
    for b in [int(r) for r in args.trace.split(",") if r.strip()]:
        print(f"-- decode graph of {b} rows", flush=True)
        result.setdefault("traces", {})[b] = trace_step(engine, 3, b)
    linear = engine.model.linear
    result["linear_report"] = linear.report
    result["chain_report"] = linear.chain_report
    for r in linear.report:
        if r["m"] in (1, 2, 4):
            best = min((v for k, v in r["us_per_call"].items() if k != "cublas"), default=None)
            print(f"linear {r['weight']:>12} {r['variant']:>14} m={r['m']}: {r['choice']:>22} {r['best_tbs']:.2f} TB/s "
                  f"(cublas {r['us_per_call']['cublas']} us, best gemv {best} us)", flush=True)
    print("chain:", linear.chain_report, flush=True)
    if args.no_steps:
        batches = []
    # 2. the engine's steps: plain with windows, plain without (decode_steps 1), drafts of d (all wrong)
    sched = engine.scheduler
    steps = sched.decode_steps
    for batch in batches:
        row = result["steps"][f"b{batch}"] = {}
        row["plain"] = spec._case(bench, llm, batch, 0, args.repeats)["ms_per_step"]
        sched.decode_steps = 1
        row["plain-nowindow"] = spec._case(bench, llm, batch, 0, args.repeats)["ms_per_step"]
        sched.decode_steps = steps
        for d in draft_lens:
            with spec.drafts(lambda tokens, k, d=d: [(tokens[-1] + 1 + i) % vocab for i in range(min(k, d))]):
                row[f"draft-{d}"] = spec._case(bench, llm, batch, d, args.repeats)["ms_per_step"]
                if batch in (1, max(batches)) and d == draft_lens[0]:
                    prof = cProfile.Profile()
                    prof.enable()
                    engine_generate(llm)(bench.prompts(batch, 555), 64)
                    if bench.device.type == "cuda":
                        torch.cuda.synchronize()
                    prof.disable()
                    buf = io.StringIO()
                    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
                    result["host_profile"][f"b{batch}-draft-{d}"] = buf.getvalue()
                    print(buf.getvalue()[:6000], flush=True)
        print(f"b{batch}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
