"""World size 8 (CPU processes in CI): the basic primitives, atomics and both barriers."""

from shmem_cases import run_world, world8_worker


def test_world_size_8():
    run_world(world8_worker, 8, timeout=300)
