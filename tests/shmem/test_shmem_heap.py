"""SymmetricHeap host side: allocation checks, exhaustion, bad input, bases, use without launch."""

import ctypes
import datetime
import gc
import glob
import os
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist

import tritium.shmem as shmem
from shmem_cases import run_world
from tritium.shmem import cpu_shm


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


@pytest.mark.parametrize("size", [0, -5, 1.5, True], ids=str)
def test_bad_size_names_the_argument(size):
    with pytest.raises(ValueError, match="size"):
        shmem.SymmetricHeap(size)


@pytest.fixture
def one_rank():
    """torch.distributed initialised in this process as a world of one (as torchrun would), on the CPU."""
    if torch.cuda.is_available():
        pytest.skip("the in-process single-rank checks run on the CPU")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    yield
    dist.destroy_process_group()


def _own_segments():
    return glob.glob(os.path.join(cpu_shm.SHM_DIR, f"tritium-{os.getpid()}-*"))


def test_heap_after_own_init_process_group(one_rank):
    """Processes started by someone else (torchrun): the heap only needs init_process_group."""
    with shmem.SymmetricHeap(1 << 16, backend="cpu-shm") as heap:
        x = heap.full((4,), 3.0)
        heap.device_barrier()
        heap.barrier()
        assert 0 < x.data_ptr() - heap.bases[0].item() < heap.size
        assert x.tolist() == [3.0] * 4


def _every_dtype():
    dtypes = {value for value in vars(torch).values() if isinstance(value, torch.dtype)}
    return sorted(dtypes, key=str)


def test_every_dtype_and_shape(one_rank):
    """Every dtype torch has (bool, complex, float8, the bit-packed and quantized ones), zero-size shapes
    included: the requested shape and dtype, aligned, inside the heap, zero-filled by zeros()."""
    shapes = [(0,), (3, 0, 5), (), (7,), (3, 5)]
    with shmem.SymmetricHeap(1 << 20) as heap:
        for dtype in _every_dtype():
            for shape in shapes:
                x = heap.zeros(shape, dtype)
                what = f"{dtype} {shape}"
                assert (x.shape, x.dtype) == (shape, dtype), what
                assert heap.offset(x) % shmem.heap.ALIGN == 0, what  # (data_ptr() is 0 when there are no elements)
                assert not any(ctypes.string_at(x.data_ptr(), x.numel() * x.element_size())), what
                assert heap.remote_address(x, 0) == heap.bases[0].item() + heap.offset(x), what
        empty = heap.empty((0, 4))
        heap.put(empty, empty, 0)  # nothing to copy, nothing refused
        assert heap.offset(empty) == heap.offset(heap.empty((0,)))  # zero-size tensors take no room
        for dtype, value in [(torch.complex64, 1 - 2j), (torch.bool, True), (torch.float8_e4m3fn, np.float32(1.5)),
                             (torch.int64, np.int64(-3))]:
            assert heap.full((np.int64(2), 3), value, dtype).tolist() == [[value] * 3] * 2, dtype


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


def test_bad_input_names_the_argument(one_rank):
    """Checked before anything is made: no segment is left, and a refused allocation takes no room."""
    for call, error, argument in [(lambda: shmem.SymmetricHeap(4096, timeout=float("nan")), ValueError, "timeout"),
                                  (lambda: shmem.SymmetricHeap(4096, timeout=float("inf")), ValueError, "timeout"),
                                  (lambda: shmem.SymmetricHeap(1 << 60), ValueError, "size"),  # more than /dev/shm
                                  (lambda: shmem.SymmetricHeap(4096, device="gpu0"), ValueError, "device")]:
        with pytest.raises(error, match=argument):
            call()
    assert not _own_segments()
    with shmem.SymmetricHeap(4096) as heap:
        x = heap.zeros((4,))
        start = heap.offset(heap.empty(0))
        for call, error, argument in [(lambda: heap.empty((True, 2)), ValueError, "shape"),
                                      (lambda: heap.put([1.0], x, 0), TypeError, "src"),
                                      (lambda: heap.put(x, "x", 0), TypeError, "dst"),
                                      (lambda: heap.put(x, x, "0"), ValueError, "rank"),
                                      (lambda: heap.remote_address(x, 0.0), ValueError, "rank")]:
            with pytest.raises(error, match=argument):
                call()
        assert heap.offset(heap.empty((np.int64(2), 3))) == start  # numpy ints are ints


def _use_after_close_worker(rank, world_size):
    """Heap tensors kept past close() stay usable; the mappings go with the last of them, not before."""
    with shmem.SymmetricHeap(1 << 16) as heap:
        x = heap.full((4,), float(rank))
        heap.barrier()
    assert x.tolist() == [float(rank)] * 4  # was a read of unmapped memory: SIGSEGV
    x.add_(1)
    prefix = os.environ[cpu_shm.PREFIX_ENV]

    def mapped():
        with open("/proc/self/maps") as f:
            return [line for line in f if prefix in line]

    assert mapped()
    del heap, x
    gc.collect()
    assert not mapped(), f"rank {rank}: heap segments still mapped with no tensor left: {mapped()}"


def test_tensors_stay_usable_after_close():
    run_world(_use_after_close_worker, 2)


def _absent_creator_worker(rank, world_size):
    """Rank 1 never makes the heap: rank 0 gives up making it after the heap's timeout, with PeerTimeout."""
    if rank == 1:
        time.sleep(4)
        return
    start = time.monotonic()
    with pytest.raises(shmem.PeerTimeout, match="rank 0: creating the SymmetricHeap failed"):
        shmem.SymmetricHeap(4096, timeout=1)
    assert time.monotonic() - start < 4


def test_heap_creation_gives_up_at_the_heap_timeout():
    run_world(_absent_creator_worker, 2)
