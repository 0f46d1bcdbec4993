"""What the command-line tests of ``python -m tritium.bench`` and ``python -m tritium.tune`` share."""

import pytest
import torch


def refused(main, argv: list[str], capsys) -> str:
    """The error of ``main(argv)`` refusing its arguments, checked as a user meets it: exit status 2 and one line
    on stderr, no traceback."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err, err
    return err.strip()


def answered(main, argv: list[str], capsys) -> str:
    """What ``main(argv)`` prints answering --help or --list, with exit status 0."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr().out
    assert exc.value.code == 0, out
    return out


@pytest.fixture
def cpu_only(monkeypatch):
    """This process as a machine without a GPU sees itself, whatever it has (kernels under the interpreter)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
