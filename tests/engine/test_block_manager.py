"""Block manager: allocation, freeing, prefix sharing, LRU eviction of cached pages."""

import pytest

from tritium.engine.block_manager import BlockManager

BS = 16


def tokens(n, start=0):
    return list(range(start, start + n))


def test_allocate_and_free():
    bm = BlockManager(8, BS)
    table = []
    assert bm.append_slots(table, 33)
    assert len(table) == 3 and bm.num_free_blocks == 5
    assert bm.append_slots(table, 48) and len(table) == 3  # fits in the last page
    assert not bm.append_slots(table, 16 * 9)               # would need 6 more
    assert len(table) == 3
    bm.free(table)
    assert table == [] and bm.num_free_blocks == 8


def test_prefix_is_shared_and_refcounted():
    bm = BlockManager(8, BS)
    prompt = tokens(40)
    a = []
    bm.append_slots(a, 40)
    keys_a = []
    bm.register(a, keys_a, prompt, 40)
    assert len(keys_a) == 2  # two full pages published, the partial third is not
    b, keys_b = bm.allocate_prefix(prompt + [7, 8])
    assert b == a[:2] and keys_b == keys_a
    assert bm.blocks[a[0]].ref_count == 2
    assert bm.hits == 32
    bm.free(a)
    assert bm.blocks[b[0]].ref_count == 1 and bm.num_free_blocks == 8 - 2


def test_last_token_is_never_served_from_cache():
    bm = BlockManager(4, BS)
    prompt = tokens(32)
    t, k = [], []
    bm.append_slots(t, 32)
    bm.register(t, k, prompt, 32)
    bm.free(t)
    shared, _ = bm.allocate_prefix(prompt)  # 32 tokens: only the first page may be reused
    assert len(shared) == 1


def test_freed_pages_stay_cached_until_evicted():
    bm = BlockManager(2, BS)
    prompt = tokens(17)
    t, k = [], []
    bm.append_slots(t, 17)
    first_page = t[0]
    bm.register(t, k, prompt, 17)
    bm.free(t)
    reused, _ = bm.allocate_prefix(prompt)
    assert reused == [first_page]  # still cached after the free
    bm.free(reused)
    other = []
    assert bm.append_slots(other, 32)  # needs both pages: the cached one is evicted
    assert bm.cached == {}
    assert bm.allocate_prefix(prompt) == ([], [])


def test_no_prefix_caching():
    bm = BlockManager(4, BS, enable_prefix_caching=False)
    t, k = [], []
    bm.append_slots(t, 32)
    bm.register(t, k, tokens(32), 32)
    assert k == [] and bm.allocate_prefix(tokens(40)) == ([], [])


def test_bad_size():
    with pytest.raises(ValueError, match="num_blocks must be >= 1, got 0"):
        BlockManager(0, BS)


def _seq(n, seq_id=0):
    from tritium.engine.sampling import SamplingParams
    from tritium.engine.sequence import Sequence
    return Sequence(seq_id, tokens(n), SamplingParams(max_tokens=8))


def test_window_pool_releases_pages_behind_the_window():
    """A window of 20 tokens: once 68 tokens are computed, queries from position 68 on see keys from 49 on,
    so pages 0-2 (tokens 0-47) are released, and page 3 once 20 more pass; both tables grow together, and a
    grow that the window pool cannot serve changes neither."""
    bm = BlockManager(16, BS, window=20, window_blocks=5)
    seq = _seq(100)
    bm.take_prefix(seq)
    assert bm.grow(seq, 68) and len(seq.block_table) == len(seq.window_table) == 5
    assert bm.window_pool.num_free_blocks == 0
    seq.num_computed = 68
    bm.computed(seq)
    assert seq.window_table[:3] == [-1] * 3 and min(seq.window_table[3:]) >= 0 and seq.window_lo == 3
    assert bm.window_pool.num_free_blocks == 3 and bm.num_free_blocks == 11  # the main pool keeps every page
    other = _seq(80, 1)
    bm.take_prefix(other)  # the same tokens: 4 full pages published, a hit; from position 64 keys 45 on are
    assert len(other.block_table) == 4 and other.window_table[:2] == [-1] * 2 and min(other.window_table[2:]) >= 0
    assert other.window_table[3] == seq.window_table[3]  # shared (page 2, released by seq, from the LRU)
    bm.free_seq(other)
    other = _seq(80, 1)
    other.token_ids = tokens(80, start=500)
    bm.take_prefix(other)
    assert not bm.grow(other, 64) and other.block_table == [] and other.window_table == []
    assert bm.num_free_blocks == 11
    seq.num_computed = 88
    bm.computed(seq)
    assert seq.window_table[:4] == [-1] * 4 and bm.window_pool.num_free_blocks == 4
    assert bm.grow(other, 64)
    bm.free_seq(seq)
    bm.free_seq(other)
    assert bm.num_free_blocks == 16 and bm.window_pool.num_free_blocks == 5
    assert seq.block_table == seq.window_table == [] and seq.block_keys == []


def test_window_pool_prefix_hit_needs_the_window_pages():
    """Both pools publish a sequence's full pages under the same keys. A later sequence with the same prefix
    gets the main pool's pages and the window's pages before the hit's end; where the window pool has
    evicted those, the hit is cut back to where it still holds them (and the main pool's pages past it
    are given back)."""
    bm = BlockManager(16, BS, window=20, window_blocks=6)
    first = _seq(80)
    bm.take_prefix(first)
    assert bm.grow(first, 80)
    first.num_computed = 80
    bm.computed(first)
    assert len(first.block_keys) == 5 and first.window_table[:3] == [-1] * 3
    kept = first.window_table[3:]
    bm.free_seq(first)
    again = _seq(80, 1)
    # 4 pages may be served (one token left to compute); from position 64 on, window pages 2-3 are needed:
    # page 2, released behind first's window, is still cached in the window pool's LRU
    bm.take_prefix(again)
    assert len(again.block_table) == 4 and again.window_table[:2] == [-1, -1]
    assert again.window_table[3] == kept[0] and bm.hits == 64
    bm.free_seq(again)
    # evict every cached window page: another sequence takes the whole window pool
    hog = _seq(96, 2)
    hog.token_ids = tokens(96, start=1000)
    bm.take_prefix(hog)
    assert bm.grow(hog, 96) and bm.window_pool.cached == {}
    bm.free_seq(hog)
    third = _seq(80, 3)
    bm.take_prefix(third)
    assert third.block_table == [] and third.window_table == [] and bm.hits == 64
    assert bm.num_free_blocks == 16  # the main pool's hit pages went back
