"""runtime: feature probes."""

import torch

from tritium import runtime


def test_pdl_only_for_compiled_nvidia_kernels(monkeypatch):
    assert runtime.pdl_supported(torch.device("cpu")) is False
    monkeypatch.setattr(runtime, "interpreting", lambda: False)
    monkeypatch.setattr(torch.version, "hip", "6.4")  # ROCm devices are "cuda" too; no PDL there
    assert runtime.pdl_supported(torch.device("cuda", 0)) is False


def test_import_tritium_picks_the_interpreter_before_any_kernel_is_decorated():
    """On a machine without a GPU and no TRITON_INTERPRET in the environment, ``import tritium`` must set it
    before any ``@triton.jit`` of ours runs (it decides as it decorates): every kernel and helper in every
    module of the package is then interpreted. A fresh process, as the serial test run and users start one
    (a helper decorated in ``runtime`` itself, before ``select_backend``, broke the serial run once)."""
    import os
    import subprocess
    import sys
    code = ("import importlib, pkgutil, tritium, triton; from triton.runtime.interpreter import InterpretedFunction\n"
            "names = [m.name for m in pkgutil.walk_packages(tritium.__path__, 'tritium.')\n"
            "         if not m.name.startswith(('tritium.testing', 'tritium.tune', 'tritium.bench', 'tritium.server'))]\n"
            "jitted = [(n, k) for n in names for k, v in vars(importlib.import_module(n)).items()\n"
            "          if isinstance(v, (triton.runtime.JITFunction, InterpretedFunction))\n"
            "          and 'gluon' not in type(v).__module__]  # (Gluon kernels: compiled only, on Hopper)\n"
            "bad = [f'{n}.{k}' for n, k in jitted if not isinstance(getattr(importlib.import_module(n), k),"
            " InterpretedFunction)]\n"
            "print(tritium.runtime.interpreting(), len(jitted), bad)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU: the interpreter
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    interp, count, bad = out.stdout.strip().split(" ", 2)
    assert interp == "True" and int(count) > 50 and bad == "[]", out.stdout
