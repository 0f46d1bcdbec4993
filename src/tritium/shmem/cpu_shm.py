"""``cpu-shm``: every rank's heap is a POSIX shared-memory file in /dev/shm, mapped by all ranks.

Used with the Triton interpreter: raw pointers, int<->pointer casts and 32/64-bit atomics work
across processes on these mappings (each process has its own base addresses, hence ``addresses``).

Names are unique (``<prefix>-r<rank>-<random>``; ``tritium.shmem.launch`` sets the prefix so it can
sweep a crashed launch). A rank unlinks its file as soon as every peer has mapped it, so nothing is
left in /dev/shm even if a process dies later; on an error before that, the file is unlinked too.

A mapping outlives ``close()`` while tensors of the heap are alive (they hold the buffer), so a tensor
kept past ``close()`` stays readable instead of pointing at unmapped memory.
"""

from __future__ import annotations

import glob
import mmap
import os
import secrets

import torch

from tritium.shmem.allocator import Allocator, Exchange

SHM_DIR = "/dev/shm"
PREFIX_ENV = "TRITIUM_SHMEM_PREFIX"  # set by launch() for the processes it starts


def segment_prefix() -> str:
    """Name prefix of this process's segments: launch()'s per-launch prefix, or a fresh one."""
    return os.environ.get(PREFIX_ENV) or f"tritium-{os.getpid()}-{secrets.token_hex(4)}"


def remove_segments(prefix: str) -> None:
    """Unlink every segment whose name starts with ``prefix`` (those of one launch, whatever rank made them)."""
    for path in glob.glob(os.path.join(SHM_DIR, f"{prefix}-*")):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass  # its rank unlinked it meanwhile


def _check_room(nbytes: int) -> None:
    """A file larger than what tmpfs has free maps fine, and the first write past the free space kills the
    process with SIGBUS: refuse such a heap up front instead."""
    stat = os.statvfs(SHM_DIR)
    free = stat.f_bavail * stat.f_frsize
    if nbytes > free:
        raise ValueError(f"size: a heap of {nbytes} bytes does not fit in {SHM_DIR}, which has {free} bytes free "
                         f"(of {stat.f_blocks * stat.f_frsize}); ask for a smaller heap or free/enlarge {SHM_DIR}")


def _map(path: str, nbytes: int, create: bool) -> mmap.mmap:
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(path, flags, 0o600)
    try:
        if create:
            os.ftruncate(fd, nbytes)  # zero-filled
        return mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)


class CpuShmAllocator(Allocator):
    name = "cpu-shm"

    def __init__(self, nbytes: int, rank: int, world_size: int, device: torch.device, exchange: Exchange):
        super().__init__(nbytes, rank, world_size, device, exchange)
        if device.type != "cpu":
            raise ValueError(f"backend 'cpu-shm' needs device cpu, got {device}")
        if not os.path.isdir(SHM_DIR):
            raise RuntimeError(f"backend 'cpu-shm' needs {SHM_DIR} (Linux POSIX shared memory)")
        _check_room(nbytes)
        path = os.path.join(SHM_DIR, f"{segment_prefix()}-r{rank}-{secrets.token_hex(4)}")
        self._maps: list[mmap.mmap] = []
        self._views: list[torch.Tensor] = []
        own = None
        try:
            own = _map(path, nbytes, create=True)
            paths = exchange(path)
            for r, peer_path in enumerate(paths):
                mm = own if r == rank else _map(peer_path, nbytes, create=False)
                self._maps.append(mm)
                # NOTE: through a memoryview, which tensors keep alive: frombuffer(mm) holds no buffer export,
                # so mm.close() would unmap memory that heap tensors still point at (a segfault on use)
                self._views.append(torch.frombuffer(memoryview(mm), dtype=torch.uint8))
            exchange("mapped")  # every peer holds a mapping now: the name is no longer needed
        except BaseException:
            # Unmap what was mapped so far (a peer may be gone, or its file missing).
            if own is not None and not any(mm is own for mm in self._maps):
                own.close()
            self.close()
            raise
        finally:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.local = self._views[rank]
        self.addresses = [v.data_ptr() for v in self._views]

    def close(self) -> None:
        self.local = None
        self._views.clear()
        for mm in self._maps:
            try:
                mm.close()
            except BufferError:
                pass  # tensors of the heap are alive: the mapping goes with the last of them
        self._maps.clear()
