"""``python -m tritium.bench`` as a user meets it without a GPU: --help and --list, no suite or an unknown one, bad
option values, an --out that cannot be written, suites that need a GPU or a GPU-sized model. Every refusal is one
line naming the option and what was expected, exit status 2, no traceback, and comes before the suite does any
work (tritium.bench.args)."""

import importlib
import os
import subprocess
import sys

import pytest

from tritium.bench import SUITES, engine_common
from tritium.bench.__main__ import main

from .conftest import answered, refused

PROG = "python -m tritium.bench"


def test_help_and_list(capsys):
    for argv in (["--help"], ["embed", "--help"]):
        assert answered(main, argv, capsys).startswith(f"usage: {PROG}")
    assert [line.split()[0] for line in answered(main, ["--list"], capsys).splitlines()] == list(SUITES)


def test_no_suite_or_an_unknown_one(capsys):
    """No arguments at all was a listing with exit status 0, an unknown suite did not name what it expected."""
    suites = ", ".join(SUITES)
    assert refused(main, [], capsys) == (f"{PROG}: error: no suite given; expected one of {suites} "
                                         f"(--list lists them)")
    assert refused(main, ["atention"], capsys) == (f"{PROG}: error: unknown suite 'atention'; expected one of "
                                                   f"{suites} (--list lists them)")
    assert refused(main, ["--lsit"], capsys) == f"{PROG}: error: unrecognized arguments: --lsit"


@pytest.mark.parametrize("argv, message", [
    (["embed", "--shape", "tiny", "--repeats", "-3"], "argument --repeats: expected an int >= 1, got '-3'"),
    (["embed", "--shape", "tiny", "--chunk", "many"], "argument --chunk: expected an int >= 1, got 'many'"),
    (["embed", "--shape", "tiny", "--cases", "2y16"], "argument --cases: expected N x L pairs >= 1"),
    (["engine", "--kv-cache-gib", "-1"], "argument --kv-cache-gib: expected a number > 0, got '-1'"),
    (["engine", "--kv-cache-gib", "nan"], "argument --kv-cache-gib: expected a number > 0, got 'nan'"),
    (["engine", "--new-tokens", "1"], "argument --new-tokens: expected an int >= 2, got '1'"),
    (["engine", "--tp", "0"], "argument --tp: expected an int >= 1, got '0'"),
    (["engine", "--systems", "tritium,vllm"], "argument --systems: expected comma-separated names out of tritium"),
    (["engine", "--parts", ""], "argument --parts: expected comma-separated names out of decode"),
    (["collectives", "--world-size", "-1"], "argument --world-size: expected an int >= 1, got '-1'"),
    (["collectives", "--sizes", "4Q"], "argument --sizes: expected comma-separated sizes >= 1 such as 8K,1M"),
    (["collectives", "--tiles", "4096x"], "argument --tiles: expected (elements per tile)x(warps)"),
    (["shmem", "--mib", "-5"], "argument --mib: expected an int >= 1, got '-5'"),
    (["gemv", "--shapes", "o,zz"], "argument --shapes: expected comma-separated names out of o, qkv, down, gate_up, "
                                   "got 'o,zz' (zz unknown)"),
    (["moe", "--tokens", "8,0"], "argument --tokens: expected comma-separated ints >= 1, got '8,0'"),
    (["draft", "--drafts", "2,17"], "argument --drafts: expected comma-separated ints in [1, 16], got '2,17'"),
    (["serve", "--concurrency", "1,x"], "argument --concurrency: expected comma-separated ints >= 1"),
    (["serve", "--output-len", "1"], "argument --output-len: expected an int >= 2, got '1'"),
    (["attention", "--cases", "decode:1x1"], "argument --cases: expected comma-separated names out of prefill:1x4096"),
    (["fused", "--timeout", "0"], "argument --timeout: expected a number > 0, got '0'"),
    (["distributed_decode", "--contexts=-1K"], "argument --contexts: expected comma-separated sizes >= 1"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_values_name_the_option(argv, message, capsys):
    """Each was taken and failed later (a traceback from a worker, an empty table, a run with -5 MiB), or was a
    SystemExit with status 1 from inside the suite."""
    err = refused(main, argv, capsys)
    assert err.startswith(f"{PROG} {argv[0]}: error: {message}"), err


def test_out_must_be_a_writable_file(tmp_path, capsys, cpu_only):
    """--out is checked before the suite runs (it was opened after the whole run: a traceback at the end); a file
    made only to check it is removed again."""
    prog = f"{PROG} attention: error: argument --out:"
    assert refused(main, ["attention", "--out", str(tmp_path)], capsys) == (
        f"{prog} expected a file to write, got the directory {str(tmp_path)!r}")
    missing = tmp_path / "no-such-dir" / "a.json"
    assert refused(main, ["attention", "--out", str(missing)], capsys) == (
        f"{prog} expected a file in an existing directory, got {str(missing)!r} ({missing.parent} is not a directory)")
    locked = "/sys/tritium-bench.json" if os.geteuid() == 0 else str(tmp_path / "locked" / "a.json")
    if os.geteuid() != 0:
        (tmp_path / "locked").mkdir(mode=0o500)
    assert refused(main, ["attention", "--out", locked], capsys).startswith(
        f"{prog} expected a writable file, got {locked!r}")
    fresh = tmp_path / "attention.json"
    assert "needs a GPU" in refused(main, ["attention", "--out", str(fresh)], capsys)
    assert not fresh.exists()


@pytest.mark.parametrize("suite", ["attention", "engine-ablate", "gemm", "gemv", "moe"])
def test_gpu_suites_say_so_before_any_work(suite, capsys, monkeypatch, cpu_only):
    """engine-ablate built its model (Llama-3-8B random weights: killed for memory on a small machine) before it
    found there was no GPU; the others said so with exit status 1."""
    module = importlib.import_module(SUITES[suite])
    monkeypatch.setattr(module, "run", lambda args: pytest.fail("the suite ran"))
    err = refused(main, [suite], capsys)
    assert err.startswith(f"{PROG} {suite}: error: this suite needs a GPU (") and err.endswith("no GPU is visible")


@pytest.mark.parametrize("argv, option", [
    (["engine"], "--shape llama3-8b"), (["engine", "--tp", "2"], "--shape llama3-70b"),
    (["engine", "--tp", "2", "--shape", "tiny", "--scaling-shape", "llama3-8b"], "--scaling-shape llama3-8b"),
    (["embed"], "--shape qwen3-0.6b"), (["engine-window"], "--shape gemma-3-12b"), (["lora"], "--shape llama3-8b"),
    (["speculative"], "--shape llama3-8b"), (["serve"], "--shape llama3-8b"),
    (["draft", "--shape", "tiny"], "--draft-shape llama3.2-1b"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_gpu_sized_models_refused_on_the_cpu(argv, option, capsys, monkeypatch, cpu_only):
    """The engine suites' random-weight shapes other than tiny on the CPU: they were built in fp32 (32 GB for
    Llama-3-8B) and run under the interpreter; serve started its server process first."""
    monkeypatch.setattr(engine_common, "make_weights", lambda *a, **k: pytest.fail("weights were built"))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    err = refused(main, argv, capsys)
    flag = option.split()[0]
    assert err.startswith(f"{PROG} {argv[0]}: error: {option}: a GPU-sized model, and no GPU is visible; on the CPU "
                          f"use {flag} tiny or "), err


@pytest.mark.parametrize("argv, message", [
    (["draft", "--model", "some/model"], "--model: give its draft model as --draft-model"),
    (["engine", "--tp", "2", "--shape", "tiny", "--resume"], "--resume needs --out: the JSON of the run to continue"),
    (["embed", "--model", "/no/such/model"], "--model /no/such/model: model path '/no/such/model' does not exist"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_options_that_do_not_go_together(argv, message, capsys, cpu_only):
    """Refusals found by the suite before it starts (UsageError): exit status 2 as a bad value is (they were
    SystemExit with status 1; --model a traceback)."""
    assert refused(main, argv, capsys).startswith(f"{PROG} {argv[0]}: error: {message}")


@pytest.mark.parametrize("suite", ["shmem", "collectives", "fused", "distributed_decode"])
def test_more_ranks_than_gpus(suite, capsys, monkeypatch):
    """shmem's --world-size was not checked against the GPUs: ranks past them failed one by one in launch."""
    import torch

    from tritium import shmem
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(shmem, "launch", lambda *a, **k: pytest.fail("ranks were launched"))
    assert refused(main, [suite, "--world-size", "3"], capsys) == (
        f"{PROG} {suite}: error: --world-size 3: only 2 GPUs visible")


def test_as_a_process():
    """The entry point itself: no arguments and a bad value, exit status 2 and one line, no traceback."""
    for argv in ([], ["shmem", "--iters", "0"]):
        proc = subprocess.run([sys.executable, "-m", "tritium.bench", *argv], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(f"{PROG}") and "Traceback" not in proc.stderr
