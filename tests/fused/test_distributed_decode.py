"""distributed_paged_decode at world sizes 1-4 (3 included) against single-device attention on the
concatenated cache, both modes: unequal parts and empty parts, every feature, fp8 caches, repeated
calls with and without a workspace, bad input. One process per rank (CPU processes under the Triton interpreter in CI)."""

import pytest
import torch

from .distributed_decode_cases import bad_input_worker, features_worker, mismatch_worker, repeat_worker, run_world

F16, F32, FP8 = torch.float16, torch.float32, torch.float8_e4m3fn
# (q dtype, kv dtype, features, total length of each sequence)
PLAIN = (F16, F16, (), (37, 20, 1))
ALL = (F32, F32, ("window", "softcap", "alibi", "sinks"), (50, 29, 70))
CASES = {
    1: (PLAIN, ALL),
    2: (PLAIN, ALL, (F16, FP8, ("alibi",), (33, 18)), (F32, FP8, ("scale_tensor", "sinks"), (21, 40))),
    3: (PLAIN, ALL, (F16, F16, ("window",), (64, 17, 2))),
    4: (ALL,),
}


@pytest.mark.parametrize("world_size", [1, 2, 3, 4], ids=lambda w: f"ws{w}")
def test_matches_single_device_attention(world_size):
    run_world(features_worker, world_size, CASES[world_size])


def test_repeated_calls_with_one_workspace():
    run_world(repeat_worker, 3, 8)


def test_bad_input_names_the_argument():
    run_world(bad_input_worker, 2)


def test_ranks_disagreeing_and_inconsistent_metadata():
    run_world(mismatch_worker, 2)
