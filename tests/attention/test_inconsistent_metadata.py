"""Inconsistent batch metadata with validate=False never crashes and never touches memory outside the
tensors: the sequence it concerns gets NaN rows, the other sequences stay exact.

Each case runs in a child process, so a kernel that reads or writes out of bounds fails its test
(a segfault under the interpreter, an illegal address on a GPU) instead of killing pytest. The child
poisons the output (NaN), surrounds it with guard rows, gives the split-KV workspace rows past
num_tokens that must stay untouched, and fills the workspace and the caches (between finite guard pages)
with finite values, so a row the kernels fail to write, a write past the end, or a NaN that does not come
from the kernel's checks, shows up.
validate=True still reports every case as a ValueError (in process: it raises before any launch).
"""

import pytest
import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, hopper, launcher, paged_attention, write_kv_cache
from tritium.attention.reference import write_kv_cache_ref
from tritium.runtime import default_device

from .utils import TOL, Shape, assert_rel_close, feature_kwargs, run_in_child

INT32_MAX, INT32_MIN = 2**31 - 1, -2**31
DTYPE = torch.float16

# Batches of 4 sequences (block-table rows hold 4 pages of 16 = 64 tokens) and the launch options of
# each kernel path. Decode-like batches (<= 64 rows per Q block) take the small-Q-block configuration;
# "prefill" has a 40-token query (80 rows), so it takes the prefill one (large Q blocks, REVERSE order).
DECODE = Shape(q_lens=(3, 1, 5, 2), seq_lens=(20, 17, 40, 33))
PREFILL = Shape(q_lens=(3, 1, 40, 2), seq_lens=(20, 17, 45, 33))
PATHS = {
    "unsplit": (DECODE, {"num_splits": 1}),
    "split3-sinks": (DECODE, {"num_splits": 3, "features": "sinks"}),
    "prefill": (PREFILL, {"num_splits": 1}),
    # Chunked prefill of one length in rank order (launcher.ORDER 3, _rank_order), 3 Q blocks a sequence, each over
    # 16+ keys of context (so each reads the pages the cases corrupt); the cu_seqlens_q cases make the kernel's
    # uniformity check fall back to slot order.
    "prefill-uniform": (Shape(q_lens=(24, 24, 24, 24), seq_lens=(45, 40, 48, 41)),
                        {"num_splits": 1, "max_seqlen_q": 24, "order": 3,
                         "config": AttentionConfig(block_m=16, block_q=8, tile_n=16, num_splits=1, num_warps=2,
                                                   num_stages=2)}),
    # The Gluon Hopper kernel (tritium.attention.hopper): on a Hopper GPU only.
    "gluon": (Shape(q_lens=(3, 1, 40, 2), seq_lens=(20, 17, 45, 33), head_dim=128), {"config": hopper.CONFIG}),
}


# name -> (tensor, index, value(num_tokens, num_blocks, cu_seqlens_q), sequences whose rows must be NaN,
# what validate=True says). The tensor is one of block_table, seq_lens, cu_seqlens_q.
CASES = {
    # A sequence longer than its block-table row: 65 tokens made the kernel read the next row's first
    # page id, 100000 read past the block table (a segfault before the checks).
    "seq_len-past-row": ("seq_lens", 1, lambda n, nb, cu: 65, [1], r"seq_lens\[1\] = 65 needs 5 pages"),
    "seq_len-far-past-row": ("seq_lens", 0, lambda n, nb, cu: 100_000, [0], r"seq_lens\[0\] = 100000 needs 6250 pages"),
    "seq_len-int32-max": ("seq_lens", 3, lambda n, nb, cu: INT32_MAX, [3], r"seq_lens\[3\] = 2147483647 needs"),
    "seq_len-shorter-than-query": ("seq_lens", 2, lambda n, nb, cu: 2, [2],
                                   r"seq_lens\[2\] = 2 is shorter than its query length"),
    # Page ids outside the cache among the pages a sequence uses.
    "page-id-past-cache": ("block_table", (0, 0), lambda n, nb, cu: nb, [0],
                           r"block_table\[0, 0\] = \d+ is out of range"),
    "page-id-int32-min": ("block_table", (2, 1), lambda n, nb, cu: INT32_MIN, [2],
                          r"block_table\[2, 1\] = -2147483648 is out of range"),
    "page-id-int32-max": ("block_table", (3, 0), lambda n, nb, cu: INT32_MAX, [3],
                          r"block_table\[3, 0\] = 2147483647 is out of range"),
    # cu_seqlens_q: totals that differ from num_tokens, a first entry that is not 0 (the rows no sequence
    # claims belong to the first / last sequence), an entry past num_tokens, decreasing, negative.
    "cu-total-short": ("cu_seqlens_q", 4, lambda n, nb, cu: n - 1, [3], r"end at num_tokens"),
    "cu-total-long": ("cu_seqlens_q", 4, lambda n, nb, cu: n + 5, [3], r"end at num_tokens"),
    "cu-first-not-0": ("cu_seqlens_q", 0, lambda n, nb, cu: 1, [0], r"must start at 0"),
    "cu-past-num_tokens": ("cu_seqlens_q", 2, lambda n, nb, cu: n + 7, [1, 2, 3], r"non-decreasing"),
    "cu-decreasing": ("cu_seqlens_q", 2, lambda n, nb, cu: cu[3] + 1, [1, 2, 3], r"non-decreasing"),
    "cu-negative": ("cu_seqlens_q", 1, lambda n, nb, cu: -2, [0, 1], r"non-decreasing"),
}


def _corrupt(batch, case: str) -> dict:
    """Copies of the batch's block_table, seq_lens and cu_seqlens_q with the case's one wrong entry."""
    name, index, value, _, _ = CASES[case]
    meta = {"block_table": batch.block_table.clone(), "seq_lens": batch.seq_lens.clone(),
            "cu_seqlens_q": batch.cu_seqlens_q.clone()}
    meta[name][index] = value(batch.q.shape[0], batch.k_cache.shape[0], batch.cu_seqlens_q.tolist())
    return meta


GUARD = 3  # guard rows (pages, for the caches) before and after out and the caches
SENTINEL = 7.0


def _guarded(rows: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(buffer, view): a view of ``rows`` rows shaped like ``like``'s rows, between GUARD sentinel rows."""
    buf = torch.full((rows + 2 * GUARD, *like.shape[1:]), SENTINEL, dtype=like.dtype, device=like.device)
    return buf, buf[GUARD:GUARD + rows]


def _assert_guards(buf: torch.Tensor, rows: int, what: str) -> None:
    for part in (buf[:GUARD], buf[GUARD + rows:]):
        assert bool((part == SENTINEL).all()), f"{what}: a write landed outside the tensor"


def _finite_caches(batch) -> None:
    """Make the caches finite (the test batches fill unowned slots with NaN) and put them between guard
    pages, so that NaN rows can only come from the kernel's own poisoning, never from reading a wrong
    slot or a page past the cache."""
    for name in ("k_cache", "v_cache"):
        cache = getattr(batch, name).nan_to_num(SENTINEL)
        buf, view = _guarded(cache.shape[0], cache)
        view.copy_(cache)
        setattr(batch, name, view)


def check_case(case: str, path: str, seed: int) -> None:
    """One case on one kernel path (runs in the child process). Raises AssertionError on a mismatch."""
    torch.manual_seed(seed)
    shape, options = PATHS[path]
    options = dict(options)
    kwargs = feature_kwargs(options.pop("features", "plain"), shape.num_q_heads)
    if "order" in options:  # the child's own launcher
        launcher.ORDER = options.pop("order")
    batch = shape.batch(DTYPE)
    _finite_caches(batch)
    ref = batch.ref(**kwargs)  # from the consistent metadata
    num_tokens = batch.q.shape[0]
    assert batch.block_table.shape[1] * shape.block_size == 64, "the cases assume 64-token block-table rows"
    meta = _corrupt(batch, case)
    bad = CASES[case][3]

    out_buf, out = _guarded(num_tokens, batch.q)
    out.fill_(float("nan"))
    ws_rows = num_tokens + 4  # rows past num_tokens must stay as they are
    workspace = AttentionWorkspace(ws_rows, shape.num_q_heads, shape.head_dim, max_splits=4, device=out.device)
    workspace.part_out.fill_(1.0)  # finite: a row the attention kernel skips would merge into 1.0
    workspace.part_lse.fill_(0.0)
    ws_before = (workspace.part_out[:, num_tokens:].clone(), workspace.part_lse[:, num_tokens:].clone())

    paged_attention(batch.q, batch.k_cache, batch.v_cache, meta["block_table"], meta["seq_lens"],
                    meta["cu_seqlens_q"], out=out, workspace=workspace, **options, **kwargs)

    _assert_guards(out_buf, num_tokens, "out")
    assert torch.equal(workspace.part_out[:, num_tokens:], ws_before[0]), "workspace rows past num_tokens written"
    assert torch.equal(workspace.part_lse[:, num_tokens:], ws_before[1]), "workspace lse past num_tokens written"
    cu = batch.cu_seqlens_q.tolist()
    for s in range(len(cu) - 1):
        rows = slice(cu[s], cu[s + 1])
        if s in bad:
            nan = torch.isnan(out[rows].float())
            assert bool(nan.all()), f"sequence {s}: {int((~nan).sum())} of {nan.numel()} elements are not NaN"
        else:
            assert_rel_close(out[rows], ref[rows], TOL[DTYPE], what=f"sequence {s}")


def check_kv_write(seed: int) -> None:
    """Slots past the cache (and far past it) are dropped; the other tokens land (runs in the child)."""
    torch.manual_seed(seed)
    device = default_device()
    num_blocks, block_size, heads, dim = 3, 16, 2, 64
    num_slots = num_blocks * block_size
    k = torch.randn(6, heads, dim, dtype=DTYPE, device=device)
    v = torch.randn(6, heads, dim, dtype=DTYPE, device=device)
    slots = torch.tensor([3, num_slots, 2**40, -1, num_slots - 1, 17], device=device)
    kept = [0, 4, 5]  # the tokens whose slot lies in the cache
    bufs, caches = [], []
    for _ in range(2):  # k_cache, v_cache: views between guard pages
        buf = torch.full((num_blocks + 2 * GUARD, block_size, heads, dim), SENTINEL, dtype=DTYPE, device=device)
        buf[GUARD:GUARD + num_blocks] = 0.0
        bufs.append(buf)
        caches.append(buf[GUARD:GUARD + num_blocks])
    want = [torch.zeros_like(caches[0]), torch.zeros_like(caches[1])]
    for w, src in zip(want, (k, v)):
        w.view(-1, heads, dim)[slots[kept]] = src[kept]
    ref = [torch.zeros_like(caches[0]), torch.zeros_like(caches[1])]
    write_kv_cache_ref(k, v, ref[0], ref[1], slots)
    write_kv_cache(k, v, caches[0], caches[1], slots)
    for buf, cache, w, r, name in zip(bufs, caches, want, ref, ("k_cache", "v_cache")):
        _assert_guards(buf, num_blocks, name)
        assert torch.equal(cache, w), f"{name}: the kernel's writes differ from the in-range tokens"
        assert torch.equal(r, w), f"{name}: the reference's writes differ from the in-range tokens"


def _hopper_gpu() -> bool:
    return default_device().type == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability()[0] >= 9


def _in_child(function: str, *args) -> None:
    run_in_child(__name__, function, *args)


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case", list(CASES))
def test_inconsistent_metadata(case, path):
    if path == "gluon" and not _hopper_gpu():
        pytest.skip("the Gluon kernel needs a Hopper GPU")
    _in_child("check_case", case, path, torch.initial_seed())


def test_kv_write_outside_cache():
    _in_child("check_kv_write", torch.initial_seed())


@pytest.mark.parametrize("case", list(CASES))
def test_validate_raises(case):
    match = CASES[case][4]
    batch = DECODE.batch(DTYPE)
    meta = _corrupt(batch, case)
    with pytest.raises(ValueError, match=match):
        paged_attention(batch.q, batch.k_cache, batch.v_cache, meta["block_table"], meta["seq_lens"],
                        meta["cu_seqlens_q"], validate=True)
