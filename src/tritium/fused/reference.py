"""PyTorch references of the fused package's ops, in fp32; tests and benchmarks import these."""

from __future__ import annotations

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [M, K] @ b [K, N]`` -> ``[M, N]`` in fp32 (inputs upcast; no reduced-precision products)."""
    return a.float() @ b.float()
