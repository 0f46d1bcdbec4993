"""Symmetric memory: a heap on every rank, every peer's heap mapped into each process, and
``@triton.jit`` primitives that load, store and do atomics on any rank's memory from inside a kernel
(the capability of Iris, arXiv 2511.12500).

Host side::

    import tritium.shmem as shmem

    def worker(rank, world_size):
        with shmem.SymmetricHeap(256 << 20) as heap:
            x = heap.zeros((1024,), torch.float32)
            my_kernel[grid](x, heap.rank, heap.bases, ...)
            heap.barrier()

    shmem.launch(worker, 2)

Device side (``tritium.shmem.device``, ``atomics``, ``sync``): ``translate``; ``load``, ``store``,
``get``, ``put``, ``copy``; ``atomic_{add,sub,xchg,cas,min,max,and,or,xor}``; ``signal``, ``wait``,
``barrier``. Every primitive takes ``(pointers..., values..., rank, remote ranks..., bases, options)``
where pointers point into the calling rank's heap.
"""

from tritium.shmem.atomics import (atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or,
                                   atomic_sub, atomic_xchg, atomic_xor)
from tritium.shmem.device import copy, get, load, put, remote, store, translate
from tritium.shmem.heap import AllocationMismatch, DeviceTimeout, HeapExhausted, PeerTimeout, SymmetricHeap
from tritium.shmem.launch import LaunchTimeout, RankFailed, launch
from tritium.shmem.sync import barrier, signal, wait

__all__ = [
    "SymmetricHeap", "launch", "HeapExhausted", "AllocationMismatch", "DeviceTimeout", "PeerTimeout", "RankFailed",
    "LaunchTimeout", "translate", "remote", "load", "store", "get", "put", "copy", "atomic_add", "atomic_sub",
    "atomic_xchg", "atomic_cas", "atomic_min", "atomic_max", "atomic_and", "atomic_or", "atomic_xor",
    "signal", "wait", "barrier",
]
