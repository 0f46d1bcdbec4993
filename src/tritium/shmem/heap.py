"""``SymmetricHeap``: one heap per rank, the same tensors at the same offsets on every rank, every
peer's heap mapped into this process so that kernels can reach it (``tritium.shmem.device``).

Allocation is a bump pointer shared by no one: it is the SAME sequence of calls on every rank that
keeps offsets symmetric. With ``check=True`` (default) every allocation compares the call on all
ranks and raises :class:`AllocationMismatch` on the first difference; the host barrier compares a
digest of the whole sequence in any case.
"""

from __future__ import annotations

import ctypes
import datetime
import hashlib
import math
import numbers
from typing import Any

import torch
import torch.distributed as dist

from tritium import runtime
from tritium.shmem import checks, sync
from tritium.shmem.allocator import Allocator
from tritium.shmem.cpu_shm import CpuShmAllocator
from tritium.shmem.cuda_ipc import CudaIpcAllocator

ALIGN = 256  # bytes; every tensor starts on this boundary (16-byte vectors need 16)

# Polls before a device-side wait gives up. NOTE: one poll of a local flag is ~1 us on an H200
# and ~0.2 ms under the interpreter (measured), so both bounds are seconds to tens of seconds.
MAX_SPINS_GPU = 1 << 24
MAX_SPINS_INTERPRETER = 1 << 16



def backend_class(name: str) -> type[Allocator]:
    """The allocator class registered as ``name``."""
    backends = {cls.name: cls for cls in (CudaIpcAllocator, CpuShmAllocator)}
    if name not in backends:
        raise ValueError(f"backend must be one of {sorted(backends)}, got {name!r}")
    return backends[name]


def default_backend(device: torch.device) -> str:
    """``cuda-ipc`` for CUDA devices, ``cpu-shm`` for the CPU (the Triton interpreter)."""
    if device.type == "cuda":
        if torch.version.hip is not None:
            raise NotImplementedError("no HIP backend yet: see tritium.shmem.allocator for what it needs")
        return "cuda-ipc"
    return "cpu-shm"


class HeapExhausted(MemoryError):
    """An allocation does not fit in what is left of the heap."""


class AllocationMismatch(RuntimeError):
    """Ranks allocated in different orders, shapes or dtypes (or one rank skipped a collective)."""


class PeerTimeout(RuntimeError):
    """A host-side collective of the heap (rendezvous, allocation check, barrier, close) gave up on a peer."""


class DeviceTimeout(RuntimeError):
    """A device-side barrier gave up waiting for a peer (the peer is lost or far behind)."""


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, (tuple, list, torch.Size)) or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"shape must be an int or a tuple of non-negative ints, got {shape!r}")
    return tuple(int(d) for d in shape)


def _address(tensor: torch.Tensor) -> int:
    """Address of ``tensor``'s first element. NOTE: not ``data_ptr()``, which is 0 for a tensor of no elements."""
    return tensor.untyped_storage().data_ptr() + tensor.storage_offset() * tensor.element_size()


class SymmetricHeap:
    """A symmetric heap of ``size`` bytes on every rank of ``group`` (a ``torch.distributed`` process
    group; default: the whole world), e.g. the ranks of one tensor-parallel group.

    Collective over ``group``: every rank of it constructs it (after ``torch.distributed.init_process_group``),
    allocates the same tensors in the same order, and closes it.

    - ``rank``, ``world_size``: this rank's index in ``group`` and the group's size (ranks of the heap
      are group ranks); ``group``: the group given (None: the world), ``global_ranks``: its members.
    - ``device``: the heap's device (the current CUDA device, or the CPU under the interpreter).
    - ``bases``: int64 ``[world_size]`` on ``device``: each rank's heap base as mapped in THIS process;
      pass it to kernels with local heap tensors (``tritium.shmem.device``).
    - ``sync``: int64 ``[sync.SYNC_SLOTS + world_size]``, the device barrier's state.
    - ``max_spins``: polls before device-side waits of this heap give up.

    ``backend``: "cuda-ipc" or "cpu-shm" (default: by device). ``timeout``: seconds any host-side
    collective of the heap waits for a peer before raising. ``check``: compare every allocation
    across ranks.
    """

    def __init__(self, size: int, *, backend: str | None = None, device: torch.device | str | None = None,
                 timeout: float = 300.0, check: bool = True, group: "dist.ProcessGroup | None" = None):
        size = checks.integer("size (bytes)", size, minimum=1)
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("SymmetricHeap needs torch.distributed initialised: call "
                               "init_process_group first, or run under tritium.shmem.launch")
        timeout = checks.seconds("timeout", timeout)
        self.device = self._pick_device(device)
        if group is None:
            self.global_ranks = list(range(dist.get_world_size()))
        else:
            if group is dist.GroupMember.NON_GROUP_MEMBER:  # what new_group returns to the other ranks
                raise ValueError(f"group: rank {dist.get_rank()} is not a member of it")
            if not isinstance(group, dist.ProcessGroup):
                raise TypeError(f"group must be a torch.distributed ProcessGroup or None, got {type(group).__name__}")
            self.global_ranks = dist.get_process_group_ranks(group)
            if dist.get_rank() not in self.global_ranks:
                raise ValueError(f"group: rank {dist.get_rank()} is not a member (members: {self.global_ranks})")
        self.group = group
        self.rank = self.global_ranks.index(dist.get_rank())
        self.world_size = len(self.global_ranks)
        self.check = check
        self.max_spins = MAX_SPINS_GPU if self.device.type == "cuda" else MAX_SPINS_INTERPRETER
        self.size = -(-size // ALIGN) * ALIGN
        # Host-side exchanges go over a gloo group of their own (made below), so that they wait at most
        # ``timeout`` whatever the default group is (NCCL, or gloo with its own, usually longer, timeout).
        self.timeout = timeout
        self._allocator = None
        self._offset = 0
        self._count = 0
        self._digest = hashlib.sha256()
        backend = backend or default_backend(self.device)
        allocator_class = backend_class(backend)  # a bad name raises before any collective
        self.backend = backend
        self._group = None
        try:
            self._group = self._new_group()
            self._allocator = allocator_class(self.size, self.rank, self.world_size, self.device,
                                              lambda obj: self._exchange("rendezvous", obj))
            self.bases = torch.tensor(self._allocator.addresses, dtype=torch.int64, device=self.device)
            self.sync = self.zeros((sync.SYNC_SLOTS + self.world_size,), torch.int64)
            self.barrier()
        except BaseException:
            self._release()
            raise

    @staticmethod
    def _pick_device(device) -> torch.device:
        if device is None:
            if runtime.default_device().type == "cuda":
                return torch.device("cuda", torch.cuda.current_device())
            return torch.device("cpu")
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError) as e:
            raise ValueError(f"device must be a torch.device or a device string, got {device!r}") from e
        if device.type == "cuda":
            if not torch.cuda.is_available():
                raise ValueError(f"device is {device}, but no CUDA device is available")
            if device.index is None:
                device = torch.device("cuda", torch.cuda.current_device())
        return device

    def _new_group(self) -> "dist.ProcessGroup":
        """The heap's own gloo group (collective over its members): its waits end after ``timeout``."""
        span = datetime.timedelta(seconds=self.timeout)
        try:
            if self.group is None:
                return dist.new_group(backend="gloo", timeout=span)
            # only the members make it (other ranks need not take part)
            return dist.new_group(self.global_ranks, backend="gloo", use_local_synchronization=True, timeout=span)
        except RuntimeError as e:
            raise PeerTimeout(f"rank {self.rank}: creating the SymmetricHeap failed: a peer did not create it within "
                              f"timeout={self.timeout} s or is gone ({str(e).splitlines()[0]})") from e

    # ---- host-side collectives over the heap's group -------------------------------------------------

    def _exchange(self, kind: str, payload: Any) -> list:
        """All-gather ``payload`` tagged with ``kind``; raise if ranks are in different collectives, or
        :class:`PeerTimeout` if a peer does not arrive within ``timeout`` (or is gone)."""
        got = [None] * self.world_size
        try:
            dist.all_gather_object(got, (kind, payload), group=self._group)
        except RuntimeError as e:
            raise PeerTimeout(f"rank {self.rank}: heap collective {kind!r} failed: a peer did not arrive within "
                              f"timeout={self.timeout} s or is gone ({str(e).splitlines()[0]})") from e
        kinds = [k for k, _ in got]
        if len(set(kinds)) > 1:
            raise AllocationMismatch("ranks are in different heap collectives: "
                                     + ", ".join(f"rank {r}: {k}" for r, k in enumerate(kinds)))
        return [p for _, p in got]

    # ---- allocation ----------------------------------------------------------------------------------

    def empty(self, shape, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Uninitialised tensor of ``shape`` in the heap (collective: same calls, same order on all ranks)."""
        shape = _shape(shape)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"dtype must be a torch.dtype, got {dtype!r}")
        self._check_open()
        nbytes = math.prod(shape) * dtype.itemsize
        call = (self._count, shape, str(dtype))
        if self.check:
            calls = self._exchange("allocate", call)
            if any(c != call for c in calls):
                raise AllocationMismatch("ranks allocated differently; allocation (index, shape, dtype) by rank: "
                                         + ", ".join(f"rank {r}: {c}" for r, c in enumerate(calls)))
        if nbytes > self.size - self._offset:
            raise HeapExhausted(f"SymmetricHeap of {self.size} bytes has {self.size - self._offset} bytes left; "
                                f"shape {shape} {dtype} needs {nbytes} bytes")
        start = self._offset
        self._offset = start + -(-nbytes // ALIGN) * ALIGN
        self._count += 1
        self._digest.update(repr(call).encode())
        return self._allocator.local[start:start + nbytes].view(dtype).view(shape)

    def zeros(self, shape, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Zero-filled heap tensor. Like every fill, call ``barrier()`` before peers access it."""
        tensor = self.empty(shape, dtype)
        # NOTE: torch has no fill for empty tensors of the bit-packed dtypes (bits8, uint1..7, float4_e2m1fn_x2)
        return tensor.zero_() if tensor.numel() else tensor

    def full(self, shape, value, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Heap tensor filled with ``value``. Call ``barrier()`` before peers access it."""
        if not isinstance(value, numbers.Number) and not (isinstance(value, torch.Tensor) and value.numel() == 1):
            raise TypeError(f"value must be a number (or a one-element tensor), got {type(value).__name__}")
        return self.empty(shape, dtype).fill_(value)

    def offset(self, tensor: torch.Tensor) -> int | None:
        """Byte offset of ``tensor``'s first element in this rank's heap when all its bytes lie in the
        heap (a heap tensor or a view of one), else None."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
        self._check_open()
        if tensor.device != self.device:
            return None
        offset = _address(tensor) - self._allocator.addresses[self.rank]
        span = 0  # bytes from the first element to the end of the last
        if tensor.numel():
            span = (1 + sum((n - 1) * abs(s) for n, s in zip(tensor.shape, tensor.stride()))) * tensor.element_size()
        return offset if 0 <= offset and offset + span <= self.size else None

    def put(self, src: torch.Tensor, dst: torch.Tensor, rank: int) -> None:
        """Copy ``src`` (contiguous, on this heap's device, anywhere) into rank ``rank``'s copy of the heap
        tensor ``dst`` (contiguous, same number of bytes) with the copy engine, on the current stream: no
        SM does the copy, nothing waits for it on the host (``cudaMemcpyAsync`` over the peer mapping; on
        the CPU heap a plain memory copy into the peer's mapping, done at once)."""
        for name, tensor in (("src", src), ("dst", dst)):
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"put: {name} must be a torch.Tensor, got {type(tensor).__name__}")
        if not src.is_contiguous() or not dst.is_contiguous():
            raise ValueError("put: src and dst must be contiguous")
        nbytes = src.numel() * src.element_size()
        if nbytes != dst.numel() * dst.element_size():
            raise ValueError(f"put: src has {nbytes} bytes, dst {dst.numel() * dst.element_size()}")
        if src.device != self.device:
            raise ValueError(f"put: src is on {src.device}, the heap on {self.device}")
        address = self.remote_address(dst, rank)
        if nbytes == 0:
            return
        if self.device.type == "cuda":
            from cuda.bindings import runtime as cudart

            err, = cudart.cudaMemcpyAsync(address, src.data_ptr(), nbytes, cudart.cudaMemcpyKind.cudaMemcpyDefault,
                                          torch.cuda.current_stream(self.device).cuda_stream)
            if int(err) != 0:
                raise RuntimeError(f"put: cudaMemcpyAsync to rank {rank} failed: {err!r}")
        else:
            ctypes.memmove(address, src.data_ptr(), nbytes)

    def remote_address(self, tensor: torch.Tensor, rank: int) -> int:
        """Address of ``tensor``'s first element in ``rank``'s heap as mapped in this process (for copy
        engines: ``cudaMemcpyAsync``); ``tensor`` must be a tensor of this heap."""
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be an int in [0, {self.world_size}), got {rank!r}")
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor must be a torch.Tensor of this heap, got {type(tensor).__name__}")
        offset = self.offset(tensor)
        if offset is None:
            raise ValueError(f"tensor must live in this heap (on {self.device}); it starts "
                             f"{_address(tensor) - self._allocator.addresses[self.rank]} bytes from the heap start "
                             f"and is on {tensor.device}")
        return self._allocator.addresses[int(rank)] + offset

    # ---- synchronisation -----------------------------------------------------------------------------

    def barrier(self) -> None:
        """Host barrier: returns when every rank's earlier work on the heap (kernels included) is done
        and visible to all ranks. Also checks that all ranks allocated the same sequence, and raises
        :class:`DeviceTimeout` if a device-side barrier of any rank gave up since the last check."""
        self._check_open()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        timeouts = int(self.sync[sync.TIMEOUTS].item())
        states = self._exchange("barrier", (self._digest.hexdigest(), timeouts))
        if len({d for d, _ in states}) > 1:
            raise AllocationMismatch("ranks allocated different sequences of tensors (digest differs by rank)")
        lost = [r for r, (_, t) in enumerate(states) if t]
        if lost:
            self.sync[sync.TIMEOUTS] = 0
            raise DeviceTimeout(f"device barrier timed out on rank(s) {lost} (a peer did not arrive within "
                                f"max_spins={self.max_spins} polls)")

    def device_barrier(self) -> None:
        """Device-side barrier on the current stream: kernels launched after it on any rank see
        everything launched before it on every rank. No host synchronisation, no host state: it can be
        captured in a CUDA graph and replayed. A timeout is reported by the next ``barrier()``."""
        self._check_open()
        sync.device_barrier(self.sync, self.bases, self.rank, self.world_size, self.max_spins)

    # ---- teardown ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Collective: wait for all ranks, then unmap the peers and free this rank's heap. Idempotent.
        Heap tensors kept past it stay usable (the CPU heap's mapping and the CUDA heap's memory go with the
        last of them); kernels must not reach peers through ``bases`` any more."""
        if self._allocator is None:
            return
        try:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self._exchange("close", None)
        finally:
            self._release()

    def _check_open(self) -> None:
        if self._allocator is None:
            raise RuntimeError("SymmetricHeap is closed")

    def _release(self) -> None:
        """Unmap the peers, free this rank's heap and the heap's group, whatever was made so far."""
        try:
            if self._allocator is not None:
                self._allocator.close()
        finally:
            self._allocator = None
            if self._group is not None:
                dist.destroy_process_group(self._group)
                self._group = None

    def __enter__(self) -> "SymmetricHeap":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        elif self._allocator is not None:
            # Leaving on an error: peers may never reach close(), so do not wait for them.
            self._release()
