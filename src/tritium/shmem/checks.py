"""Checks of user input shared by the host side of ``tritium.shmem``: each error names the argument."""

from __future__ import annotations

import math
import numbers


def integer(name: str, value, minimum: int | None = None) -> int:
    """``value`` as an int (Python or numpy integers; not bool), at least ``minimum``. ValueError otherwise,
    for a wrong type too (as these checks always raised)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or (minimum is not None and value < minimum):
        at_least = "" if minimum is None else f" >= {minimum}"
        raise ValueError(f"{name} must be an int{at_least}, got {type(value).__name__} {value!r}")
    return int(value)


def seconds(name: str, value) -> float:
    """``value``, checked to be a positive, finite number of seconds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be positive, finite seconds, got {value!r}")
    return value
