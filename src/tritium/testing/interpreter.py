"""The Triton interpreter without its per-call re-patching of ``triton.language`` (tests' CPU time).

Under ``TRITON_INTERPRET=1`` a kernel launch patches ``triton.language``'s builtins to the interpreter's once for
the launch and restores them after it (``GridExecutor``). But every call of a nested ``@triton.jit`` function
inside the kernel patches them again (``InterpretedFunction.__call__`` calls ``_patch_lang``, which walks the
modules with ``inspect.getmembers``), once per call, per program: a test that runs an engine made ~20,000 such
calls over 261 launches, 28.6 s of its 150 (19%; Triton 3.6, cProfile). Within a launch those calls patch what
the launch or an earlier call in it has already patched, with the same builder, so :func:`skip_nested_patching`
skips them: a nested function is patched as before only the first time in a launch that its module reaches a
part of the language not yet patched in it (``tl.core``, which triton.language.standard's ``tl.sum`` uses, where
the kernel imported only ``tl``); a jit function called outside any launch always.
"""

from __future__ import annotations

import inspect
import threading

import triton.language as tl
from triton.runtime import interpreter

from tritium.runtime import interpreting
from tritium.testing.compile_check import record_from_env

_installed = False


def skip_nested_patching() -> None:
    """Patch the interpreter (once a process) so that nested jit calls inside a launch skip re-patching the
    language the launch already patched. A no-op unless the interpreter is what runs kernels."""
    global _installed
    if _installed or not interpreting():
        return
    original_patch, original_launch = interpreter._patch_lang, interpreter.GridExecutor.__call__
    state = threading.local()          # .launch: [the language modules patched so far in the running launch]
    langs_of: dict[object, frozenset[int]] = {}

    def langs(fn) -> frozenset[int]:
        key = getattr(fn, "__code__", fn)
        found = langs_of.get(key)
        if found is None:
            found = frozenset(id(v) for v in fn.__globals__.values()
                              if inspect.ismodule(v) and (v is tl or v is tl.core))
            langs_of[key] = found
        return found

    def patch_lang(fn):
        launch = getattr(state, "launch", None)
        if launch is None:
            return original_patch(fn)           # a jit function called outside any launch: as before
        mine = langs(fn)                        # never empty (upstream asserts it): a launch's first call patches
        if mine <= launch[0]:
            return None                         # a nested call: what its code reaches is patched already
        scope = original_patch(fn)              # the launch's own (GridExecutor restores it), or a nested call
        launch[0] = launch[0] | mine            # reaching more (``tl.core`` for tl.sum, tl.zeros...): as upstream
        return scope

    def launch(self, *args, **kwargs):
        outer = getattr(state, "launch", None)
        state.launch = [frozenset()]
        try:
            return original_launch(self, *args, **kwargs)
        finally:
            state.launch = outer

    original_np_dtype = interpreter._get_np_dtype
    scalars: dict[object, object] = {}
    pointer = original_np_dtype(tl.pointer_type(tl.int8))

    def get_np_dtype(tt_dtype):
        """``_get_np_dtype`` without building its table of 17 dtypes at each of its calls (6% of an engine test's
        interpreted time): a block's element type, a pointer's uint64, a scalar's numpy dtype as upstream's."""
        if isinstance(tt_dtype, tl.block_type):
            tt_dtype = tt_dtype.element_ty
        if isinstance(tt_dtype, tl.pointer_type):
            return pointer
        found = scalars.get(tt_dtype)
        if found is None:
            found = scalars[tt_dtype] = original_np_dtype(tt_dtype)
        return found

    # GridExecutor.__call__ patches with `_patch_lang` as a launch starts and restores the scope it returns when
    # the launch ends; InterpretedFunction.__call__ (a nested call) ignores the result. Both look it up in the
    # module, so replacing the module's name is enough.
    interpreter._patch_lang = patch_lang
    interpreter.GridExecutor.__call__ = launch
    interpreter._get_np_dtype = get_np_dtype
    _installed = True


def install_test_hooks() -> None:
    """What the test suite installs in its processes (tests/conftest.py) and, named in ``TRITIUM_RANK_INIT``, in
    every rank or engine-worker process they start: the launch recorder of the compile check
    (:func:`~tritium.testing.compile_check.record_from_env`) and :func:`skip_nested_patching`."""
    record_from_env()
    skip_nested_patching()
