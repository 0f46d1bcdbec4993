"""World size 8: the basic primitives, atomics and both barriers (CPU processes in CI; on a GPU machine
with fewer than 8 GPUs, ranks share GPUs round-robin)."""

from shmem_cases import run_world, world8_worker


def test_world_size_8():
    run_world(world8_worker, 8, timeout=300, share_gpus=True)
