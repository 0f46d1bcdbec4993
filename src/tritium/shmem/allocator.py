"""Backends that give every rank a heap and map every peer's heap into this process.

A backend is a class with the constructor below, registered in :data:`BACKENDS` by name. It owns
one allocation per rank; ``SymmetricHeap`` sub-allocates tensors from ``local`` and hands
``addresses`` to kernels.

Backends now: ``cuda-ipc`` (legacy CUDA IPC through cuda-bindings, NVIDIA) and ``cpu-shm`` (POSIX
shared memory, for the Triton interpreter). The interface leaves room for:

- ``hip-ipc`` (AMD): the same calls as ``cuda-ipc`` with HIP names (``hipIpcGetMemHandle``,
  ``hipIpcOpenMemHandle(handle, hipIpcMemLazyEnablePeerAccess)``, ``hipIpcCloseMemHandle``,
  ``hipMemGetAddressRange``) through hip-python;
- a VMM backend (``cuMemCreate`` + ``cuMemExportToShareableHandle`` with POSIX file descriptors,
  ``cuMemMap`` of every peer into one reserved range) or torch symmetric memory
  (``torch.distributed._symmetric_memory``), which also allow multicast objects.
"""

from __future__ import annotations

import abc
from typing import Any, Callable

import torch

# exchange(obj) -> [obj of rank 0, ..., obj of rank world_size - 1]: a collective all-gather of
# picklable objects over the heap's host group.
Exchange = Callable[[Any], list]


class Allocator(abc.ABC):
    """One heap of ``nbytes`` per rank, every peer's mapped here.

    After construction (a collective over all ranks):
    - ``local``: uint8 tensor ``[nbytes]`` on ``device``: this rank's heap, zero-filled;
    - ``addresses``: ``world_size`` ints, each rank's heap start as mapped in this process
      (``addresses[rank] == local.data_ptr()``).
    """

    name: str

    def __init__(self, nbytes: int, rank: int, world_size: int, device: torch.device, exchange: Exchange):
        self.nbytes = nbytes
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.local: torch.Tensor
        self.addresses: list[int]

    @abc.abstractmethod
    def close(self) -> None:
        """Unmap the peers and release this rank's heap. Call after a barrier: peers may still read."""
