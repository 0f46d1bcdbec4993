"""signal/wait message passing, bounded waits, host and device barriers (CUDA graphs on the GPU)."""

import pytest
import torch

from shmem_cases import barrier_timeout_worker, barrier_worker, message_worker, run_world
from tritium.shmem import sync


@pytest.mark.parametrize("world_size", [1, 2, 4], ids=lambda w: f"W{w}")
def test_signal_wait_messages(world_size):
    run_world(message_worker, world_size)


@pytest.mark.parametrize("world_size", [1, 2, 4], ids=lambda w: f"W{w}")
def test_device_and_host_barriers(world_size):
    run_world(barrier_worker, world_size)


def test_device_barrier_times_out_instead_of_hanging():
    run_world(barrier_timeout_worker, 2)


def _graph_worker(rank, world_size, replays):
    import tritium.shmem as shmem
    from shmem_cases import _stamp_kernel

    with shmem.SymmetricHeap(1 << 20) as heap:
        slots = heap.zeros((world_size,), torch.int64)
        bumps = heap.zeros((1,), torch.int64)
        heap.barrier()
        epoch0 = heap.sync[sync.EPOCH].item()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):  # warm up (compile) outside the capture
            _stamp_kernel[(world_size,)](slots, 0, rank, heap.bases)
            heap.device_barrier()
        stream.synchronize()
        heap.barrier()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            heap.device_barrier()
            bumps.add_(1)
            heap.device_barrier()
        heap.barrier()
        for _ in range(replays):
            graph.replay()
        heap.barrier()
        state = heap.sync.tolist()
        want = epoch0 + 1 + 2 * replays
        assert state[sync.EPOCH] == want and state[sync.ARRIVALS:] == [want] * world_size, \
            f"rank {rank}: barrier state after {replays} graph replays: {state}"
        assert bumps.item() == replays


@pytest.mark.gpu
def test_device_barrier_in_cuda_graph():
    run_world(_graph_worker, 2, 5)
