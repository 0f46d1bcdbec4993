"""Collectives written in Triton on the symmetric heap (the ``ccl`` of Iris, arXiv 2511.12500).

    import tritium.collectives as coll
    comm = coll.Communicator(heap, max_bytes=64 << 20)
    comm.all_reduce(x, op="sum", out=None, algorithm="auto")     # "one_shot" | "two_shot" | "auto"
    comm.all_gather(x), comm.reduce_scatter(x, op="sum"), comm.all_to_all(x), comm.broadcast(x, src)
    comm.all_reduce_rms_norm(x, residual, weight, eps)
    comm.check()                                                  # raises what the device recorded

Host side in :mod:`tritium.collectives.communicator`; the protocol and the ``@triton.jit`` building blocks
(stage tiles, arrive, wait for every peer, reduce a tile across peers) in :mod:`tritium.collectives.kernels`;
PyTorch references of every collective over per-rank inputs in :mod:`tritium.collectives.reference`.
"""

from tritium.collectives.communicator import (ALGORITHMS, DTYPES, OPS, CollectiveMismatch, Communicator,
                                               select_all_reduce)

__all__ = ["Communicator", "CollectiveMismatch", "select_all_reduce", "ALGORITHMS", "DTYPES", "OPS"]
