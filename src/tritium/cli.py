"""The ``tritium`` command.

    tritium generate [--model PATH] [--max-tokens N] [--temperature T] [--raw] "prompt"

Prints the answer (the model's chat template applied unless ``--raw``) and a line with tokens/s. Errors a
user can fix (missing files, unsupported models, prompts too long, bad sampling parameters) are printed
as one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys

from tritium.engine import LLM, SamplingParams, UnsupportedModelError
from tritium.runtime import interpreting


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tritium", description="LLM inference in Python and Triton")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="generate text from a prompt")
    gen.add_argument("prompt", help="the prompt (a chat message unless --raw)")
    gen.add_argument("--model", default=None,
                     help="Hugging Face model directory or .gguf file (default: SmolLM2-135M-Instruct)")
    gen.add_argument("--max-tokens", type=int, default=128, help="tokens to generate at most (default 128)")
    gen.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (default)")
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--top-k", type=int, default=0)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--stop", action="append", default=None, help="stop string (repeatable)")
    gen.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    gen.add_argument("--system", default=None, help="system message for the chat template")
    gen.add_argument("--attention-backend", choices=["triton", "torch"], default=None,
                     help="default: triton on a GPU, torch on the CPU")
    gen.add_argument("--max-model-len", type=int, default=None, help="context length (default: the model's)")
    return parser


def generate(args) -> int:
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                            top_k=args.top_k, seed=args.seed, stop=args.stop)
    kwargs = {}
    if args.attention_backend == "triton" and interpreting():
        kwargs["op_backend"] = "torch"  # the interpreter is slow enough with attention alone
    llm = LLM(args.model, progress=sys.stderr.isatty(), attention_backend=args.attention_backend,
              max_model_len=args.max_model_len, **kwargs)
    prompt = llm.tokenizer.encode(args.prompt) if args.raw else llm.encode_chat(args.prompt, system=args.system)
    out = llm.generate([prompt], params)[0]
    print(out.text.strip() if not args.raw else out.text)
    stats, config = llm.stats, llm.engine.config
    print(f"[{stats['generated_tokens']} tokens in {stats['seconds']:.2f} s: {stats['tokens_per_s']:.1f} tokens/s, "
          f"{config.device.type}, attention {config.attention_backend}]", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "generate":
            return generate(args)
    except (FileNotFoundError, UnsupportedModelError, ValueError, ImportError) as e:
        print(f"tritium: error: {e}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
