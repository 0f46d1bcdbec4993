"""Fill in the middle: a prompt of the text before a gap and the text after it, in the special tokens a code model
was trained with, so that the answer is what goes in between (OpenAI's ``suffix`` on completions).

A model supports it when its vocabulary holds one of the formats below as single tokens; the prompt is then
``<prefix token> prefix <suffix token> suffix <middle token>`` (prefix-suffix-middle, the order these models
were trained on), after what the tokenizer puts before any text (BOS where it adds one). The answer ends at EOS or
at any of the format's other tokens (the markers themselves, a file separator, padding: a model that emits one
has finished the middle).
"""

from __future__ import annotations

import dataclasses

from tritium.engine.tokenizer import Tokenizer


@dataclasses.dataclass(frozen=True)
class FimFormat:
    name: str  # the models that use it
    prefix: str
    suffix: str
    middle: str
    stops: tuple[str, ...]  # more tokens that end a middle, where the vocabulary has them


FORMATS = (
    FimFormat("Qwen2.5-Coder, Qwen3-Coder, CodeGemma", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
              ("<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<|file_separator|>", "<|endoftext|>")),
    FimFormat("StarCoder, StarCoder2, SantaCoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>",
              ("<fim_pad>", "<file_sep>", "<filename>", "<|endoftext|>")),
    FimFormat("DeepSeek-Coder", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", ("<|EOT|>",)),
)


def fim_format(tokenizer: Tokenizer | None) -> FimFormat | None:
    """The first format whose three markers are tokens of ``tokenizer``'s vocabulary; None if none."""
    if tokenizer is None:
        return None
    backend = tokenizer.backend
    for fmt in FORMATS:
        if all(backend.token_to_id(t) is not None for t in (fmt.prefix, fmt.suffix, fmt.middle)):
            return fmt
    return None


def _lead(tokenizer: Tokenizer) -> list[int]:
    """What the tokenizer puts before any text (BOS, where it adds one)."""
    plain = tokenizer.encode("x", add_special_tokens=False)
    full = tokenizer.encode("x")
    for i in range(len(full) - len(plain) + 1):
        if full[i:i + len(plain)] == plain:
            return full[:i]
    return []


def encode_fim(tokenizer: Tokenizer | None, prefix: str, suffix: str) -> tuple[list[int], list[int]]:
    """(prompt token ids, stop token ids) of the gap between ``prefix`` and ``suffix``; ValueError when the model
    has no fill-in-the-middle tokens or the texts are not strings."""
    fmt = fim_format(tokenizer)
    if fmt is None:
        known = "; ".join(f"{f.prefix} {f.suffix} {f.middle} ({f.name})" for f in FORMATS)
        raise ValueError(f"this model's vocabulary has no fill-in-the-middle tokens (known formats: {known})")
    for name, text in (("prompt", prefix), ("suffix", suffix)):
        if not isinstance(text, str):
            raise ValueError(f"{name} must be text to fill in the middle, got {type(text).__name__}")
    ids = tokenizer.backend.token_to_id
    prompt = (_lead(tokenizer) + [ids(fmt.prefix)] + tokenizer.encode(prefix, add_special_tokens=False)
              + [ids(fmt.suffix)] + tokenizer.encode(suffix, add_special_tokens=False) + [ids(fmt.middle)])
    return prompt, fim_stop_ids(tokenizer)


def fim_stop_ids(tokenizer: Tokenizer) -> list[int]:
    """The token ids that end a middle (the format's markers and end tokens the vocabulary has); [] without a
    format."""
    fmt = fim_format(tokenizer)
    if fmt is None:
        return []
    ids = tokenizer.backend.token_to_id
    return [ids(t) for t in (fmt.prefix, fmt.suffix, fmt.middle, *fmt.stops) if ids(t) is not None]
