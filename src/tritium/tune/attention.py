"""Offline tuning of paged attention: sweep kernel knobs over a grid of workloads, fit decision trees.

    python -m tritium.tune attention [--out DIR] [--part decode|prefill] [--limit N] [--repeats R]
                                     [--grid DECODE,PREFILL | --match REGEX] [--shard I/N]
    python -m tritium.tune attention --merge INTO SHARD [SHARD ...]     # join shards' sweeps
    python -m tritium.tune attention --fit FILE [--tree-dir DIR]      # refit from a sweep's JSON
    python -m tritium.tune attention --confirm FILE [--repeats R]     # re-time its held-out picks (GPU)
    python -m tritium.tune attention --retime FILE [--shard I/N]      # re-time what a kernel change moved (GPU)
    python -m tritium.tune attention --retime-apply FILE RETIME...    # put those timings into the sweep
    python -m tritium.tune attention --resweep FILE [--kv-dtype fp8] [--within F]  # sweep again (GPU)
    python -m tritium.tune attention --merge FILE RESWEEP --replace   # put the re-sweep in place of the old

On a GPU, every workload of the grid (decode, prefill and mixed batches; batch 1-256, context 128-128k,
head_dim 64/128/256, GQA 1/4/8, pages of 16/64, bf16 and fp8 KV) is timed with every candidate knob
set of its kernel family (``tritium.attention.config``) and with the hand rules. Decode-family
workloads are timed cold: a CUDA graph of calls over enough copies of the KV cache that the copies
together are twice the L2, the way each layer of a model reads different memory. Records go to
``DIR/attention-<gpu>.json`` after every workload (a re-run skips what is there). Kernels are compiled
first by a pool of processes (the Triton cache is on disk), then timed by this one. On a machine of
several GPUs, ``bench/gpu_tune.sh`` runs one process a GPU (``--shard``) and merges their records.

The fit (``tritium.tune.trees``, scikit-learn) needs no GPU: it holds out a fifth of the workloads
(never the benchmark's anchor shapes, ``anchor_workloads``; ``--hold-out-anchors`` lets it), fits one
tree per family on the rest, prints the held-out table and writes the tree module for the GPU under
``src/tritium/attention/tuned/``.
"""

import argparse
import concurrent.futures
import dataclasses
import importlib.util
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import statistics
import sys
import time

import torch

from tritium.attention import AttentionWorkspace, paged_attention
from tritium.attention.config import (DECODE, PREFILL, config_from_knobs, family, features,
                                      hand_rules)
from tritium.attention.reference import paged_attention_ref
from tritium.bench import jsonio
from tritium.bench.args import Parser, integer, json_file, output_dir
from tritium.bench.attention import DECODE_CASES, PREFILL_CASES
from tritium.bench.common import header
from tritium.ops.gemv import gemv
from tritium.tune import confirm, retime, trees
from tritium.runtime import device_name, interpreting, max_shared_memory, num_sms

# Candidate knobs per family (see tritium.attention.config). Decode: (tile_n, num_stages, splits_per_sm).
# NOTE: pruned to what earlier sweeps (bench/NOTES.md "Paged attention") found competitive, so that the
# kernels to compile stay ~700 per GPU: 32-key tiles only with 2 stages.
DECODE_KNOBS = [(n, st, p) for n, st in ((32, 2), (64, 2), (64, 3), (128, 2), (128, 3)) for p in (0, 1, 2, 4, 8)]
# Prefill: (block_m, tile_n, num_warps, num_stages).
PREFILL_KNOBS = [(64, 64, 4, 2), (64, 64, 4, 3), (64, 128, 4, 2), (128, 32, 4, 3), (128, 64, 4, 2),
                 (128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3)]
KNOBS = {DECODE: DECODE_KNOBS, PREFILL: PREFILL_KNOBS}
HAND = trees.HAND  # the hand rules' name among the candidates

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTEXTS = (128, 512, 2048, 8192, 32768, 131072)
HEAD_DIMS = (64, 128, 256)
GROUPS = (1, 4, 8)
KV_HEADS = (1, 2, 8)
BLOCK_SIZES = (16, 64)
KV_DTYPES = ("bf16", "fp8")
# Largest KV cache (one copy) and query batch a workload may have.
MAX_KV_BYTES = 6 << 30
MAX_PREFILL_TOKENS = 32768
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn, "fp32": torch.float32}


@dataclasses.dataclass(frozen=True)
class Workload:
    """One batch: ``num_seqs`` sequences of ``context`` cached tokens (new ones included); the first
    ``num_prefill`` of them have ``q_len`` new tokens, the others one (decode). Pure decode:
    num_prefill = 0; pure prefill: num_prefill = num_seqs; mixed: in between."""
    num_seqs: int
    num_prefill: int
    q_len: int
    context: int
    head_dim: int
    group: int
    num_kv_heads: int
    block_size: int
    kv_dtype: str
    dtype: str = "bf16"

    @property
    def name(self) -> str:
        kind = "decode" if self.num_prefill == 0 else ("prefill" if self.num_prefill == self.num_seqs else "mixed")
        return (f"{kind}-B{self.num_seqs}-P{self.num_prefill}x{self.q_len}-L{self.context}-D{self.head_dim}"
                f"-G{self.group}-K{self.num_kv_heads}-bs{self.block_size}-{self.kv_dtype}")

    @property
    def num_tokens(self) -> int:
        return self.num_prefill * self.q_len + (self.num_seqs - self.num_prefill)

    @property
    def max_seqlen_q(self) -> int:
        return self.q_len if self.num_prefill else 1

    @property
    def num_q_heads(self) -> int:
        return self.group * self.num_kv_heads

    def kv_bytes(self) -> int:
        elem = 1 if self.kv_dtype == "fp8" else 2
        return 2 * self.num_seqs * self.context * self.num_kv_heads * self.head_dim * elem

    def family(self) -> str:
        return family(max_seqlen_q=self.max_seqlen_q, num_q_heads=self.num_q_heads, num_kv_heads=self.num_kv_heads)

    def features(self) -> dict:
        return features(num_tokens=self.num_tokens, num_seqs=self.num_seqs, num_q_heads=self.num_q_heads,
                        num_kv_heads=self.num_kv_heads, head_dim=self.head_dim, block_size=self.block_size,
                        max_seqlen_q=self.max_seqlen_q, max_seqlen_k=self.context,
                        kv_dtype=_DTYPES[self.kv_dtype])

    def config(self, knobs, sms: int):
        """The AttentionConfig of ``knobs`` (or HAND) for this workload on a GPU of ``sms`` SMs."""
        if knobs == HAND:  # as select_attention_config gives them on this GPU (its shared memory included)
            gpu = None if interpreting() else torch.device("cuda", torch.cuda.current_device())
            return hand_rules(num_seqs=self.num_seqs, num_q_heads=self.num_q_heads, num_kv_heads=self.num_kv_heads,
                              head_dim=self.head_dim, max_seqlen_q=self.max_seqlen_q, max_seqlen_k=self.context,
                              dtype=_DTYPES[self.dtype], sms=sms,
                              max_shared=None if gpu is None else max_shared_memory(gpu))
        return config_from_knobs(self.family(), tuple(knobs), num_seqs=self.num_seqs, num_q_heads=self.num_q_heads,
                                 num_kv_heads=self.num_kv_heads, max_seqlen_q=self.max_seqlen_q,
                                 max_seqlen_k=self.context, sms=sms)


# The decode steps of ``python -m tritium.bench engine`` (Llama-3-8B, pages of 16, a 512-token prompt and 256
# new tokens, batch 1 and 64). NOTE: added after the tree of 2026-11-26 (fitted without them) took the hand
# rules at B=64 L=512-768, where the tree before took 128-key tiles: the engine's b64 step 8.51 -> 8.69 ms
# (bench/NOTES.md, "Paged attention").
ENGINE_DECODE_CASES = [(1, 512), (1, 640), (1, 768), (64, 512), (64, 640), (64, 768)]


def anchor_workloads() -> list[Workload]:
    """The benchmarks' shapes (GQA 32/8, head_dim 128, bf16): ``python -m tritium.bench attention``'s decode
    cases with pages of 16 and 64 and prefill cases with pages of 16, and the engine benchmark's decode
    steps (``ENGINE_DECODE_CASES``). Every sweep times them, and the fit always trains on them (never holds
    them out): they are the shapes the targets are stated for and the Llama-3 geometry most users run.

    NOTE: H100 sweep of 2026-11-23 with a fifth held out at random (7 of the 16 anchors among it): the
    tree's picks were 1.08-1.12x the best swept at decode B=16 L=4096, B=64 L=2048 (pages of 16, held
    out) and B=1 L=32768; with every anchor trained on, 1.00-1.04x (bench/NOTES.md, "Paged attention")."""
    out = [Workload(b, 0, 1, L, 128, 4, 8, bs, "bf16") for b, L in DECODE_CASES for bs in BLOCK_SIZES]
    out += [Workload(b, b, s, s, 128, 4, 8, 16, "bf16") for b, s in PREFILL_CASES]
    return out + [Workload(b, 0, 1, L, 128, 4, 8, 16, "bf16") for b, L in ENGINE_DECODE_CASES]


def workload_domain() -> list[Workload]:
    """Every workload ``workload_grid`` can draw (its value sets, the same size limits; ~28k): the fit labels
    them with its cost model and distils one tree per family from those labels (``tritium.tune.trees``)."""
    out, seen = [], set()

    def add(w):
        if w.name not in seen and w.kv_bytes() <= MAX_KV_BYTES and w.num_tokens <= MAX_PREFILL_TOKENS:
            seen.add(w.name)
            out.append(w)

    for d, g, k, bs, kv in itertools.product(HEAD_DIMS, GROUPS, KV_HEADS, BLOCK_SIZES, KV_DTYPES):
        kw = dict(head_dim=d, group=g, num_kv_heads=k, block_size=bs, kv_dtype=kv)
        for q_len, b, L in itertools.product((1, 2, 4, 8), BATCHES, CONTEXTS):  # decode, verification
            w = Workload(b, b if q_len > 1 else 0, q_len, L, **kw)
            if w.family() == DECODE:
                add(w)
        candidates = [Workload(b, b, s, s, **kw) for s in (256, 512, 1024, 2048, 4096, 8192, 16384)
                      for b in (1, 2, 4, 8, 16) if b * s <= MAX_PREFILL_TOKENS]  # whole prompts
        candidates += [Workload(1, 1, q, L, **kw) for q in (256, 512, 2048) for L in (2048, 8192, 32768, 131072)]
        candidates += [Workload(b, 1, q, L, **kw) for q in (128, 512, 2048) for b in (8, 32, 128)
                       for L in (q, 2048, 8192) if L >= q]  # one chunk among decodes
        for w in candidates:
            if w.family() == PREFILL:
                add(w)
    return out


def workload_grid(seed: int = 0, decode: int = 120, prefill: int = 54) -> list[Workload]:
    """A reproducible random sample of the workload space (the full product has ~20k points), with
    the benchmark's anchor shapes (GQA 32/8, D=128) always in."""
    rng = random.Random(seed)
    out, seen = [], set()

    def add(w):
        if w.name not in seen and w.kv_bytes() <= MAX_KV_BYTES and w.num_tokens <= MAX_PREFILL_TOKENS:
            seen.add(w.name)
            out.append(w)
            return True
        return False

    for w in anchor_workloads():
        add(w)

    def common():
        return dict(head_dim=rng.choice(HEAD_DIMS), group=rng.choice(GROUPS), num_kv_heads=rng.choice(KV_HEADS),
                    block_size=rng.choice(BLOCK_SIZES), kv_dtype=rng.choice(KV_DTYPES))

    n_decode = sum(1 for w in out if w.num_prefill == 0)
    while n_decode < decode:
        # Decode and speculative verification (q_len 2-8 new tokens per sequence).
        q_len = 1 if rng.random() < 0.8 else rng.choice((2, 4, 8))
        b, L = rng.choice(BATCHES), rng.choice(CONTEXTS)
        w = Workload(b, b if q_len > 1 else 0, q_len, L, **common())
        if w.family() == DECODE and add(w):
            n_decode += 1
    n_prefill = len(out) - n_decode
    while n_prefill < prefill:
        kind = rng.choice(("prefill", "chunked", "mixed"))
        kw = common()
        if kind == "prefill":  # whole prompts
            s = rng.choice((256, 512, 1024, 2048, 4096, 8192, 16384))
            b = rng.choice([x for x in (1, 2, 4, 8, 16) if x * s <= MAX_PREFILL_TOKENS] or [1])
            w = Workload(b, b, s, s, **kw)
        elif kind == "chunked":  # a chunk of new tokens after a long cached context
            q = rng.choice((256, 512, 2048))
            w = Workload(1, 1, q, rng.choice((2048, 8192, 32768, 131072)), **kw)
        else:  # one prefill chunk among decode sequences
            q = rng.choice((128, 512, 2048))
            w = Workload(rng.choice((8, 32, 128)), 1, q, rng.choice((q, 2048, 8192)), **kw)
        if w.context >= w.q_len and w.family() == PREFILL and add(w):
            n_prefill += 1
    return out


# ---------------------------------------------------------------------------------------------------------
# Inputs and timing


def build_inputs(w: Workload, device, copies: int = 1) -> dict:
    """Random paged K/V for ``copies`` independent copies of the workload's cache (one cache tensor,
    shuffled pages; copy c has its own block table), its queries and metadata."""
    pages = -(-w.context // w.block_size)
    blocks = w.num_seqs * pages
    kv = _DTYPES[w.kv_dtype]
    shape = (copies * blocks, w.block_size, w.num_kv_heads, w.head_dim)
    k_cache = torch.randn(shape, dtype=torch.bfloat16, device=device).to(kv)
    v_cache = torch.randn(shape, dtype=torch.bfloat16, device=device).to(kv)
    perm = torch.randperm(copies * blocks, device=device).int()
    tables = [perm[c * blocks:(c + 1) * blocks].view(w.num_seqs, pages) for c in range(copies)]
    q_lens = [w.q_len] * w.num_prefill + [1] * (w.num_seqs - w.num_prefill)
    cu = torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0).int().to(device)
    q = torch.randn(w.num_tokens, w.num_q_heads, w.head_dim, dtype=_DTYPES[w.dtype], device=device)
    seq_lens = torch.full((w.num_seqs,), w.context, dtype=torch.int32, device=device)
    scales = dict(k_scale=0.5, v_scale=0.5) if kv != _DTYPES[w.dtype] else {}
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, tables=tables, seq_lens=seq_lens, cu_seqlens_q=cu,
                scales=scales)


def _copies(w: Workload, l2_bytes: int) -> int:
    """Copies of the cache to rotate over so that a decode-family workload is timed cold."""
    if w.family() != DECODE or interpreting():
        return 1
    return max(1, min(64, math.ceil(2 * l2_bytes / max(1, w.kv_bytes()))))


def _calls(w: Workload, inputs: dict, config, out, workspace):
    q = inputs["q"]
    common = dict(max_seqlen_q=w.max_seqlen_q, max_seqlen_k=w.context, out=out, workspace=workspace, config=config,
                  **inputs["scales"])
    return [lambda t=t: paged_attention(q, inputs["k_cache"], inputs["v_cache"], t, inputs["seq_lens"],
                                        inputs["cu_seqlens_q"], **common)
            for t in inputs["tables"]]


def _capture(fns):
    """A CUDA graph of ``fns`` in order (each run once first, on a side stream, outside the capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for f in fns:
            f()
    return graph


def _replay_ms(graph) -> float:
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def time_calls(calls, budget_ms: float = 25.0, before=None) -> float:
    """Milliseconds per call: on a GPU the median over replays of one CUDA graph of all calls (at least
    8 per graph; as many replays as fit in about ``budget_ms``, 3 to 15); under the interpreter, wall
    clock of one pass.

    ``before`` (callables, one per call): time each call after its own ``before[i]``, as a model runs
    attention after a projection, and count only what the call adds: the graph of (before, call) pairs
    minus the graph of the befores alone, replayed alternately (medians; at least 1 ns a call)."""
    if interpreting():
        t0 = time.perf_counter()
        for i, c in enumerate(calls):
            if before is not None:
                before[i]()
            c()
        return (time.perf_counter() - t0) * 1e3 / len(calls)
    n = max(1, math.ceil(8 / len(calls)))
    seq = calls * n
    graphs = [_capture(seq)] if before is None else [
        _capture([f for b, c in zip(before * n, seq) for f in (b, c)]), _capture(before * n)]
    times = [[] for _ in graphs]
    reps = 3
    while len(times[0]) < reps:
        for g, t in zip(graphs, times):
            t.append(_replay_ms(g))
        if len(times[0]) == 1:  # the first replay (warm-up) sets the count and is dropped
            reps = 1 + max(3, min(15, int(budget_ms / max(times[0][0], 1e-3))))
    del graphs
    med = [sorted(t[1:])[(len(t) - 1) // 2] for t in times]  # the upper median of the timed replays
    return (med[0] if before is None else max(med[0] - med[1], 1e-6 * len(seq))) / len(seq)


# Timing orders of a sweep (its JSON's "order"): decode calls back to back (every sweep before stop 43), or each
# after a projection-sized GEMV (MODEL_ORDER), as a model's layer runs them.
BACK_TO_BACK, MODEL_ORDER = "back_to_back", "model"
ORDERS = (BACK_TO_BACK, MODEL_ORDER)
# The GEMV before each decode call in MODEL_ORDER: Llama-3-8B's QKV projection (6144 x 4096 bf16, 50 MB), two
# weight copies so that it streams from DRAM as a layer's does; tiny under the interpreter.
PROJECTION = (6144, 4096)
_PROJECTIONS = {}


def projection_calls(n: int, device) -> list:
    """``n`` callables, each one launch of the QKV-sized GEMV (``tritium.ops.gemv``, PDL where the GPU has
    it), alternating over two weight copies."""
    key = str(device)
    if key not in _PROJECTIONS:
        rows, cols = (64, 64) if interpreting() else PROJECTION
        dtype = torch.float16 if interpreting() else torch.bfloat16
        x = torch.randn(1, cols, dtype=dtype, device=device)
        _PROJECTIONS[key] = (x, [torch.randn(rows, cols, dtype=dtype, device=device) for _ in range(2)])
        gemv(x, _PROJECTIONS[key][1][0])  # compiled here, not inside a timed candidate
    x, weights = _PROJECTIONS[key]
    return [lambda w=weights[i % 2]: gemv(x, w) for i in range(n)]


def _candidates(w: Workload):
    return [HAND] + KNOBS[w.family()]


def _workspace(w: Workload, sms: int, device, candidates=None):
    """Split-KV workspace for the largest split count of ``candidates`` (default: all of ``w``'s; None if
    none splits); its strides, like the kernels compiled for them, do not depend on that count."""
    splits = 1
    for knobs in candidates or _candidates(w):
        try:
            splits = max(splits, w.config(knobs, sms).num_splits)
        except Exception:
            pass
    if splits == 1:
        return None
    return AttentionWorkspace(w.num_tokens, w.num_q_heads, w.head_dim, max_splits=splits, device=device)


def _warm_one(w_dict: dict, sms: int, candidates=None) -> str:
    """Compile process: run every candidate of one workload (``candidates``: default all of its family's)
    once on a one-sequence copy of it (the compiled kernels do not depend on the batch size, only on the
    shapes' constexprs and strides); returns what failed (it fails again, and is recorded, when timed)."""
    try:
        w = Workload(**w_dict)
        candidates = candidates or _candidates(w)
        small = dataclasses.replace(w, num_seqs=1 if w.num_prefill in (0, w.num_seqs) else 2,
                                    num_prefill=min(w.num_prefill, 1))
        inputs = build_inputs(small, "cuda")
        out = torch.empty_like(inputs["q"])
        workspace = _workspace(w, sms, "cuda", candidates)
        failed = []
        for knobs in candidates:
            try:
                _calls(small, inputs, w.config(knobs, sms), out, workspace)[0]()
                torch.cuda.synchronize()
            except Exception as e:
                failed.append(f"{knobs}: {type(e).__name__}")
        return "; ".join(failed)
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:200]}"


def precompile(workloads, sms: int, jobs: int, candidates: dict | None = None) -> None:
    """Fill Triton's on-disk cache with every candidate's kernels, ``jobs`` processes at a time
    (``candidates``: workload name -> the knobs to compile, default all of its family's)."""
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_warm_one, dataclasses.asdict(w), sms, (candidates or {}).get(w.name)): w
                   for w in workloads}
        for done, f in enumerate(concurrent.futures.as_completed(futures), 1):
            try:
                failed = f.result()
            except Exception as e:  # a compile process died: its kernels compile when timed
                failed = f"{type(e).__name__}: {e}"
            if failed:
                print(f"  compile {futures[f].name}: {failed}", flush=True)
            if done % 10 == 0 or done == len(futures):
                print(f"  compiled {done}/{len(futures)} workloads ({time.perf_counter() - t0:.0f} s)", flush=True)


def _checkable(w: Workload) -> bool:
    """Small enough for the fp32 reference (dense scores per sequence)."""
    return w.num_tokens * w.context * w.num_q_heads <= 1 << 28 and w.kv_bytes() <= 1 << 29


def sweep_workload(w: Workload, device, sms: int, l2_bytes: int, check: bool = True, repeats: int = 1,
                   candidates=None, order: str = BACK_TO_BACK) -> dict:
    """Time every candidate of ``w`` (``candidates``: these knob sets instead, HAND among them or not); a
    record with ms per candidate (None: failed). ``repeats`` > 1 times
    the candidates that many times, in alternating order (forward, backward, ...), records every time in
    ``runs_ms`` and their median in ``times_ms``: one configuration timed twice in one sweep differed by
    2.3% (90th percentile) and up to 12.7% (bench/NOTES.md), as much as the near-ties a tree must tell apart.
    ``order``: MODEL_ORDER times each decode-family call after a projection-sized GEMV (``time_calls``'s
    ``before``); back to back, the next call's pre-wait work overlaps the call before's merge, which ranks
    the split counts of short calls differently (bench/NOTES.md, stop 43)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    copies = _copies(w, l2_bytes)
    inputs = build_inputs(w, device, copies)
    out = torch.empty_like(inputs["q"])
    candidates = candidates or _candidates(w)
    workspace = _workspace(w, sms, device, candidates)
    record = dict(workload=dataclasses.asdict(w), name=w.name, family=w.family(), features=w.features(),
                  copies=copies, kv_mb=round(w.kv_bytes() / 1e6, 3), times_ms={}, configs={})
    if check and _checkable(w):  # the hand rules' output against the fp32 reference, on the first copy
        ref = paged_attention_ref(inputs["q"].float(), inputs["k_cache"], inputs["v_cache"], inputs["tables"][0],
                                  inputs["seq_lens"], inputs["cu_seqlens_q"], **inputs["scales"])
        got = _calls(w, inputs, w.config(HAND, sms), out, workspace)[0]().float()
        err = ((got - ref).norm() / ref.norm()).item()
        record["rel_err"] = err
        if not err < 3e-2:
            raise RuntimeError(f"{w.name}: tritium differs from the reference, rel err {err:.3g}")
    before = projection_calls(copies, device) if order == MODEL_ORDER and w.family() == DECODE else None
    keys = [trees.knob_key(knobs) for knobs in candidates]
    configs = {key: w.config(knobs, sms) for knobs, key in zip(candidates, keys)}
    record["configs"] = {key: dataclasses.astuple(config) for key, config in configs.items()}
    runs = {key: [] for key in keys}
    for rep in range(repeats):
        for key in keys[::1 if rep % 2 == 0 else -1]:
            if key in record.get("errors", {}):
                continue
            try:
                t0 = time.perf_counter()
                calls = _calls(w, inputs, configs[key], out, workspace)
                runs[key].append(time_calls(calls, before=before))
                if time.perf_counter() - t0 > 2.0 and rep == 0:  # compiled here: the compile pool missed it
                    record.setdefault("slow", []).append(key)
            except Exception as e:  # does not fit (shared memory, registers): never chosen
                runs[key] = []
                record.setdefault("errors", {})[key] = f"{type(e).__name__}: {str(e)[:160]}"
                if device != "cpu":
                    torch.cuda.synchronize()
    record["times_ms"] = {key: statistics.median(runs[key]) if runs[key] else None for key in keys}
    if repeats > 1:
        record["runs_ms"] = {key: runs[key] for key in keys if runs[key]}
    return record


def merge_sweeps(into: str, paths, *, replace: bool = False, create: bool = False, flag: str = "--merge") -> int:
    """Append to the sweep JSON ``into`` the records of the sweeps at ``paths`` (shards of one machine's
    GPUs) that it does not hold yet; returns how many were added or, with ``replace``, replaced: a record of
    ``paths`` then takes the place of ``into``'s of the same workload (a re-sweep, ``resweep``). ``create``:
    ``into`` may be missing, and is made from the first of ``paths``. The sweeps must be of one GPU model,
    with the same candidate knobs and timings a candidate: anything else is refused, nothing written.
    From a sweep of the other timing order only prefill-family records are taken (the order changes how
    decode-family calls are timed, nothing else): a model-order decode re-sweep keeps the prefill sweep."""
    data = load_json(into, "gpu", "knobs", "records", flag=flag)
    if data is None and create and paths:
        data = load_json(paths[0], "gpu", "knobs", "records", flag=flag)
        data = None if data is None else dict(data, records=[])
    if data is None:
        raise SystemExit(f"{flag}: {into if not create or not paths else paths[0]} does not exist")
    data.setdefault("repeats", 1)
    data.setdefault("order", BACK_TO_BACK)
    have = {r["name"]: i for i, r in enumerate(data["records"])}
    added = 0
    for path in paths:
        other = load_json(path, "gpu", "knobs", "records", flag=flag)
        if other is None:
            raise SystemExit(f"{flag}: {path} does not exist")
        other.setdefault("repeats", 1)
        other.setdefault("order", BACK_TO_BACK)
        for key in ("gpu", "knobs", "repeats"):
            if other[key] != data[key]:  # both as read from JSON
                raise SystemExit(f"{flag}: {path} has {key} {other[key]!r}, {into} has {data[key]!r}")
        same_order = other["order"] == data["order"]
        for r in other["records"]:
            if not (same_order or r["family"] == PREFILL):
                continue
            if r["name"] not in have:
                have[r["name"]] = len(data["records"])
                data["records"].append(r)
                added += 1
            elif replace:
                data["records"][have[r["name"]]] = r
                added += 1
        if other.get("header", {}).get("date", "") > data.get("header", {}).get("date", ""):
            data["header"] = other["header"]
    save_json(data, into)
    return added


def load_json(path: str, *keys: str, flag: str = ""):
    """The JSON at ``path``, or None where there is no file; SystemExit naming a file that is not JSON or (with
    ``keys``) not an object holding them (``flag``: the option that read it, for the message)."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        try:
            data = json.load(f)
        except (UnicodeDecodeError, ValueError) as e:
            raise SystemExit(f"{flag + ': ' if flag else ''}{path} is not JSON ({e})") from None
    missing = [k for k in keys if k not in data] if isinstance(data, dict) else list(keys)
    if missing:
        raise SystemExit(f"{flag + ': ' if flag else ''}{path} is not a JSON object with {', '.join(keys)} (no "
                         f"{', '.join(missing)})")
    return data


def save_json(data: dict, path: str) -> None:
    """Write a tuning file (``jsonio.save_json``: whole or not at all), one value a line as committed."""
    jsonio.save_json(data, path, indent=0)


def gpu_slug(name: str) -> str:
    """"NVIDIA H100 80GB HBM3" -> "NVIDIA-H100" (the bench/results naming)."""
    return "-".join(name.split()[:2]) if name else "gpu"


def job_path(out_dir: str, gpu: str, kind: str | None = None) -> str:
    """Where a job's JSON for ``gpu`` goes: ``DIR/attention-<gpu slug>[.<kind>].json`` (a sweep, "confirm", ...)."""
    return os.path.join(out_dir, f"attention-{gpu_slug(gpu)}{'.' + kind if kind else ''}.json")


def interleave_families(workloads: list) -> list:
    """``workloads`` reordered so that every prefix holds the decode and prefill families in the proportion
    of the whole list (each family's own order kept): a sweep stopped at its time limit, or split into
    shards by position, leaves a sample of both families instead of the first family alone."""
    by_family = {}
    for w in workloads:
        by_family.setdefault(w.family(), []).append(w)
    keyed = [((i + 0.5) / len(ws), f, w) for f, ws in by_family.items() for i, w in enumerate(ws)]
    return [w for _, _, w in sorted(keyed, key=lambda x: (x[0], x[1]))]


def parse_shard(text: str) -> tuple[int, int]:
    """"I/N" -> (I, N) with 0 <= I < N; ValueError otherwise."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"shard must be I/N with integers, got {text!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"shard I/N needs 0 <= I < N, got {text!r}")
    return i, n


def sweep(out_dir: str, *, part: str | None = None, limit: int | None = None, jobs: int = 0,
          seed: int = 0, workloads=None, device=None, repeats: int | None = None,
          grid: tuple[int, int] = (120, 54), shard: tuple[int, int] = (0, 1), compile_only: bool = False,
          order: str | None = None, kind: str = "", source: dict | None = None,
          candidates: dict | None = None) -> str:
    """Run (or continue) the sweep; returns the JSON path. ``repeats``: timings of each candidate (see
    ``sweep_workload``); a sweep is continued only with the count it was started with (None: that count,
    1 for a new sweep). ``grid``: decode- and prefill-family workloads of ``workload_grid``, swept with
    the families interleaved. ``shard`` (I, N): only the I-th of every N workloads still to sweep, so
    that N processes, one a GPU of a machine, sweep disjoint parts (``merge_sweeps`` joins them).
    ``compile_only``: fill the Triton cache for what all N shards will sweep (``limit`` each), time
    nothing; the shards then run with ``jobs=1`` instead of N pools compiling the same kernels.
    ``order``: how decode-family calls are timed (``ORDERS``, see ``sweep_workload``); a sweep is continued
    only in its own order (None: that order, BACK_TO_BACK for a new sweep). ``kind`` (e.g. "resweep"): the
    JSON is ``attention-<gpu>.<kind>.json``; ``source``: what it is of (``resweep``), checked when continued.
    ``candidates``: workload name -> the knob sets to time (default: every candidate of its family); such a
    record names the others (``left_out``)."""
    device = torch.device(device or ("cpu" if interpreting() else "cuda"))
    name = device_name(device)
    sms = num_sms(device)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 50 << 20
    path = job_path(out_dir, name, kind)
    data = load_json(path) or dict(gpu=name, sms=sms, l2_bytes=l2, seed=seed, knobs=dict(KNOBS),
                                   repeats=repeats or 1, order=order or BACK_TO_BACK, records=[],
                                   **({} if source is None else dict(source=source)))
    if data["gpu"] != name:
        raise SystemExit(f"{path} holds a sweep of {data['gpu']}, this GPU is {name}")
    if data.get("source") != source:
        raise SystemExit(f"{path} holds a sweep of {data.get('source')}, asked for one of {source}")
    data.setdefault("repeats", 1)  # sweeps before the option timed once
    data.setdefault("order", BACK_TO_BACK)  # and back to back
    if order and data["order"] != order:
        raise SystemExit(f"{path} holds a sweep timed in order {data['order']!r}; asked for {order!r}")
    repeats = repeats or data["repeats"]
    if data["repeats"] != repeats:
        raise SystemExit(f"{path} holds a sweep with {data['repeats']} timing(s) a candidate; asked for {repeats}")
    data["header"] = header(device) if device.type == "cuda" else dict(gpu=name)
    done = {r["name"] for r in data["records"]}
    todo = [w for w in (workloads or interleave_families(workload_grid(seed, *grid))) if w.name not in done]
    if part:
        todo = [w for w in todo if w.family() == part]
    pool = jobs or min(16, os.cpu_count() or 1)
    if compile_only:
        todo = todo[:limit * shard[1]] if limit else todo  # every shard's share
        print(f"{name}: compiling for {len(todo)} workloads ({shard[1]} shard(s))", flush=True)
        if todo and device.type == "cuda":
            precompile(todo, sms, pool, candidates)
        return path
    todo = todo[shard[0]::shard[1]]
    todo = todo[:limit] if limit else todo
    print(f"{name}: {len(done)} workloads done, {len(todo)} to sweep"
          + (f" (shard {shard[0]} of {shard[1]})" if shard[1] > 1 else ""), flush=True)
    if todo and device.type == "cuda" and jobs != 1:
        precompile(todo, sms, pool, candidates)
    for i, w in enumerate(todo):
        t0 = time.perf_counter()
        record = sweep_workload(w, device, sms, l2, repeats=repeats, order=data["order"],
                                candidates=(candidates or {}).get(w.name))
        if candidates and w.name in candidates:  # what this record did not time (the fit counts it as failed)
            record["left_out"] = [k for k in map(trees.knob_key, _candidates(w)) if k not in record["times_ms"]]
        data["records"].append(record)
        times = {k: v for k, v in record["times_ms"].items() if v is not None}
        best = min(times, key=times.get)
        print(f"[{i + 1}/{len(todo)}] {w.name}: hand {times.get(HAND, math.nan) * 1e3:.1f} us, best {best} "
              f"{times[best] * 1e3:.1f} us ({time.perf_counter() - t0:.1f} s)", flush=True)
        save_json(data, path)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return path


def resweep(sweep_path: str, out_dir: str, *, kv_dtype: str | None = None, part: str | None = None,
            limit: int | None = None, jobs: int = 0, shard: tuple[int, int] = (0, 1), compile_only: bool = False,
            within: float | None = None, head_dim: int | None = None, device=None) -> str:
    """Sweep again the workloads of the sweep at ``sweep_path`` (those of ``kv_dtype``'s caches, ``part``'s family
    and ``head_dim`` where given), with its repeat count and timing order, into ``DIR/attention-<gpu>.resweep.json``;
    returns that path. For a kernel change that moves most candidates of a kind of workload, where re-timing a
    few (``tritium.tune.retime``) would not do: the fp8 caches' dots in fp16 (stop 70) after the H100's sweep.
    ``merge_sweeps(SWEEP, [RESWEEP], replace=True)`` (``--merge SWEEP RESWEEP --replace``) then puts its records
    in place of the old ones, and the trees are refitted.

    Every candidate, or with ``within`` only those the old record timed within that factor of its best, and
    the hand rules (a third of the timings at 1.1 on the H100's fp8 workloads). Each such record names what
    it left out (``resweep``: within, the candidates not timed); the fit counts a candidate not timed as a
    failed one, so the tree does not learn to pick it, and a held-out pick of one counts as a miss."""
    src = load_json(sweep_path, "gpu", "knobs", "records", flag="--resweep")
    if src["knobs"] != json.loads(json.dumps(dict(KNOBS))):
        raise SystemExit(f"--resweep: {sweep_path} was swept over other candidates than this version's KNOBS; "
                         "a re-sweep could not replace its records")
    if within is not None and not (math.isfinite(within) and within >= 1.0):
        raise ValueError(f"within must be a finite factor >= 1.0, got {within!r}")
    recs = [r for r in src["records"]
            if (kv_dtype is None or r["workload"]["kv_dtype"] == kv_dtype) and (part is None or r["family"] == part)
            and (head_dim is None or r["workload"]["head_dim"] == head_dim)]
    if not recs:
        raise SystemExit(f"--resweep: {sweep_path} has no workloads" + (f" with {kv_dtype} caches" if kv_dtype else "")
                         + (f" of the {part} family" if part else "")
                         + (f" of head_dim {head_dim}" if head_dim else ""))
    device = torch.device(device or ("cpu" if interpreting() else "cuda"))
    if src["gpu"] != device_name(device):
        raise SystemExit(f"--resweep: {sweep_path} is a sweep of {src['gpu']}; this GPU is {device_name(device)}")
    source = retime.sweep_source(sweep_path)
    candidates = None
    if within is not None:
        source["within"] = within
        candidates = {r["name"]: near_best(r, within) for r in recs}
    workloads = interleave_families([Workload(**r["workload"]) for r in recs])
    return sweep(out_dir, limit=limit, jobs=jobs, workloads=workloads, device=device, repeats=src.get("repeats", 1),
                 shard=shard, compile_only=compile_only, order=src.get("order", BACK_TO_BACK), kind="resweep",
                 source=source, candidates=candidates)


def near_best(record: dict, within: float) -> list:
    """The knob sets of a sweep record's candidates timed within ``within`` of its best, and the hand rules, in
    the family's candidate order."""
    times = {k: v for k, v in record["times_ms"].items() if v is not None}
    if not times:
        return [HAND] + KNOBS[record["family"]]
    best = min(times.values())
    keep = {k for k, v in times.items() if v <= within * best} | {HAND}
    return [knobs for knobs in [HAND] + KNOBS[record["family"]] if trees.knob_key(knobs) in keep]


def name_pattern(text: str) -> re.Pattern:
    """``--match``'s regular expression, compiled (argparse names the option on a bad one)."""
    try:
        return re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"expected a regular expression, got {text!r} ({e})") from None


def factor(text: str) -> float:
    """Option type: a finite factor >= 1 (1.1: within 10%)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1.0):
        raise argparse.ArgumentTypeError(f"expected a factor >= 1 (1.1: within 10%), got {text!r}")
    return value


SWEEP_FILE = json_file("gpu", "knobs", "records")  # option type: a sweep's JSON, as sweep() writes it


def main(argv) -> int:
    parser = Parser(prog="python -m tritium.tune attention", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=output_dir, default="bench/results/tuning", help="directory of the sweep JSON")
    parser.add_argument("--part", choices=[DECODE, PREFILL], help="sweep one family only")
    parser.add_argument("--limit", type=integer(1), help="sweep at most this many new workloads")
    parser.add_argument("--jobs", type=integer(0), default=0, help="compile processes (default 0: CPUs, at most 16)")
    parser.add_argument("--grid", default="120,54", metavar="DECODE,PREFILL",
                        help="decode- and prefill-family workloads to sample (the anchors always among them)")
    parser.add_argument("--match", type=name_pattern, metavar="REGEX",
                        help="sweep the workloads of the fit's domain whose names match REGEX (re.search; e.g. "
                             "'^prefill-.*-D64-G1-') instead of the grid's: more data where a fit is unsure; with "
                             "--confirm, re-time only the held-out workloads whose names match")
    parser.add_argument("--repeats", type=integer(1), default=None,
                        help="time each candidate this many times, in alternating order; the median is kept "
                             "(default: as the sweep being continued, 1 for a new one)")
    parser.add_argument("--order", choices=ORDERS, default=None,
                        help="how a new sweep times decode-family calls: back to back, or each after a QKV-sized "
                             "GEMV as a model runs them (default: the continued sweep's, back_to_back for a new one)")
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="sweep only the I-th of every N workloads still to sweep (one process a GPU)")
    parser.add_argument("--compile-only", action="store_true",
                        help="fill the Triton cache for the workloads of all N shards (--shard I/N, --limit each) "
                             "and exit; the shards then sweep with --jobs 1")
    parser.add_argument("--merge", nargs="+", metavar="FILE",
                        help="INTO SHARD...: add the shards' records to the sweep JSON INTO (no GPU)")
    parser.add_argument("--confirm", type=SWEEP_FILE, metavar="FILE",
                        help="re-time the held-out picks of the fit of this sweep JSON against the hand rules and "
                             "the sweep's best (--repeats rounds, default 6; tritium.tune.confirm)")
    parser.add_argument("--confirm-merge", nargs="+", metavar="FILE",
                        help="INTO SHARD...: add the shards' re-timings to the confirmation JSON INTO (no GPU)")
    parser.add_argument("--resweep", type=SWEEP_FILE, metavar="FILE",
                        help="sweep this sweep JSON's workloads again, every candidate (--kv-dtype, --part: only "
                             "those), into --out's attention-<gpu>.resweep.json; then --merge FILE RESWEEP --replace")
    parser.add_argument("--within", type=factor, metavar="F",
                        help="with --resweep: time only the candidates the old record timed within F of its best "
                             "(e.g. 1.1), and the hand rules")
    parser.add_argument("--head-dim", type=integer(1), metavar="D",
                        help="with --resweep: only the workloads of this head_dim")
    parser.add_argument("--resweep-merge", nargs="+", metavar="FILE",
                        help="INTO SHARD...: add the shards' records to the re-sweep JSON INTO (no GPU)")
    parser.add_argument("--kv-dtype", choices=["bf16", "fp8"], default=None,
                        help="with --confirm or --resweep: only the workloads with KV caches of this dtype")
    parser.add_argument("--replace", action="store_true",
                        help="with --merge or --confirm-merge: a shard's record replaces INTO's of the same workload "
                             "(after a kernel change); without it INTO's is kept")
    parser.add_argument("--confirm-carry", nargs=2, metavar=("SWEEP", "OLD"),
                        help="start the confirmation of SWEEP's fit in --out from the records of OLD, a confirmation "
                             "of another fit of this GPU, whose picks did not change (no GPU; same kernels only)")
    parser.add_argument("--confirm-summary", type=json_file("gpu", "records"), metavar="FILE",
                        help="print a confirmation JSON's table (no GPU)")
    parser.add_argument("--retime", type=SWEEP_FILE, metavar="FILE",
                        help="re-time the candidates of this sweep JSON that the first-tile preload changed, with "
                             "calibrators (--repeats rounds, default 2; tritium.tune.retime)")
    parser.add_argument("--retime-merge", nargs="+", metavar="FILE",
                        help="INTO SHARD...: add the shards' records to the re-timing JSON INTO (no GPU)")
    parser.add_argument("--retime-apply", nargs="+", metavar="FILE",
                        help="SWEEP RETIME...: put the re-timings into the sweep JSON, calibrated (no GPU)")
    parser.add_argument("--retime-min-context", type=integer(0), default=0, metavar="N",
                        help="with --retime-apply: leave the timings of workloads of fewer than N cached tokens as "
                             "they were (tritium.tune.retime.apply)")
    parser.add_argument("--fit", type=SWEEP_FILE, metavar="FILE",
                        help="fit and export trees from this sweep JSON (no GPU)")
    parser.add_argument("--tree-dir", type=output_dir, default=None, help="where the tree module goes "
                        "(default: src/tritium/attention/tuned of this package)")
    parser.add_argument("--no-fit", action="store_true", help="sweep only")
    parser.add_argument("--with-sweep", type=SWEEP_FILE, action="append", default=[], metavar="FILE",
                        help="another GPU's sweep JSON whose timings the cost model also trains on (repeatable)")
    parser.add_argument("--hold-out-anchors", action="store_true",
                        help="let the held-out fifth take the benchmark's anchor shapes too (how trees were fitted "
                             "before stop 27; the H200 tree still is)")
    args = parser.parse_args(argv)
    try:
        return _main(parser, args)
    except SystemExit as e:  # the sweeps' refusals of the files given (another GPU's, missing): argument errors
        if isinstance(e.code, str):
            parser.error(e.code)
        raise


def _main(parser, args) -> int:
    if args.head_dim is not None and not args.resweep:
        parser.error("--head-dim goes with --resweep (the workloads to sweep again)")
    if args.within is not None and not args.resweep:
        parser.error("--within goes with --resweep (which candidates to time again)")
    if args.kv_dtype and not (args.confirm or args.resweep):
        parser.error("--kv-dtype goes with --confirm or --resweep (the workloads to time again)")
    other_jobs = (args.fit, args.merge, args.resweep, args.resweep_merge, args.confirm_merge,
                  args.confirm_carry, args.confirm_summary, args.retime, args.retime_merge, args.retime_apply)
    if args.match is not None and any(other_jobs):
        parser.error("--match goes with a sweep (which workloads of the domain to sweep) or --confirm (which "
                     "held-out workloads to time again)")
    if args.replace and not (args.merge or args.confirm_merge):
        parser.error("--replace goes with --merge or --confirm-merge")
    if args.merge or args.resweep_merge:
        files = args.merge or args.resweep_merge
        flag = "--merge" if args.merge else "--resweep-merge"
        if len(files) < 2:
            parser.error(f"{flag} needs the sweep JSON to add to and at least one shard's JSON")
        added = merge_sweeps(files[0], files[1:], replace=args.replace, create=bool(args.resweep_merge), flag=flag)
        print(f"{files[0]}: {added} workloads {'added or replaced' if args.replace else 'added'} from "
              f"{len(files) - 1} shard(s)")
        return 0
    if args.resweep:
        try:
            shard = parse_shard(args.shard)
        except ValueError as e:
            parser.error(f"--shard: {e}")
        if not (torch.cuda.is_available() or interpreting()):
            parser.error("--resweep times kernels: it needs a GPU (or TRITON_INTERPRET=1 for a dry run)")
        resweep(args.resweep, args.out, kv_dtype=args.kv_dtype, part=args.part, limit=args.limit, jobs=args.jobs,
                shard=shard, compile_only=args.compile_only, within=args.within, head_dim=args.head_dim)
        return 0
    if args.confirm_merge or args.confirm_carry or args.confirm_summary or args.confirm:
        return _confirm_main(parser, args)
    if args.retime or args.retime_merge or args.retime_apply:
        return _retime_main(parser, args)
    path = args.fit
    if path is None:
        try:
            shard = parse_shard(args.shard)
        except ValueError as e:
            parser.error(f"--shard: {e}")
        try:
            grid = tuple(int(n) for n in args.grid.split(","))
        except ValueError:
            grid = ()
        if len(grid) != 2 or min(grid) < 1:
            parser.error(f"--grid must be two positive counts DECODE,PREFILL, got {args.grid!r}")
        workloads = None
        if args.match is not None:
            workloads = [w for w in workload_domain() if args.match.search(w.name)]
            if not workloads:
                parser.error(f"--match: no workload of the domain matches {args.match.pattern!r} (names look like "
                             f"{workload_domain()[0].name!r})")
        if not torch.cuda.is_available():
            parser.error("sweeping needs a GPU; use --fit FILE to fit trees from a sweep's JSON")
        path = sweep(args.out, part=args.part, limit=args.limit, jobs=args.jobs, repeats=args.repeats, grid=grid,
                     shard=shard, compile_only=args.compile_only, order=args.order, workloads=workloads)
        if args.no_fit or args.compile_only:
            return 0
    if importlib.util.find_spec("sklearn") is None:
        if args.fit:
            parser.error("--fit needs scikit-learn: pip install 'tritium[tune]'")
        print(f"not fitting: scikit-learn is missing (pip install 'tritium[tune]'; then "
              f"python -m tritium.tune attention --fit {path})")
        return 0
    anchors = set() if args.hold_out_anchors else {w.name for w in anchor_workloads()}
    trees.fit_and_export(path, domain=[w.features() for w in workload_domain()], tree_dir=args.tree_dir,
                         train_only=anchors, others=tuple(args.with_sweep))
    return 0


def _timing_job(parser, args, flag: str, *, default_repeats: int, min_repeats: int, why: str = ""):
    """(shard, repeats) of a GPU job re-timing a sweep's workloads (--confirm, --retime), or a parser error."""
    try:
        shard = parse_shard(args.shard)
    except ValueError as e:
        parser.error(f"--shard: {e}")
    repeats = default_repeats if args.repeats is None else args.repeats
    if repeats < min_repeats:
        parser.error(f"--repeats must be >= {min_repeats} with {flag}{why}, got {repeats}")
    if not (torch.cuda.is_available() or interpreting()):
        parser.error(f"{flag} times kernels: it needs a GPU (or TRITON_INTERPRET=1 for a dry run)")
    return shard, repeats


def _confirm_main(parser, args) -> int:
    if args.confirm_merge:
        if len(args.confirm_merge) < 2:
            parser.error("--confirm-merge needs the confirmation JSON to add to and at least one shard's JSON")
        added = confirm.merge(args.confirm_merge[0], args.confirm_merge[1:], replace=args.replace)
        print(f"{args.confirm_merge[0]}: {added} workloads {'added or replaced' if args.replace else 'added'} "
              f"from {len(args.confirm_merge) - 1} shard(s)")
        data = load_json(args.confirm_merge[0])
        if data is not None:
            confirm.print_summary(data)
        return 0
    if args.confirm_carry:
        sweep, old = args.confirm_carry
        for name in (sweep, old):
            if not os.path.isfile(name):
                parser.error(f"argument --confirm-carry: {name} does not exist")
        if not os.path.exists(confirm.validation_path(sweep)):
            parser.error(f"--confirm-carry: {confirm.validation_path(sweep)} does not exist (--fit {sweep} writes it)")
        path, carried, left = confirm.carry(sweep, old, args.out)
        print(f"{path}: {carried} re-timed picks carried from {old}, {left} held-out workloads left to time")
        data = load_json(path)
        if data["records"]:
            confirm.print_summary(data)
        return 0
    if args.confirm_summary:
        confirm.print_summary(load_json(args.confirm_summary))
        return 0
    shard, repeats = _timing_job(parser, args, "--confirm", default_repeats=6, min_repeats=2,
                                 why=" (rounds compared one by one)")
    if not os.path.exists(confirm.validation_path(args.confirm)):
        parser.error(f"--confirm: {confirm.validation_path(args.confirm)} does not exist (--fit {args.confirm} "
                     f"writes it)")
    path = confirm.confirm(args.confirm, args.out, repeats=repeats, part=args.part, kv_dtype=args.kv_dtype,
                           match=args.match, shard=shard, limit=args.limit,
                           jobs=args.jobs, compile_only=args.compile_only)
    if not args.compile_only and shard[1] == 1:
        confirm.print_summary(load_json(path))
    return 0


def _retime_main(parser, args) -> int:
    if args.retime_merge:
        if len(args.retime_merge) < 2:
            parser.error("--retime-merge needs the re-timing JSON to add to and at least one shard's JSON")
        added = retime.merge(args.retime_merge[0], args.retime_merge[1:])
        print(f"{args.retime_merge[0]}: {added} workloads added from {len(args.retime_merge) - 1} shard(s)")
        return 0
    if args.retime_apply:
        if len(args.retime_apply) < 2:
            parser.error("--retime-apply needs the sweep JSON and at least one re-timing JSON")
        print(json.dumps(retime.apply(args.retime_apply[0], args.retime_apply[1:],
                                      min_context=args.retime_min_context)))
        return 0
    shard, repeats = _timing_job(parser, args, "--retime", default_repeats=2, min_repeats=1)
    retime.retime(args.retime, args.out, repeats=repeats, part=args.part or DECODE, shard=shard, limit=args.limit,
                  jobs=args.jobs, compile_only=args.compile_only)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
