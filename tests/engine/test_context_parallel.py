"""Context parallelism: each sequence's KV pages spread over 2 or 3 ranks give the greedy tokens of one rank,
with unequal parts at prefill, contexts growing across a rank boundary during decode, chunked prefill,
prefix caching and preemption; the distributed-decode kernel (fused and torch modes) and the PyTorch path;
the block manager's parts and each rank's view of a step; clean shutdown; bad input.

CPU: worker processes, the PyTorch path (partials all-gathered over gloo) or tritium's distributed decode
under the Triton interpreter (cpu-shm heap). On GPUs (``-m gpu``): 2 ranks with the Triton kernels and
CUDA graphs.
"""

import subprocess
import sys
import types

import numpy as np
import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine.block_manager import BlockManager
from tritium.engine.parallel import check_context_parallel
from tritium.engine.runner import ModelRunner, StepPlan

from .conftest import PROMPTS
from .test_tensor_parallel import ON_GPU, _children, _kw, _tokens, check_close, no_leaks  # noqa: F401 (a fixture)

pytestmark = pytest.mark.timeout(300)

# block_size 16: a prompt of 60 words and 30 new tokens needs 6 pages, 3 per rank at CP=2 (prefill parts of
# 48 and 12 tokens), 2 per rank at CP=3 (32, 28, then rank 2 from token 64 on, during decode); the short
# prompts' contexts cross the boundary at token 32 while decoding
LONG = " ".join(f"w{i}" for i in range(100, 160))
CP_PROMPTS = PROMPTS + [LONG]
GREEDY = SamplingParams(max_tokens=30, ignore_eos=True)


def _need_gpus(n: int) -> None:
    if ON_GPU and torch.cuda.device_count() < n:
        pytest.skip(f"needs {n} GPUs")


@pytest.fixture(scope="module")
def reference(tiny_models):
    path, _ = tiny_models["llama"]
    with LLM(path, **_kw()) as llm:
        return _tokens(llm, CP_PROMPTS, GREEDY)


def test_embeddings_equal_one_rank(tiny_models, no_leaks):
    """Embedding requests (last-token and mean pooling) whose pages spread over 2 ranks: rank 0's hidden
    states, pooled, as one rank's."""
    _need_gpus(2)
    path, _ = tiny_models["llama"]
    prompts = PROMPTS[:2] + [LONG]
    with LLM(path, **_kw()) as llm:
        want = {mode: llm.embed(prompts, pooling=mode) for mode in ("last", "mean")}
    with LLM(path, context_parallel_size=2, **_kw()) as llm:
        for mode in ("last", "mean"):
            torch.testing.assert_close(llm.embed(prompts, pooling=mode), want[mode], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cp", [2, 3])
def test_greedy_equals_one_rank(tiny_models, reference, no_leaks, cp):
    """The PyTorch path on the CPU (the Triton kernels on GPUs); every rank holds pages of the long prompt
    while it runs."""
    _need_gpus(cp)
    path, _ = tiny_models["llama"]
    with LLM(path, context_parallel_size=cp, **_kw(max_num_seqs=5)) as llm:
        engine = llm.engine
        assert engine.model.num_heads == engine.model_config.num_attention_heads  # the whole model per rank
        assert _tokens(llm, CP_PROMPTS, GREEDY) == reference
        engine.add_request("long", LONG, GREEDY)
        seq = engine._requests["long"]
        while seq.num_computed < 70:  # past the last boundary (64 at CP=3)
            engine.step()
        held = [engine.block_manager.rank_blocks - len(pool) for pool in engine.block_manager.pools]
        assert all(n > 0 for n in held), f"pages held per rank: {held}"
        while engine.has_unfinished():
            engine.step()
        if cp == 2:  # a second call on the same ranks
            assert _tokens(llm, CP_PROMPTS[::-1], GREEDY) == reference[::-1]


@pytest.mark.parametrize("comm", ["auto", "torch"])
def test_distributed_decode_kernel(tiny_models, reference, no_leaks, comm, monkeypatch):
    """tritium's distributed_paged_decode for every token (under the interpreter: a short run); comm picks
    its mode, fused (per-row flags in the heap) or torch (a torch.distributed all-gather of the partials)."""
    _need_gpus(2)
    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=4, ignore_eos=True)  # 19 + 4 tokens: a page on each rank
    # prefill per part (paged_attention with q_start_pos and lse, parts merged); chunks of 16 tokens at most,
    # so a prompt's second chunk attends to keys on both ranks
    with LLM(path, context_parallel_size=2, attention_backend="triton", comm=comm,
             **_kw(max_num_batched_tokens=16)) as llm:
        attention = llm.engine.model.attention
        assert attention.name == "context_parallel" and attention.prefill_parts
        assert attention.mode == ("torch" if comm == "torch" else "fused")
        calls = []  # rank 0's per-part prefill layers (this process)
        parts = type(attention)._attend_parts
        monkeypatch.setattr(type(attention), "_attend_parts", lambda self, q, *a: calls.append(q.shape[0]) or
                            parts(self, q, *a))
        assert _tokens(llm, PROMPTS[:2], params) == [reference[0][:4], reference[1][:4]]
        assert calls and max(calls) <= 16, f"prefill chunks run per part: {calls}"


def test_scheduling_features_under_cp(tiny_models, no_leaks):
    """Chunked prefill (a chunk's earlier keys on the other rank), prefix caching (prompts sharing a long
    prefix) and preemption (a small KV cache) give the tokens of one rank with the same settings."""
    _need_gpus(2)
    path, _ = tiny_models["llama"]
    prefix = " ".join(f"w{i}" for i in range(60, 100))
    prompts = [prefix + f" w{i}" for i in range(1, 4)] + PROMPTS[:2]
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    kw = _kw(max_num_seqs=3, max_num_batched_tokens=24, num_blocks=6, block_size=16)
    scored = SamplingParams(max_tokens=2, prompt_logprobs=1)  # every prompt row's logits, from the parts
    with LLM(path, **kw) as llm:
        expected = _tokens(llm, prompts, params)
        want = [o.prompt_logprobs for o in llm.generate(prompts[:1] + PROMPTS[1:2], scored)]
    with LLM(path, context_parallel_size=2, **{**kw, "num_blocks": 3}) as llm:  # 3 pages per rank
        assert _tokens(llm, prompts, params) == expected
        assert llm.stats["preemptions"] > 0 and llm.stats["prefix_cache_hit_tokens"] > 0
        got = [o.prompt_logprobs for o in llm.generate(prompts[:1] + PROMPTS[1:2], scored)]
        for g, w in zip(got, want):
            assert g[0] is None and len(g) == len(w)
            assert [lp.logprob for lp in g[1:]] == pytest.approx([lp.logprob for lp in w[1:]], abs=1e-4)
            assert [lp.top[0][0] for lp in g[1:]] == [lp.top[0][0] for lp in w[1:]]


def _seq(prompt_len: int, max_tokens: int):
    return types.SimpleNamespace(prompt_len=prompt_len, token_ids=list(range(prompt_len)), block_table=[],
                                 params=types.SimpleNamespace(max_tokens=max_tokens, pooling=None), scores_prompt=False,
                                 cache_salt=None, lora=None, lora_slot=None)


def test_cli_generate_cp(tiny_models, reference, no_leaks):
    """``tritium generate --cp 2``: the same greedy answer as one rank (the CPU: fp32 by default there)."""
    if ON_GPU:
        pytest.skip("compares with the fp32 reference; the CLI runs bf16 on GPUs")
    path, _ = tiny_models["llama"]
    proc = subprocess.run([sys.executable, "-m", "tritium.cli", "generate", "--model", path, "--cp", "2",
                           "--max-tokens", str(GREEDY.max_tokens), "--raw", "-q", CP_PROMPTS[-1]],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from tritium.engine.tokenizer import Tokenizer

    assert proc.stdout.strip() == Tokenizer.from_hf_dir(path).decode(reference[-1]).strip()


def test_block_manager_parts():
    """Pages in contiguous parts, ceil(pages of the final length / ranks) per rank, from each rank's pool;
    a cached page is reused only on the rank it belongs on."""
    bm = BlockManager(8, 16, num_ranks=3, max_model_len=1000)
    seq = _seq(40, 60)  # 100 tokens at most: 7 pages, 3 per rank (rank 2 gets the last one)
    assert bm.share(seq) == 3
    assert bm.grow(seq, 40)
    assert [b // 8 for b in seq.block_table] == [0, 0, 0]
    assert bm.grow(seq, 100)
    assert [b // 8 for b in seq.block_table] == [0, 0, 0, 1, 1, 1, 2]
    assert [len(p) for p in bm.pools] == [5, 5, 7] and bm.num_free_blocks == 17
    bm.register(seq.block_table, [], seq.token_ids + list(range(40, 100)), 100)
    other = _seq(40, 2)  # one page per rank: the cached second page lives on rank 0, not rank 1
    table, keys = bm.prefix(other)
    assert table == seq.block_table[:1] and len(keys) == 1
    small = BlockManager(1, 16, num_ranks=2, max_model_len=64)
    assert not small.grow(_seq(20, 0), 40)  # 3 pages at 1 per rank: the last rank takes 2, has 1
    assert small.num_free_blocks == 2
    bm.free(seq.block_table)
    assert bm.num_free_blocks == 24 - 1


def test_localize_each_rank_view():
    """Every rank's view of a step: its pages, the keys of each token in its part, its slots; the parts of
    every token add up to its position + 1."""
    nb, bs = 4, 16
    # sequence 0: pages 0 (rank 0), 5 (rank 1); prefill of tokens 10..25. sequence 1: decode at position 40,
    # pages 1, 2 (rank 0), 6 (rank 1)
    table = np.array([[0, 5, 8], [1, 2, 6]], dtype=np.int32)  # 8: past every rank's pages
    pos = np.array(list(range(10, 26)) + [40])
    slots = np.array([table[0 if i < 16 else 1][p // bs] * bs + p % bs for i, p in enumerate(pos)])
    plan = StepPlan(pos.copy(), pos, slots, [16, 1], [26, 41], [15, 16], table, False)
    lens, written = 0, 0
    for rank in range(2):
        runner = types.SimpleNamespace(cp_rank=rank, num_blocks=nb, block_size=bs, cp_parts=False)
        view = ModelRunner.localize(runner, plan)
        assert view.q_lens == [1] * 17 and view.logit_rows == plan.logit_rows and view.q_start is None
        lens = lens + np.array(view.seq_lens)
        mine = view.slots >= 0
        written += mine.sum()
        assert np.all(view.slots[mine] < nb * bs)
        if rank == 1:
            assert view.table[0].tolist() == [1] and view.table[16].tolist() == [2]
            assert view.seq_lens[:6] == [0] * 6 and view.seq_lens[6:16] == list(range(1, 11))
            assert view.seq_lens[16] == 9 and view.slots[16] == 2 * bs + 8
    assert lens.tolist() == (pos + 1).tolist() and written == len(pos)
    # per part (the Triton path's prefill): a row per sequence, its part's keys up to its last new token,
    # and its first new token's position relative to the part (negative: the part starts after it)
    for rank, want_lens, want_start in ((0, [16, 32], [10, 40]), (1, [10, 9], [-6, 8])):
        runner = types.SimpleNamespace(cp_rank=rank, num_blocks=nb, block_size=bs, cp_parts=True)
        view = ModelRunner.localize(runner, plan)
        assert view.q_lens == [16, 1] and view.seq_lens == want_lens and view.q_start.tolist() == want_start
        assert view.table.tolist()[0][:1] == [[0], [1]][rank] and view.table.tolist()[1][:2 - rank] == \
            [[1, 2], [2]][rank]
        assert view.slots.tolist() == ModelRunner.localize(types.SimpleNamespace(
            cp_rank=rank, num_blocks=nb, block_size=bs, cp_parts=False), plan).slots.tolist()


def test_clean_shutdown(tiny_models, no_leaks):
    _need_gpus(2)
    path, _ = tiny_models["qwen2"]
    check_close(LLM(path, context_parallel_size=2, attention_backend="triton", **_kw()))  # a heap per rank


def test_bad_input(tiny_models, no_leaks):
    path, _ = tiny_models["llama"]
    with pytest.raises(ValueError, match="context_parallel_size must be >= 1, got 0"):
        LLM(path, context_parallel_size=0, **_kw())
    with pytest.raises(TypeError, match="context_parallel_size must be an int, got 2.0"):
        LLM(path, context_parallel_size=2.0, **_kw())
    with pytest.raises(TypeError, match="context_parallel_size must be an int, got True"):
        LLM(path, context_parallel_size=True, **_kw())
    with pytest.raises(ValueError, match="context_parallel_size 2 with tensor_parallel_size 2 is not supported"):
        LLM(path, context_parallel_size=2, tensor_parallel_size=2, **_kw())
    if torch.cuda.device_count() < 4:
        with pytest.raises(ValueError, match=r"context_parallel_size 4 needs 4 GPUs from cuda:0, but \d+ GPU"):
            check_context_parallel(4, torch.device("cuda", 0))
    assert not _children(no_leaks)


@pytest.mark.gpu
@pytest.mark.parametrize("comm", ["tritium", "torch"])
def test_gpu_cp2(tiny_models, no_leaks, comm):
    """2 GPUs: distributed decode in CUDA graphs (mode fused with comm tritium, torch with comm torch), the
    Triton ops; same tokens as one GPU (fp32, so that sums in another order cannot flip a greedy choice)."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    path, _ = tiny_models["llama"]
    kw = _kw(max_num_seqs=8)
    with LLM(path, **kw) as llm:
        expected = _tokens(llm, CP_PROMPTS, GREEDY)
    with LLM(path, context_parallel_size=2, comm=comm, **kw) as llm:
        assert llm.engine.runner.graphs, "decode steps should run from CUDA graphs"
        assert llm.engine.model.attention.name == "context_parallel"
        for _ in range(2):
            assert _tokens(llm, CP_PROMPTS, GREEDY) == expected
