"""A producer/consumer pair across ranks through a ring buffer in the consumer's heap.

Ranks pair up (0 -> 1, 2 -> 3, ...). The producer writes chunk i into slot i % SLOTS of the
consumer's ring with ``put`` and bumps the consumer's ``produced`` counter with ``signal(op="add")``
(release). The consumer waits for ``produced >= i + 1`` (acquire), sums the chunk, and bumps the
producer's ``consumed`` counter so the producer can reuse the slot (it waits for
``consumed >= i + 1 - SLOTS`` before overwriting). Both loops run in one program each; every wait is
bounded and a timeout is reported in ``ok``.

    python examples/shmem/producer_consumer.py [world_size]   # CPU: interpreter, default 2 ranks
"""

from example_main import main, report  # first: it imports tritium, which picks the interpreter when there is no GPU

import torch
import triton
import triton.language as tl

import tritium.shmem as shmem

BLOCK = 32  # elements per chunk
SLOTS = 2
CHUNKS = 6


@triton.jit
def producer_kernel(staging, ring, produced, consumed, ok, rank, consumer, bases, chunks, max_spins,
                    BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    good = 1
    for i in range(chunks):
        # the slot is free once the consumer has taken chunk i - SLOTS
        good = good & shmem.wait(consumed, i + 1 - SLOTS, rank, rank, bases, max_spins)
        tl.store(staging + offs, i * BLOCK + offs)  # "produce" chunk i locally
        tl.debug_barrier()
        slot = ring + (i % SLOTS) * BLOCK
        shmem.put(staging + offs, slot + offs, rank, consumer, bases, hint=BLOCK)
        shmem.signal(produced, 1, rank, consumer, bases, op="add")
    tl.store(ok, good)


@triton.jit
def consumer_kernel(ring, produced, consumed, total, ok, rank, producer, bases, chunks, max_spins,
                    BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    good = 1
    acc = tl.zeros((BLOCK,), tl.int64)
    for i in range(chunks):
        good = good & shmem.wait(produced, i + 1, rank, rank, bases, max_spins)
        acc += tl.load(ring + (i % SLOTS) * BLOCK + offs)
        shmem.signal(consumed, 1, rank, producer, bases, op="add")  # the slot may be overwritten now
    tl.store(total, tl.sum(acc))
    tl.store(ok, good)


def worker(rank, world_size):
    with shmem.SymmetricHeap(1 << 20) as heap:
        staging = heap.zeros((BLOCK,), torch.int32)
        ring = heap.zeros((SLOTS, BLOCK), torch.int32)
        produced = heap.zeros((1,), torch.int32)
        consumed = heap.zeros((1,), torch.int32)
        total = heap.zeros((1,), torch.int64)
        ok = heap.zeros((1,), torch.int32)
        heap.barrier()
        right = True
        if rank % 2 == 0 and rank + 1 < world_size:
            producer_kernel[(1,)](staging, ring, produced, consumed, ok, rank, rank + 1, heap.bases, CHUNKS,
                                  heap.max_spins, BLOCK=BLOCK, SLOTS=SLOTS)
            right = ok.item() == 1
        elif rank % 2 == 1:
            consumer_kernel[(1,)](ring, produced, consumed, total, ok, rank, rank - 1, heap.bases, CHUNKS,
                                  heap.max_spins, BLOCK=BLOCK, SLOTS=SLOTS)
            n = CHUNKS * BLOCK
            right = ok.item() == 1 and total.item() == n * (n - 1) // 2
        heap.barrier()
    report("producer_consumer", rank, world_size, right)


if __name__ == "__main__":
    main(worker)
