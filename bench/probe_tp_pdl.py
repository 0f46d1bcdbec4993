"""Probe: does the Lamport all-reduce's early PDL trigger slow the GEMVs around it in the TP engine?

    PYTHONPATH=src:bench python bench/probe_tp_pdl.py VARIANT OUT.json [--shape llama3-8b] [--repeats 5]

One tensor-parallel engine (comm tritium, 2 ranks, batch 1) per process, built with one VARIANT of the
collectives' programmatic dependent launch, installed in every rank (``TRITIUM_RANK_INIT``) before any
kernel compiles:

- ``shipped``: as the package launches them: each collective lets the next kernel launch at its start
  (``gdc_launch_dependents``), then waits for the kernel before (``gdc_wait``);
- ``wait-first``: the wait first, then the trigger: the GEMV after an all-reduce cannot become resident
  while the GEMV before it still streams;
- ``no-pdl``: the collectives launched without PDL (``Communicator.pdl = False``).

Prints and writes the batch-1 decode step (median of ``--repeats``) and the rank-0 trace of one step
(each kernel's exposed time). Run the variants one after another on the same machine and compare; stop
48 (NOTES, Tensor-parallel engine, run 8) saw the GEMVs of the tritium engine 0.45 ms a step slower
than those of the NCCL engine at 70B.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import triton
import triton.language as tl

VARIANTS = ("shipped", "wait-first", "no-pdl")
_ENV = "TRITIUM_PROBE_PDL_VARIANT"


@triton.jit
def _wait_then_trigger(USE_PDL: tl.constexpr):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


def install() -> None:
    """The variant named by $TRITIUM_PROBE_PDL_VARIANT, in this process (rank 0 and each worker rank)."""
    variant = os.environ.get(_ENV, "shipped")
    if variant == "wait-first":
        import tritium.collectives.all_reduce as ar
        import tritium.collectives.all_reduce_rms_norm as arn
        import tritium.collectives.kernels as kernels
        for module in (ar, arn, kernels):
            module.pdl_prologue = _wait_then_trigger
    elif variant == "no-pdl":
        from tritium.collectives import communicator

        init = communicator.Communicator.__init__

        def no_pdl(self, *args, **kwargs):
            init(self, *args, **kwargs)
            self.pdl = False

        communicator.Communicator.__init__ = no_pdl
    print(f"probe_tp_pdl: variant {variant} installed in pid {os.getpid()}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variant", choices=VARIANTS)
    parser.add_argument("out")
    parser.add_argument("--shape", default="llama3-8b")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tp", type=int, default=2)
    a = parser.parse_args()
    os.environ[_ENV] = a.variant
    os.environ["TRITIUM_RANK_INIT"] = "probe_tp_pdl:install"
    install()
    from tritium.bench.engine_tp import Clock, decode_batch1, decode_trace, measure_engine
    from tritium.bench.engine_common import Bench

    args = argparse.Namespace(shape=a.shape, model=None, prompt_len=512, new_tokens=256, kv_cache_gib=10.0,
                              max_model_len=768, batch=1, repeats=a.repeats)
    bench = Bench(args, shape=a.shape, lazy=True)
    out = measure_engine(bench, Clock(), f"{a.shape} tp{a.tp} {a.variant}", [decode_batch1, decode_trace],
                         tensor_parallel_size=a.tp, comm="tritium", max_model_len=768)
    out["variant"] = a.variant
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    trace = out.get("trace", {}).get("by_kernel", {})
    print(f"{a.variant}: b1 step {out['batch1_decode_ms']:.4f} ms (all {out['batch1_decode_ms_all']})")
    for name, k in sorted(trace.items(), key=lambda kv: -kv[1]["exposed_us"])[:8]:
        print(f"  {name[:40]:>40}: {k['count']:4d} x, busy {k['busy_us']:8.1f} us, exposed {k['exposed_us']:8.1f} us")


if __name__ == "__main__":
    main()
