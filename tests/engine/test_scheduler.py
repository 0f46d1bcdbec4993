"""Scheduler: token budget, chunked prefill, admission limits, preemption order."""

import pytest

from tritium.engine.block_manager import BlockManager
from tritium.engine.sampling import SamplingParams
from tritium.engine.scheduler import Scheduler
from tritium.engine.sequence import Sequence, Status

P = SamplingParams()


def make(num_blocks=16, budget=32, max_seqs=4, chunked=True):
    return Scheduler(BlockManager(num_blocks, 16), max_num_batched_tokens=budget, max_num_seqs=max_seqs,
                     enable_chunked_prefill=chunked)


def seq(i, n):
    return Sequence(i, list(range(100 * i, 100 * i + n)), P)


def advance(s, batch):
    """Apply a step: progress, then one sampled token for sequences that finished their tokens."""
    for q in s.update(batch):
        q.token_ids.append(0)


def test_chunked_prefill_splits_long_prompt_under_budget():
    s = make(budget=32)
    a, b = seq(1, 50), seq(2, 10)
    s.add(a), s.add(b)
    batch = s.schedule()
    assert batch.seqs == [a] and batch.num_new == [32]
    advance(s, batch)
    batch = s.schedule()
    assert batch.seqs == [a, b] and batch.num_new == [18, 10]
    advance(s, batch)
    batch = s.schedule()
    assert batch.num_new == [1, 1] and batch.is_decode


def test_without_chunking_a_prompt_waits_for_a_whole_budget():
    s = make(budget=32, chunked=False)
    a, b = seq(1, 20), seq(2, 20)
    s.add(a), s.add(b)
    batch = s.schedule()
    assert batch.seqs == [a]
    with pytest.raises(RuntimeError, match="exceeds max_num_batched_tokens 32"):
        s2 = make(budget=32, chunked=False)
        s2.add(seq(3, 40))
        s2.schedule()


def test_max_num_seqs():
    s = make(max_seqs=2)
    seqs = [seq(i, 3) for i in range(3)]
    for q in seqs:
        s.add(q)
    batch = s.schedule()
    assert batch.seqs == seqs[:2] and seqs[2].status is Status.WAITING


def test_preempts_newest_and_recomputes():
    s = make(num_blocks=2, budget=64)
    a, b = seq(1, 16), seq(2, 16)
    s.add(a), s.add(b)
    batch = s.schedule()
    assert batch.seqs == [a, b]
    advance(s, batch)  # both now hold 17 tokens, 16 computed
    batch = s.schedule()  # a needs a second page: b is preempted
    assert batch.seqs == [a]
    assert b.status is Status.WAITING and b.num_computed == 0 and b.block_table == []
    assert s.num_preemptions == 1 and s.waiting[0] is b
    s.finish(a, "length")
    batch = s.schedule()  # b comes back and recomputes prompt and generated token
    assert batch.seqs == [b] and batch.num_new == [17]


def test_sequence_larger_than_cache_fails_clearly():
    s = make(num_blocks=2, budget=32)
    s.add(seq(1, 40))
    advance(s, s.schedule())  # a first chunk of 32 tokens fits
    with pytest.raises(RuntimeError, match="needs 3 KV-cache pages, the cache has 2"):
        s.schedule()
