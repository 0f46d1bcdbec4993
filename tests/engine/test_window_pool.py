"""Layers with a sliding window keep their K/V in a pool of their own whose pages are released behind the
window (``num_window_blocks``): tokens as transformers with chunked prefill, greedy decode windows, prefix
caching and preemption, while every sequence holds only its window's pages there."""

import pytest
import torch

from tritium import LLM, LLMEngine, SamplingParams
from tritium.engine.config import EngineConfig
from tritium.engine.llm_engine import _num_blocks, window_pages_needed
from tritium.engine.runner import kv_cache_bytes_per_block, window_layers

from .conftest import WORDS, hf_greedy, make_tiny_model

WINDOW = 6  # the tiny models' (conftest)
BLOCK = 16
CHUNK = 24  # max_num_batched_tokens: prompts prefill in chunks
# prompts of 31-52 tokens that run 24 more: 3-5 pages a sequence, 2-4 of them behind the window by the end
PROMPTS = [" ".join(WORDS[i:i + n]) for i, n in ((3, 40), (60, 31), (100, 52), (3, 44))]
MAX_TOKENS = 24


def _window_pages_held(seq) -> int:
    return sum(p >= 0 for p in seq.window_table)


def _run(engine: LLMEngine, prompts, params) -> dict[str, list[int]]:
    """Step ``engine`` over ``prompts``, checking after every step that each running sequence holds no window
    page behind its window: at most the pages of its last WINDOW tokens and of what the scheduler reserved
    ahead (a chunk, or a greedy window and its continuation), + 2 for page alignment."""
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, params)
    ahead = max(CHUNK, 2 * engine.config.decode_steps + 1)
    bound = -(-(WINDOW + ahead) // BLOCK) + 2
    out = {}
    while engine.has_unfinished():
        for o in engine.step():
            if o.finished:
                out[o.request_id] = o.token_ids
        for seq in engine.scheduler.running:
            held = _window_pages_held(seq)
            assert held <= bound, (seq.num_computed, seq.window_table)
            assert seq.window_lo == max(0, (seq.num_computed - WINDOW) // BLOCK)
            assert all(p == -1 for p in seq.window_table[:seq.window_lo])
    return out


@pytest.mark.parametrize("model_type,backend", [
    ("gemma3_text", "torch"), ("gemma3_text", "triton"), ("gemma2", "torch"), ("mistral", "torch")])
def test_window_pool_matches_transformers(tmp_path, model_type, backend):
    """Gemma 3 (3 of 4 layers windowed), Gemma 2 (every other one) and Mistral (every layer: the main pool holds
    no layer) with a window pool of 14 pages for 4 sequences that grow to 4-5 pages each: without releases
    they would need 18 and preempt. Greedy tokens as transformers, no preemption, every layer's cache where it
    belongs."""
    overrides = dict(sliding_window=WINDOW) if model_type == "mistral" else {}
    hf = make_tiny_model(str(tmp_path), model_type, **overrides)
    engine = LLMEngine(str(tmp_path), dtype=torch.float32, attention_backend=backend, op_backend=backend,
                       linear_backend=backend, max_num_batched_tokens=CHUNK, num_blocks=64, num_window_blocks=14)
    runner, cfg = engine.runner, engine.model_config
    windowed = window_layers(engine.model)
    assert windowed == [i for i in range(cfg.num_hidden_layers) if cfg.layer_window(i) is not None]
    assert runner.window_cache.shape[:3] == (len(windowed), 2, 15)
    assert runner.kv_cache.shape[:3] == (cfg.num_hidden_layers - len(windowed), 2, 65)
    for i, (k, v) in enumerate(runner.kv_caches):
        base = runner.window_cache if i in windowed else runner.kv_cache
        assert k.untyped_storage().data_ptr() == v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    out = _run(engine, PROMPTS, SamplingParams(max_tokens=MAX_TOKENS))
    assert engine.scheduler.num_preemptions == 0
    for i, prompt in enumerate(PROMPTS):
        ids = engine.tokenizer.encode(prompt)
        assert out[str(i)] == hf_greedy(hf, ids, MAX_TOKENS), f"{model_type}/{backend} prompt {i}"
    pool = engine.block_manager.window_pool
    assert pool.num_free_blocks == pool.num_blocks  # every page back


def test_window_pool_prefix_caching_and_preemption(tmp_path):
    """The same prompts again are served from the prefix cache (both pools' pages published under the same
    keys; a hit needs the window's pages before its end), a 4-page main pool preempts and recomputes, and the
    tokens stay those of an engine without a window pool."""
    make_tiny_model(str(tmp_path), "gemma3_text")
    kw = dict(dtype=torch.float32, max_num_batched_tokens=CHUNK)
    plain = LLM(str(tmp_path), num_window_blocks=0, **kw)
    assert plain.engine.runner.window_cache is None and plain.engine.block_manager.window_pool is None
    params = SamplingParams(max_tokens=MAX_TOKENS)
    expected = [o.token_ids for o in plain.generate(PROMPTS, params)]

    llm = LLM(str(tmp_path), num_window_blocks=12, num_blocks=64, **kw)
    assert [o.token_ids for o in llm.generate(PROMPTS, params)] == expected
    blocks = llm.engine.block_manager
    hits = blocks.hits
    # the prompt a third time, after the first two: pages of the full layers and the window's stay cached
    assert [o.token_ids for o in llm.generate(PROMPTS[:2], params)] == expected[:2]
    assert blocks.hits - hits >= 2 * BLOCK
    assert blocks.window_pool.hits == 0  # the window pool's hits count in the main one's

    tight = LLM(str(tmp_path), num_window_blocks=12, num_blocks=6, **kw)
    assert [o.token_ids for o in tight.generate(PROMPTS, params)] == expected
    assert tight.engine.scheduler.num_preemptions > 0
    pools = (tight.engine.block_manager, tight.engine.block_manager.window_pool)
    assert all(p.num_free_blocks == p.num_blocks for p in pools)


def test_window_pool_prefix_hit_cut_to_the_window_pages_cached(tmp_path):
    """A prefix whose window pages were evicted from the window pool (another sequence took them) is served
    only as far as the window pool still holds the pages before its end; the tokens do not change."""
    make_tiny_model(str(tmp_path), "gemma3_text")
    engine = LLMEngine(str(tmp_path), dtype=torch.float32, max_num_batched_tokens=CHUNK, num_blocks=64,
                       num_window_blocks=6)
    params = SamplingParams(max_tokens=4)
    first = _run(engine, PROMPTS[2:3], params)["0"]
    blocks = engine.block_manager
    keys = [k for k in blocks.cached]  # the prompt's full pages, published in both pools
    assert len(keys) >= 3
    # evict the window pages of that prefix: other prompts take every window page there is
    _run(engine, [" ".join(WORDS[200:240]), " ".join(WORDS[150:190])], params)
    assert not any(k in blocks.window_pool.cached for k in keys[-2:])
    hits = blocks.hits
    again = _run(engine, PROMPTS[2:3], params)["0"]
    assert again == first
    assert blocks.hits - hits < len(keys) * BLOCK


def test_window_pool_sizing(tiny_models, tmp_path):
    """A window pool is made where it saves memory: its pages then come out of the budget, the main pool
    gets the rest; none where the cache holds fewer pages than the pool would need, for a model without
    windows, with num_window_blocks=0 or under context parallelism."""
    make_tiny_model(str(tmp_path), "gemma3_text")
    engine = LLMEngine(str(tmp_path), dtype=torch.float32, num_blocks=8)
    model = engine.model
    per_full = kv_cache_bytes_per_block(model, BLOCK, 1)
    per_window = kv_cache_bytes_per_block(model, BLOCK, 3)
    cfg = EngineConfig(max_num_seqs=4, max_model_len=256, max_num_batched_tokens=64, kv_cache_memory=4 << 20,
                       decode_steps=8)
    wanted = window_pages_needed(cfg, WINDOW)
    assert wanted == 4 * (1 + 2 + 2) + 4
    full, win = _num_blocks(model, cfg, torch.device("cpu"))
    assert win == wanted and full == (4 << 20) // per_full - wanted * 3 - 3 - 1
    assert (full + 1) * per_full + (win + 1) * per_window <= 4 << 20
    shared = (4 << 20) // (per_full + per_window) - 1
    assert full > shared  # the point: more pages for the full layer
    small = EngineConfig(max_num_seqs=4, max_model_len=256, max_num_batched_tokens=64, num_blocks=16)
    assert _num_blocks(model, small, torch.device("cpu")) == (16, 0)  # 24 window pages would save nothing
    assert _num_blocks(model, EngineConfig(num_blocks=16, num_window_blocks=5), torch.device("cpu")) == (16, 5)
    off = EngineConfig(max_num_seqs=4, max_model_len=256, kv_cache_memory=4 << 20, num_window_blocks=0)
    assert _num_blocks(model, off, torch.device("cpu"))[1] == 0
    short = EngineConfig(max_num_seqs=4, max_model_len=WINDOW, kv_cache_memory=4 << 20)  # nothing to release
    assert _num_blocks(model, short, torch.device("cpu")) == (_num_blocks(model, off, torch.device("cpu"))[0], 0)
    path, _ = tiny_models["llama"]
    plain = LLMEngine(path, dtype=torch.float32, num_blocks=8, num_window_blocks=5)
    assert plain.runner.window_cache is None and plain.block_manager.window_pool is None
    with pytest.raises(ValueError, match="num_window_blocks must be >= 0"):
        LLMEngine(str(tmp_path), num_window_blocks=-1)
