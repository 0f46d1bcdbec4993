"""Engine configuration: :class:`EngineConfig`, the serving knobs (KV-cache size, batching budget, backends)."""

from __future__ import annotations

import dataclasses
import os

import torch

from tritium.ops.quant import QUANTIZATIONS

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# dtype's names, torch's and vLLM's ("auto": None, the engine's choice)
DTYPE_NAMES = {"auto": None, "float32": torch.float32, "float": torch.float32, "fp32": torch.float32,
               "float16": torch.float16, "half": torch.float16, "fp16": torch.float16,
               "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
# KV-cache dtypes: the model's, or float8_e4m3fn
KV_CACHE_DTYPES = ("auto", "fp8")
KV_CACHE_SCALES = ("auto", "checkpoint")


@dataclasses.dataclass
class EngineConfig:
    """Serving knobs.

    - ``block_size``: tokens per KV-cache page (a multiple of 16).
    - ``num_blocks`` / ``kv_cache_memory``: KV-cache size as a page count or a byte budget; when neither is
      given it is sized from free GPU memory (``gpu_memory_utilization``) or, on the CPU, from
      ``max_num_seqs * max_model_len`` tokens. Either is refused (ValueError) before the cache is allocated
      where it needs more than the device has: a GPU's free memory, on the CPU the system's available memory.
    - ``num_window_blocks``: pages of the pool that layers with a sliding window keep their K/V in (Gemma 2
      and 3, Mistral, Phi-3...): a sequence releases its pages there once they fall behind its window, so
      those layers hold about ``window`` tokens a sequence however long it grows. None (default): such a pool
      where it takes less memory than those layers' share of one cache, sized so that it never runs out
      first (``max_num_seqs`` windows, their greedy windows ahead, one step's chunks); its memory comes out
      of the KV-cache budget, the rest holds the other layers' pages. 0: no pool, every layer keeps every
      page. Not with context parallelism. A pool smaller than one sequence may need there (its window and one
      step's ``max_num_batched_tokens`` after it, or its whole context where that is less) is refused at start-up.
    - ``kv_cache_dtype``: ``"auto"`` (default: the model's dtype) or ``"fp8"``: keys and values stored as
      float8_e4m3fn divided by their layer's scale, saturated to +-448: half the bytes a token, so twice the
      tokens in one budget and half the KV read of decode; attention dequantizes as it loads. Not with context
      parallelism.
    - ``kv_cache_scales`` (fp8 cache): ``"auto"`` (default): the checkpoint's scales where it has them, else
      measured at start-up (``LlamaModel.calibrate_kv_scales``: one prefill of fixed tokens; a layer's scale
      rises above 1 only where its keys or values came within 4x of 448); ``"checkpoint"``: the checkpoint's
      or 1 (vLLM's ``kv_cache_dtype="fp8"`` without ``calculate_kv_scales``).
    - ``max_num_batched_tokens``: token budget of one step (chunked prefill splits longer prompts).
    - ``max_num_seqs``: sequences running at once; also the largest CUDA-graph batch.
    - ``attention_backend``: ``"triton"`` (tritium's paged attention) or ``"torch"`` (PyTorch SDPA over
      gathered pages). ``op_backend``: ``"triton"`` (fused RMSNorm, RoPE, SiLU-and-mul) or ``"torch"``.
      ``None`` picks triton on a GPU and torch on the CPU (torch for attention too where the model's head_dim is
      not one the paged-attention kernels take: 64, 80, 96, 128, 192, 256).
    - ``linear_backend``: projections of decode batches of 1-4 rows: ``"auto"`` (time cuBLAS and tritium's
      Triton GEMV on the loaded weights at start-up, keep the faster per shape), ``"triton"`` (always the
      GEMV) or ``"torch"`` (always ``F.linear``). ``None`` picks auto on a GPU and torch on the CPU.
    - ``linear_cache``: with ``"auto"``, record what the start-up timing settled on disk and, at a later
      start of the same model with the same options on the same kind of GPU and the same software, run
      those kernels without timing again (:mod:`tritium.engine.linear_cache`: the record's key, where it
      lives). Starts then run the same kernels and round alike, and start sooner. False times every start.
    - ``weight_prefetch``: in decode steps, prefetch projection weights into L2 while the small kernels
      before them run (NVIDIA Hopper or newer; :mod:`tritium.engine.prefetch`). Off by default: on the H100
      it bought nothing measurable (bench/NOTES.md). ``None``: on where the GPU supports it; after start-up
      it reads whether it is active.
    - ``cuda_graphs``: capture decode steps for bucketed batch sizes (GPU only).
    - ``warmup_attention``: at start-up on a GPU, run paged attention once for every kernel configuration
      the engine's batches can select (decode, chunks beside decodes, equal chunks; up to ``max_num_seqs``,
      ``max_num_batched_tokens`` and ``max_model_len``), so that none compiles inside a request (a first
      compile takes about a second; later starts load them from Triton's cache). With ``quantization``, the
      fp8 projections' matmul configurations too (``LlamaModel.warm_quantized``).
    - ``pdl``: the decode chain's kernels (norms, rope, GEMVs) launch by programmatic dependent launch on
      NVIDIA Hopper; False turns it off everywhere. ``attention_pdl``: attention too (on by default: a batch-1
      Llama-3-8B step on the H100 measured 0.06 ms faster with it in three runs of 2026-11-26, after four
      earlier runs measured it 0.03-0.05 ms slower; bench/NOTES.md).
    - ``attention_num_splits``: split-KV count of decode attention (None: ``select_attention_config``'s).
    - ``fuse_rope_kv_write``: rope and the KV-cache write as one kernel (triton ops and attention).
    - ``fuse_norms``: decode steps whose projections all run the Triton GEMV (one rank, triton ops) take
      each RMSNorm inside the GEMV after it and each residual add inside the GEMV before it (two launches
      fewer a layer; the normed rows are not rounded to the model dtype, as the unfused norm rounds them;
      the norm weights are folded into the QKV and gate/up weights at load). Off by default: on the H100
      (Llama-3-8B, batch 1) the fused GEMVs cost what the two norm kernels did (bench/NOTES.md).
    - ``fuse_qkv_rope``: decode steps whose QKV projection runs the Triton GEMV do rope and the KV-cache write
      in its epilogue (one launch fewer a layer; triton ops and attention). On by default: a batch-1 Llama-3-8B
      step on the H100 measured 0.012-0.064 ms faster with it in two runs of 2026-11-27, the QKV GEMV tuned
      each way (bench/NOTES.md).
    - ``fuse_swiglu``: decode steps whose gate/up projection runs the Triton GEMV do the MLP's SiLU-and-mul in
      its epilogue; the down projection then multiplies the activation plainly (GEMV or cuBLAS). On by
      default; off, the down GEMV does the SiLU-and-mul while loading [gate | up] (bench/NOTES.md).
    - ``fuse_act_quant``: with ``quantization="fp8-dynamic"``, the RMSNorms before the QKV and gate/up
      projections and the SiLU-and-mul before the down projection quantize their rows to fp8 as they write
      them, instead of a quantization launch before each of those products (three launches fewer a layer;
      the same bits). On by default.
    - ``fuse_row_parallel``: with ``comm="tritium"``, decode steps of up to 4 sequences run each row-parallel
      projection (o_proj, down_proj) with its all-reduce, residual add and the next RMSNorm as one launch
      (:func:`tritium.fused.matmul_all_reduce_rms_norm`, 16-bit weights). Off by default: on 2x H200 (70B,
      TP=2, batch 1) it measured 1.001x and 0.978x the unfused step (bench/NOTES.md, "Tensor-parallel engine").
    - ``pipeline_windows``: queue the next greedy window before the host reads the one in flight.
    - ``tensor_parallel_size``: GPUs (ranks) one model is sharded over. On one host the engine starts the
      other ranks itself (worker processes); under torchrun it must equal the job's world size (or be 1).
      ``comm``: the model's collectives, ``"tritium"`` (tritium's, on the symmetric heap: one host),
      ``"torch"`` (torch.distributed: NCCL, gloo on the CPU) or ``"auto"`` (tritium on the GPUs of one
      host, else torch). ``parallel_timeout``: seconds rank 0 waits for the other ranks (start-up, a step)
      before raising; the workers get at least 120 s to start (import torch, create their CUDA context).
    - ``torch_all_reduce_from``: with tritium's collectives, all-reduces of at least this many bytes outside
      CUDA graphs (prefill, large batches) go to torch.distributed (NCCL) instead, where it is the faster.
      None: the measured rule, 8 MiB from 4 ranks and never on 2-3 (``tritium.engine.parallel.
      torch_all_reduce_from``; on 4x H200 tritium's all-reduce took 42.9 vs NCCL's 45.3 us at 4 MiB but 136
      vs 100 at 16 MiB; on 2x H200 tritium's was the faster up to 16 MiB). An int applies at every size of
      group (``sys.maxsize``: never).
    - ``context_parallel_size``: ranks (GPUs, or CPU processes under the Triton interpreter) each
      sequence's KV pages are spread over, each rank holding the whole model (tensor_parallel_size must
      be 1). A sequence's pages are split in contiguous parts, ``ceil(pages / N)`` per rank of the pages its
      longest context (prompt + max_tokens) needs, in rank order; new tokens go to the rank owning the
      tail. Attention runs through :func:`tritium.fused.distributed_paged_decode` for every token (decode
      and prefill alike), in its mode ``"torch"`` when ``comm="torch"``, else ``"fused"``. Greedy decode
      windows are off (each step is planned on the host); the context holds ``N`` times a rank's pages.
    - ``enable_lora``: serve LoRA adapters (PEFT directories; ``LLM.generate(..., lora_request=...)``, the
      server's ``--lora-modules``), ``max_loras`` of them in one step, each of rank <= ``max_lora_rank``
      (:mod:`tritium.engine.lora`). A step with adapters adds each token's update to every projection (in the
      epilogue of the QKV + rope and gate/up + SiLU-and-mul GEMVs at decode sizes, else after the projection);
      16-bit weights; with ``tensor_parallel_size`` each rank holds its shard of every adapter.
    - ``batch_invariant``: a request's tokens and log-probabilities come out with the same bits whatever else
      runs beside it: other requests in its batch, how its prompt is chunked, a prefix-cache hit, a
      preemption and recompute (on one GPU, or the CPU under the Triton interpreter; the same engine build
      and GPU kind). Every kernel then fixes each row's reduction order: projections through tritium's
      matmul without split-K (no cuBLAS, no GEMV), one grouped attention configuration for every call, Triton
      RMSNorm/rope/SiLU. It needs triton attention and ops (the defaults on a GPU; set on the CPU, which then
      needs ``TRITON_INTERPRET=1``), leaves ``linear_backend`` to itself and runs on one rank. Off by default:
      slower (bench/NOTES.md, "Batch invariance").
    - ``quantization``: None, or ``"fp8"``: the layers' projection weights in float8_e4m3fn with one fp32 scale
      per output row (weight-only FP8; the products still run in ``dtype``). A 16/32-bit checkpoint is
      quantized as it loads; an FP8 checkpoint (compressed-tensors or fbgemm_fp8, per-tensor or per-channel
      scales) selects it by itself. Halves the bytes a decode step reads. ``"fp8-dynamic"``: the same fp8
      weights, and each projection's input quantized to fp8 per token as it runs, the products fp8 times fp8
      on the tensor cores (W8A8: faster at batch sizes where the products are compute- or conversion-bound,
      an activation rounding of error; an FP8 checkpoint that quantizes activations selects it by itself).
      ``"int4"``: weight-only int4, 4-bit codes with one scale and zero point per row and group of input
      features (``tritium.ops.int4``); a GPTQ, AWQ or compressed-tensors W4A16 checkpoint selects it by itself,
      a 16/32-bit checkpoint is quantized as it loads (round to nearest, groups of 128). About 3.5x fewer
      bytes a decode step reads than 16-bit weights. Not with ``batch_invariant``.
    - ``decode_steps``: up to this many greedy decode steps of an unchanged batch run back to back (CUDA
      graph replays, or eager steps without graphs), the next token fed on the device, before the host
      reads their tokens; the next window is queued from the device's state before that read, so the
      host's per-step work overlaps the GPU. A sequence that stops on EOS or a stop string wastes the
      rest of its window and of the one queued after it. 1 syncs every step.
    - ``num_speculative_tokens``: speculative decoding by prompt lookup (:mod:`tritium.engine.speculative`):
      a sequence whose last ``prompt_lookup_max`` down to ``prompt_lookup_min`` tokens occurred earlier in its
      prompt or output gets up to this many draft tokens (those that followed there), computed with its last
      token in one step; for a greedy request the model's argmax accepts the draft's tokens while they match
      and adds its own at the first difference, so a step yields 1 to ``1 + num_speculative_tokens`` tokens,
      each the one plain greedy decoding picks. 0 (default): off. Batches without a draft run greedy windows as
      before; drafts are looked for at each step that the host plans, and a window in flight is not continued
      once a sequence's text repeats itself. Sampled requests (temperature, top-k, top-p, min-p) verify drafts
      by rejection sampling: their tokens keep plain sampling's distribution (not its draws). Requests with
      logprobs, penalties, a bias, ``min_tokens`` or a response format never get drafts. Not with context
      parallelism.
    - ``speculative_model``: a smaller model of the same vocabulary (a checkpoint path or Hub name, as the
      engine's own model) proposes the drafts instead of prompt lookup (:mod:`tritium.engine.draft`): each
      step, the sequences that draft run up to ``num_speculative_tokens`` + 1 greedy steps of it (a CUDA-graph
      window), which the model then verifies as above, so the tokens are the ones the model alone gives. Its
      KV cache takes the same pages as the model's (counted in the cache's size); a request's
      ``prediction`` still drafts first. Under tensor parallelism the draft model runs whole on rank 0's GPU (the
      other ranks wait for the verification step). Needs ``num_speculative_tokens`` >= 1 and a model without
      sliding-window layers; the draft model runs in the engine's dtype, or its checkpoint's quantization.
    - ``dtype``: the weights' and activations' dtype: torch.float32, torch.float16 or torch.bfloat16, or a name of
      one as torch and vLLM write it (``"float32"``/``"float"``/``"fp32"``, ``"float16"``/``"half"``/``"fp16"``,
      ``"bfloat16"``/``"bf16"``; ``validate`` makes it the torch dtype). None or ``"auto"``: the checkpoint's
      float16 or bfloat16 on a GPU (bfloat16 for a float32 checkpoint), float32 on the CPU.
    - ``chat_template``: Jinja text replacing the model's chat template (for a model without one, or to change
      it); checked (compiled) at start-up. None keeps the checkpoint's.
    - ``check_finite``: at load, every weight is scanned for NaN and infinite values, and a checkpoint holding
      one is refused (ValueError naming the first such tensor and its file); False skips the scan
      (``ModelOptions.check_finite``: the model's, a draft model's and every tensor-parallel rank's).
    """

    block_size: int = 16
    num_blocks: int | None = None
    num_window_blocks: int | None = None
    kv_cache_dtype: str = "auto"
    kv_cache_scales: str = "auto"
    kv_cache_memory: int | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 64
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    attention_backend: str | None = None
    op_backend: str | None = None
    linear_backend: str | None = None
    linear_cache: bool = True
    weight_prefetch: bool | None = False
    cuda_graphs: bool = True
    warmup_attention: bool = True
    decode_steps: int = 8
    num_speculative_tokens: int = 0
    prompt_lookup_max: int = 4
    prompt_lookup_min: int = 2
    pdl: bool = True
    attention_pdl: bool = True
    attention_num_splits: int | None = None
    fuse_rope_kv_write: bool = True
    fuse_norms: bool = False
    fuse_qkv_rope: bool = True
    fuse_swiglu: bool = True
    fuse_act_quant: bool = True
    fuse_row_parallel: bool = False
    pipeline_windows: bool = True
    batch_invariant: bool = False
    enable_lora: bool = False
    max_loras: int = 4
    max_lora_rank: int = 16
    quantization: str | None = None
    tensor_parallel_size: int = 1
    context_parallel_size: int = 1
    comm: str = "auto"
    parallel_timeout: float = 300.0
    torch_all_reduce_from: int | None = None
    dtype: torch.dtype | None = None
    device: torch.device | None = None
    chat_template: str | None = None
    speculative_model: str | None = None
    check_finite: bool = True

    @property
    def max_decode_rows(self) -> int:
        """Rows of the largest decode step (its CUDA graph, the attention workspace): ``max_num_seqs``, or a
        sequence's token and a whole draft where that is more (speculative decoding runs a draft's tokens as
        decode rows of their own)."""
        return max(self.max_num_seqs, 1 + self.num_speculative_tokens)

    def kv_dtype(self, model_dtype: torch.dtype) -> torch.dtype:
        """The KV cache's torch dtype for a model of ``model_dtype``."""
        return torch.float8_e4m3fn if self.kv_cache_dtype == "fp8" else model_dtype

    def validate(self) -> None:
        """Raise TypeError/ValueError naming the bad field, what it must be and the value given."""
        for name in ("block_size", "max_num_batched_tokens", "max_num_seqs", "decode_steps", "num_speculative_tokens",
                     "prompt_lookup_max", "prompt_lookup_min"):
            _check_int(name, getattr(self, name))
        for name in ("num_blocks", "num_window_blocks", "kv_cache_memory", "max_model_len", "attention_num_splits",
                     "torch_all_reduce_from"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name))
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype must be one of {', '.join(map(repr, KV_CACHE_DTYPES))}, "
                             f"got {self.kv_cache_dtype!r}")
        if self.kv_cache_scales not in KV_CACHE_SCALES:
            raise ValueError(f"kv_cache_scales must be one of {', '.join(map(repr, KV_CACHE_SCALES))}, "
                             f"got {self.kv_cache_scales!r}")
        if self.kv_cache_dtype == "fp8" and self.context_parallel_size > 1:
            raise ValueError("kv_cache_dtype='fp8' is not supported with context parallelism "
                             f"(context_parallel_size={self.context_parallel_size})")
        if self.num_window_blocks is not None and self.num_window_blocks < 0:
            raise ValueError(f"num_window_blocks must be >= 0 or None, got {self.num_window_blocks}")
        if self.torch_all_reduce_from is not None and self.torch_all_reduce_from < 0:
            raise ValueError(f"torch_all_reduce_from must be bytes >= 0 or None, got {self.torch_all_reduce_from}")
        if not isinstance(self.tensor_parallel_size, int) or isinstance(self.tensor_parallel_size, bool):
            raise TypeError(f"tensor_parallel_size must be an int, got {self.tensor_parallel_size!r} "
                            f"({type(self.tensor_parallel_size).__name__})")
        if self.tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size must be >= 1, got {self.tensor_parallel_size}")
        if not isinstance(self.context_parallel_size, int) or isinstance(self.context_parallel_size, bool):
            raise TypeError(f"context_parallel_size must be an int, got {self.context_parallel_size!r} "
                            f"({type(self.context_parallel_size).__name__})")
        if self.context_parallel_size < 1:
            raise ValueError(f"context_parallel_size must be >= 1, got {self.context_parallel_size}")
        if self.context_parallel_size > 1 and self.tensor_parallel_size > 1:
            raise ValueError(f"context_parallel_size {self.context_parallel_size} with tensor_parallel_size "
                             f"{self.tensor_parallel_size} is not supported: context parallelism runs the whole "
                             f"model on every rank (tensor_parallel_size=1)")
        template = self.chat_template
        if template is not None and (not isinstance(template, str) or not template.strip()):
            raise ValueError(f"chat_template must be None or the Jinja text of a chat template, got "
                             f"{self.chat_template!r:.60}")
        if self.comm not in ("auto", "tritium", "torch"):
            raise ValueError(f"comm must be 'auto', 'tritium' or 'torch', got {self.comm!r}")
        if not isinstance(self.parallel_timeout, (int, float)) or isinstance(self.parallel_timeout, bool) \
                or not self.parallel_timeout > 0:
            raise ValueError(f"parallel_timeout must be positive seconds, got {self.parallel_timeout!r}")
        if self.quantization is not None and self.quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be None or one of {', '.join(map(repr, QUANTIZATIONS))}, "
                             f"got {self.quantization!r}")
        if self.quantization == "int4" and self.batch_invariant:
            raise ValueError("quantization='int4' has no batch-invariant product: batch_invariant=True needs 16-bit "
                             "or fp8 weights")
        if isinstance(self.dtype, str):
            name = self.dtype.strip().lower().removeprefix("torch.")
            if name not in DTYPE_NAMES:
                raise ValueError(f"dtype must be None or one of torch.float32, torch.float16, torch.bfloat16 or their "
                                 f"names ({', '.join(map(repr, DTYPE_NAMES))}), got {self.dtype!r}")
            self.dtype = DTYPE_NAMES[name]
        if self.dtype is not None and self.dtype not in _DTYPES:
            raise TypeError(f"dtype must be None or one of torch.float32, torch.float16, torch.bfloat16 or their "
                            f"names ({', '.join(map(repr, DTYPE_NAMES))}), got {self.dtype!r}")
        if not isinstance(self.gpu_memory_utilization, (int, float)) or isinstance(self.gpu_memory_utilization, bool):
            raise TypeError(f"gpu_memory_utilization must be a float, got {self.gpu_memory_utilization!r}")
        if self.block_size <= 0 or self.block_size % 16:
            raise ValueError(f"block_size must be a positive multiple of 16, got {self.block_size}")
        for name in ("attention_backend", "op_backend"):
            value = getattr(self, name)
            if value not in (None, "triton", "torch"):
                raise ValueError(f"{name} must be 'triton', 'torch' or None, got {value!r}")
        if self.linear_backend not in (None, "auto", "triton", "torch") and \
                not (self.batch_invariant is True and self.linear_backend == "invariant"):
            raise ValueError(f"linear_backend must be 'auto', 'triton', 'torch' or None, got {self.linear_backend!r}")
        for name in ("linear_cache", "weight_prefetch", "cuda_graphs", "warmup_attention", "enable_prefix_caching",
                     "enable_chunked_prefill", "pdl", "attention_pdl", "fuse_rope_kv_write", "fuse_norms",
                     "fuse_qkv_rope", "fuse_swiglu", "fuse_act_quant", "fuse_row_parallel", "pipeline_windows",
                     "batch_invariant", "check_finite"):
            value = getattr(self, name)
            if not isinstance(value, bool) and not (name == "weight_prefetch" and value is None):
                raise TypeError(f"{name} must be True or False{' or None' if name == 'weight_prefetch' else ''}, "
                                f"got {value!r}")
        if self.max_num_batched_tokens < 1:
            raise ValueError(f"max_num_batched_tokens must be >= 1, got {self.max_num_batched_tokens}")
        if not 1 <= self.decode_steps <= 64:
            raise ValueError(f"decode_steps must be in [1, 64], got {self.decode_steps}")
        if not 0 <= self.num_speculative_tokens <= 16:
            raise ValueError(f"num_speculative_tokens must be in [0, 16] (0: no speculative decoding), "
                             f"got {self.num_speculative_tokens}")
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max <= 16:
            raise ValueError(f"prompt_lookup_min and prompt_lookup_max must satisfy 1 <= min <= max <= 16, got "
                             f"{self.prompt_lookup_min} and {self.prompt_lookup_max}")
        if self.num_speculative_tokens and self.context_parallel_size > 1:
            raise ValueError(f"num_speculative_tokens={self.num_speculative_tokens} is not supported with context "
                             f"parallelism (context_parallel_size={self.context_parallel_size})")
        if self.speculative_model is not None:
            if not isinstance(self.speculative_model, (str, os.PathLike)) or not os.fspath(self.speculative_model):
                raise TypeError(f"speculative_model must be None or a checkpoint path or Hub name, "
                                f"got {self.speculative_model!r}")
            if not self.num_speculative_tokens:
                raise ValueError(f"speculative_model={self.speculative_model!r} drafts num_speculative_tokens "
                                 "tokens a step: set num_speculative_tokens >= 1")
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if not isinstance(self.enable_lora, bool):
            raise TypeError(f"enable_lora must be True or False, got {self.enable_lora!r}")
        for name in ("max_loras", "max_lora_rank"):
            _check_int(name, getattr(self, name))
        if not 1 <= self.max_loras <= 64:
            raise ValueError(f"max_loras must be in [1, 64], got {self.max_loras}")
        if not 1 <= self.max_lora_rank <= 256:
            raise ValueError(f"max_lora_rank must be in [1, 256], got {self.max_lora_rank}")
        if self.enable_lora:
            clash = [f"{name}={value!r}" for name, value in (
                ("context_parallel_size", self.context_parallel_size),
                ("quantization", self.quantization), ("batch_invariant", self.batch_invariant),
                ("fuse_norms", self.fuse_norms)) if value not in (1, None, False)]
            if clash:
                raise ValueError(f"enable_lora=True runs 16-bit weights without context parallelism: it cannot be "
                                 f"combined with "
                                 f"{', '.join(clash)}")
        for name in ("num_blocks", "kv_cache_memory", "max_model_len", "attention_num_splits"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.batch_invariant:
            clash = [f"{name}={value!r}" for name, value in (
                ("attention_backend", self.attention_backend), ("op_backend", self.op_backend))
                if value not in (None, "triton")]
            clash += [f"linear_backend={self.linear_backend!r}"] if self.linear_backend not in (None, "invariant") else []
            clash += [f"{name}={value}" for name, value in (("tensor_parallel_size", self.tensor_parallel_size),
                                                            ("context_parallel_size", self.context_parallel_size))
                      if value != 1]
            if clash:
                raise ValueError(f"batch_invariant=True runs tritium's own kernels on one rank: it cannot be combined "
                                 f"with {', '.join(clash)}")


def _check_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
