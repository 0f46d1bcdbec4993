"""PyTorch references of the collectives over the inputs of every rank (``xs[r]``: rank r's tensor).

Floats reduce in fp32 in rank order (as the kernels do) and round to the input dtype once; ints exactly.
"""

from __future__ import annotations

import torch


def _reduce(xs: list[torch.Tensor], op: str) -> torch.Tensor:
    acc = xs[0].float() if xs[0].is_floating_point() else xs[0].clone()
    for x in xs[1:]:
        x = x.float() if x.is_floating_point() else x
        acc = acc + x if op in ("sum", "avg") else torch.maximum(acc, x) if op == "max" else torch.minimum(acc, x)
    if op == "avg":
        acc = acc / len(xs)
    return acc.to(xs[0].dtype)


def all_reduce_ref(xs: list[torch.Tensor], op: str = "sum") -> torch.Tensor:
    return _reduce(xs, op)


def reduce_scatter_ref(xs: list[torch.Tensor], rank: int, op: str = "sum") -> torch.Tensor:
    return _reduce([x.chunk(len(xs))[rank] for x in xs], op)


def all_gather_ref(xs: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(xs)


def all_to_all_ref(xs: list[torch.Tensor], rank: int) -> torch.Tensor:
    return torch.cat([x.chunk(len(xs))[rank] for x in xs])


def all_reduce_rms_norm_ref(xs: list[torch.Tensor], residual: torch.Tensor, weight: torch.Tensor, eps: float
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, new residual): ``h = all_reduce(xs) + residual`` in x's dtype, ``out = weight * rms_norm(h)``
    with the normalised row rounded to x's dtype before the weight (as ``tritium.ops.reference.rms_norm``)."""
    h = all_reduce_ref(xs) + residual
    hf = h.float()
    y = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)).to(h.dtype)
    return (y.float() * weight.float()).to(h.dtype), h
