"""runtime: feature probes."""

import torch

from tritium import runtime


def test_pdl_only_for_compiled_nvidia_kernels(monkeypatch):
    assert runtime.pdl_supported(torch.device("cpu")) is False
    monkeypatch.setattr(runtime, "interpreting", lambda: False)
    monkeypatch.setattr(torch.version, "hip", "6.4")  # ROCm devices are "cuda" too; no PDL there
    assert runtime.pdl_supported(torch.device("cuda", 0)) is False
