"""Loads, stores, get, put and copy from every rank to every rank, fp16/bf16/fp32; atomics."""

import pytest

from shmem_cases import DTYPES, ORDERINGS, atomics_worker, primitives_worker, run_world


@pytest.mark.parametrize("world_size", [1, 2, 4], ids=lambda w: f"W{w}")
def test_point_to_point_all_pairs(world_size):
    run_world(primitives_worker, world_size, list(DTYPES))


@pytest.mark.parametrize("world_size", [1, 2, 4], ids=lambda w: f"W{w}")
def test_atomics_all_pairs_every_ordering(world_size):
    run_world(atomics_worker, world_size, ORDERINGS)
