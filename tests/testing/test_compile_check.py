"""The compile check: what it compiles for each target, that it fails naming the kernel and target when a
kernel does not compile for AMD, and that its AMD constexprs are the launchers' choices on ROCm.

The check itself runs in a subprocess with the interpreter off (pytest runs under TRITON_INTERPRET=1), on
records written here from the kernels of check_kernels.py (described, never launched: a launch would
land in the suite's own record)."""

import importlib
import itertools
import json
import os
import subprocess
import sys

import pytest
import torch

import check_kernels
from tritium import runtime
from tritium.testing import compile_check

fused_matmul = importlib.import_module("tritium.fused.matmul")  # the module (tritium.fused.matmul is the op)

AMD = ("hip:gfx942", "hip:gfx950")


def _entry(kernel, *args, **kwargs) -> dict:
    return compile_check._describe(kernel.fn, args, kwargs)


def _x():
    return torch.zeros(64, dtype=torch.int32)


def _switched(use_pdl: bool, use_tma: bool, **options) -> dict:
    return _entry(check_kernels.switched_kernel, _x(), 64, BLOCK=64, USE_PDL=use_pdl, USE_TMA=use_tma, **options)


def _check(tmp_path, entries, *args, script=None):
    """Run the compile check on a record of ``entries``; (exit code, its report on stdout; stderr, where the
    compiler's own messages go, appended after a marker for assertion messages)."""
    record = tmp_path / "launches.jsonl"
    record.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))
    env = dict(os.environ, TRITON_INTERPRET="0")
    env.pop("TRITIUM_RECORD_LAUNCHES", None)
    command = ["-c", script] if script else ["-m", "tritium.testing.compile_check"]
    run = subprocess.run([sys.executable, *command, str(record), "--jobs", "1", *args], env=env,
                         capture_output=True, text=True, timeout=300)
    return run.returncode, run.stdout + _STDERR + run.stderr


_STDERR = "\n--- stderr ---\n"


def test_variants_follow_the_launchers_on_each_backend():
    recorded = _switched(use_pdl=False, use_tma=True, num_warps=4)
    hopper = compile_check.variants(recorded, "cuda:90")
    assert [(v["constexprs"]["USE_PDL"], v["options"].get("launch_pdl")) for v in hopper] == [(False, None),
                                                                                             (True, True)]
    assert all(v["constexprs"]["USE_TMA"] is True for v in hopper)
    assert len(compile_check.variants(recorded, "cuda:80")) == 1  # no programmatic dependent launch before sm_90
    deep = _switched(use_pdl=False, use_tma=False, num_stages=4)
    assert [v["options"]["num_stages"] for v in compile_check.variants(deep, "cuda:90")] == [4, 4]
    assert [v["options"]["num_stages"] for v in compile_check.variants(deep, "hip:gfx942")] == [2]
    for target in AMD:
        (amd,) = compile_check.variants(recorded, target)
        assert amd["constexprs"] == dict(recorded["constexprs"], USE_PDL=False, USE_TMA=False)
        assert amd["options"] == {"num_warps": 4}
    # a launch recorded on the NVIDIA path is compiled on AMD's
    (amd,) = compile_check.variants(_switched(use_pdl=True, use_tma=True, launch_pdl=True), "hip:gfx942")
    assert (amd["constexprs"]["USE_PDL"], amd["constexprs"]["USE_TMA"], amd["options"]) == (False, False, {})
    # the skinny GEMM's bulk L2 prefetch: on sm_90+ only, sized by its pipeline
    skinny = dict(recorded, constexprs={"USE_PDL": False, "PREFETCH_BYTES": 0, "BLOCK_K": 128},
                  options={"num_warps": 4, "num_stages": 4})
    assert [v["constexprs"]["PREFETCH_BYTES"] for v in compile_check.variants(skinny, "cuda:90")] == [1024, 1024]
    assert [v["constexprs"]["PREFETCH_BYTES"] for v in compile_check.variants(skinny, "cuda:80")] == [0]
    assert compile_check.variants(skinny, "hip:gfx942")[0]["constexprs"]["PREFETCH_BYTES"] == 0
    fused = dict(recorded, constexprs={"USE_TMA": True, "B_KMAJOR": True, "FENCE": False})
    assert compile_check.variants(fused, "cuda:90")[0]["constexprs"]["FENCE"] is True
    assert compile_check.variants(fused, "hip:gfx950")[0]["constexprs"] == dict.fromkeys(fused["constexprs"], False)


def test_amd_constexprs_are_what_the_launchers_choose_on_rocm(monkeypatch):
    """Each constexpr that ON_GPU["hip"] sets is asked of the launcher's own probe with ROCm simulated (a
    compiled run, torch.version.hip set: ROCm devices are "cuda" devices)."""
    assert set(compile_check.ON_GPU["hip"]) == {"USE_PDL", "USE_TMA", "B_KMAJOR", "FENCE"}
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(torch.version, "hip", "6.4")
    gpu = torch.device("cuda", 0)
    assert runtime.pdl_launch(gpu) == {"USE_PDL": False}
    assert fused_matmul._tma_supported(gpu) is False
    # B_KMAJOR (and all_gather_matmul's FENCE) only with TMA: launch_options without it
    monkeypatch.setattr(fused_matmul, "_tma_supported", lambda device: False)
    a, w = torch.zeros(64, 32, dtype=torch.float16), torch.zeros(48, 32, dtype=torch.float16)
    opts = fused_matmul.launch_options(a, w.t(), torch.zeros(64, 48, dtype=torch.float16),
                                       fused_matmul.MatmulConfig(64, 64, 32))
    assert (opts["USE_TMA"], opts["B_KMAJOR"]) == (False, False)
    # num_stages: at most CAPPED_OPTIONS["hip"] (MatmulConfig's default is 3), as compile_check.variants caps it
    assert compile_check.CAPPED_OPTIONS["hip"] == {"num_stages": runtime.ROCM_MAX_STAGES} == {"num_stages": 2}
    assert opts["num_stages"] == 2 and runtime.pipeline_stages(6) == 2
    monkeypatch.setattr(torch.version, "hip", None)
    assert runtime.pipeline_stages(6) == 6
    assert opts["DOT_PRECISION"] == "ieee"  # the one precision every backend accepts (gfx950 has no tf32)


def test_target_option():
    assert compile_check.gpu_target("cuda:90").arch == 90
    assert (compile_check.gpu_target("hip:gfx942").arch, compile_check.gpu_target("hip:gfx942").warp_size) == (
        "gfx942", 64)
    for bad in ("hip:942", "cuda:sm90", "rocm:gfx942", "hip:gfxzz"):
        with pytest.raises(ValueError, match="cuda:<capability> or hip:gfx<arch>"):
            compile_check.gpu_target(bad)


def test_check_passes_portable_kernels_on_every_target(tmp_path):
    entries = [_entry(check_kernels.portable_kernel, _x(), 64, BLOCK=64), _switched(use_pdl=False, use_tma=True)]
    code, out = _check(tmp_path, entries)
    assert code == 0, out
    assert "cuda:90 compile check of 3 kernel launches: 3 passed, 0 failed (3 distinct" in out  # + the PDL variant
    for target in AMD:
        assert f"{target} compile check of 2 kernel launches: 2 passed, 0 failed (2 distinct" in out
    assert "compile-check: 7 passed, 0 failed (cuda:90, hip:gfx942, hip:gfx950;" in out


def test_launches_of_one_program_are_compiled_once_and_all_counted(tmp_path):
    entries = [_entry(check_kernels.portable_kernel, _x(), 64, BLOCK=64, ADD=add, TAG=tag)
               for add, tag in ((True, 0), (True, 1), (False, 0))]
    code, out = _check(tmp_path, entries, "--jobs", "2", "--all-launches")
    assert code == 0, out
    for target in ("cuda:90",) + AMD:
        assert f"{target} compile check of 3 kernel launches: 3 passed, 0 failed (2 distinct" in out


def test_check_fails_naming_each_kernel_and_target_that_does_not_compile(tmp_path):
    entries = [_entry(check_kernels.portable_kernel, _x(), 64, BLOCK=64),
               _entry(check_kernels.ptx_kernel, _x(), BLOCK=64, TAG=0),
               _entry(check_kernels.ptx_kernel, _x(), BLOCK=64, TAG=1)]  # the same program: both fail
    code, out = _check(tmp_path, entries, "--target", "cuda:90", "--target", ",".join(AMD))
    assert code == 1, out
    assert "cuda:90 compile check of 3 kernel launches: 3 passed, 0 failed (2 distinct" in out
    for target in AMD:
        assert f"FAILED {target} check_kernels.ptx_kernel {{'BLOCK': 64, 'TAG': 0}} (and 1 more launches of it)" in out
        assert f"{target} compile check of 3 kernel launches: 1 passed, 2 failed (2 distinct" in out
    assert out.partition(_STDERR)[0].rstrip().endswith("kernels that do not compile:\n" + "\n".join(
        f"  {target} check_kernels.ptx_kernel" for target in AMD))


def test_without_the_amd_constexprs_the_nvidia_path_fails_on_amd(tmp_path):
    """What makes switched_kernel pass on AMD is ON_GPU["hip"]: emptied, its NVIDIA path is compiled there."""
    script = ("import sys\nfrom tritium.testing import compile_check\ncompile_check.ON_GPU['hip'] = {}\n"
              "sys.exit(compile_check.main(sys.argv[1:]))")
    for use_pdl, use_tma in ((True, False), (False, True)):
        code, out = _check(tmp_path, [_switched(use_pdl, use_tma)], "--target", "hip:gfx942", script=script)
        assert code == 1 and "FAILED hip:gfx942 check_kernels.switched_kernel" in out, out


def test_amd_targets_compile_a_cover_of_the_launches(tmp_path):
    """Four launches: every ADD and TAG value is in two of them. AMD compiles two that together show every
    value (cuda:90 all four, and AMD too with --all-launches)."""
    entries = [_entry(check_kernels.portable_kernel, _x(), 64, BLOCK=64, ADD=add, TAG=tag)
               for add in (True, False) for tag in (0, 1)]
    chosen = compile_check.cover(entries)
    assert len(chosen) == 2
    assert {c["constexprs"]["ADD"] for c in chosen} == {True, False}
    assert {c["constexprs"]["TAG"] for c in chosen} == {0, 1}
    code, out = _check(tmp_path, entries)
    assert code == 0, out
    assert "cuda:90 compile check of 4 kernel launches: 4 passed" in out
    for target in AMD:
        assert (f"{target} compile check of 2 kernel launches (a cover of the 4 recorded: every constexpr value, "
                f"argument type and option of each kernel): 2 passed, 0 failed") in out
    code, out = _check(tmp_path, entries, "--target", "hip:gfx942", "--all-launches")
    assert code == 0 and "hip:gfx942 compile check of 4 kernel launches: 4 passed" in out, out


def test_hopper_compiles_every_launch_with_pdl_and_a_cover_without(tmp_path):
    """Four launches recorded without PDL (each pair of BLOCK and USE_TMA values in one of them): cuda:90
    compiles all four with PDL, as Hopper launches them (their pairwise cover), and two without it that show
    every value; all eight with --all-launches."""
    entries = [_switched(use_pdl=False, use_tma=tma, num_warps=4) for tma in (True, False)]
    entries += [dict(e, constexprs=dict(e["constexprs"], BLOCK=128)) for e in entries]
    code, out = _check(tmp_path, entries, "--target", "cuda:90")
    assert code == 0, out
    assert ("cuda:90 compile check of 6 kernel launches (4 of the 4 as the launchers make them there, with PDL "
            "where they may use it: every launch of tritium.attention.*, a pairwise cover of the others'; and a "
            "cover of the 4 without PDL): 6 passed, 0 failed (6 distinct") in out
    code, out = _check(tmp_path, entries, "--target", "cuda:90", "--all-launches")
    assert code == 0 and "cuda:90 compile check of 8 kernel launches: 8 passed, 0 failed (8 distinct" in out, out
    hopper = [v for e in entries for v in compile_check.variants(e, "cuda:90")]
    assert sorted(v["constexprs"]["USE_PDL"] for v in hopper) == [False] * 4 + [True] * 4


def test_cover_starts_from_each_kernels_largest_launch():
    """64- and 128-wide blocks at 2 and 3 stages: the first two launches show every value, but not the
    128-wide block at 3 stages, the one that needs the most shared memory; the cover compiles it first,
    then what it lacks."""
    def launch(block, stages, add):
        entry = _entry(check_kernels.portable_kernel, _x(), 64, BLOCK=block, ADD=add, TAG=0)
        return dict(entry, options=dict(entry["options"], num_stages=stages))

    entries = [launch(128, 2, True), launch(64, 3, False), launch(128, 3, True)]
    assert compile_check._footprint(entries[2]) > max(compile_check._footprint(e) for e in entries[:2])
    chosen = compile_check.cover(entries)
    assert chosen[0] == entries[2] and len(chosen) == 3


def test_pairwise_cover_compiles_each_pair_of_values_once_and_whole_kernels_whole():
    """Eight launches, every combination of BLOCK (64/128), ADD and TAG (0/1), in int32 and a float32 copy of
    the largest: the pairwise cover shows every pair of values that one launch has together, in fewer
    launches, starting from the largest launch of each argument type; a kernel named in ``whole`` keeps
    all of them."""
    def launch(block, add, tag, x=None):
        return _entry(check_kernels.portable_kernel, _x() if x is None else x, 64, BLOCK=block, ADD=add, TAG=tag)

    entries = [launch(b, a, t) for b in (64, 128) for a in (True, False) for t in (0, 1)]
    entries.append(launch(128, True, 1, torch.zeros(64)))  # another argument type: its own largest launch
    chosen = compile_check.cover(entries, ways=2)
    pairs = lambda ls: {p for e in ls for p in itertools.combinations(sorted(compile_check._items(e)), 2)}
    assert pairs(chosen) == pairs(entries) and len(chosen) < len(entries)
    assert chosen[0]["constexprs"]["BLOCK"] == 128 and entries[-1] in chosen
    assert len(compile_check.cover(entries)) == 3  # one way: each value (and argument type) once
    assert compile_check.cover(entries, ways=2, whole=("check_kernels",)) == entries
    assert compile_check.cover(entries, ways=2, whole=("tritium.attention.",)) == chosen
    with pytest.raises(ValueError, match="ways must be 1"):
        compile_check.cover(entries, ways=3)


def test_cover_keeps_each_kernel_apart():
    a = [_entry(check_kernels.portable_kernel, _x(), 64, BLOCK=64, ADD=True, TAG=0)]
    b = [_entry(check_kernels.ptx_kernel, _x(), BLOCK=64, TAG=0)]
    assert len(compile_check.cover(a + b)) == 2  # the same constexpr values, two kernels: both compiled


def test_record_names_the_arguments_the_gpu_specialises_as_divisible_by_16():
    """A 16-byte-aligned tensor and an int divisible by 16 are recorded as ``aligned`` (compiled with
    tt.divisibility, as Triton's JIT specialises them on a GPU); a misaligned view, an int that is not,
    and an argument the kernel does not specialise are not."""
    x = _x()
    assert x.data_ptr() % 16 == 0
    assert _entry(check_kernels.portable_kernel, x, 64, BLOCK=64)["aligned"] == ["x_ptr", "n"]
    assert _entry(check_kernels.portable_kernel, x[1:], 63, BLOCK=64)["aligned"] == []
    entry = compile_check._describe(check_kernels.portable_kernel.fn, (x, 64), dict(BLOCK=64),
                                    do_not_specialize=["n"], do_not_specialize_on_alignment=["x_ptr"])
    assert entry["aligned"] == []


def test_aligned_arguments_reach_the_compiler(tmp_path):
    """The recorded ``aligned`` arguments are compiled as divisible by 16: the TTIR says so."""
    entry = _entry(check_kernels.portable_kernel, _x(), 64, BLOCK=64)
    script = ("import sys, tempfile\nfrom tritium.testing import compile_check\n"
              "entries, _ = compile_check.load(sys.argv[1])\n"
              "for aligned in (True, False):\n"
              "    e = dict(entries[0], aligned=entries[0]['aligned'] if aligned else [])\n"
              "    ok, path = compile_check._frontend(e, 'cuda:90', tempfile.mkdtemp())\n"
              "    print(aligned, ok, open(path).read().count('tt.divisibility = 16'))\n")
    code, out = _check(tmp_path, [entry], script=script)
    assert code == 0, out
    assert "True True 2" in out and "False True 0" in out, out


def test_a_program_over_the_targets_shared_memory_fails(tmp_path):
    """A program that compiles but needs more shared memory than the target has (SHARED_LIMITS; here
    made smaller than any program's) could not launch there: the check fails, naming it."""
    entries = [_entry(check_kernels.portable_kernel, _x(), 64, BLOCK=64)]
    script = ("import sys\nfrom tritium.testing import compile_check\n"
              "compile_check.SHARED_LIMITS['hip:gfx942'] = -1\n"
              "sys.exit(compile_check.main(sys.argv[1:]))\n")
    code, out = _check(tmp_path, entries, "--target", "cuda:90,hip:gfx942", script=script)
    assert code == 1, out
    assert "FAILED hip:gfx942 check_kernels.portable_kernel" in out and "bytes of shared memory, hip:gfx942 has -1" in out
    assert "cuda:90 compile check of 1 kernel launches: 1 passed, 0 failed" in out
    assert set(compile_check.SHARED_LIMITS) == {"cuda:90", "hip:gfx942", "hip:gfx950"}


def test_launches_differing_only_in_alignment_are_compiled_once_with_the_union(tmp_path):
    a = _entry(check_kernels.portable_kernel, _x(), 64, BLOCK=64)
    b = _entry(check_kernels.portable_kernel, _x()[1:], 64, BLOCK=64)  # x misaligned, n aligned
    c = _entry(check_kernels.portable_kernel, _x(), 63, BLOCK=64)      # x aligned, n not
    record = tmp_path / "launches.jsonl"
    record.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in (b, c)))
    (entry,), _ = compile_check.load(str(record))
    assert entry["aligned"] == ["n", "x_ptr"] and sorted(a["aligned"]) == entry["aligned"]
