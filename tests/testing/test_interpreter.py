"""``tritium.testing.interpreter``: the interpreter's per-call re-patching skipped inside a launch (installed in every
test process by conftest), with kernels' results unchanged and the language restored after each launch."""

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

from tritium.runtime import interpreting
from tritium.testing import interpreter as hooks

pytestmark = pytest.mark.skipif(not interpreting(), reason="the Triton interpreter's own hooks")


@triton.jit
def _scaled(x, scale):
    return x * scale


@triton.jit
def _row_sum(x):
    return tl.sum(_scaled(x, 2.0), axis=0)  # a nested call into tl.sum (triton.language.standard: tl.core)


@triton.jit
def _nested_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(3):
        acc += _scaled(x, 1.0)
    tl.store(out_ptr + pid, _row_sum(acc))


def _launch(x, programs, block):
    out = torch.full((programs,), float("nan"))
    _nested_kernel[(programs,)](x, out, BLOCK=block)
    return out


def test_nested_calls_patch_once_a_launch_and_results_hold(monkeypatch):
    """A kernel of 16 programs, each calling nested jit functions 5 times and tl.sum / tl.zeros once: the language
    is patched for the launch and once more for tl.core (upstream: at every call, ~100 times), the sums are the
    reference's, and tl's builtins (tl.load) are the originals again after the launch."""
    hooks.install_test_hooks()
    assert interpreter._patch_lang.__name__ == "patch_lang"  # installed (conftest installs it too)
    calls = []
    builtin = interpreter._patch_builtin
    monkeypatch.setattr(interpreter, "_patch_builtin", lambda *a: calls.append(a[0]) or builtin(*a))
    original_load = tl.load
    x = torch.randn(16 * 32)
    out = _launch(x, 16, 32)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, (x.view(16, 32) * 3.0 * 2.0).sum(dim=1), rtol=1e-5, atol=1e-5)
    launches = sum(1 for pkg in calls if pkg is tl)
    assert launches <= 2, f"tl patched {launches} times in one launch of 16 programs"
    assert len(calls) < 16, f"{len(calls)} patches of the language in one launch"
    assert tl.load is original_load  # the launch's patches undone
    # a second launch patches again (and its results are right again)
    calls.clear()
    y = torch.randn(4 * 32)
    torch.testing.assert_close(_launch(y, 4, 32), (y.view(4, 32) * 6.0).sum(dim=1), rtol=1e-5, atol=1e-5)
    assert 1 <= sum(1 for pkg in calls if pkg is tl) <= 2


def test_a_failing_launch_leaves_no_launch_open():
    """A kernel that raises mid-launch: the next launch is still patched as a launch (the state is per launch)."""
    hooks.install_test_hooks()

    @triton.jit
    def failing(x_ptr, BLOCK: tl.constexpr):  # defined here: the compile check lists it, never compiles it
        tl.store(x_ptr + tl.arange(0, BLOCK), _scaled(tl.load(x_ptr + tl.arange(0, BLOCK)), 2.0))

    with pytest.raises(Exception, match="power of 2"):
        failing[(2,)](torch.randn(64), BLOCK=48)  # arange of 48: not a power of 2
    x = torch.randn(2 * 32)
    torch.testing.assert_close(_launch(x, 2, 32), (x.view(2, 32) * 6.0).sum(dim=1), rtol=1e-5, atol=1e-5)
