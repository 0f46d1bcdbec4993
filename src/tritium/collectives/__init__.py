"""Collectives written in Triton on the symmetric heap (the ``ccl`` of Iris, arXiv 2511.12500).

    import tritium.collectives as coll
    comm = coll.Communicator(heap, max_bytes=64 << 20)
    comm.all_reduce(x, op="sum", out=None, algorithm="auto")     # "one_shot" | "two_shot" | "lamport" | "auto"
    comm.all_gather(x), comm.reduce_scatter(x, op="sum"), comm.all_to_all(x), comm.broadcast(x, src)
    comm.all_reduce_rms_norm(x, residual, weight, eps)
    comm.check()                                                  # raises what the device recorded

:mod:`~tritium.collectives.communicator`: the Communicator (heap buffers, flags, argument checks, the
launch of the generic kernel). One module per collective: :mod:`~tritium.collectives.all_reduce`
(one-shot, two-shot, Lamport; ``select_all_reduce``), :mod:`~tritium.collectives.all_gather`,
:mod:`~tritium.collectives.reduce_scatter`, :mod:`~tritium.collectives.all_to_all`,
:mod:`~tritium.collectives.broadcast`, :mod:`~tritium.collectives.all_reduce_rms_norm`. The protocol and
the ``@triton.jit`` building blocks (stage tiles, arrive, wait for every peer, reduce a tile across
peers) in :mod:`tritium.collectives.kernels`; PyTorch references of every collective over per-rank
inputs in :mod:`tritium.collectives.reference`.
"""

from tritium.collectives.all_reduce import ALGORITHMS, select_all_reduce
from tritium.collectives.common import DTYPES, OPS, CollectiveMismatch
from tritium.collectives.communicator import Communicator

__all__ = ["Communicator", "CollectiveMismatch", "select_all_reduce", "ALGORITHMS", "DTYPES", "OPS"]
