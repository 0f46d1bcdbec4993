"""Smoke test of ``python -m tritium.bench draft`` on the CPU (Triton interpreter): every case runs and is
reported, the draft model's windows counted. The GPU run is bench/gpu_draft.sh."""

import json
import subprocess
import sys

import pytest

from tritium.bench.draft import expected_accepted
from tritium.runtime import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="CPU smoke test (the GPU run is bench/gpu_draft.sh)")


def test_expected_accepted():
    assert expected_accepted(0.5, 3) == pytest.approx(0.875) and expected_accepted(1.0, 4) == 4


def test_draft_bench_tiny(tmp_path):
    out = tmp_path / "draft.json"
    cmd = [sys.executable, "-m", "tritium.bench", "draft", "--shape", "tiny", "--draft-shape", "tiny", "--drafts", "2",
           "--batches", "1", "--new-tokens", "6", "--prompt-len", "8", "--repeats", "1", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(out.read_text())
    cases = r["cases"]["b1"]
    assert r["suite"] == "draft" and set(cases) == {"plain", "verify-2", "model-2"}
    model = cases["model-2"]
    # a window of d steps, fewer where a sequence has fewer tokens left to draft
    assert model["draft_windows"] > 0 and model["draft_windows"] <= model["draft_steps"] <= 2 * model["draft_windows"]
    assert model["draft_tokens"] > 0 and cases["verify-2"]["draft_tokens"] > 0
    # the same random weights drafting for themselves (fp32): drafts accepted
    assert model["accepted_tokens"] > 0 and model["tokens_per_step"] > 1
    assert set(model["speedup_at_rate"]) == {"0.5", "0.6", "0.7", "0.8", "0.9"}
