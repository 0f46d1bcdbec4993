"""Weight prefetch into L2: the kernel compiles to Hopper's bulk prefetch; elsewhere it is a checked no-op."""

import json
import os
import subprocess
import sys

import pytest
import torch

from tritium.ops.prefetch import WeightPrefetcher, prefetch_l2


_COMPILE = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tritium.ops.prefetch import CHUNK, LANES, _prefetch_l2_kernel
out = {}
for evict_last in (False, True):
    src = ASTSource(fn=_prefetch_l2_kernel, signature={"base_ptr": "*u8", "nbytes": "i64", "CHUNK": "constexpr",
                                                        "LANES": "constexpr", "EVICT_LAST": "constexpr"},
                    constexprs={"CHUNK": CHUNK, "LANES": LANES, "EVICT_LAST": evict_last})
    out[str(evict_last)] = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                          options={"num_warps": LANES // 32}).asm["ptx"]
json.dump(out, sys.stdout)
"""


def test_kernel_compiles_to_bulk_prefetch_for_sm90():
    """The interpreter cannot run inline PTX, so the kernel is compiled for sm_90 (in a process with the
    interpreter off) and its PTX read: one bulk prefetch per lane, with an evict-last cache policy when
    asked, and nothing loaded into registers."""
    env = dict(os.environ, TRITON_INTERPRET="0")
    env.pop("TRITIUM_RECORD_LAUNCHES", None)
    run = subprocess.run([sys.executable, "-c", _COMPILE], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    for evict_last, ptx in json.loads(run.stdout).items():
        evict_last = evict_last == "True"
        expected = ("cp.async.bulk.prefetch.L2.global.L2::cache_hint" if evict_last
                    else "cp.async.bulk.prefetch.L2.global [")
        assert ptx.count("cp.async.bulk.prefetch.L2.global") == 1 and expected in ptx
        assert ("createpolicy.fractional.L2::evict_last" in ptx) == evict_last
        assert "ld.global" not in ptx


def test_prefetch_is_a_checked_no_op_without_hopper():
    w = torch.randn(64, 32)
    before = w.clone()
    prefetch_l2(w)
    prefetch_l2(w, 100)
    prefetch_l2(w, 0)
    assert torch.equal(w, before)
    with pytest.raises(ValueError, match="t must be a contiguous tensor"):
        prefetch_l2(w.t())
    with pytest.raises(ValueError, match="t must be a contiguous tensor, got list"):
        prefetch_l2([1, 2])
    with pytest.raises(ValueError, match=r"nbytes must be an int >= 0 or None, got -1"):
        prefetch_l2(w, -1)
    with pytest.raises(ValueError, match=r"nbytes must be an int >= 0 or None, got 1.5"):
        prefetch_l2(w, 1.5)
    pf = WeightPrefetcher(torch.device("cpu"))
    assert not pf.enabled
    pf.issue(w)
    pf.join()
