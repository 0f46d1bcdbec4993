"""Smoke test of ``python -m tritium.bench distributed_decode`` (CPU ranks, Triton interpreter, tiny shapes,
~15 s): the correctness pass and every system run, and the JSON holds each figure. The GPU run is
bench/gpu_distributed_decode.sh."""

import json
import os
import subprocess
import sys

import pytest

from tritium.runtime import interpreting

pytestmark = pytest.mark.skipif(not interpreting(),
                                reason="CPU smoke test (the GPU run is bench/gpu_distributed_decode.sh)")

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def test_distributed_decode_smoke_runs_every_system(tmp_path):
    out = tmp_path / "distributed_decode.json"
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "tritium.bench", "distributed_decode", "--smoke", "--world-size", "2",
           "--batches", "1", "--contexts", "64", "--timeout", "120", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert (r["suite"], r["world_size"], r["smoke"], r["dtype"]) == ("distributed_decode", 2, True, "fp16")
    assert r["check_passed"] is True, r["check"]
    assert set(r["check"]) == {"plain", "window+softcap+alibi+sinks"}
    for case in r["check"].values():
        assert set(case) == {"fused", "bulk", "nccl"} and all(e <= r["check_tolerance"] for e in case.values())
    (row,) = r["rows"]
    assert (row["batch"], row["context"], row["tokens_per_rank"]) == (1, 64, 32)
    for system in ("single", "fused", "bulk", "nccl"):
        assert row[f"{system} us"] > 0 and row[f"{system} TB/s"] > 0, system
    assert set(row["rel_err_vs_single"]) == {"fused", "bulk", "nccl"}
    assert row["fused speedup vs single"] > 0 and row["fused speedup vs nccl"] > 0
    assert r["copy_tbs_per_rank"] == [None, None] and r["copy_ceiling_sum_tbs"] is None  # no GPU copy on the CPU
    assert r["targets"] and all(v is None for v in r["targets"].values())  # no targets on the CPU
    assert "target fused speedup vs nccl >= 1.15 on every case: not measured" in proc.stdout
