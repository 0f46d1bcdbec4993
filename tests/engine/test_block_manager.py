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
