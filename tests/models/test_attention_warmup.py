"""The engine's attention warm-up: the batches it draws from cover the kernel configurations real steps
select (checked against random engine-like batches with each GPU's tuned tree and with the hand rules),
and running it launches exactly one call per configuration of its plan, reading the cache only."""

import random

import pytest
import torch

from tritium.attention import config as attention_config
from tritium.attention.tuned import nvidia_h100, nvidia_h200
from tritium.models import attention as model_attention
from tritium.models.attention import TritonAttention, warmup_batches
from tritium.runtime import interpreting


def _random_batch(rng, max_num_seqs, max_model_len, budget):
    """What the scheduler can form: up to max_num_seqs sequences, most decoding, some prefill chunks, within
    the token budget; every sequence at least as long as its new tokens."""
    q_lens, left = [], budget
    for _ in range(rng.randint(1, max_num_seqs)):
        if left <= 0:
            break
        q_len = 1 if rng.random() < 0.6 else rng.randint(1, min(left, max_model_len))
        q_lens.append(q_len)
        left -= q_len
    return tuple(q_lens), rng.randint(max(q_lens), max_model_len)


@pytest.mark.parametrize("tree", [nvidia_h100, nvidia_h200, None], ids=["h100-tree", "h200-tree", "hand-rules"])
@pytest.mark.parametrize("limits", [(64, 768, 2048), (16, 4096, 512), (256, 8192, 8192)],
                         ids=lambda v: "seqs{}-len{}-tokens{}".format(*v))
def test_plan_covers_random_engine_batches(monkeypatch, tree, limits):
    monkeypatch.setattr(attention_config.tuned, "for_device", lambda name: tree)
    max_num_seqs, max_model_len, budget = limits
    attn = TritonAttention(max_num_seqs, 32, 128, torch.device("cpu"))
    k_cache = torch.empty(4, 16, 8, 128, dtype=torch.bfloat16)
    q = torch.empty(max(budget, max_num_seqs), 32, 128, dtype=torch.bfloat16)
    plan = attn.warmup_plan(q, k_cache, warmup_batches(*limits))
    assert len(plan) >= 2  # decode and prefill at least
    rng = random.Random(f"{limits}-{tree}")
    missed = []
    for _ in range(500):
        batch = _random_batch(rng, *limits)
        missed += [(batch, key) for key in attn.warmup_plan(q, k_cache, [batch]) if key not in plan]
    assert not missed, f"{len(missed)} of 500 random batches select a configuration the warm-up skips: {missed[:3]}"


def test_batches_respect_the_limits():
    batches = warmup_batches(12, 300, 40)
    assert all(1 <= len(q) <= 12 and 1 <= max(q) <= seq_len <= 300 and sum(q) <= 40 for q, seq_len in batches)
    # decode of every size on the grid, the longest context, a full-budget chunk
    assert ((1,) * 12, 300) in batches and ((40,), 300) in batches and ((1,), 1) in batches


@pytest.mark.skipif(not interpreting(), reason="CPU tensors through the Triton interpreter (its bookkeeping, not the "
                    "kernels, is what this checks; the kernels' GPU runs are tests/attention)")
def test_warmup_runs_each_configuration_once_and_reads_only(monkeypatch):
    """Under the interpreter (hand rules): a small engine's warm-up launches one attention call per key of
    its plan, those calls select exactly the plan's configurations, and the cache is unchanged."""
    attn = TritonAttention(4, 4, 64, torch.device("cpu"), num_splits=None)
    k_cache = torch.randn(10, 16, 2, 64)
    v_cache = torch.randn(10, 16, 2, 64)
    before = (k_cache.clone(), v_cache.clone())
    batches = warmup_batches(4, 128, 24)
    plan = attn.warmup_plan(torch.empty(24, 4, 64), k_cache, batches)
    assert any(split for _, split, _, _ in plan) and any(not split for _, split, _, _ in plan)
    calls = []
    real = model_attention.paged_attention

    def spy(q, k, v, block_table, seq_lens, cu_seqlens_q, **kw):
        out = real(q, k, v, block_table, seq_lens, cu_seqlens_q, **kw)
        assert torch.isfinite(out).all()
        assert block_table.shape[1] == 8  # the runner's width: ceil(128 / 16)
        q_lens = tuple((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).tolist())
        calls.append(next(iter(attn.warmup_plan(q, k, [(q_lens, kw["max_seqlen_k"])]))))
        return out

    monkeypatch.setattr(model_attention, "paged_attention", spy)
    count = attn.warmup(k_cache, v_cache, batches, block_table_width=8, dtype=torch.float32)
    assert count == len(plan) == len(calls)
    assert set(calls) == set(plan)
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1])


def test_plan_tells_the_gluon_kernels_apart(monkeypatch):
    """Where the Gluon kernel serves a batch, the plan keys which of its two kernels ``hopper.launch`` runs
    for the engine's block-table width (``hopper.persistent_by_default``)."""
    from tritium.attention import hopper

    monkeypatch.setattr(model_attention, "planned_launch", lambda *a, **k: (hopper.CONFIG, 1))
    attn = TritonAttention(4, 32, 128, torch.device("cpu"))
    k_cache = torch.empty(4, 16, 8, 128, dtype=torch.bfloat16)
    q = torch.empty(4 * 8192, 32, 128, dtype=torch.bfloat16)
    batches = [((8192,), 8192), ((8192,) * 4, 8192), ((2048,) * 4, 2048)]
    for width, keys in ((512, 8192), (256, 4096)):  # pages a row, keys a row
        plan = attn.warmup_plan(q, k_cache, batches, block_table_width=width)
        assert list(plan) == [(hopper.CONFIG, False, 1, hopper.persistent_by_default(keys))]
    assert [key[3] for key in attn.warmup_plan(q, k_cache, batches, block_table_width=256)] == [True]
    assert [key[3] for key in attn.warmup_plan(q, k_cache, batches)] == [None]  # width unknown
