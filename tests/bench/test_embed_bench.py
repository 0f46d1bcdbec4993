"""Smoke test of ``python -m tritium.bench embed`` on a tiny model (CPU, Triton interpreter): both systems run, agree
(cosine similarity of their vectors) and the JSON holds each figure. The GPU run is bench/gpu_embed.sh."""

import json
import os
import subprocess
import sys

import pytest

from tritium.runtime import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="CPU smoke test (the GPU run is bench/gpu_embed.sh)")

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def test_embed_bench_tiny(tmp_path):
    out = tmp_path / "embed.json"
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "tritium.bench", "embed", "--shape", "tiny", "--cases", "2x16,1x24", "--repeats", "1",
           "--kv-cache-gib", "0.01", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["suite"] == "embed" and set(r["cases"]) == {"2x16", "1x24"}
    for case in r["cases"].values():
        assert case["cosine_min"] > 0.9999
        for key in ("tritium_tokens_per_s", "transformers_tokens_per_s", "vs_transformers", "tritium_tflops"):
            assert case[key] > 0
