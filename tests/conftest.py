import os
import sys

import pytest

from tritium.runtime import install_debug_hooks, select_backend

# Must run before any kernel module is imported (Triton reads TRITON_INTERPRET at decoration time).
BACKEND = select_backend()
install_debug_hooks()


def pytest_collection_modifyitems(config, items):
    if BACKEND == "gpu":
        return
    skip = pytest.mark.skip(reason="needs a GPU (running under the Triton interpreter)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
