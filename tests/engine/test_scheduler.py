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
    with pytest.raises(ValueError, match="exceeds max_num_batched_tokens 32"):  # refused as it comes
        make(budget=32, chunked=False).add(seq(3, 40))


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
    """A prompt that could never be computed is refused as it comes (nothing queued, the others run on); one
    that outgrows the cache while generating fails at scheduling."""
    s = make(num_blocks=2, budget=32)
    with pytest.raises(ValueError, match="the prompt of 40 tokens needs 3 KV-cache pages, the cache has 2"):
        s.add(seq(1, 40))
    assert not s.has_work()
    s.add(seq(2, 32))
    advance(s, s.schedule())  # its 32 tokens fit; with the token it sampled it needs a third page
    with pytest.raises(RuntimeError, match="needs 3 KV-cache pages, the cache has 2"):
        s.schedule()


def test_prompt_past_the_step_budget_without_chunked_prefill_is_refused():
    s = make(budget=8, chunked=False)
    with pytest.raises(ValueError, match="prompt of 9 tokens exceeds max_num_batched_tokens 8 and chunked prefill"):
        s.add(seq(1, 9))
    s.add(seq(2, 8))
    assert s.schedule().num_new == [8]
