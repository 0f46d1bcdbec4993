"""What the fused GEMM + communication ops share on the host: argument checks, the choice of overlap
mode per shape (:func:`select_overlap`) and the split of a launch's programs between moving data and
computing (:func:`split_programs`)."""

from __future__ import annotations

import torch

from tritium.collectives import Communicator
from tritium.runtime import interpreting, num_sms

OVERLAPS = ("auto", "bulk", "producer_consumer", "fused")
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def check_operands(op: str, a, b, comm, gated: bool = False) -> None:
    """ValueError/TypeError naming the argument unless ``a [M, k] @ b [k, N]`` chains on ``comm``'s device
    (``gated``: a is ``[M, 2k]`` = [gate | up], of an even width)."""
    if not isinstance(comm, Communicator):
        raise TypeError(f"{op}: comm must be a tritium.collectives.Communicator, got {type(comm).__name__}")
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{op}: {name} must be 2-D, got shape {tuple(t.shape)}")
        if t.device != comm.device:
            raise ValueError(f"{op}: {name} is on {t.device}; this communicator's rank works on {comm.device}")
    if a.dtype not in DTYPES:
        raise TypeError(f"{op}: a has dtype {a.dtype}; expected one of float16, bfloat16, float32")
    if b.dtype != a.dtype:
        raise TypeError(f"{op}: b has dtype {b.dtype}, a has {a.dtype}: they must match")
    if gated and a.shape[1] % 2:
        raise ValueError(f"{op}: gated: a must be [M, 2k] (gate then up), got {list(a.shape)} (an odd width)")
    k = a.shape[1] // 2 if gated else a.shape[1]
    if b.shape[0] != k:
        what = f" (gated: [gate | up], k = {k})" if gated else ""
        raise ValueError(f"{op}: shapes do not chain: a is {list(a.shape)}{what}, b is {list(b.shape)} "
                         f"(b must be [{k}, N])")


def output(out, shape: tuple[int, int], like: torch.Tensor) -> torch.Tensor:
    """``out`` checked (``shape``, like's dtype and device, contiguous rows that do not overlap: a row stride
    of at least the width, e.g. a column slice of a wider tensor), or a new tensor if None."""
    if out is None:
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    if (not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(shape) or out.dtype != like.dtype
            or out.device != like.device or out.stride(1) != 1):
        got = (f"{list(out.shape)} {out.dtype} on {out.device} strides {out.stride()}"
               if isinstance(out, torch.Tensor) else type(out).__name__)
        raise ValueError(f"out must be {list(shape)} {like.dtype} on {like.device} with contiguous rows, got {got}")
    rows, width = shape
    if rows > 1 and width > 0 and out.stride(0) < width:  # (torch strides are never negative)
        raise ValueError(f"out's rows overlap: row stride {out.stride(0)} < width {width} (strides {out.stride()}); "
                         f"out must be {list(shape)} with a row stride of at least {width}")
    return out


def select_overlap(op: str, M: int, N: int, K: int, world_size: int, overlap: str = "auto",
                   decode: bool = False) -> str:
    """The overlap mode of ``op`` for a global ``[M, K] @ [K, N]`` on ``world_size`` ranks: ``overlap``
    itself unless it is "auto". ``decode``: matmul_all_reduce's one-launch decode kernel takes the shape
    (:func:`tritium.fused.matmul_all_reduce.decode_eligible`).

    NOTE: 2x H200, bf16 (bench/results/fused-NVIDIA-H200-x2.json, bench/NOTES.md "Fused"), Llama-3-70B
    shapes, us (bulk / producer_consumer / fused). Run 5: all_gather_matmul M = 2048 770 / 754 / 969,
    M = 16384 6313 / 5953 / 6922 (the copy engine moves the rows, every SM computes): producer_consumer
    from M = 1024 rows on 2+ ranks. matmul_reduce_scatter M = 2048 793 / 1079 / 1007, M = 16384 6268 /
    6818 / 7192; matmul_all_reduce decode M = 1..64 34-82 / 40-94 / 37-114: bulk (the SM-moved modes
    give 1/8 of the SMs to the data, which costs the GEMM about what the overlap hides)."""
    if overlap not in OVERLAPS:
        raise ValueError(f"overlap must be one of {', '.join(OVERLAPS)}, got {overlap!r}")
    if overlap != "auto":
        return overlap
    if op == "all_gather_matmul" and world_size > 1 and M >= 1024:
        return "producer_consumer"
    if op == "matmul_all_reduce" and decode and K > 0 and M <= 16:
        # NOTE: decode run 2 (fused-NVIDIA-H200-x2.json "decode"): the one-launch kernel beats bulk at M = 1
        # and 8 (o_proj 29.9 / 25.6 vs 35.0 / 32.6 us) and loses at M = 64 (46.0 vs 40.9)
        return "fused"
    return "bulk"


def compute_programs(comm: Communicator, tiles: int) -> int:
    """Programs of a launch that only computes (every SM; two under the interpreter)."""
    return max(1, min(tiles, 2 if interpreting() else num_sms(comm.device)))


def split_programs(comm: Communicator, copy_units: int | None, tiles: int) -> tuple[int, int]:
    """(data-moving programs, computing programs) of one launch: every program of a fused launch is
    resident at once on a GPU (the total is at most the SM count); one SM in 8 moves data (at most one
    per unit of copy work, if given: ``copy_units``).

    NOTE: 2x H200, fused run 1: one SM in 16 (8 programs) moved data too slowly for the GEMM on the
    other SMs (all-gather + GEMM at M = 2048: 1.2 ms vs 0.67 for the GEMM alone)."""
    if interpreting():
        return 2, max(1, min(tiles, 2))
    sms = num_sms(comm.device)
    copy = max(1, sms // 8 if copy_units is None else min(copy_units, sms // 8))
    return copy, max(1, min(tiles, sms - copy))
