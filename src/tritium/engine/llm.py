"""The user-facing API, loops over :class:`LLMEngine`:

    llm = LLM(model)
    llm.generate(prompts, SamplingParams(...))            # finished RequestOutputs, one per prompt
    llm.generate(prompts, SamplingParams(n=4))[0].outputs  # a prompt's 4 samples (seeded seed + i)
    llm.chat(messages, SamplingParams(...))               # one conversation or a list of them
    for delta in llm.generate_stream(prompt, params):     # text as it is produced
        print(delta, end="", flush=True)
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Iterable, Iterator, Sequence as Seq

import torch

from tritium.engine.chat import encode_chat, is_conversation
from tritium.engine.fim import encode_fim
from tritium.engine.llm_engine import LLMEngine
from tritium.engine.lora import LoRARequest
from tritium.engine.pooling import check_dimensions, finish, model_matryoshka, model_pooling
from tritium.engine.sampling import SamplingParams
from tritium.engine.sequence import RequestOutput
from tritium.engine.tokenizer import Tokenizer, check_template_kwargs
from tritium.engine.tools import check_tools
from tritium.models.config import ModelConfig


def _sample(params: SamplingParams, j: int) -> SamplingParams:
    """Sample ``j`` of a request of ``params.n`` samples: one sample, seeded ``seed + j`` (the server's choices'
    seeds), the prompt scored by sample 0 alone."""
    seed = None if params.seed is None else params.seed + j
    return dataclasses.replace(params, n=1, seed=seed, prompt_logprobs=params.prompt_logprobs if j == 0 else None)


class LLM:
    """Offline generation over an :class:`LLMEngine` (``self.engine``).

    ``LLM()`` loads the default model (SmolLM2-135M-Instruct); ``LLM(path)`` a Hugging Face model directory
    or a ``.gguf`` file. Keyword arguments are :class:`~tritium.engine.config.EngineConfig` fields
    (``attention_backend``, ``num_blocks``, ``kv_cache_memory``, ``max_num_batched_tokens`` ...), plus
    ``progress`` (progress bars while weights load).
    """

    def __init__(self, model: str | None = None, *, progress: bool = False, **engine_kwargs):
        self._attach(LLMEngine(model, progress=progress, **engine_kwargs))

    def close(self) -> None:
        """Release the engine (tensor parallel: stop its worker processes, remove their shared memory).
        Also on leaving a ``with`` block and at interpreter exit."""
        self.engine.close()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _attach(self, engine: LLMEngine) -> None:
        self.engine = engine
        self.stats: dict = {}  # of the last generate / chat / generate_stream call
        self.last_output: RequestOutput | None = None  # generate_stream's final output
        self._ids = itertools.count()

    @classmethod
    def from_weights(cls, config: ModelConfig, weights: Iterable[tuple[str, torch.Tensor]],
                     tokenizer: Tokenizer | None = None, **engine_kwargs) -> "LLM":
        """An LLM over in-memory weights (Hugging Face names); prompts are then token-id lists unless a
        tokenizer is given."""
        return cls.from_engine(LLMEngine.from_weights(config, weights, tokenizer, **engine_kwargs))

    @classmethod
    def from_engine(cls, engine: LLMEngine) -> "LLM":
        """An LLM over an engine built already (shared, e.g. by a benchmark that also serves it)."""
        if not isinstance(engine, LLMEngine):
            raise ValueError(f"engine must be an LLMEngine, got {type(engine).__name__}")
        llm = cls.__new__(cls)
        llm._attach(engine)
        return llm

    @property
    def tokenizer(self) -> Tokenizer | None:
        return self.engine.tokenizer

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    def encode_chat(self, prompt: str, system: str | None = None, *,
                    chat_template_kwargs: dict | None = None) -> list[int]:
        """Token ids of a one-turn chat (the model's chat template, generation prompt appended);
        ``chat_template_kwargs``: more template variables, as :meth:`chat`'s."""
        if self.tokenizer is None:
            raise ValueError("this engine has no tokenizer; pass prompts as token-id lists")
        if not isinstance(prompt, str):
            raise ValueError(f"prompt must be a string (the user's message), got {type(prompt).__name__}")
        if system is not None and not isinstance(system, str):
            raise ValueError(f"system must be a string or None, got {type(system).__name__}")
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return encode_chat(self.tokenizer, messages, template_kwargs=chat_template_kwargs)

    def chat(self, messages: list[dict] | Seq[list[dict]],
             sampling_params: SamplingParams | Seq[SamplingParams] | None = None, *,
             chat_template_kwargs: dict | None = None, tools: list[dict] | None = None,
             add_generation_prompt: bool | None = None, continue_final_message: bool = False,
             lora_request: LoRARequest | Seq[LoRARequest | None] | None = None) -> list[RequestOutput]:
        """Answer one conversation (``[{"role": "system" | "user" | "assistant" | "tool", "content": str},
        ...]``) or a list of them, through the model's chat template; one finished :class:`RequestOutput` per
        conversation, like :meth:`generate`. ``chat_template_kwargs``: more template variables, e.g.
        ``{"enable_thinking": False}`` for Qwen3's template. ``tools``: OpenAI function tools for the template;
        the calls in an answer: ``tritium.engine.tools.parse_tool_calls(out.text, parser)``.
        ``continue_final_message=True``: each conversation ends with an assistant message whose text the answer
        continues (a prefilled answer; the output holds the continuation); ``add_generation_prompt`` (default:
        not ``continue_final_message``): the template's generation prompt after the messages. ``lora_request``:
        as :meth:`generate`'s; ``SamplingParams.n`` > 1: n answers of each conversation (``out.outputs``), as
        :meth:`generate` gives them."""
        if not isinstance(messages, (list, tuple)):  # (a string or a dict would be walked as if a list)
            raise ValueError(f"messages must be a list of message dicts, or a list of such lists, got "
                             f"{type(messages).__name__}")
        conversations = [messages] if is_conversation(messages) else list(messages)
        if not conversations:
            raise ValueError("messages is empty: give one conversation or a list of them")
        if isinstance(chat_template_kwargs, dict) and "tools" in chat_template_kwargs:
            raise ValueError("chat_template_kwargs: 'tools' is chat's tools argument (checked as OpenAI function "
                             "tools): pass the tools as tools")
        if tools is not None:
            chat_template_kwargs = {**check_template_kwargs(chat_template_kwargs), "tools": check_tools(tools)}
        prompts = [encode_chat(self.tokenizer, c, "messages" if len(conversations) == 1 and c is messages
                               else f"messages[{i}]", chat_template_kwargs, add_generation_prompt,
                               continue_final_message) for i, c in enumerate(conversations)]
        # an answer's text stands alone (decode(output_ids)), unless it continues the final message
        def alone(p):
            p = SamplingParams() if p is None else p
            if not isinstance(p, SamplingParams):
                return p  # generate() names what is wrong with it
            return dataclasses.replace(p, continuation=bool(continue_final_message))
        if isinstance(sampling_params, (list, tuple)):
            sampling_params = [alone(p) for p in sampling_params]
        else:
            sampling_params = alone(sampling_params)
        return self.generate(prompts, sampling_params, lora_request=lora_request)

    def embed(self, prompts: str | list[int] | Seq[str | list[int]], *, pooling: str | None = None,
              normalize: bool | None = None, dimensions: int | None = None,
              lora_request: LoRARequest | Seq[LoRARequest | None] | None = None) -> torch.Tensor:
        """Embeddings [N, hidden (or ``dimensions``)] fp32 on the CPU of ``prompts`` (strings or token ids; one or
        a list), batched with whatever else the engine runs: each prompt's final-normed hidden states pooled
        (:mod:`tritium.engine.pooling`). ``pooling`` ("last" | "mean") and ``normalize`` default to what the model's
        sentence-transformers files say (none: the last token, normalized); ``dimensions`` keeps the first
        components, before normalizing, only for a model whose config.json says it was trained for Matryoshka
        embeddings (ValueError otherwise, worded as the server's 400:
        :func:`~tritium.engine.pooling.check_dimensions`). A prompt may fill the whole context. ``lora_request``: as
        :meth:`generate`'s."""
        if self.engine.is_follower:  # torchrun: rank 0 runs the call, this rank its shard of every step
            return self.engine.follow()
        if normalize is not None and not isinstance(normalize, bool):
            raise ValueError(f"normalize must be True, False or None (the model's choice), got {normalize!r}")
        engine = self.engine
        # before any prompt runs; the model named as it was given (its Hub name or its path)
        check_dimensions(dimensions, engine.model_config.hidden_size, model_matryoshka(engine.model_path),
                         engine.hub_name or engine.model_path or "(in-memory weights)")
        mode, norm = model_pooling(engine.model_path, pooling)  # (pooling given: the files' mode not needed)
        params = SamplingParams(max_tokens=1, pooling=mode)
        outs = self.generate(prompts, params, lora_request=lora_request)  # (one prompt or a list, as generate takes)
        if not outs:
            raise ValueError("prompts is empty: give one prompt or a list of them")
        return finish(torch.stack([o.embedding for o in outs]), norm if normalize is None else normalize, dimensions)

    def generate_stream(self, prompt: str | list[int], sampling_params: SamplingParams | None = None, *,
                        on_prefill=None, lora_request: LoRARequest | None = None) -> Iterator[str]:
        """Generate a continuation of one prompt, yielding text deltas as the engine produces them (they
        concatenate to the final text; characters split across tokens come out whole). Leaving the loop
        early aborts the request. ``self.stats`` and ``self.last_output`` (the finished RequestOutput) are
        set at the end. ``on_prefill(computed, prompt_len)`` (optional) is called after each step until the
        prompt is computed (a long prompt is prefilled in chunks: progress bars). ``lora_request``: the LoRA
        adapter it runs with (as :meth:`generate`'s)."""
        if self.engine.is_follower:  # torchrun: rank 0 streams, this rank runs its shard of every step
            self.engine.follow()
            return
        try:
            yield from self._stream(prompt, sampling_params, on_prefill, lora_request)
        except GeneratorExit:  # the caller left the loop early: a normal end for the followers
            self.engine.end_call(None)
            raise
        except BaseException as e:
            self.engine.end_call(error=e)
            raise
        self.engine.end_call(self.last_output)

    def _stream(self, prompt, sampling_params, on_prefill, lora_request=None) -> Iterator[str]:
        params = SamplingParams() if sampling_params is None else sampling_params
        if not isinstance(params, SamplingParams):
            raise ValueError(f"sampling_params must be SamplingParams, got {type(params).__name__}")
        if params.n != 1:
            raise ValueError(f"generate_stream streams one sample: sampling_params.n must be 1, got {params.n} "
                             "(generate and chat run n samples)")
        engine = self.engine
        rid = f"stream-{next(self._ids)}"
        engine.add_request(rid, engine.encode(prompt, "prompt", params.generates), params, lora_request=lora_request)
        start, final, prefilling = time.perf_counter(), None, on_prefill is not None
        try:
            while final is None:
                outputs = engine.step()
                if prefilling and (progress := engine.prompt_progress(rid)) is not None:
                    on_prefill(*progress)
                    prefilling = progress[0] < progress[1]
                for out in outputs:
                    if out.request_id != rid:
                        continue
                    if out.text_delta:
                        yield out.text_delta
                    if out.finished:
                        final = out
        finally:
            if final is None:
                engine.abort(rid)
        seconds = time.perf_counter() - start
        self.last_output = final
        self.stats = {"seconds": seconds, "prompt_tokens": len(final.prompt_token_ids),
                      "generated_tokens": len(final.token_ids),
                      "tokens_per_s": len(final.token_ids) / max(seconds, 1e-9), "finish_reason": final.finish_reason}

    def generate(self, prompts: str | list[int] | Seq[str | list[int]],
                 sampling_params: SamplingParams | Seq[SamplingParams] | None = None, *,
                 suffix: str | Seq[str] | None = None,
                 lora_request: LoRARequest | Seq[LoRARequest | None] | None = None) -> list[RequestOutput]:
        """Generate a continuation of every prompt (strings, or token-id lists) with continuous batching.

        ``sampling_params``: one for all prompts or one per prompt (default: greedy, 64 tokens).
        ``suffix`` (one for all prompts or one per prompt): fill in the middle, for code models trained for it
        (:mod:`tritium.engine.fim`): each text prompt is the text before a gap, the suffix the text after it, and
        the answer what goes between (ending at EOS or the format's end tokens, added to ``stop_token_ids``); an
        empty suffix is none. ``lora_request`` (one for all prompts or one per prompt, None: the base model): the
        LoRA adapter each prompt runs with (``enable_lora=True``; ``LoRARequest(name, path)`` reads a PEFT
        directory the first time, ``LoRARequest(name)`` names one read before); prompts of different adapters batch
        together.
        Returns one finished :class:`RequestOutput` per prompt, in order, whatever ``SamplingParams.n``: with n > 1
        its fields are sample 0's and ``out.outputs`` holds the n samples (``[out]`` for one). A prompt's samples
        after the first are queued once the first has computed the prompt's full pages, which they then take from
        the prefix cache. Every prompt is checked before any is queued, so a bad one leaves the engine as it was;
        an error or interrupt while running aborts every request of the call. ``self.stats``: ``prompt_tokens``
        counts each prompt once, ``generated_tokens`` every sample's tokens.
        """
        if self.engine.is_follower:  # torchrun: rank 0 runs the call, this rank its shard of every step
            return self.engine.follow()
        try:
            outs = self._generate(prompts, sampling_params, suffix, lora_request)
        except BaseException as e:
            self.engine.end_call(error=e)
            raise
        self.engine.end_call(outs)
        return outs

    def _generate(self, prompts, sampling_params, suffix=None, lora_request=None) -> list[RequestOutput]:
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        if not isinstance(prompts, Iterable) or isinstance(prompts, (dict, set, frozenset, bytes, torch.Tensor)):
            # (a dict or set would be walked in an order of its own, a tensor as 0-d tensors)
            raise ValueError(f"prompts must be a string, a list of token ids, or a list of them, got "
                             f"{type(prompts).__name__}")
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
        if suffix is None:  # an embedding's prompt may fill the context, as may a prompt alone (max_tokens 0)
            encoded = [self.engine.encode(p, f"prompts[{i}]", q.generates)
                       for i, (p, q) in enumerate(zip(prompts, params))]
        else:
            if isinstance(suffix, str):
                suffixes = [suffix] * len(prompts)
            elif isinstance(suffix, (list, tuple)) and all(isinstance(t, str) for t in suffix):
                suffixes = list(suffix)
            else:
                raise ValueError(f"suffix must be a string or a list of strings (one per prompt), got "
                                 f"{type(suffix).__name__} {suffix!r:.80}")
            if len(suffixes) != len(prompts):
                raise ValueError(f"suffix has {len(suffixes)} entries, prompts has {len(prompts)}")
            encoded, params = [], list(params)
            for i, (prompt, text) in enumerate(zip(prompts, suffixes)):
                if not text:  # an empty suffix is none (a plain completion), as the server's
                    encoded.append(self.engine.encode(prompt, f"prompts[{i}]", params[i].generates))
                    continue
                try:
                    ids, stops = encode_fim(self.tokenizer, prompt, text)
                except ValueError as e:
                    raise ValueError(f"prompts[{i}] with a suffix: {e}") from None
                encoded.append(self.engine.encode(ids, f"prompts[{i}] with its suffix"))
                params[i] = dataclasses.replace(params[i], stop_token_ids=(params[i].stop_token_ids or []) + stops)

        engine = self.engine
        loras = list(lora_request) if isinstance(lora_request, (list, tuple)) else [lora_request] * len(prompts)
        if len(loras) != len(prompts):
            raise ValueError(f"lora_request has {len(loras)} entries, prompts has {len(prompts)}")
        loras = [None if r is None else engine.resolve_lora(r) for r in loras]
        ids = [f"generate-{next(self._ids)}" for _ in prompts]
        # n > 1: the samples after a prompt's first (sample j seeded seed + j, as the server's choices; the first's
        # prompt log-probabilities are theirs), queued once the first's prompt pages are in the prefix cache
        later = {rid: [(f"generate-{next(self._ids)}", _sample(p, j)) for j in range(1, p.n)]
                 for rid, p in zip(ids, params) if p.n > 1}
        groups = {rid: [rid] + [sid for sid, _ in samples] for rid, samples in later.items()}
        index = {rid: i for i, rid in enumerate(ids)}
        index |= {sid: index[rid] for rid, group in groups.items() for sid in group}

        def add(rid, p):
            i = index[rid]
            try:
                engine.add_request(rid, encoded[i], p, lora_request=loras[i])
            except ValueError as e:  # the error names the prompt's index
                raise ValueError(str(e).replace(f"request {rid!r}", f"prompts[{i}]")) from None

        for i, (rid, p) in enumerate(zip(ids, params)):
            try:
                add(rid, p if p.n == 1 else _sample(p, 0))
            except ValueError:  # nothing of this call stays queued
                for queued in ids[:i]:
                    engine.abort(queued)
                raise
        # a later sample takes the pages its first sample computed from the prefix cache (those of the prompt's
        # full pages but its last token); without any to share they go at once
        cached = engine.block_manager.block_size if engine.block_manager.enable_prefix_caching else 0
        shared = {rid: (len(encoded[index[rid]]) - 1) // cached * cached if cached else 0 for rid in later}

        def release():
            for rid in list(later):
                progress = engine.prompt_progress(rid)  # (None: finished already)
                if progress is None or progress[0] >= shared[rid]:
                    for sid, p in later.pop(rid):
                        add(sid, p)

        # the texts given, as the outputs' prompts (the engine saw token ids)
        texts = {rid: prompts[i] if isinstance(prompts[i], str) else None for rid, i in index.items()}
        start, hits0 = time.perf_counter(), engine.block_manager.hits
        preemptions0 = engine.scheduler.num_preemptions
        drafted0, accepted0 = engine.num_draft_tokens, engine.num_accepted_tokens
        final: dict[str, RequestOutput] = {}
        try:
            release()
            while engine.has_unfinished():
                for out in engine.step():
                    if out.finished and out.request_id in texts:
                        final[out.request_id] = out
                release()
        except BaseException:
            for rid in texts:  # nothing of this call stays queued
                engine.abort(rid)
            raise
        if engine.device.type == "cuda":
            torch.cuda.synchronize(engine.device)
        seconds = time.perf_counter() - start
        for rid, out in final.items():
            out.prompt = texts[rid]
        outs = [final[rid] for rid in ids]
        for rid, group in groups.items():
            samples = [final[sid] for sid in group]
            for j, sample in enumerate(samples):
                sample.index = j
                if params[index[rid]].prompt_logprobs is not None:
                    sample.prompt_logprobs = samples[0].prompt_logprobs
            samples[0].outputs = samples
        generated = sum(len(o.token_ids) for o in final.values())
        self.stats = {"seconds": seconds, "prompt_tokens": sum(len(o.prompt_token_ids) for o in outs),
                      "generated_tokens": generated, "tokens_per_s": generated / max(seconds, 1e-9),
                      "prefix_cache_hit_tokens": engine.block_manager.hits - hits0,
                      "preemptions": engine.scheduler.num_preemptions - preemptions0,
                      # speculative decoding (num_speculative_tokens): draft tokens proposed and accepted
                      "draft_tokens": engine.num_draft_tokens - drafted0,
                      "accepted_draft_tokens": engine.num_accepted_tokens - accepted0}
        return outs
