"""Reduce-scatter: ``x [world_size * n, ...]`` -> ``[n, ...]``, rank r gets the r-th chunk reduced over
ranks (the protocol's generic kernel, ``KIND=REDUCE_SCATTER``: each rank reduces its chunk from every
peer). Reference: :func:`tritium.collectives.reference.reduce_scatter_ref`."""

import torch

from tritium.collectives.common import op_code
from tritium.collectives.kernels import REDUCE_SCATTER


def reduce_scatter(comm, x: torch.Tensor, op: str = "sum", out: torch.Tensor | None = None) -> torch.Tensor:
    """:meth:`Communicator.reduce_scatter <tritium.collectives.Communicator.reduce_scatter>` on ``comm``."""
    comm._check_tensor("x", x)
    code, avg = op_code(op, x.dtype)
    n = comm._chunked("reduce_scatter", x)
    out = comm._out(out, (n, *x.shape[1:]), x)
    return comm._launch(REDUCE_SCATTER, x, out, x.numel() // comm.world_size, op=code, avg=avg)
