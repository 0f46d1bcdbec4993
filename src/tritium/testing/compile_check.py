"""Compile every kernel launch seen under the Triton interpreter for real GPU targets, on the CPU.

The interpreter runs kernels as Python, so it accepts code that the compiler rejects (non-constexpr
globals, Python defaults in nested @triton.jit calls, NVIDIA-only instructions on AMD, ...). CI has no
GPU, but Triton compiles to cubin (NVIDIA) and hsaco (AMD) without one. Two steps:

1. ``record(path)`` (installed by tests/conftest.py through :func:`record_from_env` when
   ``TRITIUM_RECORD_LAUNCHES`` names a file) appends one JSON line per distinct launch: kernel,
   argument types, constexpr values, options. Rank processes of multi-rank tests run
   :func:`record_from_env` too (conftest names it in ``TRITIUM_RANK_INIT``, which
   ``tritium.shmem.launch`` calls in every rank) and append to the same file.
2. ``python -m tritium.testing.compile_check FILE [--target cuda:90,hip:gfx942,hip:gfx950]`` compiles
   each distinct launch for each target with the interpreter off and fails listing every kernel and
   target that does not compile. The default targets: ``cuda:90`` (Hopper), ``hip:gfx942`` (MI300X),
   ``hip:gfx950`` (MI350X). The AMD targets compile a :func:`cover` of the launches (each kernel's
   largest launch, and every constexpr value, argument type and option its launches use); Hopper every
   launch of the kernels in ``WHOLE`` (attention) and a pairwise cover of the others' (each pair of those
   that one launch has together). ``--all-launches``: all of them.

What is compiled for a target is what the launchers launch there (:func:`variants`), not the recorded
launch as such: a launcher sets some constexprs from device probes, which the interpreter answers as
neither GPU does. :data:`ON_GPU` lists them per backend, each with the probe that decides it:

- NVIDIA: launches recorded with ``USE_PDL=False`` (the interpreter never uses programmatic dependent
  launch) are compiled with ``USE_PDL=True`` plus ``launch_pdl``, the variant Hopper runs where a
  launcher may use PDL, and as recorded (without PDL: the same code less the PDL wait and trigger) as a
  :func:`cover` of those, all of them with ``--all-launches``; ``FENCE`` (the async-proxy fence before
  TMA loads) follows ``USE_TMA``; on sm_90+ a ``PREFETCH_BYTES`` recorded as 0 (ops.skinny: the bulk L2
  prefetch, ``bulk_prefetch_supported()`` False under the interpreter) is compiled as a bf16 weight's
  ``num_stages * BLOCK_K`` columns.
- AMD: every NVIDIA-only feature is off, as the launchers choose it on ROCm (``torch.version.hip``):
  ``USE_PDL``, ``USE_TMA``, ``B_KMAJOR`` and ``FENCE`` are False and ``launch_pdl`` is dropped; ``num_stages``
  is at most 2 (``runtime.pipeline_stages``). A
  kernel that uses such a feature must branch on one of these constexprs (or on a new one, added here
  with its probe); one that does not fails the check for the hip targets.

Compile time (CI has 2 cores): launches that become the same after the tables are compiled once, and
every launch goes through Triton's frontend, but launches whose programs are then the same (a
constexpr that selects nothing in the code they reach) share the rest of the compilation (about a
fifth of the launches the tests record). Kernels defined inside functions cannot be imported by
name: they are listed, not compiled.
"""

import argparse
import hashlib
import importlib
import importlib.util
import inspect
import itertools
import json
import math
import os
import re
import sys
import tempfile
import time

from tritium.runtime import ROCM_MAX_STAGES

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
            entry = _describe(self.fn, args, kwargs, self.kwargs.get("do_not_specialize") or (),
                              self.kwargs.get("do_not_specialize_on_alignment") or ())
            key = json.dumps(entry, sort_keys=True)
            if key not in seen:
                seen.add(key)
                with open(path, "a") as f:
                    f.write(key + "\n")
        except Exception as e:  # recording must never break a test
            print(f"compile_check: could not record {self.fn.__name__}: {e}", file=sys.stderr)
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = run


def _describe(fn, args, kwargs, do_not_specialize=(), do_not_specialize_on_alignment=()):
    """One launch as JSON: argument types, constexprs, options, and ``aligned``: the arguments that
    Triton's JIT specialises as divisible by 16 on a GPU (a tensor whose address is, an int that is,
    unless the kernel says not to), which the compile check passes on as ``tt.divisibility``. Without
    them a kernel compiles to another program than the GPU runs (no vectorised, pipelined loads:
    paged attention at head_dim 256 used 76 KiB of shared memory instead of the 268 KiB it needs on an H100)."""
    import torch

    params = list(inspect.signature(fn).parameters.values())
    bound = dict(zip([p.name for p in params], args))
    bound.update({k: v for k, v in kwargs.items() if k not in _OPTIONS})
    signature, constexprs, aligned = {}, {}, []
    for i, p in enumerate(params):
        if p.name not in bound:
            continue
        value = bound[p.name]
        is_constexpr = "constexpr" in str(p.annotation)
        if is_constexpr or value is None:
            constexprs[p.name] = value
            signature[p.name] = "constexpr"
            continue
        t = _arg_type(value)
        if t is None:
            raise TypeError(f"argument {p.name}: cannot type {type(value).__name__}")
        signature[p.name] = t
        if p.name in do_not_specialize or i in do_not_specialize:
            continue
        if isinstance(value, torch.Tensor):
            dns_alignment = p.name in do_not_specialize_on_alignment or i in do_not_specialize_on_alignment
            if not dns_alignment and value.data_ptr() % 16 == 0:
                aligned.append(p.name)
        elif isinstance(value, int) and not isinstance(value, bool) and value % 16 == 0:
            aligned.append(p.name)
    options = {k: kwargs[k] for k in _OPTIONS if k in kwargs}
    return {"module": fn.__module__, "file": fn.__code__.co_filename, "name": fn.__qualname__, "signature": signature,
            "constexprs": constexprs, "options": options, "aligned": aligned}


# What a launcher passes on a GPU of each backend where the interpreter made it pass something else:
# constexpr name -> its value there, from the recorded constexprs; applied wherever a launch has it.
ON_GPU = {
    "cuda": {
        # fused.all_gather_matmul: FENCE = USE_TMA and not interpreting() (False under the interpreter)
        "FENCE": lambda c: c.get("USE_TMA", c["FENCE"]),
    },
    "hip": {
        "USE_PDL": lambda c: False,   # runtime.pdl_launch: pdl_supported() is False on ROCm
        "USE_TMA": lambda c: False,   # fused.matmul.launch_options: _tma_supported() is False on ROCm
        "B_KMAJOR": lambda c: False,  # fused.matmul.launch_options: B_KMAJOR = USE_TMA and b is K-major
        "FENCE": lambda c: False,     # fused.all_gather_matmul: FENCE = USE_TMA and not interpreting()
    },
}
# Launch options no launcher passes on a backend (runtime.pdl_launch gives launch_pdl only with USE_PDL).
DROPPED_OPTIONS = {"cuda": (), "hip": ("launch_pdl",)}
# Launch options the launchers cap on a backend (runtime.pipeline_stages: at most 2 stages on ROCm).
CAPPED_OPTIONS = {"cuda": {}, "hip": {"num_stages": ROCM_MAX_STAGES}}
DEFAULT_TARGETS = ("cuda:90", "hip:gfx942", "hip:gfx950")


def gpu_target(spec: str):
    """``cuda:<capability>`` (e.g. ``cuda:90``) or ``hip:<gfx arch>`` (e.g. ``hip:gfx942``) as a Triton
    ``GPUTarget`` (warp size 32 on NVIDIA, 64 on CDNA)."""
    from triton.backends.compiler import GPUTarget

    backend, _, arch = spec.partition(":")
    if backend == "cuda" and arch.isdigit():
        return GPUTarget("cuda", int(arch), 32)
    gfx = re.fullmatch(r"gfx(\d+)[0-9a-f]{2}", arch) if backend == "hip" else None
    if gfx:
        return GPUTarget("hip", arch, 32 if int(gfx[1]) >= 10 else 64)  # RDNA (gfx10 and later): wave32
    raise ValueError(f"target must be cuda:<capability> or hip:gfx<arch> (e.g. cuda:90, hip:gfx942), got {spec!r}")


def variants(entry: dict, target: str) -> list[dict]:
    """The launches that the launchers make on ``target`` for one recorded launch (see :data:`ON_GPU`)."""
    backend = target.partition(":")[0]
    constexprs = {k: ON_GPU[backend][k](entry["constexprs"]) if k in ON_GPU[backend] else v
                  for k, v in entry["constexprs"].items()}
    options = {k: min(v, CAPPED_OPTIONS[backend][k]) if k in CAPPED_OPTIONS[backend] else v
               for k, v in entry["options"].items() if k not in DROPPED_OPTIONS[backend]}
    hopper = backend == "cuda" and int(target.partition(":")[2]) >= 90
    if hopper and constexprs.get("PREFETCH_BYTES") == 0:  # ops.skinny: bulk_prefetch_supported() on sm_90+
        constexprs["PREFETCH_BYTES"] = 2 * options.get("num_stages", 3) * constexprs["BLOCK_K"]
    out = [dict(entry, constexprs=constexprs, options=options)]
    if hopper and constexprs.get("USE_PDL") is False:
        out.append(dict(entry, constexprs=dict(constexprs, USE_PDL=True), options=dict(options, launch_pdl=True)))
    return out


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


def _label(entry: dict) -> str:
    return f"{entry['module']}.{entry['name']}"


def _error(exc: Exception) -> str:
    """An exception as one failure description: a CompilationError shows where, its innermost cause why."""
    cause = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    why = f" (cause: {type(cause).__name__}: {str(cause)[:400]})" if cause is not exc else ""
    return f"{type(exc).__name__}: {str(exc)[-600:]}{why}"


def _frontend(entry: dict, target: str, ir_dir: str) -> tuple[bool, str]:
    """Triton's frontend and its target-independent passes (the ``ttir`` stage) for one launch:
    (True, path of the resulting TTIR file in ``ir_dir``, named by its content) or (False, the error)."""
    from triton._C.libtriton import ir
    from triton.compiler import ASTSource, make_backend

    if entry["module"] in ("__main__", "__mp_main__"):  # an example script: loaded under another name
        entry = dict(entry, module="_script_" + os.path.basename(entry["file"])[:-3])
    try:
        fn = getattr(_load_module(entry["module"], entry["file"]), entry["name"])
        names = list(inspect.signature(fn.fn if hasattr(fn, "fn") else fn).parameters)
        attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in entry.get("aligned", ())}
        src = ASTSource(fn=fn, signature=entry["signature"], constexprs=entry["constexprs"], attrs=attrs)
        backend = make_backend(gpu_target(target))
        options = backend.parse_options(dict(entry["options"], **src.parse_options()))
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = src.make_ir(gpu_target(target), options, backend.get_codegen_implementation(options),
                             backend.get_module_map(), context)
        stages = {}
        backend.add_stages(stages, options, src.language)
        text = str(stages["ttir"](module, {}))  # with source locations, for the later stages' errors
    except Exception as exc:
        return False, _error(exc)
    key = json.dumps([target, entry["options"], text], sort_keys=True)
    path = os.path.join(ir_dir, hashlib.sha256(key.encode()).hexdigest() + ".ttir")
    if not os.path.exists(path):
        with tempfile.NamedTemporaryFile("w", dir=ir_dir, delete=False) as f:
            f.write(text)
        os.replace(f.name, path)
    return True, path


# Shared memory (LDS) one program may use, bytes: what Triton's launcher checks on the GPU (H100/H200:
# 227 KiB, as the sweeps' OutOfResources errors report it; MI300X: 64 KiB of LDS; MI350X: 160 KiB).
SHARED_LIMITS = {"cuda:90": 232448, "hip:gfx942": 65536, "hip:gfx950": 163840}


def _backend(path: str, target: str, options: dict) -> str | None:
    """The rest of the compilation (from the ``ttir`` stage's output to cubin or hsaco); the error or None.
    A program that needs more shared memory than the target has (``SHARED_LIMITS``) compiles but could
    not launch there: an error too."""
    import triton

    try:
        kernel = triton.compile(path, target=gpu_target(target), options=options)
    except Exception as exc:
        return _error(exc)
    limit = SHARED_LIMITS.get(target)
    if limit is not None and kernel.metadata.shared > limit:
        return f"OutOfResources: needs {kernel.metadata.shared} bytes of shared memory, {target} has {limit}"
    return None


def load(path: str) -> tuple[list[dict], list[str]]:
    """The distinct recorded launches that can be compiled, and the names of those that cannot (kernels
    defined inside functions cannot be looked up by name). Launches that differ only in which arguments
    were aligned are one, compiled with every argument that any of them had aligned: the most vectorised
    program, the one that needs the most registers and shared memory (and the one production shapes,
    multiples of 16, get); compiling each alignment pattern would double the check's time."""
    merged = {}
    with open(path) as f:
        for line in sorted({line.strip() for line in f if line.strip()}):
            entry = json.loads(line)
            aligned = entry.pop("aligned", [])
            key = json.dumps(entry, sort_keys=True)
            merged.setdefault(key, (entry, set()))[1].update(aligned)
    entries = [dict(entry, aligned=sorted(aligned)) for entry, aligned in merged.values()]
    local = sorted({_label(e) for e in entries if "<locals>" in e["name"]})
    return [e for e in entries if "<locals>" not in e["name"]], local


def _items(launch: dict) -> set:
    """What one launch exercises: each constexpr value, argument type and launch option."""
    items = {("constexpr", k, json.dumps(v)) for k, v in launch["constexprs"].items()}
    items |= {("arg", k, t) for k, t in launch["signature"].items() if t != "constexpr"}
    return items | {("option", k, json.dumps(v)) for k, v in launch["options"].items()}


def _footprint(launch: dict) -> int:
    """How much shared memory and how many registers a launch's program may need, to order launches of
    one kernel: the product of its power-of-two int constexprs of at least 16 (tile sizes, head dims)
    times its pipeline stages."""
    ints = [v for v in launch["constexprs"].values() if isinstance(v, int) and not isinstance(v, bool)]
    return math.prod(v for v in ints if v >= 16 and v & (v - 1) == 0) * launch["options"].get("num_stages", 1)


# Kernels compiled at every recorded launch on Hopper (module prefixes): attention's tiles, stages, head
# dims and dtypes together set its shared memory and registers, and it is the package's core.
WHOLE = ("tritium.attention.",)


def cover(launches: list[dict], ways: int = 1, whole: tuple = ()) -> list[dict]:
    """A subset of ``launches`` in which every kernel shows each constexpr value, argument type and launch
    option that any of its launches has (``ways`` 2: each pair of them that one of its launches has
    together), by a greedy set cover per kernel (deterministic). It starts from the kernel's largest
    launch (:func:`_footprint`: its tiles times its stages; with ``ways`` 2 the largest of each set of
    argument types too, whose element widths scale the footprint), so that a program over the target's
    shared memory (``SHARED_LIMITS``) is found without compiling every launch. Kernels whose module starts
    with one of ``whole`` keep every launch. Used for the AMD targets (737 recorded launches became 120 at
    stop 47) and, pairwise, for Hopper's launches outside ``WHOLE`` (stop 50: 1,319 became 518); every
    feature switch and size of each kernel is still compiled, not every combination of them."""
    if ways not in (1, 2):
        raise ValueError(f"ways must be 1 (each value) or 2 (each pair of values), got {ways!r}")
    by_kernel = {}
    for launch in launches:
        by_kernel.setdefault((launch["module"], launch["name"]), []).append(launch)
    out = []
    for (module, _), group in by_kernel.items():
        if whole and module.startswith(whole):
            out += group
            continue
        items = [_items(launch) for launch in group]
        if ways == 2:
            items = [set(itertools.combinations(sorted(i), 2)) | i for i in items]
        missing = set().union(*items)
        seeds = {}
        for i, launch in enumerate(group):
            kind = _arg_types(launch) if ways == 2 else ()
            if kind not in seeds or _footprint(launch) > _footprint(group[seeds[kind]]):
                seeds[kind] = i
        for i in sorted(set(seeds.values()), key=lambda i: (-_footprint(group[i]), i)):
            missing -= items[i]
            out.append(group[i])
        while missing:
            best = max(range(len(group)), key=lambda i: (len(items[i] & missing), -i))
            missing -= items[best]
            out.append(group[best])
    return out


def _arg_types(launch: dict) -> tuple:
    return tuple(sorted((k, t) for k, t in launch["signature"].items() if t != "constexpr"))


def compile_all(entries: list[dict], targets: list[str], jobs: int = 1, covered: tuple = (),
                all_launches: bool = False) -> dict[str, tuple[int, int, list[tuple], int, str]]:
    """Compile each launch's :func:`variants` for each target, ``jobs`` processes for all targets together.
    Launches whose programs are the same after the frontend (a constexpr that selects nothing in the code
    they reach, an override that made two launches one) share the rest of the compilation: every launch
    runs through the frontend, each distinct program through the backend once. Targets in ``covered``
    compile only a :func:`cover` of the launches. On targets with programmatic dependent launch, the
    launches are compiled as the launchers make them there, each recorded without PDL with it (what
    Hopper runs by default): every launch of the kernels in ``WHOLE``, a pairwise :func:`cover` of the
    others'; and the launches without PDL as a :func:`cover` (the twin is the same code less the PDL wait
    and trigger). ``all_launches``: every launch both ways. Per target: (launches compiled, distinct
    programs, [(launch, error), ...], launches recorded, what was compiled of them when not all)."""
    tasks, recorded, notes = [], {}, {}
    for target in targets:
        seen, mine, twins = set(), [], []
        for entry in entries:
            made = variants(entry, target)
            for i, variant in enumerate(made):
                key = json.dumps(variant, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    # variants() gives the launch as recorded first, then its PDL form where there is one
                    (twins if len(made) > 1 and i == 0 else mine).append(variant)
        recorded[target] = len(mine) + len(twins)
        if target in covered:
            chosen = cover(mine + twins)
            note = (f"a cover of the {recorded[target]} recorded: every constexpr value, argument type and option "
                    f"of each kernel")
        elif all_launches:
            chosen = mine + twins
        else:
            paired, without = cover(mine, ways=2, whole=WHOLE), cover(twins)
            chosen = paired + without
            note = (f"{len(paired)} of the {len(mine)} as the launchers make them there, with PDL where they may use "
                    f"it: every launch of {', '.join(WHOLE)}*, a pairwise cover of the others'; and a cover of "
                    f"the {len(twins)} without PDL")
        if len(chosen) < recorded[target]:
            notes[target] = note
        tasks += [(variant, target) for variant in chosen]
    with tempfile.TemporaryDirectory(prefix="compile-check-") as ir_dir, _executor(jobs) as pool:
        front = list(pool.map(_frontend, [e for e, _ in tasks], [t for _, t in tasks], [ir_dir] * len(tasks),
                              chunksize=4))
        programs = {}  # TTIR path -> (target, options) of the first launch that made it
        for (entry, target), (ok, path) in zip(tasks, front):
            if ok:
                programs.setdefault(path, (target, entry["options"]))
        back = dict(zip(programs, pool.map(_backend, list(programs), *zip(*programs.values()), chunksize=2)))
    results = {}
    for t in targets:
        mine = [(entry, back[out] if ok else out) for (entry, target), (ok, out) in zip(tasks, front) if target == t]
        distinct = sum(target == t for target, _ in programs.values())
        results[t] = (len(mine), distinct, [(entry, error) for entry, error in mine if error], recorded[t],
                      notes.get(t, ""))
    return results


class _Serial:
    """A stand-in for a process pool (``--jobs 1``): ``map`` in this process."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, *iterables, chunksize=1):
        return map(fn, *iterables)


def _executor(jobs: int):
    if jobs <= 1:
        return _Serial()
    import concurrent.futures
    import multiprocessing

    return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))


def report(results: dict[str, tuple[int, int, list[tuple], int, str]], seconds: float) -> list[str]:
    """Lines for the log: each failing kernel once per target and error (with its first launch's
    constexprs and how many launches share it), a line per target, the summary, and the failing list."""
    lines, failing = [], []
    for target, (_, _, failures, _, _) in results.items():
        groups = {}
        for entry, error in failures:
            groups.setdefault((_label(entry), error), []).append(entry)
        for (label, error), group in groups.items():
            more = f" (and {len(group) - 1} more launches of it)" if len(group) > 1 else ""
            lines.append(f"FAILED {target} {label} {group[0]['constexprs']}{more}: {error}\n")
        failing += sorted({f"  {target} {_label(e)}" for e, _ in failures})
    for target, (count, distinct, failures, recorded, note) in results.items():
        of = f" ({note})" if note else ""
        lines.append(f"{target} compile check of {count} kernel launches{of}: {count - len(failures)} passed, "
                     f"{len(failures)} failed ({distinct} distinct programs after the frontend)")
    total = sum(r[0] for r in results.values())
    failed = sum(len(r[2]) for r in results.values())
    lines.append(f"compile-check: {total - failed} passed, {failed} failed ({', '.join(results)}; {seconds:.0f} s)")
    if failing:
        lines += ["kernels that do not compile:"] + failing
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="launch record written by the tests (TRITIUM_RECORD_LAUNCHES)")
    parser.add_argument("--target", action="append",
                        help=f"cuda:<capability> or hip:gfx<arch>; repeat or separate with commas "
                             f"(default: {','.join(DEFAULT_TARGETS)})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compiler processes")
    parser.add_argument("--all-launches", action="store_true",
                        help="compile every recorded launch, on Hopper both with and without PDL (default: "
                             "covers, see cover() and compile_all())")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        parser.error("run with TRITON_INTERPRET=0: the kernels must be compiled, not interpreted (without it, "
                     "importing tritium on a machine without a GPU turns the interpreter on)")
    targets = list(dict.fromkeys(t.strip() for spec in args.target or DEFAULT_TARGETS for t in spec.split(",")
                                 if t.strip()))
    for target in targets:
        try:
            gpu_target(target)
        except ValueError as e:
            parser.error(str(e))
    entries, local = load(args.path)
    if local:
        print(f"not compiled: {len(local)} kernels defined inside functions (no name to import them by): "
              f"{', '.join(local)}")
    start = time.monotonic()
    covered = () if args.all_launches else tuple(t for t in targets if t.startswith("hip:"))
    results = compile_all(entries, targets, args.jobs, covered, all_launches=args.all_launches)
    print("\n".join(report(results, time.monotonic() - start)))
    return 1 if any(r[2] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
