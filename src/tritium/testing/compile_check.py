"""Compile every kernel launch seen under the Triton interpreter for a real GPU target, on the CPU.

The interpreter runs kernels as Python, so it accepts code that the compiler rejects (non-constexpr
globals, Python defaults in nested @triton.jit calls, ...). CI has no GPU, but Triton compiles to
PTX and cubin without one. Two steps:

1. ``record(path)`` (installed by tests/conftest.py through :func:`record_from_env` when
   ``TRITIUM_RECORD_LAUNCHES`` names a file) appends one JSON line per distinct launch: kernel,
   argument types, constexpr values, options. Rank processes of multi-rank tests run
   :func:`record_from_env` too (conftest names it in ``TRITIUM_RANK_INIT``, which
   ``tritium.shmem.launch`` calls in every rank) and append to the same file.
2. ``python -m tritium.testing.compile_check FILE [--arch 90]`` compiles each distinct launch with
   the interpreter off and fails listing every kernel that does not compile.

Launches recorded with ``USE_PDL=False`` (the interpreter never uses programmatic dependent launch) are
also compiled with ``USE_PDL=True`` and ``launch_pdl``, the variant the GPU runs on Hopper.
"""

import argparse
import importlib
import importlib.util
import json
import os
import sys

_DTYPES = {
    "torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32", "torch.float64": "fp64",
    "torch.int8": "i8", "torch.int16": "i16", "torch.int32": "i32", "torch.int64": "i64", "torch.uint8": "u8",
    "torch.bool": "i1", "torch.float8_e4m3fn": "fp8e4nv", "torch.float8_e5m2": "fp8e5",
}
_OPTIONS = ("num_warps", "num_stages")


def _arg_type(value):
    import torch

    if isinstance(value, torch.Tensor):
        return "*" + _DTYPES[str(value.dtype)]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -2**31 <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    return None


def record_from_env() -> None:
    """Install :func:`record` when ``TRITIUM_RECORD_LAUNCHES`` names a file and kernels are interpreted."""
    path = os.environ.get("TRITIUM_RECORD_LAUNCHES")
    if path and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        record(path)


def record(path: str) -> None:
    """Wrap the interpreter's launch so that each distinct launch is appended to ``path``."""
    from triton.runtime.interpreter import InterpretedFunction

    seen = set()
    original = InterpretedFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        try:
            entry = _describe(self.fn, args, kwargs)
            key = json.dumps(entry, sort_keys=True)
            if key not in seen:
                seen.add(key)
                with open(path, "a") as f:
                    f.write(key + "\n")
        except Exception as e:  # recording must never break a test
            print(f"compile_check: could not record {self.fn.__name__}: {e}", file=sys.stderr)
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = run


def _describe(fn, args, kwargs):
    import inspect

    params = list(inspect.signature(fn).parameters.values())
    bound = dict(zip([p.name for p in params], args))
    bound.update({k: v for k, v in kwargs.items() if k not in _OPTIONS})
    signature, constexprs = {}, {}
    for p in params:
        if p.name not in bound:
            continue
        value = bound[p.name]
        is_constexpr = "constexpr" in str(p.annotation)
        if is_constexpr or value is None:
            constexprs[p.name] = value
            signature[p.name] = "constexpr"
        else:
            t = _arg_type(value)
            if t is None:
                raise TypeError(f"argument {p.name}: cannot type {type(value).__name__}")
            signature[p.name] = t
    options = {k: kwargs[k] for k in _OPTIONS if k in kwargs}
    return {"module": fn.__module__, "file": fn.__code__.co_filename, "name": fn.__qualname__, "signature": signature,
            "constexprs": constexprs, "options": options}


def _load_module(name, file):
    """The kernel's module: imported by name, or loaded from its file (test helpers, examples)."""
    if name in sys.modules:
        return sys.modules[name]
    try:
        return importlib.import_module(name)
    except ImportError:
        sys.path.insert(0, os.path.dirname(file))  # its sibling imports
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module


def _compile_one(entry: dict, arch: int) -> str | None:
    """Compile one recorded launch for CUDA sm_<arch>; a failure description, or None."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    label = f"{entry['module']}.{entry['name']}"
    if entry["module"] in ("__main__", "__mp_main__"):  # an example script: loaded under another name
        entry = dict(entry, module="_script_" + os.path.basename(entry["file"])[:-3])
    try:
        fn = getattr(_load_module(entry["module"], entry["file"]), entry["name"])
        src = ASTSource(fn=fn, signature=entry["signature"], constexprs=entry["constexprs"])
        triton.compile(src, target=GPUTarget("cuda", arch, 32), options=entry["options"])
    except Exception as exc:
        return f"{label} {entry['constexprs']}: {type(exc).__name__}: {str(exc)[-600:]}"
    return None


def compile_all(path: str, arch: int = 90, jobs: int = 1) -> tuple[int, list[str]]:
    """Compile each distinct recorded launch; returns (number compiled, failure descriptions)."""
    with open(path) as f:
        keys = sorted({line.strip() for line in f if line.strip()})
    # Kernels defined inside functions cannot be looked up by name.
    entries = [e for e in map(json.loads, keys) if "<locals>" not in e["name"]]
    entries += [dict(e, constexprs=dict(e["constexprs"], USE_PDL=True), options=dict(e["options"], launch_pdl=True))
                for e in entries if e["constexprs"].get("USE_PDL") is False]
    if jobs <= 1:
        results = [_compile_one(e, arch) for e in entries]
    else:
        import concurrent.futures
        import multiprocessing

        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = list(pool.map(_compile_one, entries, [arch] * len(entries), chunksize=4))
    return len(entries), [r for r in results if r is not None]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="launch record written by the tests (TRITIUM_RECORD_LAUNCHES)")
    parser.add_argument("--arch", type=int, default=90, help="CUDA compute capability, e.g. 90 for Hopper")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compiler processes")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        parser.error("run with TRITON_INTERPRET=0: the kernels must be compiled, not interpreted (without it, "
                     "importing tritium on a machine without a GPU turns the interpreter on)")
    total, failures = compile_all(args.path, args.arch, args.jobs)
    for failure in failures:
        print("FAILED", failure, "\n")
    print(f"sm_{args.arch} compile check of {total} kernel launches")
    print(f"compile-check: {total - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
