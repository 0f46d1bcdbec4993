"""Where kernels run: a GPU, or the CPU under the Triton interpreter; feature probes.

The one mechanism for the CPU interpreter: Triton decides between compiling and interpreting when a
kernel is decorated, from the ``TRITON_INTERPRET`` environment variable, so ``import tritium`` calls
:func:`select_backend` once, before any tritium kernel module can be imported. On a machine without a
GPU (and no ``TRITON_INTERPRET`` set) every tritium kernel then runs under the interpreter; set
``TRITON_INTERPRET=0`` to keep it off (compile-only checks), or ``=1`` to interpret on a GPU machine.
Every other module imports at its top. Library code asks :func:`interpreting`; this module imports
nothing of tritium's, nor Triton (whose ``@triton.jit`` reads ``TRITON_INTERPRET`` as it decorates: kernel
helpers shared by packages live in submodules, :mod:`tritium.runtime.fp8`), and holds no mutable state
beyond caches of device properties.
"""

import functools
import os

import torch


def interpreting() -> bool:
    """True when Triton kernels run on the CPU under the interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def pdl_supported(device: torch.device) -> bool:
    """Programmatic dependent launch (``launch_pdl`` + ``gdc_wait``): compiled kernels on NVIDIA Hopper or
    newer. Never on ROCm, whose devices also report as "cuda" (an MI300 says capability 9.4)."""
    if device.type != "cuda" or interpreting() or torch.version.hip is not None:
        return False
    return _capability(device.index if device.index is not None else torch.cuda.current_device())[0] >= 9


@functools.lru_cache(maxsize=None)
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def pdl_launch(device: torch.device, enabled: bool = True) -> dict:
    """Launch keywords of a kernel with a ``USE_PDL`` constexpr: ``USE_PDL=True`` plus ``launch_pdl`` where
    programmatic dependent launch is supported (and ``enabled``), else ``USE_PDL=False``. Such a kernel
    must call ``gdc_wait()`` before it reads anything an earlier kernel wrote, and before it can finish."""
    if enabled and pdl_supported(device):
        return {"USE_PDL": True, "launch_pdl": True}
    return {"USE_PDL": False}


def select_backend() -> str:
    """Use the GPU when there is one, else turn on the Triton interpreter. Returns "gpu" or "interpreter".

    ``import tritium`` calls it (see the module docstring); later calls only report the choice. An
    explicit ``TRITON_INTERPRET`` (0 or 1) is respected.
    """
    if "TRITON_INTERPRET" not in os.environ:
        # NOTE: the choice goes into the environment either way, so that processes started from this one
        # (forkserver ranks of tritium.shmem.launch) inherit it instead of asking CUDA: torch's device
        # count marks a process unsafe to fork from, and ranks forked from such a process cannot use CUDA.
        os.environ["TRITON_INTERPRET"] = "0" if torch.cuda.is_available() else "1"
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


# Software-pipeline stages a launcher passes on ROCm, at most: AMD's stream pipeliner keeps the stages' loads
# in LDS (64 KiB a program on MI300X, 160 KiB on MI350X), and 2 is Triton's own default there. The GEMM
# configurations tuned on the H100 (4-6 stages) need 80-180 KiB of LDS on gfx942/gfx950 (compile check).
ROCM_MAX_STAGES = 2


def pipeline_stages(num_stages: int) -> int:
    """``num_stages`` as a launcher passes it: at most ``ROCM_MAX_STAGES`` with a ROCm build of torch
    (``torch.version.hip``), unchanged elsewhere."""
    if torch.version.hip is not None:
        return min(num_stages, ROCM_MAX_STAGES)
    return num_stages


@functools.lru_cache(maxsize=None)
def max_shared_memory(device: torch.device) -> int | None:
    """Shared memory (LDS on AMD) one program may use on ``device``, bytes: the figure Triton's launcher
    checks a kernel against (232,448 on an H100, 65,536 on an MI300X). None for the interpreter (no limit)."""
    if device.type != "cuda" or interpreting():
        return None
    from triton.runtime import driver  # here, not at the top: this module runs before Triton is configured

    index = device.index if device.index is not None else torch.cuda.current_device()
    return driver.active.utils.get_device_properties(index)["max_shared_mem"]


@functools.lru_cache(maxsize=None)
def device_name(device: torch.device) -> str:
    if device.type != "cuda":
        return "triton-interpreter"
    return torch.cuda.get_device_name(device)

