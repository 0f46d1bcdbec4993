import os
import sys

import pytest

from tritium.runtime import interpreting
from tritium.shmem.launch import RANK_INIT_ENV
from tritium.testing.interpreter import install_test_hooks

# `import tritium` (above) chose the backend: the GPU if there is one, else the Triton interpreter.
# With TRITIUM_RECORD_LAUNCHES set, record every distinct kernel launch; under the interpreter, skip its
# re-patching of the language at every nested jit call; both here and in rank processes.
install_test_hooks()
os.environ.setdefault(RANK_INIT_ENV, "tritium.testing.interpreter:install_test_hooks")


# Tests that start processes sharing this machine's /dev/shm, ports or rank timeouts (multi-rank launches,
# servers) and check that nothing is left behind: `make test` runs them alone, after the others have run
# in parallel (pytest-xdist), so that no other test's segments or CPU load are in their way.
SERIAL = ("tests/shmem/", "tests/collectives/", "tests/server/",
          "tests/fused/test_fused_ops.py", "tests/fused/test_distributed_decode.py",
          "tests/engine/test_tensor_parallel.py", "tests/engine/test_context_parallel.py",
          "tests/bench/test_engine_tp.py", "tests/bench/test_distributed_decode_bench.py",
          "tests/models/test_layers.py")


# The longest files under the interpreter (two-core CI, stop 78: 60-200 s each), longest first. `--dist loadfile`
# hands files to the workers in collection order, so these go first and the short ones fill in around them,
# instead of one long file running alone at the end.
LONGEST = ("tests/engine/test_hf_parity.py", "tests/engine/test_kv_fp8.py", "tests/engine/test_window_pool.py",
           "tests/engine/test_quantization.py", "tests/engine/test_batch_invariant.py",
           "tests/attention/test_paged_attention.py", "tests/engine/test_int4.py", "tests/tune/test_attention_tune.py",
           "tests/engine/test_smollm2_gguf.py", "tests/engine/test_scheduling.py", "tests/models/test_llama.py",
           "tests/engine/test_json_mode.py", "tests/models/test_linear.py", "tests/engine/test_json_schema.py")


def pytest_collection_modifyitems(config, items):
    root = str(config.rootpath)
    paths = {id(item): os.path.relpath(str(item.path), root) for item in items}
    for item in items:
        if paths[id(item)].startswith(SERIAL):
            item.add_marker(pytest.mark.serial)
    # stable: each file's tests stay together and in order
    items.sort(key=lambda item: LONGEST.index(paths[id(item)]) if paths[id(item)] in LONGEST else len(LONGEST))
    if not interpreting():
        return
    skip = pytest.mark.skip(reason="needs a GPU (running under the Triton interpreter)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _linear_cache_dir(tmp_path_factory):
    """Engines started by the tests (and the servers they start) record their projection kernels
    (EngineConfig.linear_cache) in a folder of this session, never in the user's ~/.cache."""
    if "TRITIUM_CACHE_DIR" not in os.environ:
        os.environ["TRITIUM_CACHE_DIR"] = str(tmp_path_factory.mktemp("tritium-cache"))
    yield


def pytest_runtest_logreport(report):
    """TRITIUM_REPORT_AT_ONCE=1 (bench/gpu_multi_tests.sh): a failure's report goes to stderr as the test
    ends, not only in the summary, so a run that its time bound cuts short still says why a test failed."""
    if report.failed and os.environ.get("TRITIUM_REPORT_AT_ONCE") == "1":
        print(f"\n=== {report.nodeid} ({report.when}) failed ===\n{report.longreprtext}\n", file=sys.__stderr__,
              flush=True)
