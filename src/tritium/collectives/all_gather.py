"""All-gather: ``x [n, ...]`` of every rank -> ``[world_size * n, ...]`` in rank order (the protocol's
generic kernel, ``KIND=ALL_GATHER``: each rank reads every peer's staged x, or its heap x in place).
Reference: :func:`tritium.collectives.reference.all_gather_ref`."""

import torch

from tritium.collectives.kernels import ALL_GATHER


def all_gather(comm, x: torch.Tensor, out: torch.Tensor | None = None, *, tag: int = 0) -> torch.Tensor:
    """:meth:`Communicator.all_gather <tritium.collectives.Communicator.all_gather>` on ``comm``; ``tag``: a
    layout every rank must pass equal (see ``Communicator._launch``), for callers whose messages can have
    equal sizes under different layouts."""
    comm._check_tensor("x", x)
    if x.dim() == 0:
        raise ValueError("all_gather: x must have at least one dimension, got a scalar")
    out = comm._out(out, (comm.world_size * x.shape[0], *x.shape[1:]), x)
    return comm._launch(ALL_GATHER, x, out, x.numel(), tag=tag)
