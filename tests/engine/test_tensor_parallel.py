"""Tensor parallelism: the same greedy tokens at tensor_parallel_size 2 and 4 as at 1 and as transformers,
with tritium's and torch's collectives, under continuous batching, chunked prefill, prefix caching and
preemption; workers started by the engine and by torchrun; clean shutdown; a killed worker; bad input.

CPU: worker processes over gloo (comm "torch") or the cpu-shm symmetric heap with tritium's collective
kernels under the Triton interpreter (comm "tritium"); the PyTorch attention path. On GPUs (``-m gpu``):
the same at TP=2 with the Triton kernels, CUDA graphs and both comms.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import types

import psutil
import pytest
import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file

from tritium import LLM, LoRARequest, SamplingParams
from tritium.engine.config import EngineConfig
from tritium.engine.parallel import (READY_KEY, TORCH_ALL_REDUCE_BYTES, ParallelError, WorkerPool,
                                     _nccl_errors_keep_the_process, check_parallel, TensorParallel,
                                     release_default_group, select_comm, torch_all_reduce_from)
from tritium.models.config import ModelConfig
from tritium.shmem.cpu_shm import SHM_DIR
from tritium.shmem.launch import launch

from .conftest import PROMPTS, hf_greedy, make_tiny_model, merged, write_adapter

pytestmark = pytest.mark.timeout(300)  # a hang fails the test, not CI

ON_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
GREEDY = SamplingParams(max_tokens=8, ignore_eos=True)


@pytest.fixture
def two_ranks():
    """Tests that start two ranks on the default device: on a GPU machine each rank takes a GPU of its own
    (the engine refuses fewer), so they skip where fewer than two are visible; on the CPU they always run."""
    if ON_GPU and torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs (one a rank)")


def _kw(**kw):
    """Engine settings of these tests: fp32 (sums in another order must not flip a greedy choice; on a GPU
    the Triton kernels and CUDA graphs run, in fp32), a small KV cache."""
    base = dict(dtype=torch.float32, kv_cache_memory=64 << 20, max_num_seqs=4)
    if ON_GPU:
        base["linear_backend"] = "triton"  # the GEMV in decode steps, without timing it against cuBLAS first
    base.update(kw)
    return base


def _tokens(llm, prompts=PROMPTS, params=GREEDY):
    return [o.token_ids for o in llm.generate(prompts, params)]


def _children(before: frozenset = frozenset()) -> list[psutil.Process]:
    """Live child processes of this one, except those in ``before`` (pids: e.g. the forkserver of the
    multi-rank tests that ran earlier in the session)."""
    return [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE]


def _segments() -> set[str]:
    return {n for n in os.listdir(SHM_DIR) if n.startswith("tritium")} if os.path.isdir(SHM_DIR) else set()


@pytest.fixture
def no_leaks():
    """The test leaves no child process and no tritium shared-memory segment behind."""
    before, pids = _segments(), frozenset(p.pid for p in _children())
    yield pids
    deadline = time.monotonic() + 10
    while _children(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _children(pids), f"processes left behind: {_children(pids)}"
    assert _segments() <= before, f"shared memory left behind: {_segments() - before}"


@pytest.fixture(scope="module")
def reference(tiny_models):
    """TP=1 greedy tokens of PROMPTS per model type (checked against transformers)."""
    out = {}
    for model_type, (path, hf) in tiny_models.items():
        with LLM(path, **_kw()) as llm:
            out[model_type] = _tokens(llm)
            for prompt, ids in zip(PROMPTS, out[model_type]):
                expected = hf_greedy(hf, llm.tokenizer.encode(prompt), GREEDY.max_tokens)
                assert ids == expected, f"{model_type}: TP=1 differs from transformers"
    return out


@pytest.mark.parametrize("model_type,tp,comm,torch_from", [
    ("llama", 2, "torch", None),     # kv heads 2: sharded
    ("qwen2", 2, "tritium", None),   # kv heads 1 < 2: replicated; QKV bias, tied embeddings
    ("llama", 4, "torch", None),     # 4 ranks over 2 kv heads: replicated
    # prefill's all-reduces (8+ tokens of 128 fp32) through torch.distributed, decode's (<= 4 rows) tritium's
    ("llama", 2, "tritium", 4096),
    ("qwen3", 2, "tritium", None),   # query/key head norms (replicated) over sharded heads
])
def test_greedy_equals_tp1_and_transformers(tiny_models, reference, no_leaks, model_type, tp, comm, torch_from):
    if ON_GPU and torch.cuda.device_count() < tp:
        pytest.skip(f"needs {tp} GPUs")
    path, _ = tiny_models[model_type]
    with LLM(path, tensor_parallel_size=tp, comm=comm, torch_all_reduce_from=torch_from, **_kw()) as llm:
        parallel = llm.engine.parallel
        assert parallel.comm_kind == comm
        assert llm.engine.model.num_heads * tp == llm.engine.model_config.num_attention_heads
        assert _tokens(llm) == reference[model_type]
        # a second call on the same ranks (state carried across calls: windows, graphs, flags)
        assert _tokens(llm, PROMPTS[::-1]) == reference[model_type][::-1]
        calls = parallel.all_reduce_calls
        if comm == "torch":
            assert calls == {}
        else:
            assert parallel.torch_all_reduce_from == torch_from  # two ranks: never by the rule
            assert calls.get("tritium", 0) > 0
            assert (calls.get("torch", 0) > 0) == (torch_from is not None), calls


@pytest.mark.parametrize("model_type", ["mixtral", "qwen2_moe"])
def test_moe_greedy_under_tp(tmp_path, no_leaks, two_ranks, model_type):
    """Mixtral's experts (Qwen2-MoE's, with its shared expert) sharded over 2 ranks (each expert's intermediate
    size halved, the router and the shared expert's gate replicated, the partial sums all-reduced by tritium's
    collectives): transformers' tokens."""
    hf = make_tiny_model(str(tmp_path), model_type)
    with LLM(str(tmp_path), tensor_parallel_size=2, comm="tritium", **_kw()) as llm:
        moe = llm.engine.model.layers[0].moe
        if model_type == "mixtral":
            assert tuple(moe.w_down.shape) == (4, 128, 48)  # E, H, I / 2
        else:
            assert tuple(moe.w_down.shape) == (8, 128, 32) and tuple(moe.shared["down"].shape) == (128, 48)
        for prompt, ids in zip(PROMPTS, _tokens(llm)):
            assert ids == hf_greedy(hf, llm.tokenizer.encode(prompt), GREEDY.max_tokens), prompt


@pytest.mark.parametrize("model_type", ["gemma3_text", "phi3"])
def test_gemma3_and_phi3_greedy_under_tp(tmp_path, no_leaks, two_ranks, model_type):
    """Gemma 3 over 2 ranks (its 2 KV heads one a rank, the sandwich norms replicated, the output norms after
    each all-reduce), Phi-3 (its fused QKV and gate/up tensors split, then sharded): transformers' tokens.
    Both keep their windowed layers' pages in a window pool (Phi-3: every layer), which a 45-token prompt
    releases pages of on both ranks."""
    hf = make_tiny_model(str(tmp_path), model_type)
    prompts = PROMPTS + [" ".join(f"w{i}" for i in range(100, 145))]
    with LLM(str(tmp_path), tensor_parallel_size=2, comm="tritium", **_kw()) as llm:
        assert llm.engine.model.layers[0].qkv_proj.num_kv_heads == 1
        assert llm.engine.block_manager.window_pool is not None and llm.engine.runner.window_cache is not None
        for prompt, ids in zip(prompts, _tokens(llm, prompts)):
            assert ids == hf_greedy(hf, llm.tokenizer.encode(prompt), GREEDY.max_tokens), prompt


def test_torch_all_reduce_rule():
    """Large all-reduces go to torch.distributed from 4 ranks (measured on 4x H200); two and three ranks keep
    tritium's; the engine option overrides the rule at any size of group and is checked."""
    assert torch_all_reduce_from(2) is None and torch_all_reduce_from(3) is None
    assert torch_all_reduce_from(4) == torch_all_reduce_from(8) == TORCH_ALL_REDUCE_BYTES == 8 << 20
    assert torch_all_reduce_from(2, 1024) == 1024 and torch_all_reduce_from(4, 0) == 0
    EngineConfig(torch_all_reduce_from=sys.maxsize).validate()
    with pytest.raises(ValueError, match="torch_all_reduce_from must be bytes >= 0 or None, got -1"):
        EngineConfig(torch_all_reduce_from=-1).validate()
    with pytest.raises(TypeError, match="torch_all_reduce_from must be an int, got 1.5"):
        EngineConfig(torch_all_reduce_from=1.5).validate()


@pytest.mark.parametrize("tp,comm", [(2, "torch"), (4, "tritium")])
def test_lora_adapters_under_tp(tiny_models, tmp_path, no_leaks, tp, comm):
    """LoRA adapters sharded as their projections are (B's rows of a column-parallel output shard, A's columns of
    a row-parallel input shard, whose update joins the partial sum before its all-reduce): each request's tokens
    equal transformers' with its adapter merged. One slot for two adapters: the second waits, then rank 0 loads it
    into the slot the first held and the other ranks follow (read from the same directory)."""
    if ON_GPU and torch.cuda.device_count() < tp:
        pytest.skip(f"needs {tp} GPUs")
    path, base = tiny_models["llama"]
    one = merged(base, write_adapter(str(tmp_path / "one"), base, seed=1), 16 / 8)
    two = merged(base, write_adapter(str(tmp_path / "two"), base, rank=4, alpha=4, seed=2,
                                     modules=("k_proj", "up_proj", "down_proj", "o_proj")), 1.0)
    models = {None: base, "one": one, "two": two}
    names = [None, "one", "two", "one"]
    requests = [None if n is None else LoRARequest(n, str(tmp_path / n)) for n in names]
    with LLM(path, tensor_parallel_size=tp, comm=comm, enable_lora=True, max_loras=1, max_lora_rank=8,
             **_kw()) as llm:
        outs = llm.generate(PROMPTS[:4], GREEDY, lora_request=requests)
        for name, prompt, out in zip(names, PROMPTS, outs):
            assert out.token_ids == hf_greedy(models[name], llm.tokenizer.encode(prompt), GREEDY.max_tokens), name
        # the slot changes hands again in a later call
        again = llm.generate(PROMPTS[3:4], GREEDY, lora_request=[LoRARequest("two")])[0].token_ids
        assert again == hf_greedy(two, llm.tokenizer.encode(PROMPTS[3]), GREEDY.max_tokens)


def test_scheduling_features_under_tp(tiny_models, no_leaks, two_ranks):
    """Continuous batching (more prompts than sequence slots), chunked prefill (a small token budget),
    prefix caching (prompts sharing a long prefix) and preemption (a KV cache too small for all) give the
    tokens of TP=1 with the same settings."""
    path, _ = tiny_models["llama"]
    prefix = " ".join(f"w{i}" for i in range(60, 100))
    prompts = [prefix + f" w{i}" for i in range(1, 7)] + PROMPTS
    params = SamplingParams(max_tokens=20, ignore_eos=True)
    kw = _kw(max_num_seqs=3, max_num_batched_tokens=24, num_blocks=6, block_size=16)
    scored = SamplingParams(max_tokens=2, prompt_logprobs=2)  # the LM head over prompt rows on every rank
    with LLM(path, **kw) as llm:
        expected = _tokens(llm, prompts, params)
        assert llm.stats["preemptions"] > 0 and llm.stats["prefix_cache_hit_tokens"] > 0
        want = [o.prompt_logprobs for o in llm.generate(prompts[:1] + PROMPTS[1:2], scored)]
        embedded = llm.embed(prompts[:3], pooling="mean")  # rank 0's hidden states, pooled over chunks
    with LLM(path, tensor_parallel_size=2, comm="torch", **kw) as llm:
        assert _tokens(llm, prompts, params) == expected
        assert llm.stats["preemptions"] > 0 and llm.stats["prefix_cache_hit_tokens"] > 0
        torch.testing.assert_close(llm.embed(prompts[:3], pooling="mean"), embedded, rtol=1e-4, atol=1e-4)
        got = [o.prompt_logprobs for o in llm.generate(prompts[:1] + PROMPTS[1:2], scored)]
        for g, w in zip(got, want):
            assert g[0] is None and len(g) == len(w)
            assert [lp.token_id for lp in g[1:]] == [lp.token_id for lp in w[1:]]
            assert [lp.logprob for lp in g[1:]] == pytest.approx([lp.logprob for lp in w[1:]], abs=1e-4)
            assert [[t for t, _ in lp.top] for lp in g[1:]] == [[t for t, _ in lp.top] for lp in w[1:]]
        # sampled tokens (seeded, rank 0 samples from the gathered logits) and stop conditions
        sampled = SamplingParams(max_tokens=10, temperature=0.8, top_k=20, seed=3)
        first = _tokens(llm, PROMPTS[:2], sampled)
    with LLM(path, **kw) as llm:
        assert _tokens(llm, PROMPTS[:2], sampled) == first


def test_clean_shutdown(tiny_models, no_leaks, two_ranks):
    path, _ = tiny_models["qwen2"]
    check_close(LLM(path, tensor_parallel_size=2, comm="tritium", **_kw()))


def check_close(llm) -> None:
    """Closing (twice) stops every worker; the engine then refuses calls."""
    pids = [p.pid for p in llm.engine.parallel.pool.procs]
    assert all(psutil.pid_exists(pid) for pid in pids)
    llm.close()
    llm.close()  # idempotent
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        llm.generate(PROMPTS[:1], GREEDY)


@pytest.mark.parametrize("when", ["between calls", "during a call"])
def test_killed_worker_raises(tiny_models, no_leaks, two_ranks, when):
    path, _ = tiny_models["llama"]
    llm = LLM(path, tensor_parallel_size=2, comm="torch", parallel_timeout=60, **_kw())
    worker = llm.engine.parallel.pool.procs[0]
    start = time.monotonic()
    if when == "between calls":
        _tokens(llm, PROMPTS[:1])
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    else:
        threading.Timer(1.0, os.kill, (worker.pid, signal.SIGKILL)).start()
    with pytest.raises(ParallelError, match=r"rank 1 \(pid \d+\) exited with code -9"):
        for _ in range(1000):  # long enough for the kill to land inside a call
            _tokens(llm, PROMPTS, SamplingParams(max_tokens=30, ignore_eos=True))
    assert time.monotonic() - start < 60
    with pytest.raises(RuntimeError, match="tensor-parallel failure"):
        llm.generate(PROMPTS[:1], GREEDY)
    start = time.monotonic()
    llm.close()
    assert time.monotonic() - start < 60
    # the lost rank's process group is gone from this process: another engine can start here
    assert not dist.is_initialized()


def test_error_between_publish_and_launch_closes_the_engine(tiny_models, no_leaks, two_ranks):
    """An error on rank 0 after a step's plan went out (the worker may wait in its collectives) closes the
    engine: the error is raised, the worker is stopped, later calls say why."""
    path, _ = tiny_models["llama"]
    llm = LLM(path, tensor_parallel_size=2, comm="torch", **_kw())

    def broken(plan):
        raise RuntimeError("broken step")

    llm.engine.runner._step = broken
    with pytest.raises(RuntimeError, match="broken step"):
        llm.generate(PROMPTS[:1], GREEDY)
    with pytest.raises(RuntimeError, match="stopped after a tensor-parallel failure: broken step"):
        llm.generate(PROMPTS[:1], GREEDY)
    llm.close()


def test_hung_worker_raises_within_the_timeout(tiny_models, no_leaks, two_ranks):
    """A worker that stops answering (SIGSTOP) makes rank 0 raise after ``parallel_timeout``, not hang."""
    path, _ = tiny_models["llama"]
    llm = LLM(path, tensor_parallel_size=2, comm="torch", parallel_timeout=5, **_kw())
    worker = llm.engine.parallel.pool.procs[0]
    _tokens(llm, PROMPTS[:1])
    os.kill(worker.pid, signal.SIGSTOP)
    start = time.monotonic()
    try:
        # rank 0 is stuck either sending the plan (the worker's socket buffers full) or in a collective
        # (on GPUs: waiting for the step's end, its NCCL collective stuck)
        with pytest.raises(ParallelError, match=r"could not send a step's plan within 5 s|a collective with the "
                                                r"other ranks failed|waited 5 s \(parallel_timeout\) for a step"):
            _tokens(llm, PROMPTS[:1])
        assert time.monotonic() - start < 30
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGCONT)
        llm.close()


def test_check_finite_reaches_every_rank(tiny_models, tmp_path, no_leaks, two_ranks):
    """EngineConfig.check_finite travels to the workers with the rest of the engine's config: a NaN in the part of
    a weight only rank 1 loads (down_proj's columns 128-255 of 256) is refused by rank 1, named with its file, and
    the checkpoint loads on every rank with check_finite=False."""
    path, _ = tiny_models["llama"]
    for name in os.listdir(path):
        if name != "model.safetensors":
            os.symlink(os.path.join(path, name), tmp_path / name)
    tensors = load_file(os.path.join(path, "model.safetensors"))
    down = "model.layers.1.mlp.down_proj.weight"
    tensors[down][3, 200] = float("nan")
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    file = re.escape(str(tmp_path / "model.safetensors"))
    with pytest.raises(ParallelError, match=rf"rank 1 .*checkpoint tensor '{down}' in '{file}' holds 1 NaN"):
        LLM(str(tmp_path), tensor_parallel_size=2, comm="torch", **_kw())
    with LLM(str(tmp_path), tensor_parallel_size=2, comm="torch", check_finite=False, **_kw()) as llm:
        assert len(_tokens(llm, PROMPTS[:1], SamplingParams(max_tokens=2, ignore_eos=True))[0]) == 2


def test_bad_input(tiny_models, no_leaks):
    path, _ = tiny_models["llama"]  # 4 heads, 2 kv heads, intermediate 256
    with pytest.raises(ValueError, match="tensor_parallel_size 3 must divide the model's num_attention_heads"):
        LLM(path, tensor_parallel_size=3, **_kw())
    with pytest.raises(ValueError, match="tensor_parallel_size must be >= 1, got 0"):
        LLM(path, tensor_parallel_size=0, **_kw())
    with pytest.raises(TypeError, match="tensor_parallel_size must be an int, got 2.0"):
        LLM(path, tensor_parallel_size=2.0, **_kw())
    with pytest.raises(ValueError, match="comm must be 'auto', 'tritium' or 'torch', got 'nccl'"):
        LLM(path, tensor_parallel_size=2, comm="nccl", **_kw())
    assert not _children(no_leaks)
    def config(heads, kv_heads, intermediate=96):
        return ModelConfig(model_type="llama", vocab_size=64, hidden_size=64, intermediate_size=intermediate,
                           num_hidden_layers=1, num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=8,
                           max_position_embeddings=64)

    if torch.cuda.device_count() < 4:
        with pytest.raises(ValueError, match=r"tensor_parallel_size 4 needs 4 GPUs from cuda:0, but \d+ GPU"):
            check_parallel(4, config(8, 8), torch.device("cuda", 0), "auto")
    with pytest.raises(ValueError, match=r"must divide the model's intermediate_size \(96\)"):
        check_parallel(64, config(64, 64), torch.device("cpu"), "auto")
    with pytest.raises(ValueError, match="must divide the model's num_key_value_heads \\(6\\) or be a multiple"):
        check_parallel(4, config(12, 6), torch.device("cpu"), "auto")


@pytest.mark.parametrize("teardown", ["raises", "left behind", "left behind after a failure",
                                      "left behind, finishing during the next engine"])
def test_a_stuck_teardown_leaves_no_group(monkeypatch, teardown):
    """When the default group's teardown raises or outlives its bound (NCCL with a lost peer, seen on 4x
    H200), the process forgets the group, so that another engine can start in it. After a failure the
    bound is FAILED_TEARDOWN_TIMEOUT (5 s), not 30: the error is not held back waiting for it. An abort
    left behind that finishes later (its stopped peer resumed) must not drop the next engine's groups
    (seen on 2x H200: "Group ... is not registered" when the next engine shared its first value)."""
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    dist.new_group(backend="gloo")
    aborted = threading.Event()
    try:
        if teardown == "raises":
            def destroy(group=None):
                raise RuntimeError("teardown failed")
            monkeypatch.setattr(dist, "destroy_process_group", destroy)
        else:
            seconds = {"left behind": 2, "left behind after a failure": 12}.get(teardown, 1.5)

            def slow_abort(pg):
                time.sleep(seconds)
                aborted.set()
            monkeypatch.setattr(dist.ProcessGroup, "abort", slow_abort)
            monkeypatch.setattr("tritium.engine.parallel.TEARDOWN_TIMEOUT", 0.2)
        start = time.monotonic()
        release_default_group(torch.device("cpu" if teardown in ("raises", "left behind after a failure") else "cuda"),
                              failed=teardown.endswith("failure"))
        assert time.monotonic() - start < (9 if teardown.endswith("failure") else 3)
        assert not dist.is_initialized()
        monkeypatch.undo()
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # a new one starts
        side = dist.new_group(backend="gloo")
        if teardown.endswith("next engine"):
            assert aborted.wait(10)
            for thread in threading.enumerate():  # the old teardown has now returned
                if thread.name == "tritium-teardown":
                    thread.join(10)
        for group in (None, side):
            t = torch.ones(3)
            dist.all_reduce(t, group=group)
            assert t.tolist() == [1.0, 1.0, 1.0]
        assert dist.get_world_size(side) == 1
    finally:
        monkeypatch.undo()
        if dist.is_initialized():
            dist.destroy_process_group()


_SHARE_RANK = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    from tritium.engine.parallel import TensorParallel
    rank, path = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=3)
    tp = TensorParallel(comm="torch", device=torch.device("cpu"), max_bytes=1 << 16, timeout=20)
    value = {"rank": rank, "ways": {"down_proj": "plain"}} if rank == 0 else None
    print(repr(tp.share(value)), flush=True)
    tp.close()
    dist.destroy_process_group()  # this script's group (torchrun's way): left to exit, gloo may abort there
""")


def test_share_sends_rank_0s_value(tmp_path):
    """TensorParallel.share (rank 0's projection choices at start-up, run on every rank): rank 0's object on
    every rank, whatever the others pass."""
    procs = [subprocess.Popen([sys.executable, "-c", _SHARE_RANK, str(r), str(tmp_path / "store")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(3)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert out.strip().splitlines()[-1] == repr({"rank": 0, "ways": {"down_proj": "plain"}})


def test_a_lost_peer_is_named_when_its_exit_comes_after_the_reset():
    """A killed worker's sockets close before its exit can be reaped (seen once in CI's CPU run): the
    connection reset reaches rank 0 first, and the worker that exited, the cause, must still be named."""
    polls = []

    def watch():
        polls.append(time.monotonic())
        if len(polls) >= 5:
            raise ParallelError("tensor-parallel rank 1 (pid 7) exited with code -9")

    rank0 = types.SimpleNamespace(watch=watch, pool=object(), role="tensor-parallel", rank=0)
    rank0._exited_worker = lambda grace: TensorParallel._exited_worker(rank0, grace)
    reset = RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:1: Connection reset by peer")
    assert "exited with code -9" in str(TensorParallel.diagnose(rank0, reset))
    polls.clear()
    rank0.watch = lambda: polls.append(0)  # no worker exits: the symptom, after the grace
    start = time.monotonic()
    error = TensorParallel.diagnose(rank0, reset)
    assert isinstance(error, ParallelError) and "a collective with the other ranks failed" in str(error)
    assert 1 < time.monotonic() - start < 10 and len(polls) > 5
    other = ValueError("not a collective")  # any other error: as it is, at once
    assert TensorParallel.diagnose(rank0, other) is other


def _skipped_rank_worker(rank: int, world_size: int, skipped: int) -> None:
    """Both ranks of a tensor-parallel pair over tritium's collectives (rank 1 following rank 0's plans); in the
    step of plan "step" rank ``skipped`` does not make the all-reduce the other makes, whose wait gives up and
    tells it. Each rank raises ParallelError naming itself and what happened: rank 0 when it settles the step,
    rank 1 at its next plan (a pipelined window goes out before the one before is checked)."""
    device = torch.device("cuda", torch.cuda.current_device()) if ON_GPU else torch.device("cpu")
    tp = TensorParallel(comm="tritium", device=device, max_bytes=1 << 12, timeout=60)
    tp.comm.heap.max_spins = 256 if not ON_GPU else 1 << 20  # (a test of the error, not of patience)

    def execute(plan):
        if plan == "step" and rank != skipped:
            tp.comm.all_reduce(torch.ones(8, device=device))
        if plan == "step":
            if ON_GPU:
                torch.cuda.synchronize(device)
            tp.agree_min(0)  # (the give-up has been posted to the skipped rank)

    skipped_msg = rf"{tp.role} rank {rank}: the other ranks' collectives gave up waiting for this rank"
    gave_up_msg = rf"{tp.role} collectives on rank {rank} failed: rank {rank}: 1 collective wait\(s\) gave up"
    try:
        if rank == 0:
            tp.send("step")
            execute("step")
            with pytest.raises(ParallelError, match=skipped_msg if skipped == 0 else gave_up_msg):
                tp.settle()
            tp.send("next")
        else:
            with pytest.raises(ParallelError, match=skipped_msg if skipped == 1 else gave_up_msg):
                tp.follow(types.SimpleNamespace(execute=execute))
    finally:
        tp.close()


@pytest.mark.parametrize("skipped", [0, 1], ids=["rank0-skipped", "rank1-skipped"])
def test_a_rank_whose_peers_gave_up_on_it_raises(two_ranks, skipped):
    """A rank that skipped a collective its peer made (the peer's wait gave up on it, and told it) raises a
    ParallelError saying so, not a later hang or timeout; so does the peer whose wait gave up."""
    segments, pids = _segments(), frozenset(p.pid for p in _children())
    launch(_skipped_rank_worker, 2, skipped, timeout=120)
    # (the launch's forkserver, a child of this process, stays for the session: its rank processes must not)
    assert not [p for p in _children(pids) if p.ppid() != os.getpid()], "rank processes left behind"
    assert _segments() <= segments, f"shared memory left behind: {_segments() - segments}"


def test_start_waits_for_the_workers_boundedly():
    """Rank 0 waits for its workers to mark themselves ready (not for parallel_timeout alone: a worker
    imports torch and creates its CUDA context first), at most the bound it is given: the ranks that never
    came are named; a worker that exits first is named at once."""
    store = dist.HashStore()
    pool = types.SimpleNamespace(store=store, world_size=3, poll=lambda: None, role="tensor-parallel")
    store.set(READY_KEY.format(1), "1")
    start = time.monotonic()
    with pytest.raises(ParallelError, match=r"rank\(s\) \[2\] did not start within 0.3 s"):
        WorkerPool.wait_ready(pool, 0.3)
    assert 0.3 <= time.monotonic() - start < 5
    store.set(READY_KEY.format(2), "1")
    WorkerPool.wait_ready(pool, 0.3)  # both up: returns at once

    def exited():
        raise ParallelError("tensor-parallel rank 2 (pid 9) exited with code 1: ImportError")
    pool = types.SimpleNamespace(store=dist.HashStore(), world_size=3, poll=exited, role="tensor-parallel")
    start = time.monotonic()
    with pytest.raises(ParallelError, match="rank 2 .* exited with code 1"):
        WorkerPool.wait_ready(pool, 60)
    assert time.monotonic() - start < 5


def test_nccl_error_handling_keeps_the_process(monkeypatch):
    monkeypatch.delenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", raising=False)
    monkeypatch.setenv("TORCH_NCCL_ENABLE_MONITORING", "1")  # the user's choice stays
    with _nccl_errors_keep_the_process():
        assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "0"
        assert os.environ["TORCH_NCCL_ENABLE_MONITORING"] == "1"
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in os.environ
    assert os.environ["TORCH_NCCL_ENABLE_MONITORING"] == "1"


def test_comm_selection():
    assert select_comm("auto", device_type="cuda", num_hosts=1) == "tritium"
    assert select_comm("auto", device_type="cuda", num_hosts=2) == "torch"
    assert select_comm("auto", device_type="cpu", num_hosts=1) == "torch"
    assert select_comm("torch", device_type="cuda", num_hosts=3) == "torch"
    assert select_comm("tritium", device_type="cuda", num_hosts=1) == "tritium"
    with pytest.raises(ValueError, match="comm='tritium' needs every tensor-parallel rank on one host .* spans 2 hosts"):
        select_comm("tritium", device_type="cuda", num_hosts=2)
    with pytest.raises(ValueError, match="comm must be one of"):
        select_comm("mpi", device_type="cuda", num_hosts=1)


TORCHRUN_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    from tritium import LLM, LoRARequest, SamplingParams
    path, prompts = sys.argv[1], json.loads(sys.argv[2])
    kw = dict(dtype=torch.float32, kv_cache_memory=64 << 20)
    # every rank runs the same script; ranks > 0 follow rank 0 inside generate and get its outputs
    with LLM(path, tensor_parallel_size=2, comm="torch", **kw) as llm:
        outs = llm.generate(prompts, SamplingParams(max_tokens=8, ignore_eos=True))
        again = llm.generate(prompts[:1], SamplingParams(max_tokens=8, ignore_eos=True))
        try:
            llm.generate([[10 ** 9]], SamplingParams(max_tokens=2))
        except ValueError as e:
            bad = str(e)
    with open(f"{sys.argv[3]}/rank{os.environ['RANK']}.json", "w") as f:
        json.dump({"tokens": [o.token_ids for o in outs] + [again[0].token_ids], "bad": bad}, f)
""")


def test_torchrun(tiny_models, reference, tmp_path, no_leaks, two_ranks):
    """Processes started by torchrun (the path several hosts take) build the engine together; each
    rank's generate returns rank 0's outputs; rank 0's bad input raises on every rank."""
    import json

    path, _ = tiny_models["llama"]
    script = tmp_path / "tp.py"
    script.write_text(TORCHRUN_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "..", "src"),
                                                        os.environ.get("PYTHONPATH", "")]))
    with socket.socket() as s:  # a free port for the job's store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-port", str(port), str(script), path, json.dumps(PROMPTS), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in range(2):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert got["tokens"] == reference["llama"] + reference["llama"][:1], f"rank {rank}"
        assert "outside the vocabulary" in got["bad"]


def test_cli_generate_tp(tiny_models, reference, no_leaks, two_ranks):
    path, _ = tiny_models["llama"]
    proc = subprocess.run([sys.executable, "-m", "tritium.cli", "generate", "--model", path, "--tp", "2",
                           "--comm", "torch", "--max-tokens", str(GREEDY.max_tokens), "--raw", "-q", PROMPTS[0]],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from tritium.engine.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_hf_dir(path)
    assert proc.stdout.strip() == tokenizer.decode(reference["llama"][0]).strip()


@pytest.mark.gpu
@pytest.mark.parametrize("tp,comm", [(2, "tritium"), (2, "torch"), (4, "tritium"), (4, "torch")])
def test_gpu_tp(tiny_models, no_leaks, tp, comm):
    """2 and 4 GPUs: Triton kernels, CUDA graphs with the collectives inside, greedy windows; same tokens as
    TP=1 (fp32 weights, so that sums in another order cannot flip a greedy choice). At TP=4 the tiny llama's
    2 kv heads are replicated."""
    if torch.cuda.device_count() < tp:
        pytest.skip(f"needs {tp} GPUs")
    path, _ = tiny_models["llama"]
    kw = _kw(max_num_seqs=8)
    with LLM(path, **kw) as llm:
        expected = _tokens(llm, PROMPTS, SamplingParams(max_tokens=24, ignore_eos=True))
    with LLM(path, tensor_parallel_size=tp, comm=comm, **kw) as llm:
        assert llm.engine.runner.graphs, "decode steps should run from CUDA graphs"
        for _ in range(3):
            assert _tokens(llm, PROMPTS, SamplingParams(max_tokens=24, ignore_eos=True)) == expected


@pytest.mark.gpu
def test_gpu_tp2_linear_records(tiny_models, no_leaks, tmp_path, monkeypatch):
    """linear_backend auto under TP=2: rank 0 times and records the projection kernels and every rank runs
    its choices (ranks choosing for themselves could disagree, and fuse_row_parallel's layout follows the
    choice); a second start restores them (the record is not written again) and answers with the same tokens."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    monkeypatch.setenv("TRITIUM_CACHE_DIR", str(tmp_path))  # the worker process inherits it
    path, _ = tiny_models["llama"]
    kw = _kw(max_num_seqs=8, linear_backend="auto")
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    with LLM(path, tensor_parallel_size=2, comm="tritium", **kw) as llm:
        assert not llm.engine.model.linear.restored and llm.engine.model.linear.report
        first = _tokens(llm, PROMPTS, params)
    records = sorted((tmp_path / "linear").iterdir())
    assert len(records) == 1, records  # rank 0's, shared with rank 1
    stamps = {p.name: p.stat().st_mtime_ns for p in records}
    with LLM(path, tensor_parallel_size=2, comm="tritium", **kw) as llm:
        assert llm.engine.model.linear.restored
        assert _tokens(llm, PROMPTS, params) == first
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "linear").iterdir()} == stamps


def test_row_parallel_decode_in_one_launch(tiny_models, no_leaks, two_ranks, monkeypatch):
    """comm "tritium" in fp16 with fuse_row_parallel: decode steps run o_proj and down_proj (gated: SiLU-and-mul on the fly) each
    with its all-reduce, the residual add and the next RMSNorm as one launch
    (``tritium.fused.matmul_all_reduce_rms_norm``); the same greedy tokens as TP=1 in fp16."""
    import tritium.engine.parallel as parallel

    calls = []
    real = parallel.matmul_all_reduce_rms_norm

    def counted(*args, **kwargs):
        calls.append(kwargs.get("gated"))
        return real(*args, **kwargs)

    monkeypatch.setattr(parallel, "matmul_all_reduce_rms_norm", counted)  # rank 0 (this process)
    path, _ = tiny_models["llama"]
    kw = _kw(dtype=torch.float16)
    with LLM(path, **kw) as llm:
        expected = _tokens(llm)
    with LLM(path, tensor_parallel_size=2, comm="tritium", **kw) as llm:  # off by default
        assert _tokens(llm) == expected
    assert not calls
    with LLM(path, tensor_parallel_size=2, comm="tritium", fuse_row_parallel=True, **kw) as llm:
        assert _tokens(llm) == expected
    # o_proj plain; down gated where gate/up runs on cuBLAS (the CPU), plain where gate/up's GEMV takes the
    # SiLU-and-mul in its epilogue (fuse_swiglu: on a GPU, linear_backend "triton"); both, in both layers
    assert len(calls) >= 4 and False in calls, f"the one-launch layer did not run: {calls[:8]}"
    assert (True in calls) == (not ON_GPU), f"down_proj took [gate | up] {'on' if ON_GPU else 'off'} a GPU: {calls[:8]}"


def test_fp8_kv_cache_and_window_pool_under_tp(tmp_path, no_leaks, two_ranks):
    """Gemma 3 at TP=2 with an fp8 KV cache and a window pool (each rank its KV head of both pools, in fp8):
    TP=1's tokens, and log-probabilities within what fp8 rounding of the all-reduced sums' last bits allows."""
    make_tiny_model(str(tmp_path), "gemma3_text")
    prompts = PROMPTS + [" ".join(f"w{i}" for i in range(100, 145))]
    params = SamplingParams(max_tokens=8, ignore_eos=True, logprobs=1)
    kw = _kw(kv_cache_dtype="fp8", num_window_blocks=16, max_num_batched_tokens=24)
    with LLM(str(tmp_path), **kw) as llm:
        want = llm.generate(prompts, params)
    with LLM(str(tmp_path), tensor_parallel_size=2, comm="torch", **kw) as llm:
        assert llm.engine.runner.kv_cache.dtype == llm.engine.runner.window_cache.dtype == torch.float8_e4m3fn
        got = llm.generate(prompts, params)
    for g, w in zip(got, want):
        assert g.token_ids == w.token_ids
        assert [lp.logprob for lp in g.logprobs] == pytest.approx([lp.logprob for lp in w.logprobs], abs=0.02)


def test_speculative_decoding_under_tp(tiny_models, no_leaks, two_ranks):
    """Drafts (prompt lookup) verified as decode rows of a token each on both ranks give TP=1's plain tokens."""
    path, _ = tiny_models["llama"]
    prompts = ["w1 w2 w3 w1 w2 w3 w1 w2", " ".join(f"w{i % 5}" for i in range(20))] + PROMPTS[:2]
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    with LLM(path, **_kw()) as llm:
        expected = _tokens(llm, prompts, params)
    with LLM(path, tensor_parallel_size=2, comm="torch", num_speculative_tokens=4, prompt_lookup_min=1,
             **_kw(max_num_seqs=8)) as llm:
        assert _tokens(llm, prompts, params) == expected
        assert llm.engine.num_drafts > 0


def test_draft_model_under_tp(tiny_models, no_leaks, two_ranks):
    """A draft model (another architecture, the same vocabulary) on rank 0 only; both ranks verify its drafts:
    TP=1's plain tokens, drafts really taken and accepted at times (the model drafting for itself)."""
    path, _ = tiny_models["llama"]
    prompts = PROMPTS[:3]
    params = SamplingParams(max_tokens=16, ignore_eos=True)
    with LLM(path, **_kw()) as llm:
        expected = _tokens(llm, prompts, params)
    for draft in (tiny_models["qwen2"][0], path):
        with LLM(path, tensor_parallel_size=2, comm="torch", num_speculative_tokens=3, speculative_model=draft,
                 **_kw(max_num_seqs=8)) as llm:
            llm.engine.scheduler.draft_token_cost = 0.0  # (the tiny drafts are as large as the model: priced free)
            assert _tokens(llm, prompts, params) == expected
            assert llm.engine.drafter.num_windows > 0 and llm.engine.num_draft_tokens > 0
            if draft == path:
                assert llm.engine.num_accepted_tokens > 0
