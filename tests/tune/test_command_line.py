"""``python -m tritium.tune`` as a user meets it without a GPU: --help and --list, no suite or an unknown one, bad
option values, --out and --tree-dir that cannot be written, files that are missing or not a sweep's JSON, a sweep
(it needs a GPU) and a fit (it needs scikit-learn). Every refusal is one line naming the option and what was
expected, exit status 2, no traceback, before any work."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from bench.conftest import answered, refused
from tritium.tune import attention as tune
from tritium.tune import trees
from tritium.tune.__main__ import main

PROG = "python -m tritium.tune"


@pytest.fixture
def sweep(tmp_path):
    """A sweep's JSON as far as the command line reads it (its GPU, knobs and records)."""
    path = tmp_path / "attention-cpu.json"
    path.write_text(json.dumps({"gpu": "cpu", "knobs": {}, "records": []}))
    return str(path)


def test_help_and_list(capsys):
    """--help printed the usage line to stderr with exit status 2; --list was an unknown suite."""
    for argv in (["--help"], ["attention", "--help"]):
        assert answered(main, argv, capsys).startswith(f"usage: {PROG}")
    assert answered(main, ["--list"], capsys).split() == ["attention", "tritium.tune.attention"]


def test_no_suite_or_an_unknown_one(capsys):
    """Both printed the usage line alone, naming neither what was missing nor what was wrong."""
    assert refused(main, [], capsys) == f"{PROG}: error: no suite given; expected one of attention (--list lists them)"
    assert refused(main, ["atention"], capsys) == (f"{PROG}: error: unknown suite 'atention'; expected one of "
                                                   f"attention (--list lists them)")


@pytest.mark.parametrize("argv, message", [
    (["--limit", "-3"], "argument --limit: expected an int >= 1, got '-3'"),  # (a sweep of all but 3)
    (["--limit", "0"], "argument --limit: expected an int >= 1, got '0'"),  # (a sweep of everything)
    (["--jobs", "-2"], "argument --jobs: expected an int >= 0, got '-2'"),
    (["--jobs", "x"], "argument --jobs: expected an int >= 0, got 'x'"),
    (["--repeats", "2.5"], "argument --repeats: expected an int >= 1, got '2.5'"),
    (["--retime-min-context", "-1", "--retime-apply", "a", "b"],
     "argument --retime-min-context: expected an int >= 0, got '-1'"),
    (["--part", "both"], "argument --part: invalid choice: 'both'"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_values_name_the_option(argv, message, capsys):
    err = refused(main, ["attention", *argv], capsys)
    assert err.startswith(f"{PROG} attention: error: {message}"), err


def test_files_checked_before_any_work(tmp_path, sweep, capsys, monkeypatch):
    """Missing files, files that are not a sweep's JSON (tracebacks from the fit: FileNotFoundError,
    JSONDecodeError, KeyError), an --out or --tree-dir that is a file or cannot be written (--out failed after
    the first workload was swept)."""
    monkeypatch.setattr(trees, "fit_and_export", lambda *a, **k: pytest.fail("fitted"))
    prog = f"{PROG} attention: error:"
    missing = str(tmp_path / "missing.json")
    assert refused(main, ["attention", "--fit", missing], capsys) == f"{prog} argument --fit: {missing} does not exist"
    not_json = tmp_path / "notes.txt"
    not_json.write_text("not JSON")
    assert refused(main, ["attention", "--fit", str(not_json)], capsys).startswith(
        f"{prog} argument --fit: expected a JSON file, {not_json} is not one (")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"gpu": "cpu"}))
    assert refused(main, ["attention", "--fit", str(other)], capsys) == (
        f"{prog} argument --fit: expected a JSON object with gpu, knobs, records; {other} has no knobs, records")
    assert refused(main, ["attention", "--fit", sweep, "--with-sweep", missing], capsys) == (
        f"{prog} argument --with-sweep: {missing} does not exist")
    for flag in ("--out", "--tree-dir"):
        assert refused(main, ["attention", "--fit", sweep, flag, sweep], capsys) == (
            f"{prog} argument {flag}: expected a directory, got {sweep!r} ({sweep} is a file)")
    under_a_file = os.path.join(sweep, "trees")
    assert refused(main, ["attention", "--fit", sweep, "--tree-dir", under_a_file], capsys) == (
        f"{prog} argument --tree-dir: expected a directory, got {under_a_file!r} ({sweep} is a file)")
    if os.geteuid() == 0:
        locked = "/sys/tritium-tune"
    else:
        (tmp_path / "locked").mkdir(mode=0o500)
        locked = str(tmp_path / "locked" / "out")
    assert refused(main, ["attention", "--out", locked], capsys).startswith(
        f"{prog} argument --out: expected a writable directory, got {locked!r}")


def test_merges_refused_with_status_2(tmp_path, sweep, capsys):
    """The merges' refusals of their files were SystemExit with status 1 (a message without the program's name),
    a file that is not JSON a traceback."""
    prog = f"{PROG} attention: error:"
    missing = str(tmp_path / "missing.json")
    assert refused(main, ["attention", "--merge", sweep, missing], capsys) == (
        f"{prog} --merge: {missing} does not exist")
    not_json = tmp_path / "shard.json"
    not_json.write_text("{")
    assert refused(main, ["attention", "--retime-merge", str(not_json), sweep], capsys).startswith(
        f"{prog} --retime-merge: {not_json} is not JSON (")
    # JSON of something else (a list; an object without the keys) was a KeyError or a TypeError traceback.
    other = tmp_path / "other.json"
    for text, missing in (("[1, 2]", "gpu, knobs, records"), ('{"gpu": "cpu", "records": []}', "knobs")):
        other.write_text(text)
        assert refused(main, ["attention", "--merge", sweep, str(other)], capsys) == (
            f"{prog} --merge: {other} is not a JSON object with gpu, knobs, records (no {missing})")
    assert refused(main, ["attention", "--confirm-merge", str(tmp_path / "into.json"), sweep], capsys) == (
        f"{prog} --confirm-merge: {sweep} is not a JSON object with gpu, repeats, source, records (no repeats, "
        "source)")


def test_sweep_needs_a_gpu_and_fit_scikit_learn(sweep, capsys, monkeypatch, cpu_only):
    """A sweep is refused without a GPU before anything is swept; --fit without scikit-learn is an error (it
    printed a hint with exit status 0), before anything is read."""
    monkeypatch.setattr(tune, "sweep", lambda *a, **k: pytest.fail("swept"))
    assert refused(main, ["attention"], capsys) == (f"{PROG} attention: error: sweeping needs a GPU; use --fit FILE "
                                                    f"to fit trees from a sweep's JSON")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else find_spec(name, *a))
    monkeypatch.setattr(trees, "fit_and_export", lambda *a, **k: pytest.fail("fitted"))
    assert refused(main, ["attention", "--fit", sweep], capsys) == (
        f"{PROG} attention: error: --fit needs scikit-learn: pip install 'tritium[tune]'")


def test_as_a_process():
    """The entry point itself: --help (it was exit status 2), no arguments and a bad value (status 2, one line)."""
    proc = subprocess.run([sys.executable, "-m", "tritium.tune", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: {PROG}"), proc.stderr
    for argv in ([], ["attention", "--limit", "-1"]):
        proc = subprocess.run([sys.executable, "-m", "tritium.tune", *argv], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(PROG) and "Traceback" not in proc.stderr
