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

import tritium.shmem as shmem
from shmem_cases import run_world
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
    ({"world_size": 2, "timeout": -1}, "timeout"),
    ({"world_size": 2, "backend": "mpi"}, "backend"),
], ids=["world_size", "timeout", "backend"])
def test_bad_input_names_the_argument(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        shmem.launch(_hang_on_rank_1, kwargs.pop("world_size"), **kwargs)


def test_worker_must_be_callable():
    with pytest.raises(TypeError, match="worker"):
        shmem.launch("not a function", 2)


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


def _sleep_forever(rank, world_size, directory):
    with open(os.path.join(directory, f"rank{rank}"), "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between the open and the read
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_ranks_exit_when_the_launching_process_is_gone(tmp_path, sig):
    """The launching process ended by a signal it does not catch (no finally runs): its ranks, children of
    the forkserver, see their lifeline close and exit within seconds; nothing of the launch keeps running."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(here, "..", "..", "src"), here])}
    code = (f"import test_shmem_launch as t, tritium.shmem as s; "
            f"s.launch(t._sleep_forever, 2, {str(tmp_path)!r}, timeout=300)")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    pids = []
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("rank*"))) < 2:
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
    finally:
        proc.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
