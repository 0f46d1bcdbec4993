"""Tensor parallelism of the engine: one model over the GPUs of a host, or over the ranks of a torchrun job.

Rank 0 is the caller's process: it schedules, samples and runs its shard of the model. On one host,
``tensor_parallel_size=N`` starts ranks 1..N-1 itself as worker processes (``python -m
tritium.engine.worker``: no torchrun, and no ``if __name__ == "__main__"`` guard needed in the caller's
script). Under torchrun every process builds the engine; ranks other than 0 *follow* rank 0 inside each
``generate`` (SPMD scripts: every rank runs the same code, gets the same outputs).

Every rank holds its shard of each weight (:mod:`tritium.models.layers`), a KV cache of the same geometry
(the page count is the minimum over ranks) and the same CUDA graphs. Rank 0 sends each step's plan
(:class:`~tritium.engine.runner.StepPlan` / ``WindowPlan``: token ids, positions, slots, block tables; one
message per step or greedy window, never per layer) over a gloo group, and every rank runs it. The model's
collectives are tritium's (symmetric heap; the all-reduce fused with the next residual add and RMSNorm)
or torch.distributed's (NCCL; gloo on the CPU): ``comm``, see :func:`select_comm`.

Failures are bounded: a worker that exits is seen at the next step or while rank 0 waits for the device
(its exit code and its error); a step that does not finish within ``parallel_timeout`` seconds, or
collectives that gave up waiting for a peer, raise :class:`ParallelError` on rank 0. Every rank reads its
collectives' error counters (tritium's: ``Communicator.error_counts``), rank 0 after each step, the others
before each plan they run: a rank whose own waits gave up or met another call, or whose peers' waits gave up
on it (it skipped a collective they made, or came too late), raises :class:`ParallelError` naming itself and
what happened (a worker then exits with it, and rank 0 names the worker and its error). Closing stops the
workers (a plan to exit, then signals) and removes their shared memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import os
import pickle
import secrets
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import torch
import torch.distributed as dist

from tritium.collectives import Communicator
from tritium.fused import DistributedDecodeWorkspace
from tritium.fused.distributed_decode import MAX_SPLITS
from tritium.fused.matmul_all_reduce import GEMV_MAX_M, decode_eligible, matmul_all_reduce_rms_norm
from tritium.models.config import ModelConfig
from tritium.models.layers import SINGLE, ParallelGroup
from tritium.runtime import interpreting
from tritium.shmem import SymmetricHeap
from tritium.shmem.cpu_shm import PREFIX_ENV, remove_segments
from tritium.shmem.launch import ENV_DEFAULTS

log = logging.getLogger(__name__)

COMMS = ("auto", "tritium", "torch")
_ERROR_KEY = "tritium/tp-error/{}"
READY_KEY = "tritium/tp-ready/{}"  # a worker is up (imports, its GPU) and about to join the process group
# how long rank 0 waits for its workers to start, at least: a worker imports torch and creates its CUDA context
# before it can join (over 5 s on 2x H200 once), whatever ``parallel_timeout`` bounds a step to
START_TIMEOUT_S = 120.0
_HEADER = 8                   # bytes of a message's length, at the start of its first chunk
_CHUNK = 1 << 14              # a plan goes in one broadcast of this many bytes when it fits
_EXIT_GRACE_S = 2.0           # after a collective failed, how long a worker that is exiting has to show it (diagnose)
_IDLE = datetime.timedelta(days=3650)  # workers wait for the next plan as long as rank 0 lives
_SPIN_S = 0.05                # rank 0 polls the device without sleeping this long, then sleeps between polls
_GRACE_S = 10.0               # how long a worker gets to exit after the plan to exit
_GAVE_UP_ON = Communicator.ERROR_COUNTS.index("gave_up_on")  # in Communicator.error_counts


class ParallelError(RuntimeError):
    """A tensor-parallel rank failed: it exited or raised, a step did not finish in time, or collectives gave
    up waiting for a peer. The engine is closed after it."""


@dataclasses.dataclass
class Shutdown:
    """Plan: leave the follow loop and close (the engine closes)."""


@dataclasses.dataclass
class Result:
    """Plan: the driver's call is over; followers return ``payload`` (SPMD: every rank gets the outputs)."""

    payload: Any
    error: BaseException | None = None


def select_comm(requested: str, *, device_type: str, num_hosts: int) -> str:
    """"tritium" or "torch" for ``comm=requested``.

    ``"auto"``: tritium's collectives on GPUs of one host (inside the decode CUDA graphs: one-shot and
    Lamport all-reduces of a few microseconds where NCCL takes 24-30; bench/NOTES.md, Collectives), else
    torch.distributed (several hosts; the CPU, where tritium's kernels would run under the interpreter).
    ``"tritium"`` across hosts is an error: the symmetric heap maps the peers' GPU memory, one host only.
    """
    if requested not in COMMS:
        raise ValueError(f"comm must be one of {', '.join(repr(c) for c in COMMS)}, got {requested!r}")
    if requested == "tritium":
        if num_hosts > 1:
            raise ValueError(f"comm='tritium' needs every tensor-parallel rank on one host (the symmetric heap maps "
                             f"the peers' GPU memory), but the group spans {num_hosts} hosts: use comm='torch' "
                             f"or 'auto'")
        if device_type != "cuda" and not interpreting():
            raise ValueError("comm='tritium' on the CPU runs its kernels under the Triton interpreter: set "
                             "TRITON_INTERPRET=1 before importing tritium, or use comm='torch'")
        return "tritium"
    if requested == "torch":
        return "torch"
    return "tritium" if device_type == "cuda" and num_hosts == 1 else "torch"


def check_parallel(n, model_config: ModelConfig, device: torch.device, comm: str) -> None:
    """One-line errors for a tensor-parallel size the model or the machine cannot take (before any process
    starts)."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"tensor_parallel_size must be an int, got {n!r} ({type(n).__name__})")
    if n < 1:
        raise ValueError(f"tensor_parallel_size must be >= 1, got {n}")
    if comm not in COMMS:
        raise ValueError(f"comm must be one of {', '.join(repr(c) for c in COMMS)}, got {comm!r}")
    mc = model_config
    for name, size in (("num_attention_heads", mc.num_attention_heads), ("intermediate_size", mc.intermediate_size)):
        if size % n:
            raise ValueError(f"tensor_parallel_size {n} must divide the model's {name} ({size})")
    kv = mc.num_key_value_heads
    if kv % n and n % kv:
        raise ValueError(f"tensor_parallel_size {n} must divide the model's num_key_value_heads ({kv}) or be a "
                         f"multiple of it (then each KV head is replicated)")
    _check_gpus("tensor_parallel_size", n, device)


def check_context_parallel(n, device: torch.device) -> None:
    """One-line errors for a context-parallel size the machine cannot take (before any process starts)."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"context_parallel_size must be an int, got {n!r} ({type(n).__name__})")
    if n < 1:
        raise ValueError(f"context_parallel_size must be >= 1, got {n}")
    _check_gpus("context_parallel_size", n, device)


def _check_gpus(name: str, n: int, device: torch.device) -> None:
    """Rank 0 starts ranks on cuda:first .. cuda:first + n - 1: they must exist (torchrun places its own)."""
    if device.type == "cuda" and not _launched_by_torchrun():
        first = device.index if device.index is not None else torch.cuda.current_device()
        count = torch.cuda.device_count()
        if first + n > count:
            raise ValueError(f"{name} {n} needs {n} GPUs from cuda:{first}, but {count} GPU(s) are visible")


def role(context_parallel: bool) -> str:
    """What a rank of the engine is called in messages."""
    return "context-parallel" if context_parallel else "tensor-parallel"


def context_rows(cfg) -> int:
    """Rows of the distributed-decode workspace of a context-parallel engine with Triton attention: its
    decode steps' sequences, or 64 (a batch of one then splits its part 64 ways at most; steps with prefill
    run per part, without the workspace)."""
    return max(cfg.max_num_seqs, MAX_SPLITS)


def _launched_by_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or (int(os.environ.get("WORLD_SIZE", "1")) > 1
                                                   and "RANK" in os.environ)


def comm_max_bytes(model_config: ModelConfig, max_num_batched_tokens: int, max_num_seqs: int,
                   dtype: torch.dtype, world_size: int) -> int:
    """Largest message of one step: a row-parallel output of the largest batch, or the LM head's logits of
    every sampling sequence (all-gathered)."""
    tokens = max(max_num_batched_tokens, max_num_seqs)
    per_rank_vocab = -(-model_config.vocab_size // world_size)
    return max(tokens * model_config.hidden_size, max_num_seqs * per_rank_vocab) * dtype.itemsize


# torch 2.13 renames all_gather_into_tensor (2.11 on the GPU machines has only the old name)
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _torch_group(rank: int, world_size: int) -> ParallelGroup:
    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x)
        return x

    def all_gather(x: torch.Tensor) -> torch.Tensor:
        out = x.new_empty((world_size * x.shape[0], *x.shape[1:]))
        _all_gather_single(out, x.contiguous())
        return out

    return ParallelGroup(rank, world_size, all_reduce=all_reduce, all_gather=all_gather)


# From this many ranks, all-reduces of at least TORCH_ALL_REDUCE_BYTES go to torch.distributed (NCCL) when the
# engine runs tritium's collectives. Measured in graphs (bench/results/collectives-NVIDIA-H200-x{2,4}.json, us,
# tritium auto / NCCL): 4x H200 1 MiB 19.6 / 24.9, 4 MiB 42.9 / 45.3, 16 MiB 136 / 100, 64 MiB 488 / 328;
# 2x H200 16 MiB 68.7 / 77.9 (NCCL ahead only at 256 MiB: 970 / 892), so two ranks keep tritium's.
TORCH_ALL_REDUCE_RANKS = 4
TORCH_ALL_REDUCE_BYTES = 8 << 20


def torch_all_reduce_from(world_size: int, override: int | None = None) -> int | None:
    """Bytes from which an engine with tritium's collectives all-reduces through torch.distributed instead
    (outside CUDA graphs), or None for never: ``override`` (``EngineConfig.torch_all_reduce_from``) when
    given, else the measured rule above."""
    if override is not None:
        return override
    return TORCH_ALL_REDUCE_BYTES if world_size >= TORCH_ALL_REDUCE_RANKS else None


def _tritium_group(comm: Communicator, fuse_row_parallel: bool, torch_from: int | None,
                   calls: dict[str, int]) -> ParallelGroup:
    """The model's group on tritium's collectives. ``torch_from``: all-reduces of at least this many bytes
    outside CUDA graph capture go to torch.distributed's default group (NCCL on GPUs; the fused all-reduce +
    RMSNorm then returns None and the model reduces and norms apart). ``calls`` counts, by "tritium" and
    "torch", the all-reduces issued from Python (a graph's replays are not counted)."""
    def to_torch(x: torch.Tensor) -> bool:
        big = torch_from is not None and x.numel() * x.element_size() >= torch_from
        return big and not (x.is_cuda and torch.cuda.is_current_stream_capturing())

    def count(kind: str) -> None:
        calls[kind] = calls.get(kind, 0) + 1

    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        if to_torch(x):
            count("torch")
            dist.all_reduce(x)
            return x
        count("tritium")
        return comm.all_reduce(x, out=x)

    def all_reduce_rms_norm(x, residual, weight, eps):
        if to_torch(x):
            return None
        count("tritium")
        return comm.all_reduce_rms_norm(x, residual, weight, eps)

    def linear_all_reduce_rms_norm(x, weight, residual, norm_weight, eps, gated=False):
        # decode rows only (GEMV rows): above them the GEMM is compute work that the tuned linear does better
        if x.shape[0] > GEMV_MAX_M or not decode_eligible(x, weight.shape[0], comm):
            return None
        count("tritium")
        return matmul_all_reduce_rms_norm(x, weight.t(), comm, residual, norm_weight, eps, gated=gated)

    return ParallelGroup(comm.rank, comm.world_size, all_reduce=all_reduce, all_gather=comm.all_gather,
                         all_reduce_rms_norm=all_reduce_rms_norm,
                         linear_all_reduce_rms_norm=linear_all_reduce_rms_norm if fuse_row_parallel else None)


class TensorParallel:
    """This process's rank of a tensor-parallel engine (torch.distributed initialised over exactly its
    ranks): the model's :class:`ParallelGroup`, the plan channel, and the failure checks.

    ``pool``: rank 0's :class:`WorkerPool` when it started the other ranks itself (None under torchrun).
    """

    def __init__(self, *, comm: str, device: torch.device, max_bytes: int, timeout: float,
                 pool: "WorkerPool | None" = None, context_parallel: bool = False, decode_heap_bytes: int = 0,
                 fuse_row_parallel: bool = False, torch_all_reduce: int | None = None):
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.device, self.timeout, self.pool = device, timeout, pool
        self.heap: SymmetricHeap | None = None
        self.comm: Communicator | None = None
        self.torch_all_reduce_from: int | None = None
        self.all_reduce_calls: dict[str, int] = {}  # the model's all-reduces issued from Python, by "tritium" / "torch"
        self._ctrl = dist.new_group(backend="gloo", timeout=_IDLE)
        hosts: list = [None] * self.world_size
        dist.all_gather_object(hosts, socket.gethostname(), group=self._ctrl)
        self.num_hosts = len(set(hosts))
        # context parallel: the whole model on every rank; with Triton attention a communicator for
        # distributed decode (decode_heap_bytes: its workspace's share of the heap; comm="torch" picks its
        # torch.distributed mode), else torch.distributed's all-gather (cp_all_gather)
        self.context_parallel = context_parallel
        self.role = role(context_parallel)  # in error messages
        self.decode_mode = "torch" if comm == "torch" else "fused"
        if context_parallel:
            comm = "tritium" if decode_heap_bytes > 0 else "torch"
        self.comm_kind = select_comm(comm, device_type=device.type, num_hosts=self.num_hosts)
        self.cp_all_gather = _torch_group(self.rank, self.world_size).all_gather
        if self.comm_kind == "tritium":
            self.heap = SymmetricHeap(Communicator.heap_bytes(max_bytes, self.world_size) + decode_heap_bytes
                                      + (1 << 20), device=device, timeout=timeout)
            self.comm = Communicator(self.heap, max_bytes)
            # large all-reduces through torch.distributed where it is the faster (torch_all_reduce_from)
            self.torch_all_reduce_from = torch_all_reduce_from(self.world_size, torch_all_reduce)
            self.group = SINGLE if self.context_parallel else _tritium_group(
                self.comm, fuse_row_parallel, self.torch_all_reduce_from, self.all_reduce_calls)
        else:
            self.group = SINGLE if context_parallel else _torch_group(self.rank, self.world_size)
        self._buf = torch.zeros(_CHUNK, dtype=torch.uint8)
        self._buf_np = self._buf.numpy()
        cuda = device.type == "cuda"
        # collective error counters copied behind each window (by flip) and each single step (row 2; a
        # follower's: behind the last plan it ran, not yet read while _pending)
        self._status = torch.zeros(3, len(Communicator.ERROR_COUNTS), dtype=torch.int64)
        if cuda:
            self._status = self._status.pin_memory()
        self._event = torch.cuda.Event() if cuda else None
        self._pending = False
        self.closed = False
        self.shut_down = False   # a follower has received Shutdown
        # the default group was made by this engine (rank 0 with its workers), not by torchrun's script
        self.owns_dist = pool is not None

    # -- agreement at start-up -----------------------------------------------------------------------------
    def agree_min(self, value: int) -> int:
        """The minimum of ``value`` over ranks (every rank calls it)."""
        t = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self._ctrl)
        return int(t.item())

    def share(self, value=None):
        """Rank 0's ``value`` (any picklable object) on every rank; every rank calls it, the others with
        nothing. A start-up step, as :meth:`agree_min`: it waits for every rank to get there."""
        box = [value if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0, group=self._ctrl)
        return box[0]

    # -- plans ---------------------------------------------------------------------------------------------
    def send(self, plan) -> None:
        """Rank 0: send a plan to every other rank (one broadcast when it fits ``_CHUNK`` bytes)."""
        data = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
        n = len(data)
        first = min(n, _CHUNK - _HEADER)
        self._buf_np[:_HEADER] = memoryview(n.to_bytes(_HEADER, "little"))
        self._buf_np[_HEADER:_HEADER + first] = memoryview(data)[:first]
        self._broadcast(self._buf)
        if n > first:
            self._broadcast(torch.frombuffer(bytearray(data[first:]), dtype=torch.uint8))

    def _broadcast(self, t: torch.Tensor) -> None:
        """Rank 0's send, bounded: a worker that stopped reading (hung) fills the socket buffers, and the
        group's own timeout is for the workers, who wait for plans as long as rank 0 lives."""
        work = dist.broadcast(t, 0, group=self._ctrl, async_op=True)
        try:
            work.wait(timeout=datetime.timedelta(seconds=self.timeout))
        except RuntimeError as e:
            # a killed worker's socket closes before its exit can be reaped (seen on 2x H200): the cause first
            lost = self._exited_worker(_EXIT_GRACE_S)
            if lost is not None:
                raise lost from e
            first = str(e).splitlines()[0]
            if "timed out" in first.lower() or "timeout" in first.lower():
                raise ParallelError(f"rank 0 could not send a step's plan within {self.timeout:g} s (parallel_timeout):"
                                    f" a {self.role} rank stopped reading ({first})") from e
            raise ParallelError(f"rank 0 could not send a step's plan: the connection to a {self.role} rank "
                                f"failed ({first})") from e

    def recv(self):
        """Ranks > 0: the next plan from rank 0 (waits as long as rank 0 lives)."""
        dist.broadcast(self._buf, 0, group=self._ctrl)
        n = int.from_bytes(self._buf_np[:_HEADER].tobytes(), "little")
        first = min(n, _CHUNK - _HEADER)
        data = self._buf_np[_HEADER:_HEADER + first].tobytes()
        if n > first:
            rest = torch.empty(n - first, dtype=torch.uint8)
            dist.broadcast(rest, 0, group=self._ctrl)
            data += rest.numpy().tobytes()
        return pickle.loads(data)

    def follow(self, runner):
        """Ranks > 0: run rank 0's plans until a :class:`Result` (returned) or :class:`Shutdown`. Before
        each plan, what this rank's collectives reported since the last check (:meth:`_follower_check`)."""
        while True:
            plan = self.recv()
            if isinstance(plan, (Result, Shutdown)):
                self.shut_down = isinstance(plan, Shutdown)
                return plan
            self._follower_check()
            runner.execute(plan)
            self._follower_queue()

    def _follower_check(self) -> None:
        """A rank > 0: raise :class:`ParallelError` if its collectives went wrong in the plans it ran (its waits
        gave up, met a call that differs, or its peers gave up waiting for it), instead of running more plans
        out of step with the other ranks (its error then reaches rank 0: the worker exits with it). CPU: every
        op has run; GPU: the counters copied behind an earlier plan, once that copy has landed (no sync)."""
        if self.comm is None:
            return
        if self._event is None:
            self._check_status(self.comm.error_counts)
        elif self._pending and self._event.query():
            self._pending = False
            self._check_status(self._status[2])

    def _follower_queue(self) -> None:
        """A rank > 0 on a GPU: copy the collectives' error counters behind the plan it just queued (when the
        last copy has been read), for :meth:`_follower_check`."""
        if self.comm is not None and self._event is not None and not self._pending:
            self._status[2].copy_(self.comm.error_counts, non_blocking=True)
            self._event.record()
            self._pending = True

    # -- failure checks (rank 0) ---------------------------------------------------------------------------
    def watch(self) -> None:
        """Raise :class:`ParallelError` if a worker process has exited."""
        if self.pool is not None:
            self.pool.poll()

    def window_end(self, flip: int) -> None:
        """Queued behind a window: copy the collectives' error counters for :meth:`wait` to read."""
        if self.comm is not None and self._event is not None:
            self._status[flip].copy_(self.comm.error_counts, non_blocking=True)

    def wait(self, event: torch.cuda.Event, flip: int | None = None) -> None:
        """Wait for ``event`` (a window's end) at most ``timeout`` seconds, watching the workers; then
        raise if the collectives before it gave up waiting for a peer."""
        start = time.monotonic()
        last_watch = start
        while not event.query():
            now = time.monotonic()
            if now - last_watch > 0.01:
                self.watch()
                last_watch = now
            if now - start > self.timeout:
                raise ParallelError(f"rank 0 waited {self.timeout:g} s (parallel_timeout) for a step to finish: a "
                                    f"{self.role} rank is stuck")
            if now - start > _SPIN_S:
                time.sleep(0.0005)
        if flip is not None:
            self._check_status(self._status[flip])

    def settle(self) -> None:
        """After a step on rank 0 (before its logits are read): wait for it, bounded, and check it."""
        if self._event is None:  # CPU: every op has run already
            if self.comm is not None:
                self._check_status(self.comm.error_counts)
            return
        if self.comm is not None:
            self._status[2].copy_(self.comm.error_counts, non_blocking=True)
        self._event.record()
        self.wait(self._event, 2 if self.comm is not None else None)

    def _check_status(self, counts: torch.Tensor) -> None:
        """Raise :class:`ParallelError` if ``counts`` (a copy of ``comm.error_counts``) tell of a failure: a
        worker that exited first (the cause), else what ``comm.check()`` says, naming this rank; first, when
        the peers' waits gave up on this rank (it skipped a collective they made, or came too late), that."""
        if bool(counts.any()):
            self.watch()
            gave_up_on = int(counts[_GAVE_UP_ON])
            try:
                self.comm.check()
            except RuntimeError as e:
                if gave_up_on:
                    raise ParallelError(f"{self.role} rank {self.rank}: the other ranks' collectives gave up waiting "
                                        f"for this rank ({gave_up_on} time(s)): it skipped a collective they made, "
                                        f"or came to it too late, and the ranks are out of step ({e})") from e
                raise ParallelError(f"{self.role} collectives on rank {self.rank} failed: {e}") from e

    def diagnose(self, error: BaseException) -> BaseException:
        """The error to raise for ``error`` met while running with the other ranks: a
        :class:`ParallelError` naming a worker that exited if one did, else ``error`` itself."""
        if isinstance(error, ParallelError):
            return error
        text = str(error)
        lost_peer = isinstance(error, (dist.DistBackendError, dist.DistError)) or \
            any(mark in text for mark in ("gloo", "NCCL", "Connection", "Timed out", "timed out"))
        # a killed worker's sockets close before its exit can be reaped: a connection reset may come first,
        # so a lost peer gets a moment to show which worker exited (the cause) before the symptom is raised
        lost = self._exited_worker(_EXIT_GRACE_S if lost_peer else 0.0)
        if lost is not None:
            return lost
        if lost_peer:
            return ParallelError(f"{self.role} rank {self.rank}: a collective with the other ranks failed: "
                                 f"{text.splitlines()[0] if text else type(error).__name__}")
        return error

    def _exited_worker(self, grace: float) -> ParallelError | None:
        """The error naming a worker process that exited, waiting up to ``grace`` seconds (with a pool) for
        one to show; None if none did."""
        deadline = time.monotonic() + (grace if self.pool is not None else 0.0)
        while True:
            try:
                self.watch()
            except ParallelError as e:
                return e
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    # -- teardown ------------------------------------------------------------------------------------------
    def close(self, *, failed: bool = False) -> None:
        """Release this rank (idempotent; every rank closes). Rank 0 tells the other ranks to close (unless
        ``failed``); with a pool it then stops what is left of the workers and removes their shared memory.
        A follower (torchrun) waits for rank 0's message first."""
        if self.closed:
            return
        self.closed = True
        try:
            if not failed:
                try:
                    if self.rank == 0:
                        self.watch()
                        self.send(Shutdown())
                    elif not self.shut_down:
                        while not isinstance(self.recv(), Shutdown):
                            pass
                except Exception as e:  # a rank gone already: stop the others below
                    log.debug("tensor-parallel shutdown message: %s", e)
                    failed = True
            if self.heap is not None:
                if failed:
                    self.heap._release()  # peers may never reach close(): do not wait for them
                else:
                    try:
                        self.heap.close()
                    except Exception as e:
                        log.debug("closing the heap: %s", e)
                        self.heap._release()
        finally:
            if failed and self.pool is not None:
                self.pool.stop(graceful=False)  # they may be stuck in collectives: not waited for
            self._release_groups(failed)
            if self.pool is not None:
                if not failed:
                    # NOTE: after the groups: NCCL's teardown is collective (rank 0 waiting for it with its
                    # workers gone hung 100 s+ on 2x H200); the workers leave once theirs is done
                    self.pool.stop(graceful=True)
                self.pool.cleanup()

    def _release_groups(self, failed: bool) -> None:
        if not dist.is_initialized():
            return
        try:
            dist.destroy_process_group(self._ctrl)
        except Exception as e:  # the default group still goes below
            log.debug("destroy_process_group(ctrl): %s", e)
        if self.owns_dist:
            release_default_group(self.device, failed)


def release_default_group(device: torch.device, failed: bool = False) -> None:
    """Tear down the default process group. With NCCL (GPUs) it is aborted, not destroyed: a graceful
    destroy of a communicator that CUDA graphs captured hung on 2x H200 (rank 0 and its worker both
    in it, 60 s+), and peers that are gone or stuck must not be waited for either. Whatever the teardown
    does (raises, or is left behind after ``TEARDOWN_TIMEOUT``, ``FAILED_TEARDOWN_TIMEOUT`` after a
    failure), this process ends without a default group, so that it can start another engine.

    The abort's thread touches only the groups' backends; torch.distributed's record of the groups is
    dropped here, on the caller's thread. ``_abort_process_group`` does both on the thread, and one left
    behind that finished later (its stopped peer resumed or killed) dropped the record of the next
    engine's groups with it (seen on 2x H200: "Group ... is not registered" at that engine's start)."""
    left = False
    try:
        if failed or device.type == "cuda":
            world = dist.distributed_c10d._world
            groups = sorted(world.pg_names, key=world.pg_names.get, reverse=True)  # torch's own order
            default = dist.distributed_c10d._get_default_group()
            left = _bounded(lambda: _abort_groups(groups, default),
                            FAILED_TEARDOWN_TIMEOUT if failed else TEARDOWN_TIMEOUT, "aborting the process group")
        else:
            dist.destroy_process_group()
    except Exception as e:
        log.warning("tearing down the process group: %s", e)
    if left:
        log.warning("the process group's teardown did not finish: its resources are left behind, and this "
                    "process forgets it so that another engine can start")
    _forget_groups()


def _abort_groups(groups: list, default) -> None:
    """Abort ``groups``' backends (NCCL's inside one group start / end, as torch.distributed's own abort
    does, so that communicators' aborts do not wait for each other); their Python record is left alone."""
    try:
        backend = default._get_backend(torch.device("cuda"))
    except RuntimeError:
        backend = None
    nccl = dist.is_nccl_available() and isinstance(backend, dist.ProcessGroupNCCL)
    if nccl:
        backend._group_start()
    for pg in groups:
        pg.abort()
    if nccl:
        backend._group_end()


def _forget_groups() -> None:
    """Drop torch.distributed's record of this process's groups without touching their backends (one whose
    teardown is stuck in NCCL keeps its communicator: leaked, not waited for). The same bookkeeping as the
    end of ``torch.distributed``'s own abort; nothing when there is no record."""
    c10d = dist.distributed_c10d
    world = c10d._world
    if not dist.is_initialized() and not world.pg_map:
        return
    c10d._update_default_pg(None)
    for table in (world.pg_map, world.pg_names, world.pg_group_ranks, world.pg_backend_config, world.pg_to_tag,
                  world.tags_to_pg, world.pg_coalesce_state):
        table.clear()
    unregister = getattr(c10d, "_unregister_all_process_groups", None)
    if unregister is not None:
        unregister()
    world.group_count = 0


TEARDOWN_TIMEOUT = 30.0  # seconds a process-group teardown may take before it is left behind
# after a failure (the workers killed, or a torchrun peer gone): NCCL's abort with a peer that is gone or
# stopped did not return in 30 s on 4x H200 (killed and SIGSTOPped workers alike), and waiting for it only
# delays the error (a server's 503) by as long
FAILED_TEARDOWN_TIMEOUT = 5.0


_left_behind: list[str] = []  # teardowns left stuck on their threads (see teardown_left_behind)


def teardown_left_behind() -> bool:
    """Whether a teardown of this process was left stuck on its thread (a lost peer's NCCL abort). Such a
    process must leave by ``os._exit``: at a normal exit the C++ runtime destroys the stuck thread and
    aborts (SIGABRT, status 134) after everything else has gone right. ``tritium.cli.run`` does so."""
    return bool(_left_behind)


def _bounded(fn, seconds: float, what: str) -> bool:
    """Run ``fn`` (a teardown that releases the GIL while it waits in C++) on a daemon thread and wait at
    most ``seconds``: a teardown stuck in NCCL is logged and left behind instead of hanging the caller
    (True: left behind; ``fn``'s error raised if it ended with one)."""
    done, errors = threading.Event(), []

    def run():
        try:
            fn()
        except BaseException as e:
            errors.append(e)
        finally:
            done.set()

    threading.Thread(target=run, name="tritium-teardown", daemon=True).start()
    if not done.wait(seconds):
        log.warning("%s did not finish in %.0f s; left behind", what, seconds)
        _left_behind.append(what)
        return True
    if errors:
        raise errors[0]
    return False


class WorkerPool:
    """Rank 0's worker processes (ranks 1..N-1 of a one-host engine) and the store they meet at.

    Each worker is ``python -m tritium.engine.worker`` reading its spec (a pickled dict) from stdin; it
    reports an error under ``tritium/tp-error/<rank>`` in the store before it exits.
    """

    def __init__(self, world_size: int, spec: dict, timeout: float):
        self.world_size = world_size
        self.role = role(spec["config"].context_parallel_size > 1)
        self.timeout = timeout
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                   timeout=datetime.timedelta(seconds=timeout))
        self.prefix = f"tritium-tp-{os.getpid()}-{secrets.token_hex(4)}"
        env = dict(os.environ)
        for key, value in ENV_DEFAULTS.items():
            env.setdefault(key, value)
        src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env[PREFIX_ENV] = self.prefix
        self.procs: list[subprocess.Popen] = []
        try:
            for rank in range(1, world_size):
                # a session of its own: a Ctrl-C at the terminal interrupts rank 0, not the workers (the
                # engine decides what an interrupt means; workers exit when rank 0's process is gone)
                proc = subprocess.Popen([sys.executable, "-m", "tritium.engine.worker"], stdin=subprocess.PIPE,
                                        env=env, start_new_session=True)
                self.procs.append(proc)
                proc.stdin.write(pickle.dumps({**spec, "rank": rank, "world_size": world_size,
                                               "port": self.store.port, "parent": os.getpid()}))
                proc.stdin.close()
        except BaseException:
            self.stop(graceful=False)
            self.cleanup()
            raise

    def error(self, rank: int) -> str | None:
        key = _ERROR_KEY.format(rank)
        try:
            return self.store.get(key).decode() if self.store.check([key]) else None
        except Exception:
            return None

    def poll(self) -> None:
        """Raise :class:`ParallelError` naming the first worker that has exited (with its error)."""
        for rank, proc in enumerate(self.procs, start=1):
            code = proc.poll()
            if code is not None:
                err = self.error(rank)
                raise ParallelError(f"{self.role} rank {rank} (pid {proc.pid}) exited with code {code}"
                                    + (f": {err}" if err else ""))

    def wait_ready(self, seconds: float) -> None:
        """Wait until every worker is up and about to join the process group (its ``READY_KEY``), at most
        ``seconds``; a worker that exits first is named at once."""
        keys = [READY_KEY.format(rank) for rank in range(1, self.world_size)]
        deadline = time.monotonic() + seconds
        while not self.store.check(keys):
            self.poll()
            if time.monotonic() > deadline:
                late = [rank for rank, key in enumerate(keys, start=1) if not self.store.check([key])]
                raise ParallelError(f"{self.role} rank(s) {late} did not start within {seconds:g} s")
            time.sleep(0.01)

    def abandon(self, error: BaseException) -> BaseException:
        """Start-up failed with ``error``: stop the workers, remove their shared memory, and return what to
        raise: the error of a worker that had already exited (the cause), else ``error``."""
        try:
            self.poll()  # before stopping them: afterwards every worker has exited
            cause = error
        except ParallelError as worker_error:
            cause = worker_error
        self.stop(graceful=False)
        self.cleanup()
        return cause

    def stop(self, graceful: bool = True) -> None:
        """Wait for the workers (``graceful``: they were told to exit), then terminate and kill what is left."""
        deadline = time.monotonic() + (_GRACE_S if graceful else 0.0)
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(5.0)
                except subprocess.TimeoutExpired:  # stuck in the driver (uninterruptible): do not hang on it
                    log.warning("tensor-parallel worker pid %d did not exit after SIGKILL", proc.pid)

    def cleanup(self) -> None:
        """Remove shared-memory segments the workers left (a worker killed while mapping its heap)."""
        remove_segments(self.prefix)


def open_rank(cfg, model_config: ModelConfig, pool: WorkerPool | None = None) -> TensorParallel:
    """This process's :class:`TensorParallel` for a resolved engine config (every rank calls it with the
    same ``cfg`` but its own device)."""
    if cfg.context_parallel_size > 1:
        # the communicator all-gathers only the lengths (sliding windows); the workspace takes the rest
        rows = context_rows(cfg)
        heap = 0 if cfg.attention_backend == "torch" else DistributedDecodeWorkspace.heap_bytes(
            rows, model_config.num_attention_heads, model_config.head_dim, cfg.context_parallel_size)
        return TensorParallel(comm=cfg.comm, device=cfg.device, max_bytes=max(4 * rows, 1 << 16),
                              timeout=cfg.parallel_timeout, pool=pool, context_parallel=True, decode_heap_bytes=heap)
    max_bytes = comm_max_bytes(model_config, cfg.max_num_batched_tokens, cfg.max_decode_rows, cfg.dtype,
                               cfg.tensor_parallel_size)
    return TensorParallel(comm=cfg.comm, device=cfg.device, max_bytes=max_bytes, timeout=cfg.parallel_timeout,
                          pool=pool, fuse_row_parallel=cfg.fuse_row_parallel,
                          torch_all_reduce=cfg.torch_all_reduce_from)


def start(cfg, model_config: ModelConfig, source) -> TensorParallel:
    """Rank 0 (or, under torchrun, every rank): bring up the ranks of a resolved engine config and return
    this process's rank. ``source``: what workers load the model from (a checkpoint path, a list of
    (name, tensor) pairs, or an object with ``iter(device)`` yielding them)."""
    n = cfg.tensor_parallel_size * cfg.context_parallel_size  # checked in resolve_config (one of them is 1)
    if cfg.device.type == "cuda":
        first = cfg.device.index if cfg.device.index is not None else torch.cuda.current_device()
        devices = [torch.device("cuda", first + r) for r in range(n)]
    else:
        devices = [cfg.device] * n
    spec = {"config": cfg, "model_config": model_config, "source": source, "devices": devices}
    created = not dist.is_initialized()
    pool = init_ranks(n, cfg.device, spec, cfg.parallel_timeout)
    try:
        tp = open_rank(cfg, model_config, pool)
        tp.owns_dist = created
        return tp
    except BaseException as e:
        if pool is None:
            raise
        failure = pool.abandon(e)
        dist.destroy_process_group()
        if failure is e:
            raise
        raise failure from e


def init_ranks(n: int, device: torch.device, spec: dict, timeout: float) -> WorkerPool | None:
    """Bring up torch.distributed over the engine's ``n`` ranks: under torchrun, join it (None); else start
    the workers (ranks 1..n-1, given ``spec``) and join them as rank 0 (their pool)."""
    backend = "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"
    span = datetime.timedelta(seconds=timeout)
    if _launched_by_torchrun():
        if device.type == "cuda":
            torch.cuda.set_device(device)  # kernels, streams and graphs of this rank go to its own GPU
        if not dist.is_initialized():
            dist.init_process_group(backend, timeout=span)
        if dist.get_world_size() != n:
            raise ValueError(f"tensor_parallel_size (or context_parallel_size) {n} under torchrun must equal the "
                             f"job's world size ({dist.get_world_size()}), or be 1")
        return None
    if dist.is_initialized():
        raise ValueError("tensor_parallel_size or context_parallel_size > 1 starts its own ranks, but "
                         "torch.distributed is already initialised in this process (another tensor-parallel engine "
                         "not closed, or your own process group): close it first, or run under torchrun")
    with _nccl_errors_keep_the_process():  # the workers' environment is copied inside: theirs too
        pool = WorkerPool(n, spec, timeout)
        try:
            pool.wait_ready(max(timeout, START_TIMEOUT_S))
            dist.init_process_group(backend, store=pool.store, rank=0, world_size=n, timeout=span)
        except BaseException as e:
            failure = pool.abandon(e)
            if failure is e:
                raise
            raise failure from e
    return pool


# Read by each NCCL process group as it is made. PyTorch's defaults (3; monitoring on) take the whole process
# down once a collective outlives the group's timeout (seen on 4x H200: rank 0, a serving process, aborted 60 s
# after a worker stopped answering) or the watchdog stops beating. The engine bounds its own waits, raises
# ParallelError and tears the groups down itself, as it does over gloo on the CPU, so the watchdog is told to
# do nothing (0): its other choice, aborting the communicator (2), would let a step stuck on the lost peer
# finish on partial data in a race with the engine's own timeout (a graph replays the aborted collective with
# no host call to raise). No monitor kills the process either. A value the user set is kept.
_NCCL_ENV = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_ENABLE_MONITORING": "0"}


@contextlib.contextmanager
def _nccl_errors_keep_the_process():
    added = [k for k in _NCCL_ENV if k not in os.environ]
    os.environ.update({k: _NCCL_ENV[k] for k in added})
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)
