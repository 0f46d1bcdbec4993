"""All-to-all: ``x [world_size * n, ...]``, chunk j goes to rank j; chunk i of the output came from rank i
(the protocol's generic kernel, ``KIND=ALL_TO_ALL``). Reference:
:func:`tritium.collectives.reference.all_to_all_ref`."""

import torch

from tritium.collectives.kernels import ALL_TO_ALL


def all_to_all(comm, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """:meth:`Communicator.all_to_all <tritium.collectives.Communicator.all_to_all>` on ``comm``."""
    comm._check_tensor("x", x)
    comm._chunked("all_to_all", x)
    out = comm._out(out, tuple(x.shape), x)
    return comm._launch(ALL_TO_ALL, x, out, x.numel() // comm.world_size)
