"""``launch(worker, world_size, *args)``: one process per rank, torch.distributed initialised in each.

Processes come from a forkserver that has already imported torch, triton and tritium.shmem, so a
rank starts in a fraction of a second instead of re-importing torch; like ``spawn`` it needs
``worker`` and ``args`` to be picklable (a module-level function) and scripts to guard their entry
point with ``if __name__ == "__main__":``.

Ranks rendezvous through a TCPStore that the launching process hosts on a port the OS picks. Each
rank reports success or its exception over a pipe. A failure (an exception, or a process that dies
without reporting) stops all ranks and is raised as :class:`RankFailed` naming the rank that caused it:
one rank's crash makes its peers fail too (``PeerTimeout``, gloo's connection errors), so the launch
gives the other ranks a moment to report and names the earliest failure that is not such a
consequence, listing the others. Ranks still running at ``timeout`` are stopped and
:class:`LaunchTimeout` names them. Shared-memory segments of the launch (``cpu-shm`` heaps) are
removed afterwards whatever happened. A rank whose launching process is gone (killed, or ended by a
signal it does not catch: SIGTERM) removes the launch's segments and exits at once: it watches a pipe
only the launching process writes to (ranks come from the forkserver, so their parent process is not
the launching one).
"""

from __future__ import annotations

import datetime
import importlib
import logging
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import secrets
import signal
import sys
import threading
import time
import traceback
from multiprocessing.reduction import ForkingPickler
from typing import Callable, NamedTuple

import torch
import torch.distributed as dist

from tritium import runtime
from tritium.shmem import checks
from tritium.shmem.cpu_shm import PREFIX_ENV, remove_segments

log = logging.getLogger(__name__)

# Set in every rank unless the caller's environment sets them: NVLink multicast (NVLS) can take a
# shared host's GPUs down (../shared/ENVIRONMENT.md).
# "module:function" each rank process calls before its worker (see _run_rank_init)
RANK_INIT_ENV = "TRITIUM_RANK_INIT"
ENV_DEFAULTS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

_PRELOAD = ["torch", "triton", "tritium.shmem"]
_GRACE_S = 5.0  # how long a stopped rank gets to exit before it is killed
# After a first failure, how long the other ranks get to report theirs (a crash's consequences in its peers
# arrive within milliseconds; the cause can arrive after them), so that the cause is the one raised.
_SETTLE_S = 2.0
# Exceptions a rank raises because a PEER was lost or late: never the cause when another rank failed too.
CONSEQUENCES = frozenset({"PeerTimeout", "DeviceTimeout", "DistBackendError", "DistNetworkError", "DistStoreError"})


class RankFailed(RuntimeError):
    """A rank raised (``__cause__`` is its exception when it could be pickled) or died."""

    def __init__(self, rank: int, message: str):
        super().__init__(f"rank {rank} failed: {message}")
        self.rank = rank


class LaunchTimeout(TimeoutError):
    """Ranks that had not finished when the launch's timeout expired."""

    def __init__(self, ranks: list[int], timeout: float):
        super().__init__(f"rank(s) {ranks} did not finish within timeout={timeout} s; all ranks were stopped")
        self.ranks = ranks


def _check_worker(worker) -> None:
    """Rank processes get ``worker`` by reference (module and name): it must be callable, and importable there."""
    if not callable(worker):
        raise TypeError(f"worker must be callable, got {type(worker).__name__}")
    name = getattr(worker, "__qualname__", repr(worker))
    if getattr(worker, "__module__", None) == "__main__" and not getattr(sys.modules["__main__"], "__file__", None):
        raise TypeError(f"worker {name} is defined in an interactive session or `python -c`, where rank processes "
                        "cannot import it: define it in a module or a script file")
    try:
        ForkingPickler.dumps(worker)
    except Exception as e:
        raise TypeError(f"worker must be picklable (a module-level function), got {name}: {e}") from e


def default_backend(world_size: int) -> str:
    """"nccl" when there is one visible GPU per rank and kernels are compiled, else "gloo"."""
    if not runtime.interpreting() and torch.cuda.is_available() and torch.cuda.device_count() >= world_size:
        return "nccl"
    return "gloo"


def launch(worker: Callable, world_size: int, *args, backend: str | None = None, timeout: float = 300.0) -> None:
    """Run ``worker(rank, world_size, *args)`` in ``world_size`` processes and wait for all of them.

    ``backend``: torch.distributed backend, "nccl" (rank r on GPU r) or "gloo"; default
    :func:`default_backend`. With "gloo" on a machine with GPUs (and compiled kernels), rank r uses GPU
    ``r % device_count``: more ranks than GPUs is allowed for correctness runs (ranks that share a GPU
    time-slice it, so their device-side waits are slow and bandwidth figures mean nothing). ``timeout``:
    seconds for the whole launch; it is also each rank's torch.distributed timeout. Raises
    :class:`RankFailed` (naming the rank whose failure made the others fail) or :class:`LaunchTimeout`;
    ``TypeError`` up front for a ``worker`` or ``args`` the rank processes cannot receive.
    """
    _check_worker(worker)
    world_size = checks.integer("world_size", world_size, minimum=1)
    timeout = checks.seconds("timeout", timeout)
    backend = backend or default_backend(world_size)
    if backend not in ("nccl", "gloo"):
        raise ValueError(f"backend must be 'nccl' or 'gloo', got {backend!r}")
    if backend == "nccl" and torch.cuda.device_count() < world_size:
        raise ValueError(f"backend 'nccl' needs one GPU per rank: world_size is {world_size}, "
                         f"{torch.cuda.device_count()} GPU(s) visible")

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=timeout))
    prefix = f"tritium-{os.getpid()}-{secrets.token_hex(4)}"
    procs, conns = [], []
    lifeline, held = ctx.Pipe(duplex=False)  # nothing is sent: a rank's read ends when this process is gone
    try:
        for rank in range(world_size):
            ours, theirs = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_rank_main, name=f"tritium-rank{rank}", daemon=True,
                               args=(worker, rank, world_size, args, backend, store.port, prefix, timeout, theirs,
                                     lifeline))
            try:
                proc.start()
            except (pickle.PicklingError, AttributeError, TypeError) as e:  # the worker pickles: an argument does not
                raise TypeError(f"args must be picklable to reach the rank processes: {e}") from e
            finally:
                theirs.close()
            procs.append(proc)
            conns.append(ours)
        lifeline.close()
        _supervise(procs, conns, timeout)
    finally:
        _stop(procs)
        lifeline.close()
        held.close()
        remove_segments(prefix)
        del store


class _Failure(NamedTuple):
    rank: int
    when: float  # time.time() of the failure: the rank's own for a report, when it was seen for a death
    consequence: bool  # an exception of CONSEQUENCES: a symptom of another rank's failure, when there is one
    headline: str  # "ValueError: boom", or how the process ended
    traceback: str | None
    cause: BaseException | None  # the rank's exception, when it could be unpickled


def _supervise(procs, conns, timeout: float) -> None:
    """Wait for every rank's report. Raise :class:`RankFailed` for the cause of any failure (after giving the
    other ranks ``_SETTLE_S`` to report theirs), or :class:`LaunchTimeout` for ranks still running at ``timeout``."""
    deadline = time.monotonic() + timeout
    pending = set(range(len(procs)))
    failures, finished = [], []
    while pending:
        now = time.monotonic()
        if now >= deadline:
            break
        mpc.wait([conns[r] for r in pending] + [procs[r].sentinel for r in pending], timeout=deadline - now)
        for rank in sorted(pending):
            outcome = _outcome(rank, procs[rank], conns[rank])
            if outcome is None:
                continue
            pending.discard(rank)
            if outcome == "ok":
                finished.append(rank)
            else:
                failures.append(outcome)
                deadline = min(deadline, time.monotonic() + _SETTLE_S)
    if failures:
        first = min(failures, key=lambda f: (f.consequence, f.when))
        lines = [first.headline]
        lines += [f"(rank {f.rank} failed too: {f.headline.splitlines()[0][:200]})"
                  for f in sorted(failures, key=lambda f: f.when) if f is not first]
        if finished:
            lines.append(f"(rank(s) {sorted(finished)} had returned from the worker)")
        if first.traceback:
            lines.append(f"--- traceback of rank {first.rank} ---\n{first.traceback}")
        raise RankFailed(first.rank, "\n".join(lines)) from first.cause
    if pending:
        raise LaunchTimeout(sorted(pending), timeout)


def _outcome(rank: int, proc, conn) -> "str | _Failure | None":
    """None while the rank runs, "ok" once it reported success, else its :class:`_Failure`."""
    # NOTE: liveness first: a rank that reports and exits between a poll and a liveness check would
    # read as dead without a report; one seen dead here has everything it sent in the pipe already
    alive = proc.is_alive()
    report = None
    if conn.poll():
        try:
            report = conn.recv()
        except EOFError:
            pass
    elif alive:
        return None
    if report is not None and report[0] == "ok":
        return "ok"
    if report is not None:
        kind, message, tb, pickled, when = report[1]
        return _Failure(rank, when, kind in CONSEQUENCES, f"{kind}: {message}", tb, _unpickle(pickled))
    proc.join(_GRACE_S)
    return _Failure(rank, time.time(), False, _ended(proc.exitcode), None, None)


def _ended(code) -> str:
    """How a process that did not report ended, from its exit code (negative: the signal that killed it)."""
    if code is not None and code < 0:
        try:
            return f"process was killed by {signal.Signals(-code).name} without reporting"
        except ValueError:
            return f"process was killed by signal {-code} without reporting"
    return f"process exited with code {code} without reporting"


def _unpickle(data):
    try:
        return pickle.loads(data) if data is not None else None
    except Exception:
        return None


def _stop(procs) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(_GRACE_S)
        if proc.is_alive():
            proc.kill()
            proc.join(_GRACE_S)
            if proc.is_alive():  # e.g. stuck in the GPU driver (uninterruptible): do not hang on it
                log.warning("%s (pid %d) did not exit after SIGKILL", proc.name, proc.pid)


def _run_rank_init() -> None:
    """Call the ``module:function`` named by ``TRITIUM_RANK_INIT`` (if set) in this rank process, before the
    worker: how a test harness installs its hooks (e.g. the launch recorder of ``tritium.testing``) in
    processes it does not start itself."""
    spec = os.environ.get(RANK_INIT_ENV)
    if spec:
        module, _, name = spec.partition(":")
        getattr(importlib.import_module(module), name)()


def _watch_launcher(lifeline, prefix: str) -> None:
    """Exit when the launching process is gone: ``lifeline``'s other end, which only it holds, closed. The
    launch's segments go first: a launcher killed while ranks were still exchanging them cannot sweep them."""
    def run():
        try:
            lifeline.recv()
        except (EOFError, OSError):
            pass
        remove_segments(prefix)
        os._exit(1)

    threading.Thread(target=run, name="tritium-launcher-watch", daemon=True).start()


def _rank_main(worker, rank, world_size, args, backend, port, prefix, timeout, conn, lifeline) -> None:
    _watch_launcher(lifeline, prefix)
    for key, value in ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    os.environ.update({PREFIX_ENV: prefix, "RANK": str(rank), "LOCAL_RANK": str(rank),
                       "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    try:
        _run_rank_init()
        if backend == "nccl":
            torch.cuda.set_device(rank)
        else:
            torch.set_num_threads(1)  # ranks share the host's cores
            if not runtime.interpreting() and torch.cuda.is_available():
                torch.cuda.set_device(rank % torch.cuda.device_count())
        span = datetime.timedelta(seconds=timeout)
        store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=span)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=span)
        worker(rank, world_size, *args)
        if dist.is_initialized():  # the worker may have destroyed it itself
            dist.destroy_process_group()
        conn.send(("ok", None))
    except BaseException as e:  # report everything, KeyboardInterrupt included, then leave at once
        when = time.time()
        try:
            pickled = pickle.dumps(e)
        except Exception:
            pickled = None
        conn.send(("error", (type(e).__name__, str(e), traceback.format_exc(), pickled, when)))
        conn.close()
        os._exit(1)
