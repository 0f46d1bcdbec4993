"""``make demo``: a chat answer from SmolLM2-135M-Instruct through tritium's engine, then the
paged-attention self-check.

On a GPU the engine runs tritium's Triton kernels with CUDA graphs; on a CPU-only machine it uses the
PyTorch attention path so the answer comes in seconds (the kernels then run under the interpreter in
the self-check and in the tests).
"""

from __future__ import annotations

import sys
import time

from tritium.attention.demo import main as attention_main
from tritium.engine import LLM, SamplingParams

QUESTION = "What is the capital of France? Answer in one sentence."


def chat_demo() -> None:
    start = time.perf_counter()
    llm = LLM(progress=sys.stderr.isatty())
    load_s = time.perf_counter() - start
    engine = llm.engine
    mc, ec = engine.model_config, engine.config
    print(f"model: {engine.model_path}")
    print(f"  {mc.num_hidden_layers} layers, hidden {mc.hidden_size}, "
          f"{mc.num_attention_heads}/{mc.num_key_value_heads} heads; loaded in {load_s:.1f} s on "
          f"{ec.device.type}, attention: {ec.attention_backend}, "
          f"KV cache: {ec.num_blocks} pages of {ec.block_size} tokens")
    prompt = llm.encode_chat(QUESTION)
    out = llm.generate([prompt], SamplingParams(max_tokens=64))[0]
    print(f"\nuser: {QUESTION}\nassistant: {out.text.strip()}")
    s = llm.stats
    print(f"\n[{s['generated_tokens']} tokens in {s['seconds']:.2f} s: {s['tokens_per_s']:.1f} tokens/s]")


def attention_demo() -> None:
    print()
    attention_main()


def main() -> int:
    status = 0
    try:
        chat_demo()
    except (FileNotFoundError, ImportError, ValueError) as e:  # e.g. the default model or gguf not installed
        print(f"chat demo: error: {e}", file=sys.stderr)
        status = 1
    attention_demo()
    return status


if __name__ == "__main__":
    sys.exit(main())
