"""SymmetricHeap host side: allocation checks, exhaustion, bad input, bases, use without launch."""

import datetime
import os
import time

import pytest
import torch
import torch.distributed as dist

import tritium.shmem as shmem
from shmem_cases import run_world


def _allocation_errors_worker(rank, world_size):
    with shmem.SymmetricHeap(4096) as heap:
        assert (heap.rank, heap.world_size) == (rank, world_size)
        assert heap.bases.dtype == torch.int64 and heap.bases.shape == (world_size,)
        assert heap.bases.device == heap.device
        x = heap.zeros((8,), torch.float32)
        assert heap.remote_address(x, rank) == x.data_ptr()
        assert heap.remote_address(x, world_size - 1) - x.data_ptr() == \
            heap.bases[world_size - 1].item() - heap.bases[rank].item()
        # A different shape on one rank is caught on every rank, before anything is allocated.
        with pytest.raises(shmem.AllocationMismatch, match=r"rank 0: \(2, \(4,\), 'torch.float32'\)"):
            heap.empty((4 + rank,), torch.float32)
        with pytest.raises(shmem.AllocationMismatch, match="torch.int32"):
            heap.empty((4,), torch.float32 if rank == 0 else torch.int32)
        # Asking for more than is left names the sizes.
        with pytest.raises(shmem.HeapExhausted, match=r"shape \(1024, 1024\) torch.float32 needs 4194304 bytes"):
            heap.empty((1024, 1024), torch.float32)
        y = heap.full((2, 3), 5, torch.int16)  # the heap still works after the errors
        assert y.tolist() == [[5] * 3] * 2 and y.data_ptr() % shmem.heap.ALIGN == 0
        # Bad input names the argument.
        for call, argument in [(lambda: heap.empty(-1), "shape"), (lambda: heap.empty((2, 2.5)), "shape"),
                               (lambda: heap.empty(4, "float32"), "dtype"),
                               (lambda: heap.remote_address(x, world_size), "rank"),
                               (lambda: heap.remote_address(torch.zeros(2, device=heap.device), 0), "tensor")]:
            with pytest.raises(ValueError, match=argument):
                call()
        for call, argument in [(lambda: heap.full((2,), "a"), "value"),
                               (lambda: heap.remote_address("x", 0), "tensor")]:
            with pytest.raises(TypeError, match=argument):
                call()
    with pytest.raises(RuntimeError, match="closed"):
        heap.empty(4)
    for call in (heap.barrier, heap.device_barrier, lambda: heap.remote_address(x, 0)):
        with pytest.raises(RuntimeError, match="closed"):
            call()


def _unchecked_order_worker(rank, world_size):
    """With per-allocation checks off, the next host barrier still catches a different sequence."""
    with pytest.raises(shmem.AllocationMismatch, match="digest"):
        with shmem.SymmetricHeap(4096, check=False) as heap:
            heap.empty((4,), torch.float32)
            heap.empty((rank + 1,), torch.float32)
            heap.barrier()


def _late_peer_worker(rank, world_size):
    """Rank 1 reaches the host barrier late: rank 0 gives up after the heap's timeout (not the launch's, nor
    the default group's), with an error naming itself and the collective; then rank 1 finds rank 0 gone."""
    with pytest.raises(shmem.PeerTimeout, match=f"rank {rank}: heap collective '(barrier|close)'"):
        with shmem.SymmetricHeap(4096, timeout=2) as heap:
            if rank == 1:
                time.sleep(6)
            start = time.monotonic()
            heap.barrier()
    if rank == 0:
        assert time.monotonic() - start < 10, f"barrier gave up after {time.monotonic() - start:.1f} s"


def test_host_barrier_gives_up_at_the_heap_timeout():
    run_world(_late_peer_worker, 2, timeout=60)


def test_allocation_order_exhaustion_and_bad_input():
    run_world(_allocation_errors_worker, 2)


def test_unchecked_allocation_mismatch_caught_at_barrier():
    run_world(_unchecked_order_worker, 2)


def test_heap_needs_torch_distributed():
    with pytest.raises(RuntimeError, match="init_process_group"):
        shmem.SymmetricHeap(4096)


@pytest.mark.parametrize("size", [0, -5, 1.5], ids=str)
def test_bad_size_names_the_argument(size):
    with pytest.raises(ValueError, match="size"):
        shmem.SymmetricHeap(size)


def test_heap_after_own_init_process_group():
    """Processes started by someone else (torchrun): the heap only needs init_process_group."""
    if torch.cuda.is_available():
        pytest.skip("the in-process single-rank check runs on the CPU")
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        with shmem.SymmetricHeap(1 << 16, backend="cpu-shm") as heap:
            x = heap.full((4,), 3.0)
            heap.device_barrier()
            heap.barrier()
            assert 0 < x.data_ptr() - heap.bases[0].item() < heap.size
            assert x.tolist() == [3.0] * 4
    finally:
        dist.destroy_process_group()


def test_cpu_shm_rendezvous_failure_leaves_nothing_behind(monkeypatch):
    """A peer whose segment cannot be mapped: the own mapping is closed and its file unlinked."""
    from tritium.shmem import cpu_shm

    maps, paths = [], []

    def record_map(path, nbytes, create):
        mm = real_map(path, nbytes, create)
        maps.append(mm)
        paths.append(path)
        return mm

    real_map = cpu_shm._map
    monkeypatch.setattr(cpu_shm, "_map", record_map)
    missing = os.path.join(cpu_shm.SHM_DIR, "tritium-test-missing-peer")
    with pytest.raises(FileNotFoundError):
        cpu_shm.CpuShmAllocator(4096, 0, 2, torch.device("cpu"), lambda path: [path, missing])
    assert len(maps) == 1 and maps[0].closed
    assert not os.path.exists(paths[0])
