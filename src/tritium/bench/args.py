"""Command lines of ``python -m tritium.bench`` and ``python -m tritium.tune``: a parser whose errors are one line
(``prog: error: argument --repeats: expected an int >= 1, got '-3'``) with exit status 2 and no traceback, and
option types that check a value where it is given, naming what was expected.

A check that needs more than one option, or the machine (a GPU, its count), runs after parsing and raises
:class:`UsageError`, which the entry points print the same way; a suite raises it before it does any work.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile

import torch

from tritium.runtime import interpreting


class UsageError(Exception):
    """Options that cannot run (together, or on this machine): reported as an argument error (exit status 2)."""


class Parser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` whose error is one line, ``prog: error: message``, and exit status 2 (argparse
    prints the whole usage first: tens of lines here; ``--help`` shows it)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def gpu_visible() -> bool:
    """Whether kernels run on a GPU here (one is visible and ``TRITON_INTERPRET=1`` does not put them on the CPU)."""
    return torch.cuda.is_available() and not interpreting()


def no_gpu_reason() -> str:
    """Why :func:`gpu_visible` is False, for an error message."""
    if torch.cuda.is_available():
        return "TRITON_INTERPRET=1 runs the kernels on the CPU"
    return "no GPU is visible"


def split_suite(prog: str, suites: dict[str, str], argv: list[str], description: str) -> tuple[str, list[str]]:
    """(suite, the suite's arguments) of ``prog <suite> [options]``. ``--help`` and ``--list`` are answered here
    (exit status 0); no suite, or one not in ``suites``, is an argument error."""
    top = Parser(prog=prog, description=description, epilog="suites: " + ", ".join(suites))
    top.add_argument("suite", nargs="?", help=f"one of: {', '.join(suites)}")
    top.add_argument("--list", action="store_true", help="list the suites and exit")
    expected = f"expected one of {', '.join(suites)} (--list lists them)"
    if not argv or argv[0].startswith("-"):  # no suite first: the top level's own options
        if top.parse_args(argv).list:
            for name, module in suites.items():
                print(f"{name:18s} {module}")
            top.exit(0)
        top.error(f"no suite given; {expected}")
    if argv[0] not in suites:
        top.error(f"unknown suite {argv[0]!r}; {expected}")
    return argv[0], argv[1:]


def ranks(world_size: int | None) -> tuple[int, int]:
    """(GPUs the ranks of a multi-rank suite run on, 0 under the interpreter; how many ranks): ``--world-size``,
    by default every GPU (2 CPU ranks without one, and at least 2). UsageError for more ranks than GPUs."""
    gpus = 0 if interpreting() else torch.cuda.device_count()
    world = world_size or max(gpus, 2)
    if gpus and world > gpus:
        raise UsageError(f"--world-size {world}: only {gpus} GPUs visible")
    return gpus, world


def _bounds(minimum, maximum) -> str:
    if maximum is None:
        return f">= {minimum}"
    return f"in [{minimum}, {maximum}]"


def integer(minimum: int = 1, maximum: int | None = None):
    """Option type: an int in [``minimum``, ``maximum``] (None: no upper bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected an int {_bounds(minimum, maximum)}, got {text!r}")
        return value

    return parse


def positive(text: str) -> float:
    """Option type: a finite number > 0 (seconds, GiB, a rate)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def int_list(minimum: int = 1, maximum: int | None = None):
    """Option type: comma-separated ints in [``minimum``, ``maximum``], at least one ("1,8,32" -> [1, 8, 32])."""

    def parse(text: str) -> list[int]:
        try:
            values = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            values = []
        if not values or min(values) < minimum or (maximum is not None and max(values) > maximum):
            raise argparse.ArgumentTypeError(f"expected comma-separated ints {_bounds(minimum, maximum)}, "
                                             f"got {text!r}")
        return values

    return parse


def name_list(allowed):
    """Option type: comma-separated names out of ``allowed``, at least one, in the order given."""
    allowed = tuple(allowed)

    def parse(text: str) -> list[str]:
        names = [v.strip() for v in text.split(",") if v.strip()]
        unknown = [v for v in names if v not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"expected comma-separated names out of {', '.join(allowed)}, got "
                                             f"{text!r}" + (f" ({', '.join(unknown)} unknown)" if unknown else ""))
        return names

    return parse


def json_file(*keys: str):
    """Option type: an existing JSON file holding an object with ``keys`` (what the reader of it needs first)."""

    def parse(text: str) -> str:
        if not os.path.isfile(text):
            raise argparse.ArgumentTypeError(f"{text} does not exist" if not os.path.exists(text)
                                             else f"expected a JSON file, got the directory {text!r}")
        try:
            with open(text) as f:
                data = json.load(f)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise argparse.ArgumentTypeError(f"expected a JSON file, {text} is not one ({e})") from None
        missing = [k for k in keys if k not in data] if isinstance(data, dict) else list(keys)
        if missing:
            raise argparse.ArgumentTypeError(f"expected a JSON object with {', '.join(keys)}; {text} has no "
                                             f"{', '.join(missing)}")
        return text

    return parse


def output_file(text: str) -> str:
    """Option type: a file the results can be written to, checked before anything runs: not a directory, in an
    existing directory, writable (tried: a file made for the check is removed again)."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"expected a file to write, got the directory {text!r}")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"expected a file in an existing directory, got {text!r} "
                                         f"({parent} is not a directory)")
    existed = os.path.exists(text)
    try:
        with open(text, "a"):
            pass
    except OSError as e:
        raise argparse.ArgumentTypeError(f"expected a writable file, got {text!r} ({e.strerror})") from None
    if not existed:
        os.remove(text)
    return text


def output_dir(text: str) -> str:
    """Option type: a directory files can be written to, made when they are written if it does not exist yet (its
    nearest existing parent is then the one that must be a writable directory)."""
    path = os.path.abspath(text)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"expected a directory, got {text!r} ({path} is a file)")
    try:
        tempfile.TemporaryFile(dir=path).close()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"expected a writable directory, got {text!r} "
                                         f"({path}: {e.strerror})") from None
    return text
