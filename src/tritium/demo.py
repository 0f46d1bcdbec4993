"""``make demo``: a chat answer from SmolLM2-135M-Instruct through tritium's engine, then the
paged-attention self-check.

On a GPU the engine runs tritium's Triton kernels with CUDA graphs; on a CPU-only machine it uses the
PyTorch attention path so the answer comes in seconds (the kernels then run under the interpreter in
the self-check and in the tests).
"""

from __future__ import annotations

import sys
import time

QUESTION = "What is the capital of France? Answer in one sentence."


def chat_demo() -> None:
    from tritium.engine import LLM, SamplingParams

    start = time.perf_counter()
    llm = LLM(progress=sys.stderr.isatty())
    load_s = time.perf_counter() - start
    print(f"model: {llm.model_path}")
    print(f"  {llm.config.num_hidden_layers} layers, hidden {llm.config.hidden_size}, "
          f"{llm.config.num_attention_heads}/{llm.config.num_key_value_heads} heads; loaded in {load_s:.1f} s on "
          f"{llm.device.type}, attention: {llm.engine_config.attention_backend}, "
          f"KV cache: {llm.block_manager.num_blocks} pages of {llm.engine_config.block_size} tokens")
    prompt = llm.encode_chat(QUESTION)
    out = llm.generate([prompt], SamplingParams(max_tokens=64))[0]
    print(f"\nuser: {QUESTION}\nassistant: {out.text.strip()}")
    s = llm.stats
    print(f"\n[{s['generated_tokens']} tokens in {s['seconds']:.2f} s: {s['tokens_per_s']:.1f} tokens/s]")


def attention_demo() -> None:
    try:
        from tritium.attention.demo import main as attention_main
    except ImportError:
        print("\n(tritium.attention.demo is not available; skipping the paged-attention self-check)")
        return
    print()
    attention_main()


def main() -> int:
    from tritium.runtime import select_backend

    select_backend()
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
