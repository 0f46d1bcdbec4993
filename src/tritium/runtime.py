"""Where kernels run: a GPU, or the CPU under the Triton interpreter.

Triton decides between compiling and interpreting when a kernel is decorated, from the
``TRITON_INTERPRET`` environment variable, so that choice must be made before any tritium
kernel module is imported. Entry points (``tritium.demo``, the CLI, tests' conftest) call
:func:`select_backend` first; library code only asks :func:`interpreting`.
"""

import contextlib
import functools
import os

import torch


def interpreting() -> bool:
    """True when Triton kernels run on the CPU under the interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def pdl_supported(device: torch.device) -> bool:
    """Programmatic dependent launch (``launch_pdl`` + ``gdc_wait``): compiled kernels on NVIDIA Hopper or
    newer. Never on ROCm, whose devices also report as "cuda" (an MI300 says capability 9.4)."""
    if device.type != "cuda" or interpreting() or torch.version.hip is not None or not _PDL_ON[0]:
        return False
    if device.index not in _PDL:
        _PDL[device.index] = torch.cuda.get_device_capability(device)[0] >= 9
    return _PDL[device.index]


_PDL: dict = {}
_PDL_ON = [True]


@contextlib.contextmanager
def pdl_disabled():
    """Kernels launched (or captured into a CUDA graph) inside this block run without programmatic
    dependent launch: what the benchmark's ablations compare against."""
    before = _PDL_ON[0]
    _PDL_ON[0] = False
    try:
        yield
    finally:
        _PDL_ON[0] = before


def pdl_launch(device: torch.device, enabled: bool = True) -> dict:
    """Launch keywords of a kernel with a ``USE_PDL`` constexpr: ``USE_PDL=True`` plus ``launch_pdl`` where
    programmatic dependent launch is supported (and ``enabled``), else ``USE_PDL=False``. Such a kernel
    must call ``gdc_wait()`` before it reads anything an earlier kernel wrote, and before it can finish."""
    if enabled and pdl_supported(device):
        return {"USE_PDL": True, "launch_pdl": True}
    return {"USE_PDL": False}


def select_backend() -> str:
    """Use the GPU when there is one, else turn on the Triton interpreter. Returns "gpu" or "interpreter".

    Call before importing any tritium kernel module; later calls only report the choice. An explicit
    ``TRITON_INTERPRET=0`` is respected (compile-only checks on a machine without a GPU).
    """
    if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    return "interpreter" if interpreting() else "gpu"


def default_device() -> torch.device:
    return torch.device("cpu") if interpreting() else torch.device("cuda")


@functools.lru_cache(maxsize=None)
def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors (CUs on AMD) of ``device``; 132 (an H100) for the interpreter so that
    CPU runs pick the same configurations as the GPU they stand in for."""
    if device.type != "cuda":
        return 132
    return torch.cuda.get_device_properties(device).multi_processor_count


@functools.lru_cache(maxsize=None)
def device_name(device: torch.device) -> str:
    if device.type != "cuda":
        return "triton-interpreter"
    return torch.cuda.get_device_name(device)


def install_debug_hooks() -> None:
    """Env-gated developer hooks for this process (tests and rank processes call this).

    ``TRITIUM_RECORD_LAUNCHES=FILE`` with the interpreter: record each distinct kernel launch so
    that ``python -m tritium.testing.compile_check FILE`` can compile them for a GPU on the CPU.
    """
    path = os.environ.get("TRITIUM_RECORD_LAUNCHES")
    if path and interpreting():
        from tritium.testing.compile_check import record
        record(path)
