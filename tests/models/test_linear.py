"""LinearDispatch: cuBLAS or the Triton GEMV per shape (modes, tuning, the gated path)."""

import pytest
import torch
import torch.nn.functional as F

from tritium import ops
from tritium.models.linear import LinearDispatch
from tritium.ops import reference
from tritium.ops.gemv import MAX_M, GemvConfig
from tritium.runtime import default_device

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def rel_err(out, ref):
    assert not torch.isnan(out).any() and not torch.isinf(out).any()
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def test_linear_dispatch_modes():
    dev = default_device()
    w = torch.randn(24, 128, device=dev)
    with pytest.raises(ValueError, match="linear_backend"):
        LinearDispatch("cublas")
    for mode in LinearDispatch.MODES:
        lin = LinearDispatch(mode)
        for m in (1, 4, MAX_M + 3):  # beyond MAX_M always F.linear
            x = torch.randn(m, 128, device=dev)
            assert rel_err(lin(x, w), reference.linear(x, w)) < TOL[torch.float32]
    # auto without timings falls back to F.linear; with a recorded choice it runs the GEMV
    lin = LinearDispatch("auto")
    x = torch.randn(1, 128, device=dev)
    assert torch.equal(lin(x, w), F.linear(x, w))
    lin.choices[(1, 24, 128)] = GemvConfig(8, 128, 4)
    assert rel_err(lin(x, w), reference.linear(x, w)) < TOL[torch.float32]
    assert LinearDispatch("torch").tune({"w": [w]}, (1,)) == []


@pytest.mark.gpu
def test_linear_tune_picks_and_reports():
    dev = default_device()
    group = [torch.randn(1024, 2048, dtype=torch.bfloat16, device=dev) for _ in range(4)]
    lin = LinearDispatch("auto")
    report = lin.tune({"proj": group}, (1, 2))
    assert [(r["weight"], r["m"]) for r in report] == [("proj", 1), ("proj", 2)]
    assert set(lin.choices) == {(1, 1024, 2048), (2, 1024, 2048)}
    for r in report:
        assert r["best_tbs"] >= r["cublas_tbs"] > 0
    x = torch.randn(1, 2048, dtype=torch.bfloat16, device=dev)
    assert rel_err(lin(x, group[0]), reference.linear(x, group[0])) < TOL[torch.bfloat16]


@pytest.mark.parametrize("mode", ["triton", "torch"])
def test_linear_dispatch_gated(mode):
    """gated(x, w) = silu_and_mul(x) @ w^T through either path (fused GEMV, or the op then F.linear)."""
    dev = default_device()
    x = torch.randn(3, 2 * 100, device=dev) * 2
    w = torch.randn(37, 100, device=dev) / 10
    lin = LinearDispatch(mode, ops.silu_and_mul)
    assert rel_err(lin.gated(x, w), reference.linear(reference.silu_and_mul(x), w)) < TOL[torch.float32]
