"""Broadcast: ``x`` of rank ``src`` into ``x`` of every rank, in place (the protocol's generic kernel,
``KIND=BROADCAST``). Reference: the source rank's tensor itself."""

import torch

from tritium.collectives.kernels import BROADCAST


def broadcast(comm, x: torch.Tensor, src: int) -> torch.Tensor:
    """:meth:`Communicator.broadcast <tritium.collectives.Communicator.broadcast>` on ``comm``."""
    comm._check_tensor("x", x)
    if not isinstance(src, int) or isinstance(src, bool) or not 0 <= src < comm.world_size:
        raise ValueError(f"src must be a rank in [0, {comm.world_size}), got {src!r}")
    return comm._launch(BROADCAST, x, x, x.numel(), src=src)
