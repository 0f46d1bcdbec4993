"""The examples in examples/shmem run as their docstrings say: `python examples/shmem/<name>.py [world_size]`
prints one CORRECT verdict (on the CPU: the interpreter, one process per rank)."""

import os
import subprocess
import sys

import pytest
import torch

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "shmem")


@pytest.mark.parametrize("name", ["all_gather", "message_passing", "producer_consumer"])
def test_example_runs(name):
    if torch.cuda.is_available():
        pytest.skip("on a GPU machine bench/gpu_shmem.sh runs the examples, one rank per GPU")
    src = os.path.join(EXAMPLES, "..", "..", "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    # world size 3: odd (producer/consumer leaves a rank unpaired) and not a power of two (the device barrier)
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, f"{name}.py"), "3"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{name}: world_size=3 result CORRECT" in done.stdout, done.stdout + done.stderr[-3000:]
