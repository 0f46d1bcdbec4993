"""What the shmem examples share: pick the backend, launch the ranks, print one verdict."""

import sys

import torch
import torch.distributed as dist

import tritium.shmem as shmem  # importing tritium picks the backend: without a GPU, the Triton interpreter


def report(name: str, rank: int, world_size: int, right: bool) -> None:
    """Collective: rank 0 prints whether every rank's result is right; every rank fails if one is wrong."""
    verdicts = [None] * world_size
    dist.all_gather_object(verdicts, bool(right))
    if rank == 0:
        print(f"{name}: world_size={world_size} result {'CORRECT' if all(verdicts) else 'WRONG'} "
              f"(per rank: {verdicts})")
    if not all(verdicts):
        raise SystemExit(1)


def main(worker) -> None:
    """``python example.py [world_size]``: all visible GPUs by default, 2 CPU ranks without a GPU."""
    default = torch.cuda.device_count() if torch.cuda.is_available() else 2
    shmem.launch(worker, int(sys.argv[1]) if len(sys.argv) > 1 else default)
