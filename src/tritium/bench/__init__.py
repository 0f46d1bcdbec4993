"""Benchmarks: ``python -m tritium.bench <suite> [--out FILE]``.

Each suite is a module ``tritium.bench.<suite>`` with ``add_arguments(parser)`` (optional) and
``run(args) -> dict``; the runner prints the suite's table and writes the returned dict as JSON.
"""

SUITES = {
    "attention": "tritium.bench.attention",
    "shmem": "tritium.bench.shmem",
    "collectives": "tritium.bench.collectives",
    "engine": "tritium.bench.engine",
    "engine-ablate": "tritium.bench.engine_ablate",
    "engine-window": "tritium.bench.engine_window",
    "gemv": "tritium.bench.gemv",
    "serve": "tritium.bench.serve",
    "gemm": "tritium.bench.gemm",
    "fused": "tritium.bench.fused",
    "distributed_decode": "tritium.bench.distributed_decode",
    "moe": "tritium.bench.moe",
    "speculative": "tritium.bench.speculative",
    "draft": "tritium.bench.draft",
    "embed": "tritium.bench.embed",
    "lora": "tritium.bench.lora",
}
