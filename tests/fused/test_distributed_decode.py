"""distributed_paged_decode at world sizes 1-4 (3 included) against single-device attention on the
concatenated cache, every mode: unequal and empty parts, every feature, fp8 caches, GQA groups of 1, 2
and 4 heads, splits of a rank's part, repeated calls with and without a workspace, ranks disagreeing,
inconsistent metadata, bad input. One process per rank (CPU processes under the Triton interpreter in
CI, ~60 s for the file on 2 cores)."""

import pytest
import torch

from .distributed_decode_cases import (bad_input_worker, features_worker, mismatch_worker, missing_rank_worker,
                                      mode_mismatch_worker, repeat_worker, run_world)

F16, F32, BF16, FP8 = torch.float16, torch.float32, torch.bfloat16, torch.float8_e4m3fn
# (q dtype, kv dtype, features (see _check_call), total length of each sequence)
PLAIN = (F16, F16, (), (37, 20, 1))
ALL = (F32, F32, ("window", "softcap", "alibi", "sinks"), (50, 29, 70))
CASES = {
    1: (PLAIN, ALL),
    2: (PLAIN, ALL, (F16, FP8, ("alibi", "splits2", "mqa"), (33, 18)),
        (F32, FP8, ("scale_tensor", "sinks", "mha"), (21, 40))),
    3: (ALL, (F16, F16, ("window", "splits3", "mha"), (64, 17, 2)),
        (F32, F32, ALL[2] + ("splits2", "mqa"), (90, 35, 47))),
    4: (ALL,),
}


@pytest.mark.parametrize("world_size", [1, 2, 3, 4], ids=lambda w: f"ws{w}")
def test_matches_single_device_attention(world_size):
    run_world(features_worker, world_size, CASES[world_size])


@pytest.mark.gpu
def test_bf16_long_parts_default_splits_on_gpus():
    """bf16 (the interpreter's bf16 tl.dot is wrong, so on GPUs only), parts of thousands of keys, the
    launcher's split counts (tens of programs per part on an H100/H200)."""
    every = ("autosplits", "window", "softcap", "alibi", "sinks")
    run_world(features_worker, 2, ((BF16, BF16, ("autosplits",), (20011, 4099, 333)),
                                   (BF16, BF16, every, (5000, 1300, 77)), (F16, FP8, ("autosplits", "alibi"), (9000, 17))))


def test_repeated_calls_modes_and_splits_interleaved():
    run_world(repeat_worker, 3, 6)


def test_bad_input_names_the_argument():
    run_world(bad_input_worker, 2)


def test_ranks_disagreeing_and_inconsistent_metadata():
    run_world(mismatch_worker, 2)


def test_fused_waits_give_up_when_a_rank_does_not_call():
    run_world(missing_rank_worker, 2)


@pytest.mark.parametrize("world_size,feats", [(2, ()), (3, ("window",))], ids=["ws2", "ws3-window"])
def test_ranks_in_different_modes_get_a_mismatch(world_size, feats):
    run_world(mode_mismatch_worker, world_size, feats)
