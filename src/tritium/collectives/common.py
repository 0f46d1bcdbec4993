"""Host-side names shared by the collectives: dtypes, ops, sizes, the mismatch error."""

import torch

from tritium.collectives.kernels import OP_MAX, OP_MIN, OP_SUM

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INT_DTYPES = (torch.int32, torch.int64)
DTYPES = FLOAT_DTYPES + INT_DTYPES
OPS = {"sum": OP_SUM, "max": OP_MAX, "min": OP_MIN, "avg": OP_SUM}
LAMPORT_DTYPES = (torch.float16, torch.bfloat16)
LAMPORT_MAX_BYTES = 1 << 20  # per-rank message capacity of the Lamport buffers (3 x world_size x this)
LAMPORT_PROGRAMS_PER_SM = 4  # the Lamport kernels' programs never wait for each other: more than one an SM
# Heap tensors of at least this many bytes are read in place by the peers (zero copy), smaller ones are
# staged (the copy is cheaper than the zero-copy path's second flag round).
# NOTE: 2x H200, bf16, graphs (run 6): the second round costs ~4 us, the copy ~0.5 us a MiB; heap
# inputs read in place lost at 1 MiB (14.8 vs 10.8 us) and 4 MiB (24.1 vs 21.5), won from 16 MiB (64.6 vs
# 69.9; 256 MiB 827 vs 961 us, NCCL 890).
ZERO_COPY_BYTES = 8 << 20
ALIGN = 256


class CollectiveMismatch(ValueError):
    """Ranks called a collective with different sizes (detected on the device, raised by ``check``)."""


def op_code(op: str, dtype: torch.dtype) -> tuple[int, bool]:
    """(kernel op code, average) of ``op`` for ``dtype``; ValueError naming ``op`` otherwise."""
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    if op == "avg" and dtype not in FLOAT_DTYPES:
        raise ValueError(f"op 'avg' needs a floating-point tensor, got {dtype}")
    return OPS[op], op == "avg"
