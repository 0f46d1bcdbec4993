"""``cuda-ipc``: legacy CUDA IPC through cuda-bindings, one process per GPU.

The owner allocates its heap with torch (zero-filled), finds the enclosing cudaMalloc allocation
(``cuMemGetAddressRange``: the caching allocator may hand out a sub-range of a larger block) and
exports it with ``cudaIpcGetMemHandle``. Every peer opens the handle with
``cudaIpcOpenMemHandle(handle, cudaIpcMemLazyEnablePeerAccess)`` while ITS OWN device is current and
adds the heap's offset inside the allocation.

NOTE: torch's own CUDA tensor sharing (torch.multiprocessing) opens handles under the owner's
device; a Triton kernel on the local device then faults with an illegal address (measured on 2x
H200), hence the direct calls. Legacy IPC does not work with
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (those are VMM allocations).
"""

from __future__ import annotations

import ctypes

import torch

from tritium.shmem.allocator import Allocator, Exchange

_HANDLE_BYTES = 64  # sizeof(cudaIpcMemHandle_t)

# A process may open a given peer allocation only once, but two heaps can be sub-ranges of the same
# caching-allocator segment: opened mappings are shared, keyed by handle, with a count of users.
_mapped: dict[bytes, list[int]] = {}  # handle bytes -> [address, users]


def _check(result, call: str):
    """cuda-bindings calls return (error, *values): raise on error, return the values."""
    err, *values = result
    if int(err) != 0:
        raise RuntimeError(f"{call} failed: {err!r}")
    return values[0] if len(values) == 1 else values


def _handle_to_bytes(handle) -> bytes:
    return ctypes.string_at(handle.getPtr(), _HANDLE_BYTES)


def _open(runtime, data: bytes, rank: int) -> int:
    """Map a peer allocation (current device = this rank's), or share the mapping already open."""
    entry = _mapped.get(data)
    if entry is None:
        handle = runtime.cudaIpcMemHandle_t()
        ctypes.memmove(handle.getPtr(), data, _HANDLE_BYTES)
        address = _check(runtime.cudaIpcOpenMemHandle(handle, runtime.cudaIpcMemLazyEnablePeerAccess),
                         f"cudaIpcOpenMemHandle(rank {rank}'s heap)")
        entry = _mapped[data] = [int(address), 0]
    entry[1] += 1
    return entry[0]


def _close(runtime, data: bytes) -> None:
    entry = _mapped[data]
    entry[1] -= 1
    if entry[1] == 0:
        del _mapped[data]
        _check(runtime.cudaIpcCloseMemHandle(entry[0]), "cudaIpcCloseMemHandle")


class CudaIpcAllocator(Allocator):
    name = "cuda-ipc"

    def __init__(self, nbytes: int, rank: int, world_size: int, device: torch.device, exchange: Exchange):
        super().__init__(nbytes, rank, world_size, device, exchange)
        if device.type != "cuda":
            raise ValueError(f"backend 'cuda-ipc' needs a cuda device, got {device}")
        try:
            from cuda.bindings import driver, runtime
        except ImportError as e:
            raise ImportError("backend 'cuda-ipc' needs cuda-bindings (pip install cuda-bindings)") from e
        self._runtime = runtime
        self._opened: list[bytes] = []  # handles of the peer allocations this heap mapped
        with torch.cuda.device(device):
            self.local = torch.zeros(nbytes, dtype=torch.uint8, device=device)
            torch.cuda.synchronize(device)  # peers may read the zeros as soon as they map them
            ptr = self.local.data_ptr()
            alloc_base, _ = _check(driver.cuMemGetAddressRange(driver.CUdeviceptr(ptr)), "cuMemGetAddressRange")
            alloc_base = int(alloc_base)
            handle = _check(runtime.cudaIpcGetMemHandle(alloc_base), "cudaIpcGetMemHandle")
            self.addresses = []
            try:
                infos = exchange((_handle_to_bytes(handle), ptr - alloc_base))
                for r, (data, offset) in enumerate(infos):
                    if r == rank:
                        self.addresses.append(ptr)
                        continue
                    self.addresses.append(_open(runtime, data, r) + offset)
                    self._opened.append(data)
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        """Close every peer mapping (raising the first failure after trying them all), free the heap."""
        opened, self._opened = self._opened, []
        self.local = None
        errors = []
        with torch.cuda.device(self.device):
            for data in opened:
                try:
                    _close(self._runtime, data)
                except RuntimeError as e:
                    errors.append(e)
        if errors:
            raise errors[0]
