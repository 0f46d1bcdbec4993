"""Shared helpers of the attention tests: random paged batches, tolerances, comparison, test ids.

A batch is built from per-sequence query lengths and sequence lengths (cached context + new tokens).
Pages are handed out in a shuffled order; every cache slot no sequence owns (unused blocks, the tail
of each partial last page) holds NaN, so a kernel that reads the wrong page or past a sequence's end
produces NaN instead of a plausible number.
"""

import functools
import importlib
import multiprocessing
import signal
import sys
import traceback
import warnings
from dataclasses import dataclass, field

import pytest
import torch

from tritium.attention import write_kv_cache
from tritium.attention.reference import paged_attention_ref
from tritium.runtime import default_device

FP8 = torch.float8_e4m3fn
DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", FP8: "fp8"}

# Relative-error tolerances ||out - ref|| / ||ref||. fp16 and bf16 round the output and the softmax
# probabilities fed to the PV product (~2^-11 and ~2^-8 relative); fp8 caches are compared with the
# reference on the dequantised cache, so only the query dtype's rounding remains.
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES[dtype]


def dtype_param(dtype: torch.dtype):
    """A dtype parameter with a short id; bf16 runs on the GPU only (the interpreter's bf16 tl.dot is broken)."""
    marks = (pytest.mark.gpu,) if dtype == torch.bfloat16 else ()
    return pytest.param(dtype, id=dtype_name(dtype), marks=marks)


Q_DTYPES = [dtype_param(d) for d in (torch.float32, torch.float16, torch.bfloat16)]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Shape:
    """Geometry of a test batch: new tokens and total length of each sequence, page size, heads."""
    q_lens: tuple
    seq_lens: tuple
    block_size: int = 16
    num_q_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64

    @property
    def id(self) -> str:
        """``B3-L129-H8/2-D64-bs16``: sequences, longest sequence, q/kv heads, head_dim, page size."""
        return (f"B{len(self.seq_lens)}-L{max(self.seq_lens)}-H{self.num_q_heads}/{self.num_kv_heads}"
                f"-D{self.head_dim}-bs{self.block_size}")

    def batch(self, dtype: torch.dtype, **kwargs) -> "PagedBatch":
        return random_paged_batch(self.q_lens, self.seq_lens, block_size=self.block_size,
                                  num_q_heads=self.num_q_heads, num_kv_heads=self.num_kv_heads,
                                  head_dim=self.head_dim, dtype=dtype, **kwargs)


def shape_params(*shapes: Shape) -> list:
    return [pytest.param(s, id=s.id) for s in shapes]


@dataclass
class PagedBatch:
    q: torch.Tensor  # [num_tokens, num_q_heads, head_dim]
    k_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor
    block_table: torch.Tensor  # [num_seqs, max_pages] int32
    seq_lens: torch.Tensor  # [num_seqs] int32
    cu_seqlens_q: torch.Tensor  # [num_seqs + 1] int32
    q_lens_list: list = field(default_factory=list)
    seq_lens_list: list = field(default_factory=list)
    scales: dict = field(default_factory=dict)  # k_scale / v_scale of fp8 caches

    @property
    def args(self) -> tuple:
        return self.q, self.k_cache, self.v_cache, self.block_table, self.seq_lens, self.cu_seqlens_q

    @property
    def hints(self) -> dict:
        return {"max_seqlen_q": max(self.q_lens_list), "max_seqlen_k": max(self.seq_lens_list)}

    def ref(self, **kwargs) -> torch.Tensor:
        return paged_attention_ref(*self.args, **self.scales, **kwargs)


def random_paged_batch(q_lens, seq_lens, *, block_size: int, num_q_heads: int, num_kv_heads: int,
                       head_dim: int, dtype: torch.dtype, cache_dtype: torch.dtype | None = None,
                       k_scale: float = 0.05, v_scale: float = 0.03, spare_blocks: int = 3,
                       first_block: int = 0, device=None) -> PagedBatch:
    """A random batch over a paged cache with a shuffled block table.

    q_lens[s] new tokens of sequence s attend to seq_lens[s] cached tokens (the new ones included),
    so seq_lens[s] - q_lens[s] tokens are earlier context. ``spare_blocks`` unused NaN pages sit among
    the used ones; block-table columns past a sequence's pages point at one of them. With
    ``cache_dtype=float8_e4m3fn`` the caches are written by ``write_kv_cache`` with (k_scale, v_scale).
    Pages come from blocks ``first_block`` and up (the blocks below stay NaN).
    """
    assert len(q_lens) == len(seq_lens) and all(0 <= q <= s for q, s in zip(q_lens, seq_lens))
    device = default_device() if device is None else device
    cache_dtype = dtype if cache_dtype is None else cache_dtype
    num_seqs = len(seq_lens)
    pages = [cdiv(s, block_size) for s in seq_lens]
    num_blocks = first_block + sum(pages) + max(1, spare_blocks)
    perm = (first_block + torch.randperm(num_blocks - first_block)).tolist()
    spare = perm[sum(pages):]
    block_table = torch.full((num_seqs, max(pages) + 1), spare[0], dtype=torch.int32)
    start = 0
    for s, n in enumerate(pages):
        block_table[s, :n] = torch.tensor(perm[start:start + n], dtype=torch.int32)
        start += n

    # Slot of each cached token, sequence after sequence: block * block_size + offset.
    slots = torch.cat([block_table[s, torch.arange(n) // block_size].long() * block_size + torch.arange(n) % block_size
                       for s, n in enumerate(seq_lens)])
    num_kv_tokens = slots.numel()
    k = torch.randn(num_kv_tokens, num_kv_heads, head_dim, dtype=torch.float32)
    v = torch.randn(num_kv_tokens, num_kv_heads, head_dim, dtype=torch.float32)
    cache_shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.full(cache_shape, float("nan"), dtype=cache_dtype, device=device)
    v_cache = torch.full(cache_shape, float("nan"), dtype=cache_dtype, device=device)
    scales = {}
    if cache_dtype == FP8:
        # Values spread over the fp8 range (|k / k_scale| up to ~80), written by the kernel under test.
        scales = {"k_scale": k_scale, "v_scale": v_scale}
        write_kv_cache((k * 20 * k_scale).to(device, dtype), (v * 20 * v_scale).to(device, dtype), k_cache, v_cache,
                       slots.to(device), k_scale=k_scale, v_scale=v_scale)
    else:
        k_cache.view(-1, num_kv_heads, head_dim)[slots.to(device)] = k.to(device, dtype)
        v_cache.view(-1, num_kv_heads, head_dim)[slots.to(device)] = v.to(device, dtype)

    num_tokens = sum(q_lens)
    q = torch.randn(num_tokens, num_q_heads, head_dim, dtype=torch.float32)
    if cache_dtype == FP8:
        q = q / 20  # keep the scores O(1) with the larger fp8 keys
    cu = torch.zeros(num_seqs + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(q_lens), 0)
    return PagedBatch(
        q=q.to(device, dtype), k_cache=k_cache, v_cache=v_cache, block_table=block_table.to(device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device), cu_seqlens_q=cu.to(device),
        q_lens_list=list(q_lens), seq_lens_list=list(seq_lens), scales=scales)


def poisoned_like(t: torch.Tensor) -> torch.Tensor:
    """An output buffer full of NaN: every element the kernel fails to write shows up."""
    return torch.full_like(t, float("nan"))


def assert_rel_close(out: torch.Tensor, ref: torch.Tensor, tol: float, what: str = "out") -> None:
    """||out - ref|| / ||ref|| <= tol and no NaN; on failure name the worst elements."""
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    out32, ref32 = out.float(), ref.float()
    nan = torch.isnan(out32)
    if nan.any():
        idx = nan.nonzero()[:5].tolist()
        raise AssertionError(f"{what}: {int(nan.sum())} NaN of {out.numel()}, first at {idx}")
    diff = (out32 - ref32).abs()
    rel = float(diff.norm() / ref32.norm().clamp_min(1e-30))
    if not rel <= tol:
        worst = torch.topk(diff.flatten(), min(5, diff.numel())).indices
        rows = []
        for flat in worst.tolist():
            idx = tuple(torch.unravel_index(torch.tensor(flat), diff.shape))
            idx = tuple(int(i) for i in idx)
            rows.append(f"{idx}: got {float(out32[idx]):.6g}, want {float(ref32[idx]):.6g}")
        raise AssertionError(f"{what}: relative error {rel:.3g} > {tol:.3g}; worst elements "
                             f"(token, head, dim):\n  " + "\n  ".join(rows))


def run_and_check(batch: PagedBatch, tol: float, **kwargs) -> torch.Tensor:
    """Launch paged_attention into a poisoned ``out=`` buffer and compare with the fp32 reference.

    kwargs go to both the kernel and the reference, except the launcher-only ones."""
    from tritium.attention import paged_attention

    launcher_only = ("max_seqlen_q", "max_seqlen_k", "workspace", "num_splits", "config", "validate")
    ref_kwargs = {k: v for k, v in kwargs.items() if k not in launcher_only}
    out = poisoned_like(batch.q)
    result = paged_attention(*batch.args, out=out, **batch.scales, **kwargs)
    assert result is out, "paged_attention must return the out= tensor"
    assert_rel_close(out, batch.ref(**ref_kwargs), tol)
    return out


def feature_kwargs(features: str, num_q_heads: int, device=None) -> dict:
    """Keyword arguments for a '+'-joined feature list such as ``window8+softcap+alibi+sinks``.

    ``plain``: none; ``window<W>``: sliding_window=W; ``softcap``: 1.5 (well inside the score range, so
    it bends them); ``alibi``: the usual geometric slopes; ``sinks``: random sink logits around
    log(seq_len) so they take a visible share of the softmax; ``scale``: softmax_scale=0.3.
    """
    device = default_device() if device is None else device
    kwargs = {}
    for feature in features.split("+"):
        if feature == "plain":
            continue
        if feature.startswith("window"):
            kwargs["sliding_window"] = int(feature[len("window"):])
        elif feature == "softcap":
            kwargs["softcap"] = 1.5
        elif feature == "alibi":
            heads = torch.arange(1, num_q_heads + 1, dtype=torch.float32)
            kwargs["alibi_slopes"] = (2.0 ** (-8.0 * heads / num_q_heads)).to(device)
        elif feature == "sinks":
            kwargs["sinks"] = (torch.randn(num_q_heads) + 3.0).to(device)
        elif feature == "scale":
            kwargs["softmax_scale"] = 0.3
        else:
            raise ValueError(f"unknown feature {feature!r}")
    return kwargs


def strided_last_dim(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` whose last dimension has stride 2 (same shape, dtype, device and values)."""
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    view = wide[..., ::2]
    view.copy_(t)
    return view


def call_with(fn, base: dict, changes: dict):
    """fn(**base) with some keyword arguments replaced or added."""
    return fn(**{**base, **changes})


@functools.cache
def _children():
    """A forkserver that has imported torch, triton and pytest once (2-3 s a fresh interpreter pays), so
    each child is forked from it in milliseconds. It never touches a GPU, so a child may (CUDA is
    initialised in the child, never before the fork)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "triton", "pytest"])
    return ctx


def _child_main(module: str, function: str, args: tuple, conn) -> None:
    """The child's body: ``function(*args)``; sends None, or the traceback and then exits 1."""
    warnings.simplefilter("ignore")
    failure = None
    try:
        getattr(importlib.import_module(module), function)(*args)
    except BaseException:
        failure = traceback.format_exc()
    conn.send(failure)
    conn.close()
    if failure is not None:
        sys.exit(1)


def run_in_child(module: str, function: str, *args, timeout: float = 600) -> None:
    """Run ``function(*args)`` of test module ``module`` (its ``__name__``) in a child process of its own:
    a crash (signal) or a hang (past ``timeout`` seconds) fails the test instead of taking pytest down with
    it. The child is forked from a server that has imported torch and triton, not from pytest, so it
    starts clean (no CUDA context, no thread pools) but without paying for the imports."""
    ctx = _children()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(module, function, args, send), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout):
            proc.kill()
            proc.join()
            pytest.fail(f"{function}{args!r} did not finish within {timeout} s")
        message = recv.recv()
    except EOFError:  # the child died without a word: a signal, or os._exit
        message = None
    finally:
        recv.close()
    proc.join(60)
    if proc.is_alive():  # it answered but does not exit
        proc.kill()
        proc.join()
    if proc.exitcode < 0:
        pytest.fail(f"the child running {function}{args!r} crashed ({signal.Signals(-proc.exitcode).name})")
    if message is not None or proc.exitcode != 0:
        pytest.fail(message or f"the child running {function}{args!r} exited with {proc.exitcode}")
