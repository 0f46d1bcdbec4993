"""The fused GEMM + communication ops at world sizes 1-4 (3 included): one process per rank (CPU processes
under the Triton interpreter in CI, GPUs over NCCL where there are enough)."""

import pytest
import torch

from .fused_cases import (bad_input_worker, decode_size_mismatch_worker, decode_worker, mismatch_worker,
                          mode_mismatch_worker, ops_worker, out_layout_worker, repeat_worker, run_world,
                          zero_rows_worker)
from tritium import runtime

CPU = runtime.interpreting()


@pytest.mark.parametrize("world_size", [1, 2, 3, 4], ids=lambda w: f"ws{w}")
def test_every_op_and_overlap(world_size):
    dtypes = (torch.float32, torch.float16) if CPU else (torch.bfloat16, torch.float16)
    rows = (1, 17, 63)
    if CPU and world_size > 2:  # CI time: the odd world size and the largest one on fewer cases
        dtypes, rows = (torch.float16,), (1, 17)
    run_world(ops_worker, world_size, dtypes, rows, 48, 80)


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda w: f"ws{w}")
def test_twenty_calls_back_to_back(world_size):
    run_world(repeat_worker, world_size, 20)


# (M, K, N, b K-major, K pieces forced (0: chosen)): 1-64 rows, edge tiles; gated products (GEMV) at M <= 4
DECODE_SHAPES = ((1, 64, 32, False, 0), (3, 48, 80, True, 0), (1, 96, 40, False, 3), (8, 48, 80, False, 0),
                 (17, 64, 48, True, 2), (64, 32, 96, False, 0))


@pytest.mark.parametrize("world_size", [2, 3, 4], ids=lambda w: f"ws{w}")
def test_matmul_all_reduce_decode_kernel(world_size):
    run_world(decode_worker, world_size, DECODE_SHAPES, 2 * len(DECODE_SHAPES) if world_size == 2 else len(DECODE_SHAPES))


def test_bad_input_names_the_argument():
    run_world(bad_input_worker, 2)


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda w: f"ws{w}")
def test_padded_out_and_no_columns(world_size):
    run_world(out_layout_worker, world_size)


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda w: f"ws{w}")
def test_ranks_that_disagree_get_a_mismatch(world_size):
    run_world(mismatch_worker, world_size)


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda w: f"ws{w}")
def test_decode_kernel_calls_of_other_sizes_get_a_mismatch(world_size):
    run_world(decode_size_mismatch_worker, world_size)


@pytest.mark.parametrize("world_size,dtype", [(2, torch.float32), (3, torch.float16)], ids=["ws2-fp32", "ws3-fp16"])
def test_a_rank_without_rows_gets_a_mismatch(world_size, dtype):
    run_world(zero_rows_worker, world_size, dtype)


# (op, each rank's mode in turn, dtype, rows): the modes' protocols differ (the reduce-scatter kernels serve
# producer_consumer and fused alike: no mismatch between those two, they give the right sums)
MODE_CASES = (("all_gather_matmul", ("fused", "bulk"), torch.float32, 4),
              ("all_gather_matmul", ("producer_consumer", "fused"), torch.float32, 4),
              ("matmul_reduce_scatter", ("bulk", "fused"), torch.float32, 4),
              ("matmul_all_reduce", ("producer_consumer", "bulk"), torch.float32, 4),
              ("matmul_all_reduce", ("fused", "bulk"), torch.float16, 2),  # decode kernel vs Lamport all-reduce
              ("matmul_all_reduce", ("fused", "producer_consumer"), torch.float16, 2))


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda w: f"ws{w}")
@pytest.mark.parametrize("op,modes,dtype,m", MODE_CASES,
                         ids=[f"{c[0]}-{'-'.join(c[1])}-{str(c[2])[6:]}" for c in MODE_CASES])
def test_ranks_in_different_overlap_modes_get_a_mismatch(world_size, op, modes, dtype, m):
    run_world(mode_mismatch_worker, world_size, op, modes, dtype, m)
