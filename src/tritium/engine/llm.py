"""The user-facing API: ``LLM(model).generate(prompts, SamplingParams(...))``, a loop over :class:`LLMEngine`."""

from __future__ import annotations

import itertools
import time
from typing import Iterable, Sequence as Seq

import torch

from tritium.engine.llm_engine import LLMEngine
from tritium.engine.sampling import SamplingParams
from tritium.engine.sequence import RequestOutput
from tritium.engine.tokenizer import Tokenizer
from tritium.models.config import ModelConfig


class LLM:
    """Offline generation over an :class:`LLMEngine` (``self.engine``).

    ``LLM()`` loads the default model (SmolLM2-135M-Instruct); ``LLM(path)`` a Hugging Face model directory
    or a ``.gguf`` file. Keyword arguments are :class:`~tritium.engine.config.EngineConfig` fields
    (``attention_backend``, ``num_blocks``, ``kv_cache_memory``, ``max_num_batched_tokens`` ...), plus
    ``progress`` (progress bars while weights load).
    """

    def __init__(self, model: str | None = None, *, progress: bool = False, **engine_kwargs):
        self.engine = LLMEngine(model, progress=progress, **engine_kwargs)
        self.stats: dict = {}
        self._ids = itertools.count()

    @classmethod
    def from_weights(cls, config: ModelConfig, weights: Iterable[tuple[str, torch.Tensor]],
                     tokenizer: Tokenizer | None = None, **engine_kwargs) -> "LLM":
        """An LLM over in-memory weights (Hugging Face names); prompts are then token-id lists unless a
        tokenizer is given."""
        llm = cls.__new__(cls)
        llm.engine = LLMEngine.from_weights(config, weights, tokenizer, **engine_kwargs)
        llm.stats = {}
        llm._ids = itertools.count()
        return llm

    @property
    def tokenizer(self) -> Tokenizer | None:
        return self.engine.tokenizer

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    def encode_chat(self, prompt: str, system: str | None = None) -> list[int]:
        """Token ids of a one-turn chat (the model's chat template, generation prompt appended)."""
        if self.tokenizer is None:
            raise ValueError("this engine has no tokenizer; pass prompts as token-id lists")
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)

    def generate(self, prompts: str | list[int] | Seq[str | list[int]],
                 sampling_params: SamplingParams | Seq[SamplingParams] | None = None) -> list[RequestOutput]:
        """Generate a continuation of every prompt (strings, or token-id lists) with continuous batching.

        ``sampling_params``: one for all prompts or one per prompt (default: greedy, 64 tokens).
        Returns one finished :class:`RequestOutput` per prompt, in order. Every prompt is checked before
        any is queued, so a bad one leaves the engine as it was.
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
        encoded = [self.engine.encode(p, f"prompts[{i}]") for i, p in enumerate(prompts)]

        engine = self.engine
        ids = [f"generate-{next(self._ids)}" for _ in prompts]
        for rid, prompt, p in zip(ids, encoded, params):
            engine.add_request(rid, prompt, p)
        # the texts given, as the outputs' prompts (the engine saw token ids)
        texts = {rid: prompt if isinstance(prompt, str) else None for rid, prompt in zip(ids, prompts)}
        start, hits0 = time.perf_counter(), engine.block_manager.hits
        preemptions0 = engine.scheduler.num_preemptions
        final: dict[str, RequestOutput] = {}
        try:
            while engine.has_unfinished():
                for out in engine.step():
                    if out.finished and out.request_id in texts:
                        final[out.request_id] = out
        except BaseException:
            for rid in ids:  # nothing of this call stays queued
                engine.abort(rid)
            raise
        if engine.device.type == "cuda":
            torch.cuda.synchronize(engine.device)
        seconds = time.perf_counter() - start
        outs = [final[rid] for rid in ids]
        for out in outs:
            out.prompt = texts[out.request_id]
        generated = sum(len(o.token_ids) for o in outs)
        self.stats = {"seconds": seconds, "prompt_tokens": sum(len(o.prompt_token_ids) for o in outs),
                      "generated_tokens": generated, "tokens_per_s": generated / max(seconds, 1e-9),
                      "prefix_cache_hit_tokens": engine.block_manager.hits - hits0,
                      "preemptions": engine.scheduler.num_preemptions - preemptions0}
        return outs
