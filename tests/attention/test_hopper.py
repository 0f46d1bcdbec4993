"""The Gluon Hopper prefill kernel (``tritium.attention.hopper``, selected by ``AttentionConfig(kernel="gluon")``).

The interpreter cannot run Gluon, so on the CPU the kernel is compiled for sm_90 (in a child process with
the interpreter off) and its PTX checked for the pipeline it is written for; its numbers are checked on
a GPU (marked gpu) against the fp32 reference, with every unowned cache slot NaN.
"""

import json
import re
import subprocess
import sys

import pytest
import torch

from tritium.attention import AttentionConfig, hopper, paged_attention

from .utils import TOL, Shape, assert_rel_close, dtype_param, poisoned_like, run_in_child

GLUON = AttentionConfig(block_m=128, block_q=32, tile_n=128, num_splits=1, num_warps=8, num_stages=3, kernel="gluon")

_COMPILE = r"""
import json, os, subprocess, sys
os.environ["TRITON_INTERPRET"] = "0"
import torch, triton
import triton.backends.nvidia as nv
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import mangle_type
from tritium.attention import hopper as H

page, group, dtype, persistent = {page}, {group}, getattr(torch, "{dtype}"), {persistent}
desc = mangle_type(H.descriptor(torch.empty(4, page, 2, 128, dtype=dtype)))
ty = "*" + {{torch.float16: "fp16", torch.bfloat16: "bf16"}}[dtype]
ints = ("stride_q_tok", "stride_q_head", "stride_o_tok", "stride_o_head", "stride_bt_seq", "num_seqs",
        "num_tokens", "num_blocks", "max_kv_len") + (("num_slots", "num_kv_heads", "num_items") if persistent else ())
sig = dict(out_ptr=ty, q_ptr=ty, k_desc=desc, v_desc=desc, block_table_ptr="*i32", seq_lens_ptr="*i32",
           cu_seqlens_q_ptr="*i32", **({{"sched_ptr": "*i32"}} if persistent else {{}}), qk_scale_log2="fp32",
           **{{k: "i32" for k in ints}})
consts = dict(QPKV=group, HEAD_DIM=128, PAGE_SIZE=page, BLOCK_M=H.BLOCK_M, BLOCK_Q=max(1, H.BLOCK_M // group),
              TILE_N=H.TILE_N, STAGES=H.STAGES, PINGPONG={pingpong}, CONSUMER_REGS=H.CONSUMER_REGS,
              LOADER_REGS=H.LOADER_REGS, num_warps=H.NUM_WARPS,
              Q_LAYOUT=gl.NVMMASharedLayout.get_default_for([H.BLOCK_M // 2, 128], H._GL_DTYPES[dtype]))
sig.update({{k: "constexpr" for k in consts}})
fn = H._persistent_kernel if persistent else H._grid_kernel
kernel = triton.compile(GluonASTSource(fn=fn, signature=sig, constexprs=consts),
                        target=GPUTarget("cuda", 90, 32), options={{"num_warps": H.NUM_WARPS, "maxnreg": H.MAXNREG}})
ptx = kernel.asm["ptx"]
path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tritium-hopper-{{os.getpid()}}")
with open(path + ".ptx", "w") as f:
    f.write(ptx)
ptxas = os.path.join(os.path.dirname(nv.__file__), "bin", "ptxas")
info = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", path + ".ptx", "-o", path + ".cubin"],
                      capture_output=True, text=True).stderr
for suffix in (".ptx", ".cubin"):
    if os.path.exists(path + suffix):
        os.remove(path + suffix)
print(json.dumps(dict(shared=kernel.metadata.shared, ptxas=info,
                      waits=sorted({{l.strip() for l in ptx.splitlines() if "wgmma.wait_group" in l}}),
                      wgmma=ptx.count("wgmma.mma_async"), tma=ptx.count("cp.async.bulk.tensor"))))
"""


@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "grid"])
@pytest.mark.parametrize("page,group,dtype,pingpong", [(16, 4, "bfloat16", True), (64, 8, "float16", False),
                                                       (256, 1, "bfloat16", True)],
                         ids=["bs16-G4-bf16-pingpong", "bs64-G8-fp16", "bs256-G1-bf16-pingpong"])
def test_compiles_for_sm90_with_its_pipeline(page, group, dtype, pingpong, persistent):
    """Compiled for sm_90 on the CPU: at most a few spilled values (kept across the loop for the epilogue),
    shared memory within the 227 KiB an H100 block may use, TMA copies and wgmma with a wait that leaves
    one group in flight (P V runs under the next tile's softmax), and ptxas does not serialise the wgmmas
    (warning C7514)."""
    code = _COMPILE.format(page=page, group=group, dtype=dtype, pingpong=pingpong, persistent=persistent)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    spilled = int(re.search(r"(\d+) bytes spill stores", info["ptxas"]).group(1))
    assert spilled <= 96, info["ptxas"]  # values live across a work item (records, counters), not the key loop
    assert "C7514" not in info["ptxas"], info["ptxas"]
    assert info["shared"] <= 227 * 1024
    assert info["wgmma"] > 0 and info["tma"] > 0
    assert "wgmma.wait_group.sync.aligned 1;" in info["waits"], info["waits"]


def test_config_names_a_known_kernel():
    with pytest.raises(ValueError, match="kernel must be one of"):
        AttentionConfig(block_m=128, block_q=32, tile_n=128, num_splits=1, num_warps=8, num_stages=3, kernel="cuda")


@pytest.mark.parametrize("shape,kwargs,why", [
    (Shape(q_lens=(5,), seq_lens=(20,), head_dim=64), {}, "needs head_dim 128"),
    (Shape(q_lens=(5,), seq_lens=(20,), head_dim=128, block_size=48), {}, "needs pages of 16, 32, 64"),
    (Shape(q_lens=(5,), seq_lens=(20,), head_dim=128), {"sliding_window": 8}, "plain causal attention only"),
    (Shape(q_lens=(5,), seq_lens=(20,), head_dim=128), {"causal": False}, "plain causal attention only"),
], ids=["head_dim64", "pages48", "window", "not-causal"])
def test_unsupported_call_is_refused(shape, kwargs, why):
    """Where the kernel cannot serve a call, paged_attention says why instead of running something else."""
    batch = shape.batch(torch.float16)
    with pytest.raises(ValueError, match=f"config.kernel='gluon' .*{why}"):
        paged_attention(*batch.args, config=GLUON, **kwargs)


def test_refused_without_hopper_gpu():
    batch = Shape(q_lens=(5,), seq_lens=(20,), head_dim=128).batch(torch.float16)
    if batch.q.is_cuda and torch.cuda.get_device_capability()[0] >= 9:
        pytest.skip("a Hopper GPU serves it")
    with pytest.raises(ValueError, match="needs an NVIDIA Hopper"):
        paged_attention(*batch.args, config=GLUON)


def test_v_cache_laid_out_otherwise_is_refused():
    """A v_cache that is a strided view, or not 16-byte aligned, is not the kernel's (checked before the GPU):
    it says so, and without a config paged_attention runs the Triton kernel instead (on a GPU:
    check_auto_selection)."""
    batch = Shape(q_lens=(5,), seq_lens=(20,), head_dim=128).batch(torch.float16)
    wide = torch.zeros(*batch.v_cache.shape[:2], 2 * batch.v_cache.shape[2], 128, dtype=torch.float16,
                       device=batch.v_cache.device)
    wide[:, :, ::2] = batch.v_cache
    flat = torch.zeros(batch.v_cache.numel() + 1, dtype=torch.float16, device=batch.v_cache.device)
    flat[1:] = batch.v_cache.flatten()
    for v in (wide[:, :, ::2], flat[1:].view(batch.v_cache.shape)):
        why = hopper.supported(batch.q, batch.k_cache, v_cache=v)
        assert why is not None and "v_cache laid out like k_cache" in why


# GPU: batches of prefill, chunked prefill and decode rows, partial last pages, GQA 1/4/8. Each check runs in
# a child process with a time limit: a kernel never run before could fault (and take the CUDA context of
# the whole session with it) or wait forever on a barrier.
GPU_SHAPES = [
    Shape(q_lens=(1024, 333, 1, 7), seq_lens=(1024, 2100, 4000, 135), block_size=16, num_q_heads=32,
          num_kv_heads=8, head_dim=128),
    Shape(q_lens=(700, 129), seq_lens=(700, 4099), block_size=64, num_q_heads=64, num_kv_heads=8, head_dim=128),
    Shape(q_lens=(300, 17), seq_lens=(1000, 17), block_size=256, num_q_heads=8, num_kv_heads=8, head_dim=128),
]


def check_matches_reference(shape_index: int, dtype_name: str, pingpong: bool) -> None:
    from tritium.attention import hopper
    hopper.PINGPONG = pingpong  # a child process: the module default for this check only
    dtype = getattr(torch, dtype_name)
    batch = GPU_SHAPES[shape_index].batch(dtype)
    ref = batch.ref()
    for max_keys in (1 << 30, 0):  # the persistent kernel, then the one-program-a-Q-block grid
        hopper.PERSISTENT_MAX_KEYS = max_keys
        for _ in range(2):  # twice: the barriers' phases (and the work-item counter) start over in every launch
            out = poisoned_like(batch.q)
            paged_attention(*batch.args, config=GLUON, out=out)
            torch.cuda.synchronize()
            assert_rel_close(out, ref, TOL[dtype], what="persistent" if max_keys else "grid")


def check_program_counts(shape_index: int) -> None:
    """The persistent grid with 1 program (every work item through one ring: the slots', turns' and
    barriers' phases carry over hundreds of items), 7 (items of unequal length interleaved) and one program
    an item (no carry-over), against the reference."""
    from tritium.attention import hopper
    shape = GPU_SHAPES[shape_index]
    batch = shape.batch(torch.bfloat16)
    ref = batch.ref()
    block_size = batch.k_cache.shape[1]
    for programs in (1, 7, 1 << 20):
        out = poisoned_like(batch.q)
        hopper.launch(out, batch.q, batch.k_cache, batch.v_cache, batch.block_table, batch.seq_lens,
                      batch.cu_seqlens_q, scale=shape.head_dim ** -0.5,
                      max_kv_len=batch.block_table.shape[1] * block_size, persistent=True, programs=programs)
        torch.cuda.synchronize()
        assert_rel_close(out, ref, TOL[torch.bfloat16], what=f"{programs} programs")


def check_bad_page_id() -> None:
    """Both kernels; the persistent one also with one program for every item (a bad item's verdict must
    not reach the items after it in the same program)."""
    from tritium.attention import hopper
    batch = GPU_SHAPES[0].batch(torch.bfloat16)
    ref = batch.ref()
    table = batch.block_table.clone()
    table[1, 3] = batch.k_cache.shape[0] + 5
    cu = batch.cu_seqlens_q.tolist()
    for persistent, programs in ((True, None), (True, 1), (False, None)):
        out = poisoned_like(batch.q)
        hopper.launch(out, batch.q, batch.k_cache, batch.v_cache, table, batch.seq_lens, batch.cu_seqlens_q,
                      scale=128 ** -0.5, max_kv_len=table.shape[1] * batch.k_cache.shape[1], persistent=persistent,
                      programs=programs)
        torch.cuda.synchronize()
        assert bool(torch.isnan(out[cu[1]:cu[2]].float()).all()), programs
        for s in (0, 2, 3):
            assert_rel_close(out[cu[s]:cu[s + 1]], ref[cu[s]:cu[s + 1]], TOL[torch.bfloat16],
                             what=f"sequence {s}, {programs} programs")
    out = poisoned_like(batch.q)
    paged_attention(batch.q, batch.k_cache, batch.v_cache, table, batch.seq_lens, batch.cu_seqlens_q,
                    config=GLUON, out=out)
    torch.cuda.synchronize()
    assert bool(torch.isnan(out[cu[1]:cu[2]].float()).all())


def check_cuda_graph_replay() -> None:
    """Both kernels captured in a CUDA graph (the descriptors go in by value; the persistent kernel's
    counter is zeroed by a node of the graph) and replayed twice on new queries."""
    from tritium.attention import hopper
    shape = GPU_SHAPES[1]
    batch = shape.batch(torch.bfloat16)
    hints = dict(max_seqlen_q=max(shape.q_lens), max_seqlen_k=max(shape.seq_lens))
    for max_keys in (1 << 30, 0):
        hopper.PERSISTENT_MAX_KEYS = max_keys
        out = torch.empty_like(batch.q)
        paged_attention(*batch.args, config=GLUON, out=out, **hints)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            paged_attention(*batch.args, config=GLUON, out=out, **hints)
        for _ in range(2):
            batch.q.normal_()
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert_rel_close(out, batch.ref(), TOL[torch.bfloat16], what="persistent" if max_keys else "grid")


@pytest.mark.gpu
@pytest.mark.parametrize("pingpong", [True, False], ids=["pingpong", "free"])
@pytest.mark.parametrize("dtype", [dtype_param(torch.bfloat16), dtype_param(torch.float16)])
@pytest.mark.parametrize("shape_index", range(len(GPU_SHAPES)), ids=[s.id for s in GPU_SHAPES])
def test_gpu_matches_reference(shape_index, dtype, pingpong):
    run_in_child(__name__, "check_matches_reference", shape_index, str(dtype).replace("torch.", ""), pingpong,
                 timeout=240)


@pytest.mark.gpu
@pytest.mark.parametrize("shape_index", range(len(GPU_SHAPES)), ids=[s.id for s in GPU_SHAPES])
def test_gpu_program_counts(shape_index):
    run_in_child(__name__, "check_program_counts", shape_index, timeout=240)


@pytest.mark.gpu
def test_gpu_bad_page_id_gives_nan_rows():
    """A page id outside the cache makes its sequence's rows NaN; the others stay exact."""
    run_in_child(__name__, "check_bad_page_id", timeout=240)


@pytest.mark.gpu
def test_gpu_cuda_graph_replay():
    """Captured in a CUDA graph (the descriptors go in by value) and replayed on new queries."""
    run_in_child(__name__, "check_cuda_graph_replay", timeout=240)


def check_auto_selection() -> None:
    from tritium.attention import hopper
    prefill = GPU_SHAPES[1].batch(torch.bfloat16)
    assert hopper.auto_selects(prefill.q, prefill.k_cache, num_seqs=2, max_seqlen_q=700)
    assert not hopper.auto_selects(prefill.q, prefill.k_cache, num_seqs=2, max_seqlen_q=700, sliding_window=64)
    decode = Shape(q_lens=(1,) * 8, seq_lens=(300,) * 8, block_size=16, num_q_heads=32, num_kv_heads=8,
                   head_dim=128).batch(torch.bfloat16)
    assert not hopper.auto_selects(decode.q, decode.k_cache, num_seqs=8, max_seqlen_q=1)
    out = poisoned_like(prefill.q)
    paged_attention(*prefill.args, out=out)  # no config: the Gluon kernel, by itself
    torch.cuda.synchronize()
    assert_rel_close(out, prefill.ref(), TOL[torch.bfloat16])
    # a v_cache the Gluon kernel cannot read (a strided view): the Triton kernel serves it
    v = prefill.v_cache
    wide = torch.zeros(*v.shape[:2], 2 * v.shape[2], v.shape[3], dtype=v.dtype, device=v.device)
    wide[:, :, ::2] = v
    q, k, _, table, lens, cu = prefill.args
    out = poisoned_like(prefill.q)
    paged_attention(q, k, wide[:, :, ::2], table, lens, cu, out=out)
    torch.cuda.synchronize()
    assert_rel_close(out, prefill.ref(), TOL[torch.bfloat16])


@pytest.mark.gpu
def test_gpu_auto_selection():
    """paged_attention picks the kernel for a prefill batch by itself, not for decode or a window."""
    run_in_child(__name__, "check_auto_selection", timeout=240)


def test_persistent_by_default_rule():
    """The launcher's choice between the two kernels (no GPU needed): the persistent one for sequences of at
    most PERSISTENT_MAX_KEYS keys, the grid for longer ones."""
    from tritium.attention import hopper

    assert hopper.persistent_by_default(2048) and hopper.persistent_by_default(4096)
    assert not hopper.persistent_by_default(4097) and not hopper.persistent_by_default(8192)
    assert not hopper.persistent_by_default(32768)
