"""Smoke test of ``python -m tritium.bench lora`` on the CPU (Triton interpreter): the kernel part checks every
projection's update against the torch reference and writes it to the JSON. The GPU run is bench/gpu_lora.sh."""

import json
import subprocess
import sys

import pytest

from tritium.runtime import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="CPU smoke test (the GPU run is bench/gpu_lora.sh)")


def test_lora_bench_tiny(tmp_path):
    out = tmp_path / "lora.json"
    cmd = [sys.executable, "-m", "tritium.bench", "lora", "--shape", "tiny", "--tokens", "1,20", "--rank", "8",
           "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(out.read_text())
    assert r["suite"] == "lora" and r["correctness_failures"] == []
    assert {(k["projection"], k["tokens"], k["adapters"]) for k in r["kernels"]} == {
        (p, t, m) for p in ("qkv", "o_proj", "gate_up", "down") for t in (1, 20) for m in ("one", "four")}
    assert all(0 <= k["error"] < 2e-2 for k in r["kernels"])
