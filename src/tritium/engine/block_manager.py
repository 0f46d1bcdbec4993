"""KV-cache page allocation with prefix caching.

Each full page of a sequence gets a key: a hash of (key of the previous page, the page's token ids), so a
key names a whole prefix. A page whose key is registered can be shared by any sequence with the same
prefix (reference-counted). Freed pages keep their key and go to the back of an LRU free list; they are
reused as cache hits until a new allocation evicts them from the front.

Context parallelism (``num_ranks > 1``): each rank has a pool of ``num_blocks`` pages, page ``g`` being
page ``g % num_blocks`` of rank ``g // num_blocks``. A sequence's logical page ``i`` lives on rank
``min(i // share, num_ranks - 1)``, ``share = ceil(ceil(final / block_size) / num_ranks)`` pages, where
``final`` is the longest the sequence can grow (prompt + max_tokens, at most ``max_model_len``): its pages
form contiguous, page-aligned parts in rank order (what :func:`tritium.fused.distributed_paged_decode`
reads), spread evenly by its final length, and new tokens go to the rank owning the tail.

Sliding windows (``window`` tokens, ``window_blocks`` > 0): the layers that attend only to their last
``window`` keys keep their K/V in a pool of their own (``window_pool``), and a sequence holds a second table
(``seq.window_table``, indexed like ``block_table``) whose pages behind the window are released as the
sequence advances (their entries become -1; the runner points them at that pool's scratch page, which
attention reads masked or not at all). So a windowed layer holds about ``window`` tokens a sequence
however long it grows (Gemma 3: 5 of every 6 layers). Its pages are published under the same prefix keys;
a prefix hit is as long as the window pool still holds the window's pages before its end.
"""

from __future__ import annotations

import collections


class Block:
    __slots__ = ("id", "ref_count", "key")

    def __init__(self, block_id: int):
        self.id = block_id
        self.ref_count = 0
        self.key: int | None = None


def prefix_keys(token_ids: list[int], block_size: int, num_blocks: int, parent: int | None = None) -> list[int]:
    """Keys of the first ``num_blocks`` full pages of ``token_ids``."""
    keys = []
    for i in range(num_blocks):
        parent = hash((parent, tuple(token_ids[i * block_size:(i + 1) * block_size])))
        keys.append(parent)
    return keys


class BlockManager:
    """Owns ``num_blocks`` pages of ``block_size`` tokens.

    A sequence's pages are a list of block ids (its block table). ``allocate_prefix`` maps the longest
    cached prefix; ``append_slots`` grows the table to hold more tokens; ``register`` publishes newly
    filled pages; ``free`` releases a table.
    """

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True, *, num_ranks: int = 1,
                 max_model_len: int | None = None, window: int | None = None, window_blocks: int = 0):
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        if num_ranks > 1 and max_model_len is None:
            raise ValueError("num_ranks > 1 needs max_model_len (a sequence's share of pages per rank)")
        if window_blocks and (num_ranks > 1 or window is None or window < 1):
            raise ValueError(f"window_blocks needs one rank and a window >= 1 token, got window={window}, "
                             f"num_ranks={num_ranks}")
        # the windowed layers' pool (None: every layer keeps every page in this one)
        self.window = window if window_blocks else None
        self.window_pool = BlockManager(window_blocks, block_size, enable_prefix_caching) if window_blocks else None
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.num_ranks, self.rank_blocks, self.max_model_len = num_ranks, num_blocks, max_model_len
        self.blocks = [Block(i) for i in range(num_blocks * num_ranks)]
        # one LRU free list per rank (pool); ``free_blocks`` is rank 0's
        self.pools: list[collections.OrderedDict[int, None]] = [
            collections.OrderedDict((r * num_blocks + i, None) for i in range(num_blocks)) for r in range(num_ranks)]
        self.free_blocks = self.pools[0]
        self.cached: dict[int, int] = {}  # key -> block id
        self.hits = 0  # tokens served from the prefix cache

    @property
    def num_blocks(self) -> int:
        """Pages of every rank together."""
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return sum(len(pool) for pool in self.pools)

    # -- context parallelism: which rank holds a sequence's page ---------------------------------------------
    def share(self, seq) -> int | None:
        """Pages per rank of ``seq``'s parts (None: one rank)."""
        if self.num_ranks == 1:
            return None
        final = min(seq.prompt_len + seq.params.max_tokens, self.max_model_len)
        return max(1, -(-(-(-final // self.block_size)) // self.num_ranks))

    def rank_of(self, index: int, share: int | None) -> int:
        """Rank of a sequence's ``index``-th page."""
        return 0 if share is None else min(index // share, self.num_ranks - 1)

    def grow(self, seq, num_tokens: int) -> bool:
        """``append_slots`` for ``seq``'s table, on the ranks its parts live on (and its window table: both
        or neither)."""
        wp = self.window_pool
        if wp is not None and wp.blocks_needed(seq.window_table, num_tokens) > len(wp.free_blocks):
            return False
        if not self.append_slots(seq.block_table, num_tokens, self.share(seq)):
            return False
        if wp is not None:
            wp.append_slots(seq.window_table, num_tokens)
        return True

    def take_prefix(self, seq) -> None:
        """Give ``seq`` (holding no page) the longest cached prefix of its tokens: ``block_table`` and
        ``block_keys`` (:meth:`prefix`) and, with a window pool, the window's pages before the prefix's end
        (the prefix is cut to where that pool still holds them)."""
        table, keys = self.prefix(seq)
        wp = self.window_pool
        seq.window_table, seq.window_lo = [], 0
        if wp is not None and table:
            # longest m <= len(table) whose window pages [behind(m), m) are all cached in the window pool
            run, runs = 0, []
            for key in keys:
                run = run + 1 if key in wp.cached else 0
                runs.append(run)
            m = len(table)
            while m and runs[m - 1] < m - self._behind(m * self.block_size):
                m -= 1
            if m < len(table):
                self.hits -= (len(table) - m) * self.block_size
                self.free(table[m:])
                del table[m:], keys[m:]
            lo = self._behind(m * self.block_size)
            seq.window_table = [-1] * lo
            for key in keys[lo:]:
                block_id = wp.cached[key]
                wp._take(block_id)
                seq.window_table.append(block_id)
            seq.window_lo = lo
        seq.block_table, seq.block_keys = table, keys

    def _behind(self, num_computed: int) -> int:
        """Window pages no query from position ``num_computed`` on reads: the first pages of the table
        that end before ``num_computed - window`` (a query at p sees keys in (p - window, p])."""
        return max(0, (num_computed - self.window) // self.block_size)

    def computed(self, seq) -> None:
        """``seq``'s first ``num_computed`` tokens have their K/V in the cache: publish its filled pages
        (both tables) and release the window pages behind its window."""
        published = len(seq.block_keys)
        self.register(seq.block_table, seq.block_keys, seq.token_ids, seq.num_computed, seq.cache_salt)
        wp = self.window_pool
        if wp is None:
            return
        table = seq.window_table
        wp._publish(table, seq.block_keys[published:], published)  # the same pages, in the window pool
        lo = min(self._behind(seq.num_computed), len(table))
        if lo > seq.window_lo:
            wp.free(table[seq.window_lo:lo])
            table[seq.window_lo:lo] = [-1] * (lo - seq.window_lo)
            seq.window_lo = lo

    def free_seq(self, seq) -> None:
        """Release every page ``seq`` holds (both tables) and forget its keys."""
        self.free(seq.block_table)
        if self.window_pool is not None:
            self.window_pool.free(seq.window_table)
        seq.block_keys = []
        seq.window_lo = 0

    def prefix(self, seq) -> tuple[list[int], list[int]]:
        """``allocate_prefix`` for ``seq`` (a cached page counts only on the rank the page belongs on); none
        while ``seq`` still needs its prompt's log-probabilities (its cached tokens would skip the LM head), or
        for an embedding request that averages over its prompt (``pooling`` "mean")."""
        if seq.scores_prompt or seq.params.pooling == "mean":
            return [], []
        return self.allocate_prefix(seq.token_ids, self.share(seq), seq.cache_salt)

    def blocks_needed(self, block_table: list[int], num_tokens: int) -> int:
        """Pages to add so that a table holds ``num_tokens`` tokens."""
        return max(0, -(-num_tokens // self.block_size) - len(block_table))

    def allocate_prefix(self, token_ids: list[int], share: int | None = None, salt: int | None = None
                        ) -> tuple[list[int], list[int]]:
        """Block table and page keys of the longest cached prefix of ``token_ids``, leaving at least one
        token to compute (its logits are needed). Returns ([], []) without prefix caching. ``salt``: what
        else the pages' K/V depend on (a LoRA adapter's): pages match only under the same salt."""
        if not self.enable_prefix_caching:
            return [], []
        table, keys = [], []
        for key in prefix_keys(token_ids, self.block_size, (len(token_ids) - 1) // self.block_size, salt):
            block_id = self.cached.get(key)
            if block_id is None or block_id // self.rank_blocks != self.rank_of(len(table), share):
                break
            self._take(block_id)
            table.append(block_id)
            keys.append(key)
        self.hits += len(table) * self.block_size
        return table, keys

    def append_slots(self, block_table: list[int], num_tokens: int, share: int | None = None) -> bool:
        """Grow ``block_table`` in place to hold ``num_tokens`` (its new pages on the ranks ``share`` puts
        them on); False (and no change) if pages run out."""
        ranks = [self.rank_of(i, share) for i in range(len(block_table),
                                                       len(block_table) + self.blocks_needed(block_table, num_tokens))]
        if any(ranks.count(r) > len(self.pools[r]) for r in set(ranks)):
            return False
        for r in ranks:
            block_id, _ = self.pools[r].popitem(last=False)
            block = self.blocks[block_id]
            if block.key is not None:  # evict a cached page
                if self.cached.get(block.key) == block_id:
                    del self.cached[block.key]
                block.key = None
            block.ref_count = 1
            block_table.append(block_id)
        return True

    def register(self, block_table: list[int], keys: list[int], token_ids: list[int], num_computed: int,
                 salt: int | None = None) -> None:
        """Publish the pages of a sequence filled up to ``num_computed`` tokens; extends ``keys`` (the first
        chained from ``salt``, as ``allocate_prefix`` looks them up)."""
        if not self.enable_prefix_caching:
            return
        full = num_computed // self.block_size
        if full <= len(keys):
            return
        parent = keys[-1] if keys else salt
        new = prefix_keys(token_ids[len(keys) * self.block_size:], self.block_size, full - len(keys), parent)
        self._publish(block_table, new, len(keys))
        keys.extend(new)

    def _publish(self, block_table: list[int], keys: list[int], start: int) -> None:
        """Give pages ``block_table[start:]`` that have none their ``keys`` and cache them (entries < 0:
        window pages released already, skipped)."""
        for block_id, key in zip(block_table[start:], keys):
            if block_id < 0:
                continue
            block = self.blocks[block_id]
            if block.key is None:
                block.key = key
                self.cached.setdefault(key, block_id)

    def free(self, block_table: list[int]) -> None:
        """Drop one reference to each page; unreferenced pages join the free list (newest last, so the
        tail of a sequence, least likely to be shared, is evicted first). Entries < 0 (window pages
        released before) are skipped."""
        for block_id in reversed(block_table):
            if block_id < 0:
                continue
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.pools[block_id // self.rank_blocks][block_id] = None
        block_table.clear()

    def _take(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.pools[block_id // self.rank_blocks][block_id]
        block.ref_count += 1
