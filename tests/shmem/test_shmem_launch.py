"""launch: a failing rank's exception surfaces with its rank; a hung rank hits the timeout; cleanup."""

import contextlib
import glob
import importlib
import os
import signal
import subprocess
import sys
import time

import pytest
import torch.distributed as dist

import tritium.shmem as shmem
from shmem_cases import run_world
from tritium.shmem import cpu_shm
from tritium.shmem.launch import ENV_DEFAULTS

launch_module = importlib.import_module("tritium.shmem.launch")  # shmem.launch is the function


def _fail_on_rank_1(rank, world_size):
    with shmem.SymmetricHeap(1 << 16):
        if rank == 1:
            raise ValueError("boom from the worker")
        time.sleep(60)  # rank 0 would wait here; launch must stop it when rank 1 fails


def _hang_on_rank_1(rank, world_size):
    if rank == 1:
        time.sleep(600)


def _segments():
    return set(glob.glob("/dev/shm/tritium-*"))


def test_failing_rank_is_reported_with_its_rank_and_cleaned_up():
    before = _segments()
    start = time.monotonic()
    with pytest.raises(shmem.RankFailed, match=r"rank 1 failed: ValueError: boom from the worker") as info:
        run_world(_fail_on_rank_1, 2, timeout=120)
    assert info.value.rank == 1
    assert isinstance(info.value.__cause__, ValueError)
    assert "_fail_on_rank_1" in str(info.value)  # the rank's traceback
    assert time.monotonic() - start < 60, "launch waited for the healthy rank instead of stopping it"
    assert _segments() <= before, f"shared memory left behind: {_segments() - before}"


def test_hung_rank_times_out():
    with pytest.raises(shmem.LaunchTimeout, match=r"rank\(s\) \[1\] did not finish within timeout=4") as info:
        run_world(_hang_on_rank_1, 2, timeout=4)
    assert info.value.ranks == [1]


@pytest.mark.parametrize("kwargs, argument", [
    ({"world_size": 0}, "world_size"),
    ({"world_size": True}, "world_size"),
    ({"world_size": 2, "timeout": -1}, "timeout"),
    ({"world_size": 2, "timeout": float("nan")}, "timeout"),
    ({"world_size": 2, "timeout": float("inf")}, "timeout"),
    ({"world_size": 2, "backend": "mpi"}, "backend"),
], ids=["world_size", "world_size-bool", "timeout", "timeout-nan", "timeout-inf", "backend"])
def test_bad_input_names_the_argument(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        shmem.launch(_hang_on_rank_1, kwargs.pop("world_size"), **kwargs)


@pytest.mark.parametrize("worker, args, argument", [
    ("not a function", (), "worker must be callable"),
    (lambda rank, world_size: None, (), "worker must be picklable"),
    (_hang_on_rank_1, (lambda: None,), "args must be picklable"),
], ids=["not-callable", "lambda", "lambda-argument"])
def test_worker_and_args_must_reach_the_ranks(worker, args, argument):
    with pytest.raises(TypeError, match=argument):
        shmem.launch(worker, 2, *args)


def test_worker_of_an_interactive_session_is_refused():
    """`python -c` (or a notebook): rank processes cannot import a worker defined there. Refused up front
    (not: every rank dies unpickling it, "exited with code 1 without reporting")."""
    code = ("import tritium.shmem as s\n"
            "def worker(rank, world_size): pass\n"
            "s.launch(worker, 2, timeout=60)")
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120)
    assert "TypeError: worker worker is defined in an interactive session" in done.stderr, done.stderr[-2000:]


def _kill_rank_1_in_a_barrier(rank, world_size):
    with shmem.SymmetricHeap(1 << 16) as heap:
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        heap.barrier()


def test_a_rank_killed_by_a_signal_is_named_not_its_peers():
    """Rank 1 dies of SIGKILL while rank 0 waits for it in a barrier, which rank 0 then reports as lost: the
    launch raises rank 1's death, naming the signal, and lists rank 0's failure as a consequence."""
    with pytest.raises(shmem.RankFailed, match="rank 1 failed: process was killed by SIGKILL") as info:
        run_world(_kill_rank_1_in_a_barrier, 2, timeout=120)
    assert info.value.rank == 1


class _Rank:
    """A finished rank process and its pipe, for _supervise: ``report`` in the pipe (None: nothing) and
    ``exitcode``."""

    def __init__(self, report, exitcode):
        self.report, self.exitcode, self.sentinel = report, exitcode, None

    def is_alive(self):
        return False

    def join(self, timeout=None):
        pass

    def poll(self):
        return self.report is not None

    def recv(self):
        return self.report


def test_the_cause_is_named_whatever_the_order_it_is_seen_in(monkeypatch):
    """Rank 0's PeerTimeout (reported first, earlier) is a consequence of rank 1's crash: rank 1 is raised."""
    monkeypatch.setattr(launch_module.mpc, "wait", lambda objects, timeout: objects)
    lost = ("error", ("PeerTimeout", "rank 0: heap collective 'barrier' failed", "Traceback ...", None, 0.0))
    ranks = [_Rank(lost, 1), _Rank(None, -signal.SIGSEGV), _Rank(("ok", None), 0)]
    with pytest.raises(shmem.RankFailed, match="rank 1 failed: process was killed by SIGSEGV") as info:
        launch_module._supervise(ranks, ranks, timeout=5.0)
    assert info.value.rank == 1
    assert "(rank 0 failed too: PeerTimeout: rank 0: heap collective 'barrier' failed)" in str(info.value)
    assert "(rank(s) [2] had returned from the worker)" in str(info.value)


def _destroy_the_group_itself(rank, world_size):
    with shmem.SymmetricHeap(1 << 16) as heap:
        heap.barrier()
    dist.destroy_process_group()  # what a torchrun script does at its end


def test_a_worker_may_destroy_the_process_group_itself():
    run_world(_destroy_the_group_itself, 2)


def test_launch_sets_multicast_off_for_ranks():
    run_world(_check_env, 1)


def _check_env(rank, world_size):
    for key, value in ENV_DEFAULTS.items():
        assert os.environ.get(key) == value, f"{key}={os.environ.get(key)!r}"


class _ReportsAsItExits:
    """A rank that sends its report and exits between the supervisor's two looks at it: its pipe is empty at
    the first poll, and it is dead (its report in the pipe) by the liveness check."""

    def __init__(self):
        self.checked_alive = False
        self.sentinel = None

    def is_alive(self):
        self.checked_alive = True
        return False

    def poll(self):
        return self.checked_alive  # the report lands once the supervisor has looked at the process

    def recv(self):
        return ("ok", None)


def test_a_rank_that_reports_as_it_exits_is_not_taken_for_dead(monkeypatch):
    rank = _ReportsAsItExits()
    monkeypatch.setattr(launch_module.mpc, "wait", lambda objects, timeout: objects)
    launch_module._supervise([rank], [rank], timeout=5.0)  # returns: its report is read, not "died"


def _env() -> dict:
    """The environment of a launching process started here: this checkout's src and these tests importable."""
    here = os.path.dirname(os.path.abspath(__file__))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(here, "..", "..", "src"), here])}


def _sleep_forever(rank, world_size, directory):
    with open(os.path.join(directory, f"rank{rank}"), "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(0.1)


def _stall_in_rendezvous(rank, world_size, directory):
    """Rank 1 stalls before making its heap's segment: rank 0 waits in the rendezvous, its segment in /dev/shm."""
    if rank == 1:
        make = cpu_shm._map

        def stall(path, nbytes, create):
            while create:
                time.sleep(0.1)
            return make(path, nbytes, create)

        cpu_shm._map = stall
    with open(os.path.join(directory, f"rank{rank}"), "w") as f:
        f.write(str(os.getpid()))
    shmem.SymmetricHeap(1 << 16)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between the open and the read
        return False


@pytest.mark.parametrize("worker, sig", [("_sleep_forever", signal.SIGTERM), ("_sleep_forever", signal.SIGKILL),
                                         ("_stall_in_rendezvous", signal.SIGKILL)],
                         ids=["SIGTERM", "SIGKILL", "SIGKILL-in-rendezvous"])
def test_ranks_exit_when_the_launching_process_is_gone(tmp_path, worker, sig):
    """The launching process ended by a signal it does not catch (no finally runs): its ranks, children of
    the forkserver, see their lifeline close and exit within seconds; nothing of the launch keeps running,
    and no segment of it is left in /dev/shm (a rank in the rendezvous has one that only it would unlink)."""
    code = (f"import test_shmem_launch as t, tritium.shmem as s; "
            f"s.launch(t.{worker}, 2, {str(tmp_path)!r}, timeout=300)")
    proc = subprocess.Popen([sys.executable, "-c", code], env=_env())
    segments = os.path.join(cpu_shm.SHM_DIR, f"tritium-{proc.pid}-*")
    pids = []
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("rank*"))) < 2 or (worker == "_stall_in_rendezvous" and not glob.glob(segments)):
            assert proc.poll() is None and time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.2)
        time.sleep(0.2)  # the pid files written in full
        pids = [int(p.read_text()) for p in tmp_path.glob("rank*")]
        children = [int(c) for c in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()]
        proc.send_signal(sig)
        proc.wait(30)
        deadline = time.monotonic() + 20
        while any(map(_alive, pids + children)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(map(_alive, pids)), "ranks kept running after the launching process was gone"
        assert not any(map(_alive, children)), "the launch's helper processes kept running"
        assert not glob.glob(segments), "the launch's segments were left in /dev/shm"
    finally:
        proc.kill()
        for path in glob.glob(segments):
            os.unlink(path)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
