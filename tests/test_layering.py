"""The package's dependencies point one way, and tritium modules import each other at their top.

    server -> engine -> models -> {fused -> collectives -> shmem, ops, attention} -> runtime

A module of one of these packages may import only packages of a lower rank (never one beside it or above
it: that is how a cycle starts). Entry points (``tritium/__init__``, ``cli``, ``demo``, ``bench``) sit on
top and may import any of them; ``testing`` (compile checks, recording hooks) is imported by nobody in
the library. Imports are read from the source with ``ast``, not by importing anything.
"""

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tritium"
RANK = {"runtime": 0, "attention": 1, "ops": 1, "shmem": 1, "collectives": 2, "fused": 3, "models": 4,
        "engine": 5, "server": 6}
ENTRY_POINTS = {"__init__", "cli", "demo", "bench", "testing", "tune"}


def _package(module: str) -> str:
    """``tritium.models.llama`` -> ``models``; ``tritium`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path):
    """(imported tritium module, line, whether at module top level) of every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    this = _module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" if base == "tritium" else base for alias in node.names]
        else:
            continue
        for name in names:
            if name == "tritium" or name.startswith("tritium."):
                yield name, node.lineno, id(node) in top_level


def _all_imports():
    for path in sorted(SRC.rglob("*.py")):
        for name, line, top in _imports(path):
            yield path, _module_name(path), name, line, top


def test_source_tree_is_found():
    packages = {_package(_module_name(p)) for p in SRC.rglob("*.py")}
    assert {"engine", "models", "ops", "attention", "shmem", "runtime", "testing"} <= packages


def test_dependencies_point_one_way():
    wrong = []
    for path, module, name, line, _ in _all_imports():
        src, dst = _package(module), _package(name)
        if src == dst or src in ENTRY_POINTS:
            continue
        if dst == "testing" or dst == "__init__":
            wrong.append(f"{path.relative_to(SRC)}:{line}: {module} imports {name} (the library never imports it)")
        elif dst in ENTRY_POINTS:
            wrong.append(f"{path.relative_to(SRC)}:{line}: {module} imports the entry point {name}")
        elif src not in RANK or dst not in RANK:
            wrong.append(f"{path.relative_to(SRC)}:{line}: {module} -> {name}: a package outside the layering")
        elif RANK[dst] >= RANK[src]:
            wrong.append(f"{path.relative_to(SRC)}:{line}: {module} ({src}, rank {RANK[src]}) imports {name} "
                         f"({dst}, rank {RANK[dst]}): upward or sideways")
    assert not wrong, "\n".join(wrong)


def test_tritium_imports_at_module_top():
    """One mechanism picks the Triton interpreter (``import tritium``), so nothing needs a late import."""
    late = [f"{path.relative_to(SRC)}:{line}: {name}" for path, _, name, line, top in _all_imports() if not top]
    assert not late, "tritium imports inside functions or branches:\n" + "\n".join(late)


@pytest.mark.parametrize("source, expected", [
    ("from tritium.engine import LLM\n", "upward"),
    ("from tritium.attention import paged_attention\n", "sideways"),
    ("from tritium.testing import compile_check\n", "never imports"),
    ("import tritium.ops\n", None),
])
def test_checker_catches_violations(tmp_path, monkeypatch, source, expected):
    """The check itself can fail: an ops module importing the engine, a sibling or the test tooling."""
    fake = tmp_path / "tritium"
    (fake / "ops").mkdir(parents=True)
    (fake / "ops" / "bad.py").write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    if expected is None:
        test_dependencies_point_one_way()
    else:
        with pytest.raises(AssertionError, match=expected):
            test_dependencies_point_one_way()
