"""Batch invariance of paged attention (``invariant_config``): a query row's output has the same bits whether
it is computed in a prefill, a chunk, a decode step, beside other sequences, with split-KV or without.

Each case builds one cache holding every key of a few sequences, computes all of their tokens in one prefill
call, then recomputes tokens in other batch layouts over the same pages and compares bit for bit. Every
result is also checked against the fp32 reference (the grouped softmax is still attention).
"""

import pytest
import torch

from tritium.attention import AttentionWorkspace, paged_attention
from tritium.attention.config import AttentionConfig, invariant_config
from tritium.runtime import interpreting
from tritium.testing.row_dot import row_independent_dot

from .utils import FP8, assert_rel_close, poisoned_like, random_paged_batch

SEQ_LENS = [1, 45, 130, 200]


@pytest.fixture(autouse=True)
def _row_dot():
    """The interpreter's tl.dot with the GPU's row independence (tritium.testing.row_dot)."""
    with row_independent_dot():
        yield
HEADS = (4, 2)


def _config(dtype, max_seq_len=256):
    return invariant_config(num_q_heads=HEADS[0], num_kv_heads=HEADS[1], head_dim=64, max_seq_len=max_seq_len,
                            dtype=dtype)


def _view(batch, picks, **kwargs):
    """paged_attention over the batch's pages for ``picks``: (sequence, first token, end token) each, the
    sequence's keys up to ``end`` (its queries the tokens [first, end)), in that order. Returns the output
    and the rows of the full prefill they correspond to."""
    starts = [0]
    for n in batch.q_lens_list:
        starts.append(starts[-1] + n)
    rows = torch.cat([torch.arange(starts[s] + a, starts[s] + b) for s, a, b in picks])
    q = batch.q[rows.to(batch.q.device)].contiguous()
    cu = torch.zeros(len(picks) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor([b - a for _, a, b in picks]), 0)
    seq_lens = torch.tensor([b for _, _, b in picks], dtype=torch.int32)
    table = batch.block_table[[s for s, _, _ in picks]].contiguous()
    dev = batch.q.device
    out = poisoned_like(q)
    paged_attention(q, batch.k_cache, batch.v_cache, table, seq_lens.to(dev), cu.to(dev), out=out, **batch.scales,
                    max_seqlen_q=max(b - a for _, a, b in picks), max_seqlen_k=max(b for _, _, b in picks), **kwargs)
    return out, rows


def _bitwise(got, want, what):
    assert not torch.isnan(got).any(), f"{what}: NaN"
    same = got.view(-1).view(torch.int8 if got.element_size() == 1 else torch.int16) \
        == want.view(-1).view(torch.int8 if want.element_size() == 1 else torch.int16)
    if not bool(same.all()):
        diff = (got.float() - want.float()).abs().max()
        raise AssertionError(f"{what}: {int((~same).sum())} of {same.numel()} 16-bit words differ "
                             f"(max abs difference {float(diff):.3g})")


@pytest.mark.parametrize("dtype,cache_dtype", [(torch.float32, None), (torch.float16, None), (torch.float16, FP8)],
                         ids=["float32", "float16", "float16-fp8kv"])
def test_rows_do_not_depend_on_the_batch(dtype, cache_dtype):
    """float8 caches too: their dequantisation (a scale per cache) is the same in every layout."""
    check_rows_do_not_depend_on_the_batch(dtype, cache_dtype)


def check_rows_do_not_depend_on_the_batch(dtype, cache_dtype):
    extra = {} if cache_dtype is None else {"cache_dtype": cache_dtype}
    batch = random_paged_batch(SEQ_LENS, SEQ_LENS, block_size=16, num_q_heads=HEADS[0], num_kv_heads=HEADS[1],
                               head_dim=64, dtype=dtype, **extra)
    config = _config(dtype)
    assert config.group_tiles >= 2 and config.num_splits > 1  # several groups: the fold is exercised
    tol = {torch.float32: 2e-5, torch.float16: 2e-3}.get(dtype, 1e-2)
    full = poisoned_like(batch.q)
    paged_attention(*batch.args, out=full, **batch.hints, **batch.scales, config=config, num_splits=1)
    assert_rel_close(full, batch.ref(), tol, "grouped prefill")
    workspace = AttentionWorkspace(8, HEADS[0], 64, device=batch.q.device)
    layouts = {
        "decode, alone, split": ([(3, 199, 200)], dict(workspace=workspace)),
        "decode, alone, one program": ([(3, 199, 200)], dict(num_splits=1)),
        "decode of four sequences, split": ([(0, 0, 1), (1, 44, 45), (2, 129, 130), (3, 199, 200)],
                                            dict(workspace=workspace)),
        "decode of earlier tokens, more splits than groups": ([(3, 70, 71), (2, 64, 65), (1, 10, 11)],
                                                              dict(workspace=workspace, num_splits=8)),
        "a chunk": ([(3, 100, 160)], dict(num_splits=1)),
        "a chunk beside decodes": ([(1, 44, 45), (3, 37, 150), (2, 129, 130)], dict(num_splits=1)),
        "a chunk of one sequence's tail, the others whole": ([(2, 0, 130), (3, 150, 200), (1, 0, 45)],
                                                             dict(num_splits=1)),
    }
    for what, (picks, kwargs) in layouts.items():
        out, rows = _view(batch, picks, config=config, **kwargs)
        _bitwise(out, full[rows.to(full.device)], what)


def test_grouped_features_match_the_reference_split_or_not():
    """Sinks and a sliding window (the groups before the window hold only the sink), ALiBi and softcap."""
    lens = [90, 200]
    batch = random_paged_batch([1, 1], lens, block_size=16, num_q_heads=HEADS[0], num_kv_heads=HEADS[1],
                               head_dim=64, dtype=torch.float32)
    dev = batch.q.device
    feats = dict(sinks=torch.randn(HEADS[0], device=dev), sliding_window=70, softcap=20.0,
                 alibi_slopes=torch.rand(HEADS[0], device=dev) * 0.1)
    config = _config(torch.float32)
    ref = batch.ref(**feats)
    one = poisoned_like(batch.q)
    paged_attention(*batch.args, out=one, **batch.hints, config=config, num_splits=1, **feats)
    assert_rel_close(one, ref, 2e-5, "grouped, one program")
    split = poisoned_like(batch.q)
    paged_attention(*batch.args, out=split, **batch.hints, config=config, **feats,
                    workspace=AttentionWorkspace(2, HEADS[0], 64, device=dev))
    _bitwise(split, one, "split vs one program")


def test_lse_of_the_grouped_kernel():
    batch = random_paged_batch([3, 1], [140, 60], block_size=16, num_q_heads=HEADS[0], num_kv_heads=HEADS[1],
                               head_dim=64, dtype=torch.float32)
    _, ref_lse = batch.ref(return_lse=True)
    lse = torch.full(batch.q.shape[:2], float("nan"), device=batch.q.device)
    paged_attention(*batch.args, **batch.hints, config=_config(torch.float32), num_splits=1, lse=lse)
    assert_rel_close(lse, ref_lse, 1e-5, "lse")


def test_too_few_splits_for_the_groups_is_an_error():
    batch = random_paged_batch([1], [200], block_size=16, num_q_heads=HEADS[0], num_kv_heads=HEADS[1],
                               head_dim=64, dtype=torch.float32)
    config = _config(torch.float32)
    with pytest.raises(ValueError, match="num_splits >= 4"):
        paged_attention(*batch.args, **batch.hints, config=config, num_splits=2)


def test_invariant_config_sizes_its_groups_for_the_longest_sequence():
    cfg = invariant_config(num_q_heads=32, num_kv_heads=8, head_dim=128, max_seq_len=131072, dtype=torch.bfloat16)
    assert (cfg.tile_n, cfg.block_m, cfg.num_warps) == (64, 64, 4)
    assert cfg.num_splits <= 64 and cfg.num_splits * cfg.group_tiles * cfg.tile_n >= 131072
    short = invariant_config(num_q_heads=32, num_kv_heads=8, head_dim=128, max_seq_len=700, dtype=torch.bfloat16)
    assert short.group_tiles == 2 and short.num_splits == 6
    with pytest.raises(ValueError, match="group_tiles"):
        AttentionConfig(block_m=64, block_q=16, tile_n=64, num_splits=1, num_warps=4, num_stages=2, group_tiles=-1)


@pytest.mark.skipif(interpreting(), reason="GPU: bf16 and the tensor-core tiles")
@pytest.mark.gpu
@pytest.mark.parametrize("cache_dtype", [None, FP8], ids=["bf16kv", "fp8kv"])
def test_rows_do_not_depend_on_the_batch_bf16_gpu(cache_dtype):
    check_rows_do_not_depend_on_the_batch(torch.bfloat16, cache_dtype)
