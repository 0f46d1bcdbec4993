"""Message passing with flags: every rank sends a message to the next rank in a ring.

The sender writes the payload into the receiver's heap with ``put``, then raises the receiver's
flag with ``signal`` (release, sys: the payload is visible before the flag). The receiver spins on
its own flag with ``wait`` (acquire, sys; bounded) and then reads the payload from its own heap.

    python examples/shmem/message_passing.py [world_size]     # CPU: interpreter, default 2 ranks
"""

from example_main import main, report  # first: it imports tritium, which picks the interpreter when there is no GPU

import torch
import triton
import triton.language as tl

import tritium.shmem as shmem

BLOCK = 64


@triton.jit
def send_kernel(message, inbox, flag, rank, to_rank, bases, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    shmem.put(message + offs, inbox + offs, rank, to_rank, bases, hint=BLOCK)  # payload first...
    shmem.signal(flag, 1, rank, to_rank, bases)  # ...then the flag (release, sys)


@triton.jit
def receive_kernel(inbox, flag, received, ok, rank, bases, max_spins, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    arrived = shmem.wait(flag, 1, rank, rank, bases, max_spins)  # acquire, sys; 0 on timeout
    tl.store(ok, arrived)
    tl.store(received + offs, tl.load(inbox + offs))


def worker(rank, world_size):
    with shmem.SymmetricHeap(1 << 20) as heap:
        message = heap.empty((BLOCK,), torch.float32)
        message.copy_(torch.arange(BLOCK, dtype=torch.float32) + 1000 * rank)
        inbox = heap.zeros((BLOCK,), torch.float32)
        flag = heap.zeros((1,), torch.int32)
        received = heap.zeros((BLOCK,), torch.float32)
        ok = heap.zeros((1,), torch.int32)
        heap.barrier()  # every rank's buffers are initialised before anyone writes into them
        send_kernel[(1,)](message, inbox, flag, rank, (rank + 1) % world_size, heap.bases, BLOCK=BLOCK)
        receive_kernel[(1,)](inbox, flag, received, ok, rank, heap.bases, heap.max_spins, BLOCK=BLOCK)
        sender = (rank - 1) % world_size
        want = torch.arange(BLOCK, dtype=torch.float32, device=heap.device) + 1000 * sender
        right = bool(ok.item() == 1 and torch.equal(received, want))
        heap.barrier()
    report("message_passing", rank, world_size, right)


if __name__ == "__main__":
    main(worker)
