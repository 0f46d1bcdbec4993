"""An all-gather written with ``put``: every rank writes its chunk into slot ``rank`` of every rank's
output (its own included), then a device barrier makes all chunks visible everywhere. The result is
compared with torch.distributed.all_gather.

    python examples/shmem/all_gather.py [world_size]          # CPU: interpreter, default 2 ranks
"""

from example_main import main, report  # first: it imports tritium, which picks the interpreter when there is no GPU

import torch
import torch.distributed as dist
import triton
import triton.language as tl

import tritium.shmem as shmem

CHUNK = 1000  # elements per rank: not a multiple of BLOCK, so the last block is masked
BLOCK = 256


@triton.jit
def all_gather_kernel(chunk_ptr, out_ptr, rank, world_size, bases, chunk, BLOCK: tl.constexpr):
    """Program (peer, block): ``out[rank * chunk + block]`` on ``peer`` <- ``chunk_ptr[block]``."""
    peer = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    shmem.put(chunk_ptr + offs, out_ptr + rank * chunk + offs, rank, peer, bases, mask=offs < chunk)


def all_gather(heap, chunk: torch.Tensor, out: torch.Tensor) -> None:
    """``out`` [world_size * n] <- every rank's ``chunk`` [n]; both tensors of ``heap``."""
    grid = (heap.world_size, triton.cdiv(chunk.numel(), BLOCK))
    all_gather_kernel[grid](chunk, out, heap.rank, heap.world_size, heap.bases, chunk.numel(), BLOCK=BLOCK)
    heap.device_barrier()  # every rank's puts have landed before anyone reads `out`


def worker(rank, world_size):
    with shmem.SymmetricHeap(1 << 20) as heap:
        chunk = heap.empty((CHUNK,), torch.float32)
        chunk.copy_(torch.randn(CHUNK, generator=torch.Generator().manual_seed(rank)))
        out = heap.full((world_size * CHUNK,), float("nan"))
        heap.barrier()
        all_gather(heap, chunk, out)
        reference = torch.empty_like(out)
        dist.all_gather(list(reference.chunk(world_size)), chunk.clone())  # (all_gather_into_tensor: deprecated)
        right = bool(torch.equal(out, reference))
        heap.barrier()
    report("all_gather", rank, world_size, right)


if __name__ == "__main__":
    main(worker)
