import os

import pytest

from tritium.runtime import interpreting
from tritium.shmem.launch import RANK_INIT_ENV
from tritium.testing.compile_check import record_from_env

# `import tritium` (above) chose the backend: the GPU if there is one, else the Triton interpreter.
# With TRITIUM_RECORD_LAUNCHES set, record every distinct kernel launch, here and in rank processes.
record_from_env()
os.environ.setdefault(RANK_INIT_ENV, "tritium.testing.compile_check:record_from_env")


def pytest_collection_modifyitems(config, items):
    if not interpreting():
        return
    skip = pytest.mark.skip(reason="needs a GPU (running under the Triton interpreter)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
