import zlib
from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_per_test(request):
    """Fresh random inputs for every test, reproducible from its id."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


_HERE = Path(__file__).parent
# Triton 3.6's interpreter converts 1-element arrays to scalars the way numpy >= 1.25 deprecates,
# thousands of times a run; the warning is about Triton, not about the code under test.
_INTERPRETER_NOISE = pytest.mark.filterwarnings(
    "ignore:Conversion of an array with ndim > 0 to a scalar:DeprecationWarning")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(_INTERPRETER_NOISE)
