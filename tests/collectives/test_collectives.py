"""Collectives on the symmetric heap at world sizes 1-4, 6 and 8: one process per rank (CPU
processes under the Triton interpreter in CI, GPUs over NCCL where there are enough)."""

import pytest
import torch

from collective_cases import (FLOATS, INTS, algorithm_mismatch_worker, back_to_back_worker, bad_input_worker,
                              collectives_worker, graph_worker, group_worker, lamport_late_push_worker,
                              lamport_mismatch_worker, missing_rank_worker, mismatch_worker, rms_norm_worker,
                              rms_norm_zero_rows_worker, zero_copy_worker, run_world)

ALL_DTYPES = FLOATS + INTS


@pytest.mark.parametrize("world_size", [1, 2, 3, 4], ids=lambda w: f"ws{w}")
def test_every_collective(world_size):
    # sizes 1, 17, 1000 and a multiple of the interpreter's tile (256); every op on the small sizes
    run_world(collectives_worker, world_size, (1, 17, 1000, 512), ALL_DTYPES, world_size <= 2)


@pytest.mark.parametrize("world_size", [3, 4], ids=lambda w: f"ws{w}")
def test_every_op_at_odd_world_sizes(world_size):
    run_world(collectives_worker, world_size, (17,), (torch.float32, torch.int32, torch.bfloat16), True)


@pytest.mark.parametrize("world_size", [6, 8], ids=lambda w: f"ws{w}")
def test_large_world_sizes(world_size):
    if world_size == 8:
        run_world(collectives_worker, 8, (17, 300), (torch.float32, torch.int64), False)
    else:
        run_world(collectives_worker, 6, (17,), (torch.float32, torch.bfloat16), False)


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda w: f"ws{w}")
def test_fifty_calls_back_to_back(world_size):
    run_world(back_to_back_worker, world_size, 50)


@pytest.mark.parametrize("world_size", [3, 4], ids=lambda w: f"ws{w}")
def test_subgroups(world_size):
    run_world(group_worker, world_size)


@pytest.mark.parametrize("world_size", [1, 2, 3], ids=lambda w: f"ws{w}")
def test_zero_copy_heap_inputs(world_size):
    run_world(zero_copy_worker, world_size)


@pytest.mark.parametrize("world_size", [1, 2, 3], ids=lambda w: f"ws{w}")
def test_all_reduce_rms_norm(world_size):
    run_world(rms_norm_worker, world_size)


@pytest.mark.parametrize("world_size,dtype", [(2, torch.float32), (3, torch.float32), (2, torch.bfloat16)],
                         ids=["ws2-fp32", "ws3-fp32", "ws2-bf16"])
def test_all_reduce_rms_norm_without_rows_on_one_rank_gets_a_mismatch(world_size, dtype):
    run_world(rms_norm_zero_rows_worker, world_size, dtype)


def test_bad_input_names_the_argument():
    run_world(bad_input_worker, 2)


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda w: f"ws{w}")
def test_ranks_calling_differently_raise_on_every_rank(world_size):
    run_world(mismatch_worker, world_size)


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda w: f"ws{w}")
def test_lamport_calls_that_differ_raise_a_mismatch_on_every_rank(world_size):
    run_world(lamport_mismatch_worker, world_size)


def test_lamport_mismatch_waits_for_a_late_peers_pushes():
    run_world(lamport_late_push_worker, 2)


@pytest.mark.parametrize("world_size,picks", [(2, ("one_shot", "two_shot")), (2, ("lamport", "one_shot")),
                                               (3, ("lamport", "one_shot", "two_shot"))],
                         ids=["ws2-one-two", "ws2-lamport-one", "ws3-all"])
def test_ranks_picking_different_algorithms_raise_on_every_rank(world_size, picks):
    run_world(algorithm_mismatch_worker, world_size, picks)


def test_a_rank_that_never_calls_times_out_the_others():
    run_world(missing_rank_worker, 3)


@pytest.mark.gpu
def test_cuda_graph_replays_with_new_data():
    run_world(graph_worker, 2)
