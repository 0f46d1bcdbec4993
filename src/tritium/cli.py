"""The ``tritium`` command.

    tritium generate [--model PATH] [--max-tokens N] [--temperature T] [--raw] [--no-stream] "prompt" | -
    tritium chat     [--model PATH] [--system TEXT] ...      interactive; /reset clears the history, Ctrl-D leaves
    tritium serve    [--model PATH] [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--max-model-len N]
                     [--max-num-seqs N] [--max-queue N]      OpenAI-compatible HTTP (pip install 'tritium[serve]')
    tritium perplexity [--model PATH] [--context N] [--stride S] [--json] FILE | -
                     the model's perplexity on a text, over windows of N tokens S apart

Every command takes ``--dtype auto|float32|float16|bfloat16``, ``--chat-template-kwargs JSON`` (more chat template
variables, e.g. ``'{"enable_thinking": false}'``; serve's are the default of each chat request), ``--chat-template
FILE|TEXT`` (a template in place of the model's), ``--no-check-finite`` (load weights holding NaN or infinite
values, refused by default) and ``-v`` / ``--quiet`` / ``--log-level LEVEL``. ``generate`` streams the answer as it
is produced (the model's chat template applied unless ``--raw``; ``-`` reads the prompt from stdin) and ends with a
line of tokens/s on stderr (not with ``--quiet``). Errors a user can fix (bad flags, missing files, unsupported
models, prompts too long, bad sampling parameters, a missing extra) are printed as one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import re
import sys
import traceback

import torch

from tritium.engine import EngineStoppedError, LLM, LLMEngine, LoRARequest, SamplingParams, UnsupportedModelError
from tritium.engine import parallel
from tritium.engine.chat import encode_chat
from tritium.engine.config import DTYPE_NAMES
from tritium.engine.tokenizer import check_template_kwargs, compile_chat_template
from tritium.engine.tools import PARSERS as TOOL_PARSERS
from tritium.runtime import interpreting
from tritium.server import check_extra, check_listen, check_tls, serve
from tritium.server.responses import DEFAULT_MAX_STORED, check_responses_dir

LOG_LEVELS = ("debug", "info", "warning", "error")
DTYPES = DTYPE_NAMES  # (auto, float32 / float / fp32, float16 / half / fp16, bfloat16 / bf16)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None,
                        help="Hugging Face model directory, .gguf file, or Hub name (org/name, org/name/FILE.gguf, "
                             "@revision: from the local Hugging Face cache, else downloaded with the hub extra); "
                             "default: SmolLM2-135M-Instruct")
    parser.add_argument("--max-model-len", type=int, default=None, help="context length (default: the model's)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="auto",
                        help="weights and activations: auto (default) is the checkpoint's float16 or bfloat16 on "
                             "a GPU (bfloat16 for a float32 checkpoint), float32 on the CPU")
    parser.add_argument("--attention-backend", choices=["triton", "torch"], default=None,
                        help="default: triton on a GPU (torch for a head_dim the kernels do not take), torch on the "
                             "CPU")
    parser.add_argument("--linear-backend", choices=["auto", "triton", "torch"], default=None,
                        help="projections of decode batches of 1-4 rows: auto (the default on a GPU) times cuBLAS "
                             "against tritium's GEMV at start-up and keeps the faster (recorded: later starts of the "
                             "model on this kind of GPU run the same kernels); triton or torch need no timing "
                             "(default torch on the CPU, where triton runs under the Triton interpreter: minutes a "
                             "token)")
    parser.add_argument("--no-linear-cache", dest="linear_cache", action="store_false",
                        help="with --linear-backend auto, time the projections at every start instead of running "
                             "those an earlier start of this model on this kind of GPU recorded (in "
                             "$TRITIUM_CACHE_DIR/linear, default ~/.cache/tritium/linear)")
    parser.add_argument("--no-check-finite", dest="check_finite", action="store_false",
                        help="load weights holding NaN or infinite values (by default each weight is scanned at load "
                             "and such a checkpoint is refused, naming the first such tensor and its file)")
    parser.add_argument("--batch-invariant", action="store_true",
                        help="a request's answer (tokens and log-probabilities) has the same bits whatever runs "
                             "beside it, however its prompt is chunked or cached (one GPU; slower: tritium's own "
                             "kernels with fixed reduction orders, no cuBLAS)")
    parser.add_argument("--quantization", choices=["fp8", "fp8-dynamic", "int4"], default=None,
                        help="fp8: the layers' projection weights in FP8 with a scale per output row (weight-only: "
                             "half the bytes a decode step reads); a 16-bit checkpoint is quantized as it loads, an "
                             "FP8 checkpoint (compressed-tensors, fbgemm_fp8) runs so by itself. fp8-dynamic: the "
                             "same weights times activations quantized per token (W8A8: fp8 tensor-core products). "
                             "int4: 4-bit weights in groups (a GPTQ, AWQ or compressed-tensors W4A16 checkpoint "
                             "runs so by itself; a 16-bit one is quantized as it loads)")
    parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8"], default="auto",
                        help="auto: the KV cache in the model's dtype; fp8: keys and values in FP8 (e4m3, scaled per "
                             "layer, saturated): twice the tokens in the same memory, half the KV read of decode")
    parser.add_argument("--kv-cache-scales", choices=["auto", "checkpoint"], default="auto",
                        help="fp8 KV cache: auto: the checkpoint's scales, else measured at start-up on one prefill "
                             "(above 1 only for layers whose keys or values come near FP8's 448); checkpoint: the "
                             "checkpoint's or 1")
    parser.add_argument("--num-speculative-tokens", type=int, default=0, metavar="K",
                        help="speculative decoding by prompt lookup: requests whose last tokens occurred earlier "
                             "get up to K draft tokens, verified in one step (default 0: off); with "
                             "--speculative-model, that model drafts K tokens")
    parser.add_argument("--speculative-model", default=None, metavar="MODEL",
                        help="a smaller model of the same tokenizer (path or Hub name) that drafts the "
                             "--num-speculative-tokens tokens each step; the answers are unchanged")
    parser.add_argument("--prompt-lookup-max", type=int, default=4, metavar="N",
                        help="longest suffix looked up for a draft (default 4)")
    parser.add_argument("--prompt-lookup-min", type=int, default=2, metavar="N",
                        help="shortest suffix looked up for a draft (default 2)")
    parser.add_argument("--tp", "--tensor-parallel-size", dest="tp", type=int, default=1,
                        help="GPUs to shard the model over (default 1); on one host the engine starts the other "
                             "ranks itself, under torchrun it must equal the job's world size")
    parser.add_argument("--cp", "--context-parallel-size", dest="cp", type=int, default=1,
                        help="GPUs to spread each sequence's KV cache over (default 1; every GPU holds the whole "
                             "model; --tp must then be 1)")
    parser.add_argument("--comm", choices=["auto", "tritium", "torch"], default="auto",
                        help="tensor-parallel collectives: tritium's (one host), torch.distributed's (NCCL), or "
                             "auto (tritium on the GPUs of one host; the default)")
    parser.add_argument("--chat-template-kwargs", type=_template_kwargs, default=None, metavar="JSON",
                        help="more variables for the model's chat template, as a JSON object, e.g. "
                             "'{\"enable_thinking\": false}' (Qwen3); serve: the default of every chat request, "
                             "whose own chat_template_kwargs override it name by name")
    parser.add_argument("--chat-template", type=_chat_template, default=None, metavar="FILE|TEXT",
                        help="a chat template (a Jinja file, or its text) in place of the model's: for a model "
                             "without one, or to change it")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_const", dest="log_level", const="info", default="warning",
                       help="log what the engine does (--log-level info)")
    group.add_argument("-q", "--quiet", action="store_const", dest="log_level", const="error", default="warning",
                       help="errors only (--log-level error)")
    group.add_argument("--log-level", choices=LOG_LEVELS, default="warning")


def _chat_template(value: str) -> str:
    """--chat-template: the text of a Jinja file, or the value itself where it is Jinja text (a usage error
    otherwise, or where it does not parse)."""
    if os.path.isfile(value):
        try:
            with open(value, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise argparse.ArgumentTypeError(f"cannot read {value}: {e}") from None
    elif "{{" in value or "{%" in value:
        text = value
    else:
        raise argparse.ArgumentTypeError(f"no file {value!r}, and not the Jinja text of a template either")
    try:
        compile_chat_template(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value if text is not value else 'the text given'}: {e}") from None
    return text


def _template_kwargs(text: str) -> dict:
    """--chat-template-kwargs: a JSON object of template variables (a usage error otherwise)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e}): {text!r}") from None
    try:
        return check_template_kwargs(value, "--chat-template-kwargs")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _sampling(parser: argparse.ArgumentParser, max_tokens: int) -> None:
    parser.add_argument("--max-tokens", type=int, default=max_tokens,
                        help=f"tokens to generate at most (default {max_tokens})")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (default)")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--min-p", type=float, default=0.0,
                        help="keep tokens at least this many times as likely as the most likely one (default 0: all)")
    parser.add_argument("--repetition-penalty", type=float, default=1.0,
                        help="divide the positive logits of tokens already in the prompt or answer by this, "
                             "multiply the negative ones (default 1: off)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--stop", action="append", default=None, help="stop string (repeatable)")
    parser.add_argument("--json", dest="json_mode", action="store_true",
                        help="JSON mode: the answer is one JSON object, ending when it closes "
                             "(response_format json_object)")
    parser.add_argument("--json-schema", default=None, metavar="FILE",
                        help="the answer is one JSON object that this JSON Schema file accepts (structured outputs)")
    parser.add_argument("--choice", action="append", default=None, metavar="TEXT",
                        help="the answer is one of these strings (repeatable; guided choice)")
    parser.add_argument("--regex", default=None, metavar="PATTERN",
                        help="the answer matches this regular expression in full (guided regex)")
    parser.add_argument("--prediction", default=None, metavar="FILE",
                        help="text the answer is expected to largely repeat (a file being edited): with "
                             "--num-speculative-tokens, drafts come from it first; the answer is unchanged")
    parser.add_argument("--system", default=None, help="system message for the chat template")
    parser.add_argument("--lora", default=None, metavar="DIR",
                        help="answer with this LoRA adapter (a PEFT directory: adapter_config.json and "
                             "adapter_model.safetensors) on the model")


class _Parser(argparse.ArgumentParser):
    """argparse's parser with a usage error printed as every other error is: one ``tritium: error: ...`` line
    (status 2), pointing to the command's --help, not the usage block above argparse's own line."""

    def error(self, message: str):
        self.exit(2, f"tritium: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tritium", description="LLM inference in Python and Triton")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="generate text from a prompt (streamed)")
    gen.add_argument("prompt", help="the prompt (a chat message unless --raw); - reads it from stdin")
    _common(gen)
    _sampling(gen, 128)
    gen.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    gen.add_argument("--no-stream", dest="stream", action="store_false", help="print the answer when it is done")
    chat = sub.add_parser("chat", help="interactive multi-turn chat (/reset clears the history, Ctrl-D leaves)")
    _common(chat)
    _sampling(chat, 512)
    srv = sub.add_parser("serve", help="OpenAI-compatible HTTP server (needs pip install 'tritium[serve]')")
    _common(srv)
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    srv.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on /v1/*")
    srv.add_argument("--allowed-origins", action="append", default=None, metavar="ORIGIN",
                     help="a web origin whose browser pages may call the server (CORS; repeatable; '*' for any)")
    srv.add_argument("--ssl-keyfile", default=None, metavar="PEM", help="serve HTTPS with this private key")
    srv.add_argument("--ssl-certfile", default=None, metavar="PEM", help="... and this certificate")
    srv.add_argument("--served-model-name", default=None, help="the model's name in the API (default: its file name)")
    srv.add_argument("--max-num-seqs", type=int, default=64, help="requests running at once (default 64)")
    srv.add_argument("--max-queue", type=int, default=None,
                     help="requests that may wait beyond the running batch's free slots; past it the server "
                          "answers 503 (default: unbounded)")
    srv.add_argument("--max-stored-responses", type=int, default=DEFAULT_MAX_STORED,
                     help=f"/v1/responses kept in memory for retrieval and previous_response_id, the least recently "
                          f"used dropped first (default {DEFAULT_MAX_STORED})")
    srv.add_argument("--responses-dir", default=None, metavar="DIR",
                     help="also keep /v1/responses on disk in DIR (one JSON file each, this user only), so that they "
                          "outlive the server: the next server on DIR reads them back (default: memory only)")
    srv.add_argument("--decode-steps", type=int, default=None,
                     help="greedy decode steps per host sync (default 8; 1 streams every token as it is made)")
    srv.add_argument("--kv-cache-memory", type=int, default=None, help="KV-cache bytes (default: from free memory)")
    srv.add_argument("--tool-call-parser", choices=["auto", *TOOL_PARSERS], default="auto",
                     help="how the model writes tool calls, for chat requests with tools: hermes (<tool_call> "
                          "blocks: Qwen2.5/Qwen3, Hermes), llama3_json (Llama 3.1-3.3), mistral (a JSON list: "
                          "Mistral 7B v0.3, Nemo), pythonic ([f(x=1), g()]: Llama 3.2 / 4 pythonic templates), "
                          "or auto (the default: recognised from the chat template)")
    srv.add_argument("--reasoning-parser", choices=["think"], default=None,
                     help="return chat answers' <think> ... </think> part (Qwen3, QwQ, DeepSeek-R1) as "
                          "message.reasoning_content instead of in the content (default: left in the content)")
    srv.add_argument("--lora-modules", nargs="+", default=None, metavar="NAME=PATH",
                     help="LoRA adapters to serve (PEFT directories), each under its NAME: a request whose model is "
                          "NAME runs that adapter; requests of different adapters and of the base model batch "
                          "together (implies --enable-lora)")
    srv.add_argument("--enable-lora", action="store_true",
                     help="serve LoRA adapters (--lora-modules; a step with adapters adds each one's update to the "
                          "projections: ~1.2x a decode step's time)")
    srv.add_argument("--allow-runtime-lora", action="store_true",
                     help="serve POST /v1/load_lora_adapter {lora_name, lora_path} and /v1/unload_lora_adapter "
                          "{lora_name} (adapters read from paths on this machine; implies --enable-lora)")
    srv.add_argument("--max-loras", type=int, default=4, help="LoRA adapters one step may mix (default 4)")
    srv.add_argument("--max-lora-rank", type=int, default=16, help="the largest adapter rank served (default 16)")
    srv.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false",
                     help="compute every prompt whole, never from KV pages cached by earlier requests (slower for "
                          "repeated prefixes; a repeated greedy request then rounds as it did the first time)")
    ppl = sub.add_parser("perplexity", help="the model's perplexity on a text file (prompt log-probabilities over "
                                            "sliding windows)")
    ppl.add_argument("file", help="the text (UTF-8); - reads it from stdin")
    _common(ppl)
    ppl.add_argument("--context", type=int, default=None,
                     help="tokens a window (default: 2048, or the model's context if shorter)")
    ppl.add_argument("--stride", type=int, default=None,
                     help="tokens between window starts, below --context (default --context - 1: windows share one "
                          "token); each token is scored once, in the first window that holds it with context "
                          "before it, so a smaller stride gives each token more context for more compute")
    ppl.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return parser


def _engine_kwargs(args) -> dict:
    kwargs = dict(attention_backend=args.attention_backend, linear_backend=args.linear_backend,
                  linear_cache=args.linear_cache, check_finite=args.check_finite, batch_invariant=args.batch_invariant,
                  max_model_len=args.max_model_len, quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype,
                  kv_cache_scales=args.kv_cache_scales,
                  tensor_parallel_size=args.tp, context_parallel_size=args.cp, comm=args.comm, dtype=DTYPES[args.dtype],
                  num_speculative_tokens=args.num_speculative_tokens, prompt_lookup_max=args.prompt_lookup_max,
                  prompt_lookup_min=args.prompt_lookup_min, speculative_model=args.speculative_model,
                  chat_template=args.chat_template)
    if getattr(args, "lora", None) is not None:  # generate / chat --lora: slots for its rank
        kwargs.update(enable_lora=True, max_loras=1, max_lora_rank=_adapter_rank(args.lora))
    if args.attention_backend == "triton" and interpreting() and not args.batch_invariant:
        kwargs["op_backend"] = "torch"  # the interpreter is slow enough with attention alone
    return kwargs


def _params(args) -> SamplingParams:
    schema = None
    if args.json_schema is not None:
        try:
            with open(args.json_schema, encoding="utf-8") as f:
                schema = json.load(f)
        except OSError as e:
            raise ValueError(f"--json-schema: cannot read {args.json_schema}: {e.strerror}") from None
        except ValueError as e:
            raise ValueError(f"--json-schema: {args.json_schema} is not JSON ({e})") from None
    prediction = None
    if args.prediction is not None:
        try:
            with open(args.prediction, encoding="utf-8") as f:
                prediction = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"--prediction: cannot read {args.prediction} as text: {getattr(e, 'strerror', e)}") \
                from None
    formats = [(flag, fmt) for flag, fmt, given in (("--json", "json_object", args.json_mode),
                                                     ("--json-schema", "json_schema", schema is not None),
                                                     ("--choice", "choice", args.choice is not None),
                                                     ("--regex", "regex", args.regex is not None)) if given]
    if len(formats) > 1:
        raise ValueError(f"{formats[0][0]} and {formats[1][0]} exclude each other (one constraint on an answer)")
    if args.max_tokens < 1:  # (SamplingParams takes 0, a prompt scored alone: nothing to print here)
        raise ValueError(f"--max-tokens must be >= 1, got {args.max_tokens}")
    return SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                          top_k=args.top_k, seed=args.seed, stop=args.stop, min_p=args.min_p,
                          repetition_penalty=args.repetition_penalty, json_schema=schema, choices=args.choice,
                          regex=args.regex, response_format=formats[0][1] if formats else None,
                          prediction=prediction)


class _Prefill:
    """A progress bar for a prompt that takes several steps to prefill (on a terminal)."""

    def __init__(self):
        self.bar = None

    def __call__(self, computed: int, total: int) -> None:
        if self.bar is None:
            if computed >= total or not sys.stderr.isatty():
                return
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="prefill", unit="tok", leave=False, file=sys.stderr)
        self.bar.update(computed - self.bar.n)
        if computed >= total:
            self.bar.close()


def _stream(llm: LLM, prompt, params: SamplingParams, strip: bool, lora: LoRARequest | None = None) -> str:
    """Print the answer as it comes; returns it. ``strip``: without the whitespace around it, as ``--no-stream``
    prints it (whitespace is held until text follows it)."""
    text, held = "", ""
    for delta in llm.generate_stream(prompt, params, on_prefill=_Prefill(), lora_request=lora):
        if strip:
            delta = held + (delta.lstrip() if not text else delta)
            body = delta.rstrip()
            delta, held = body, delta[len(body):]
        text += delta
        print(delta, end="", flush=True)
    print()
    return text


def _report(llm: LLM) -> None:
    stats, config = llm.stats, llm.engine.config
    print(f"[{stats['generated_tokens']} tokens in {stats['seconds']:.2f} s: {stats['tokens_per_s']:.1f} tokens/s, "
          f"{config.device.type}, {str(config.dtype).removeprefix('torch.')}, attention {config.attention_backend}]",
          file=sys.stderr)


def generate(args) -> int:
    params = _params(args)
    text = _prompt_text(args)
    with LLM(args.model, progress=sys.stderr.isatty(), **_engine_kwargs(args)) as llm:
        _check_tokenizer(args, llm)
        return _generate(args, llm, text, params)


def _check_tokenizer(args, llm: LLM) -> None:
    """The commands read and write text: a model without a tokenizer is a usage error (status 2), not a
    traceback."""
    if llm.tokenizer is None:
        raise ValueError(f"model {args.model or 'default'!r} has no tokenizer (tokenizer.json beside its weights), "
                         f"which {args.command} needs to turn text into tokens and back")


def _prompt_text(args) -> str:
    """generate's prompt: the argument, or for ``-`` stdin's text, where a chat message (not ``--raw``) drops the
    line ends that ``echo`` and editors put after it, as ``$(cat)`` does: ``echo Hi | tritium generate -`` asks
    what ``tritium generate Hi`` does."""
    if args.prompt != "-":
        return args.prompt
    text = sys.stdin.read()
    return text if args.raw else text.rstrip("\r\n")


def _generate(args, llm: LLM, text: str, params: SamplingParams) -> int:
    for flag, given in (("--chat-template-kwargs", args.chat_template_kwargs), ("--system", args.system)):
        if args.raw and given:  # (else silently dropped)
            raise ValueError(f"{flag} has no chat template to reach with --raw")
    prompt = llm.tokenizer.encode(text) if args.raw else llm.encode_chat(text, system=args.system,
                                                                  chat_template_kwargs=args.chat_template_kwargs)
    params = dataclasses.replace(params, continuation=args.raw)  # a chat answer's text stands alone
    lora = _lora_request(args)
    if llm.engine.is_follower:  # torchrun rank > 0: runs its shard of rank 0's steps; rank 0 prints
        llm.generate([prompt], params)
        return 0
    if args.stream:
        _stream(llm, prompt, params, strip=not args.raw, lora=lora)
    else:
        out = llm.generate([prompt], params, lora_request=lora)[0]
        print(out.text.strip() if not args.raw else out.text)
    if args.log_level != "error":  # --quiet: the answer only
        _report(llm)
    return 0


def chat(args) -> int:
    if max(args.tp, args.cp) > 1 and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("chat reads the terminal on one process: run it with --tp or --cp without torchrun (the "
                         "engine starts its ranks itself)")
    params = dataclasses.replace(_params(args), continuation=False)  # an answer's text stands alone
    with LLM(args.model, progress=sys.stderr.isatty(), **_engine_kwargs(args)) as llm:
        _check_tokenizer(args, llm)
        return _chat(args, llm, params)


def _chat(args, llm: LLM, params: SamplingParams) -> int:
    system = [{"role": "system", "content": args.system}] if args.system else []
    history = list(system)
    print("chat with the model; /reset clears the history, Ctrl-D leaves", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except EOFError:
            print(file=sys.stderr)
            return 0
        except KeyboardInterrupt:
            print(file=sys.stderr)
            continue
        if not line.strip():
            continue
        if line.strip() == "/reset":
            history = list(system)
            print("[history cleared]", file=sys.stderr)
            continue
        history.append({"role": "user", "content": line})
        try:
            prompt = encode_chat(llm.tokenizer, history, template_kwargs=args.chat_template_kwargs)
            answer = _stream(llm, prompt, params, strip=True, lora=_lora_request(args))
        except KeyboardInterrupt:  # stops this answer, not the session
            print("\n[interrupted]", file=sys.stderr)
            history.pop()
            continue
        except ValueError as e:  # the conversation outgrew the context, say
            print(f"tritium: error: {e} (/reset starts over)", file=sys.stderr)
            history.pop()
            continue
        history.append({"role": "assistant", "content": answer})
        if args.log_level in ("info", "debug"):
            _report(llm)


def _serve_engine_kwargs(args) -> dict:
    """LLMEngine keyword arguments of ``tritium serve``'s flags."""
    kwargs = dict(max_num_seqs=args.max_num_seqs, enable_prefix_caching=args.prefix_caching, **_engine_kwargs(args))
    if args.decode_steps is not None:
        kwargs["decode_steps"] = args.decode_steps
    if args.kv_cache_memory is not None:
        kwargs["kv_cache_memory"] = args.kv_cache_memory
    if args.enable_lora or args.lora_modules or args.allow_runtime_lora:
        kwargs.update(enable_lora=True, max_loras=args.max_loras, max_lora_rank=args.max_lora_rank)
    return kwargs


def _adapter_rank(path: str) -> int:
    """The rank (``r``) in a PEFT adapter's config, which ``--lora`` sizes its slot for (the adapter itself is read
    and checked when the first request runs it)."""
    config = os.path.join(path, "adapter_config.json")
    try:
        with open(config) as f:
            rank = json.load(f).get("r")
    except (OSError, ValueError, AttributeError) as e:
        raise ValueError(f"--lora {path!r}: cannot read {config} ({type(e).__name__}: {e})") from None
    if not isinstance(rank, int) or isinstance(rank, bool) or not 1 <= rank <= 256:
        raise ValueError(f"--lora {path!r}: adapter_config.json's r must be an integer in [1, 256], got {rank!r}")
    return rank


def _lora_request(args) -> LoRARequest | None:
    return None if args.lora is None else LoRARequest(os.path.basename(os.path.normpath(args.lora)), args.lora)


def lora_modules(specs: list[str] | None) -> dict[str, str]:
    """``--lora-modules NAME=PATH ...`` as {name: path}; ValueError naming a malformed one."""
    out = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--lora-modules takes NAME=PATH (a PEFT adapter directory), got {spec!r}")
        if name in out:
            raise ValueError(f"--lora-modules: the name {name!r} is given twice")
        out[name] = path
    return out


def serve_command(args) -> int:
    check_tls(args.ssl_keyfile, args.ssl_certfile, ("--ssl-keyfile", "--ssl-certfile"))  # before the model loads
    if os.environ.get("RANK", "0") == "0":  # the rank that listens (torchrun's other ranks may be on other hosts)
        check_listen(args.host, args.port, ("--host", "--port"))
    if args.responses_dir is not None:
        check_responses_dir(args.responses_dir, "--responses-dir")
    adapters = lora_modules(args.lora_modules)
    check_extra()
    engine = LLMEngine(args.model, progress=sys.stderr.isatty(), **_serve_engine_kwargs(args))
    with engine:
        for name, path in adapters.items():  # read and checked before the server listens
            engine.load_lora(name, path)
        if engine.is_follower:  # torchrun rank > 0: rank 0 serves; this rank runs its shard of every step
            while not engine.closed:
                engine.follow()
            return 0
        try:
            serve(engine, host=args.host, port=args.port, api_key=args.api_key, max_queue=args.max_queue,
                  model_name=args.served_model_name, log_level=args.log_level,
                  chat_template_kwargs=args.chat_template_kwargs,
                  tool_parser=None if args.tool_call_parser == "auto" else args.tool_call_parser,
                  reasoning_parser=args.reasoning_parser, allowed_origins=args.allowed_origins,
                  ssl_keyfile=args.ssl_keyfile, ssl_certfile=args.ssl_certfile,
                  max_stored_responses=args.max_stored_responses, runtime_lora=args.allow_runtime_lora,
                  responses_dir=args.responses_dir)
        except EngineStoppedError as e:  # the engine loop failed: the server shut down (a supervisor restarts it)
            print(f"tritium: error: {e}", file=sys.stderr)
            return 1
    return 0


def windows(num_tokens: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """Sliding windows over ``num_tokens`` tokens: (begin, end, first scored) each, ``context`` tokens long
    (the last may be shorter) and ``stride`` apart (Hugging Face's strided perplexity). A window scores its
    tokens after the previous window's end; ``stride`` < ``context`` makes each window start at or before the
    previous one's last token, so every token but the first is scored, once, with context before it."""
    if context < 2:
        raise ValueError(f"--context must be >= 2 (a token to condition on and one to score), got {context}")
    if not 1 <= stride < context:
        raise ValueError(f"--stride must be in [1, --context - 1 = {context - 1}] (windows that share a token, so "
                         f"that each window's first token is scored in the one before), got {stride}")
    out, scored, begin = [], 1, 0  # token 0 has nothing before it
    while True:
        end = min(begin + context, num_tokens)
        if end > scored:
            out.append((begin, end, scored))
            scored = end
        if end == num_tokens:
            return out
        begin += stride


def perplexity(args) -> int:
    # what needs no model, checked before it loads (the default --context is the model's)
    if args.context is not None:
        windows(2, args.context, 1 if args.stride is None else args.stride)  # (--context < 2 is named first)
    elif args.stride is not None and args.stride < 1:
        raise ValueError(f"--stride must be >= 1, got {args.stride}")
    if args.file == "-":  # its bytes decoded here: the console's decoder may keep bad bytes as surrogates
        raw = getattr(sys.stdin, "buffer", None)
        try:
            text = sys.stdin.read() if raw is None else raw.read().decode("utf-8-sig")  # (a byte-order mark: no text)
        except UnicodeDecodeError as e:
            raise ValueError(f"file: cannot read stdin as UTF-8 text: {e}") from None
    else:
        try:
            with open(args.file, encoding="utf-8-sig") as f:  # (a byte-order mark is not scored)
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:  # a directory, no permission, not UTF-8 text
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ValueError(f"file: cannot read {args.file} as UTF-8 text: {why}") from None
    with LLM(args.model, progress=sys.stderr.isatty(), **_engine_kwargs(args)) as llm:
        _check_tokenizer(args, llm)
        return _perplexity(args, llm, text)


def _perplexity(args, llm: LLM, text: str) -> int:
    ids = llm.tokenizer.encode(text)
    if len(ids) < 2:
        raise ValueError(f"{'stdin' if args.file == '-' else args.file}: {len(ids)} token(s); perplexity needs at "
                         f"least 2")
    context = min(2048, llm.engine.max_model_len) if args.context is None else args.context
    if context > llm.engine.max_model_len:
        raise ValueError(f"--context {context} is longer than the model's context of {llm.engine.max_model_len} "
                         f"tokens (--max-model-len)")
    stride = context - 1 if args.stride is None else args.stride
    spans = windows(len(ids), context, stride)
    params = SamplingParams(max_tokens=0, prompt_logprobs=0)  # the windows scored, nothing generated
    outs = llm.generate([ids[b:e] for b, e, _ in spans], params)
    if llm.engine.is_follower:  # torchrun rank > 0: ran its shard of rank 0's steps; rank 0 prints
        return 0
    total = sum(lp.logprob for (b, e, first), out in zip(spans, outs) for lp in out.prompt_logprobs[first - b:])
    scored = sum(e - first for _, e, first in spans)
    result = {"perplexity": math.exp(-total / scored), "mean_nll": -total / scored, "tokens": scored,
              "windows": len(spans), "context": context, "stride": stride}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"perplexity {result['perplexity']:.4f} (mean negative log-likelihood {result['mean_nll']:.4f} nats) "
              f"over {scored} tokens: {len(spans)} window(s) of up to {context} tokens, {stride} apart")
    return 0


COMMANDS = {"generate": generate, "chat": chat, "serve": serve_command, "perplexity": perplexity}


# keyword arguments of the library that a command's flag feeds under another name
_ALIASES = {"max_responses": "max_stored_responses", "tensor_parallel_size": "tp", "context_parallel_size": "cp"}


def _flags_named(message: str, parser: argparse.ArgumentParser, command: str) -> str:
    """``message`` (a library error) with the keyword arguments it names written as the command's flags that set
    them ("max_num_seqs must be >= 1" -> "--max-num-seqs must be >= 1"), where one is followed by " must", "=" or
    ": " ("regex: pattern '(': ..."; a name in running text stays)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flags = {a.dest: max(a.option_strings, key=len) for a in sub._actions if a.option_strings and a.dest != "help"}
    for alias, dest in _ALIASES.items():
        if dest in flags:
            flags[alias] = flags[dest]
    pattern = r"(?<![\w.-])(" + "|".join(map(re.escape, sorted(flags, key=len, reverse=True))) + r")(?= must|=|: )"
    return re.sub(pattern, lambda m: flags[m.group(1)], message)


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except (FileNotFoundError, UnsupportedModelError, ValueError, ImportError) as e:
        print(f"tritium: error: {_flags_named(str(e), parser, args.command)}", file=sys.stderr)
        return 2


def run() -> None:
    """The ``tritium`` command: exits with :func:`main`'s status. Where a multi-GPU teardown was left stuck
    on its thread (a lost peer), the process leaves by ``os._exit`` once its output is flushed: a normal exit
    would have the C++ runtime abort on that thread (SIGABRT, status 134) after the error was reported."""
    try:
        code = main()
    except BaseException:
        if not parallel.teardown_left_behind():
            raise
        traceback.print_exc()
        code = 1
    if parallel.teardown_left_behind():
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
