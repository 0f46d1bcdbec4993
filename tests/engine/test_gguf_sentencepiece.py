"""GGUF files with a SentencePiece vocabulary (``tokenizer.ggml.model == "llama"``: Llama 2, Mistral) against
transformers loading the same file: token ids, decoded text, chat template and greedy generations.

The vocabulary is built locally: BPE pieces learned on a small corpus (score = -merge rank, as in a
SentencePiece model), all 256 byte-fallback pieces ``<0xNN>`` and control tokens.
"""

import os

import pytest
import torch

from tritium import LLM, SamplingParams

from .conftest import hf_greedy
from .test_gguf_loading import write_gguf

gguf = pytest.importorskip("gguf")

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "hello world, hello there; the world is wide and the sea is deep",
    "numbers like 12 and 2024 are written digit by digit",
    "in the beginning there was nothing, then there was something",
    "tokenizers split words into pieces and pieces into bytes",
]
TEXTS = [
    "hello world",
    " hello world",
    "   leading and  double  spaces ",
    "The Quick Brown Fox!",
    "digits 0123456789 and 3.14",
    "naïve café — ünïcödé 🙂 日本",
    "line one\nline two\n\ttabbed",
    "[INST] what is the sea? [/INST]",
    "unknown <s> mid </s> end",
    "",
]
TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
            "{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}")


def spm_vocab() -> tuple[list[str], list[float], list[int]]:
    """(pieces, scores, token types): <unk>, <s>, </s>, <0x00>..<0xFF>, ~300 learned pieces, [INST], [/INST]."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    learner = Tokenizer(models.BPE())
    learner.pre_tokenizer = pre_tokenizers.Metaspace()
    learner.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, show_progress=False))
    learned = sorted(learner.get_vocab().items(), key=lambda kv: kv[1])  # alphabet first, then merge order
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(pieces)
    for rank, (piece, _) in enumerate(learned):
        pieces.append(piece)
        types.append(1)
        scores.append(-float(rank))
    pieces += ["[INST]", "[/INST]"]
    types += [3, 3]
    scores += [0.0, 0.0]
    return pieces, scores, types


VOCAB = spm_vocab()


def write_spm_tokenizer(w, vocab_size: int) -> None:
    pieces, scores, types = VOCAB
    assert vocab_size == len(pieces)
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(TEMPLATE)


@pytest.fixture(scope="module")
def spm_gguf(tmp_path_factory):
    """(directory, file name, transformers model) of a tiny random Llama whose GGUF has the SPM vocabulary
    (hidden 256 over 4 heads: transformers derives head_dim 64 from them, not from the key length)."""
    import transformers

    hf_dir = str(tmp_path_factory.mktemp("spm_hf"))
    config = transformers.LlamaConfig(
        vocab_size=len(VOCAB[0]), hidden_size=256, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=256,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.15)
    torch.manual_seed(1)
    model = transformers.LlamaForCausalLM(config).float().eval()
    model.save_pretrained(hf_dir, safe_serialization=True)
    out_dir = str(tmp_path_factory.mktemp("spm_gguf"))
    write_gguf(hf_dir, model, os.path.join(out_dir, "spm.gguf"), write_metadata=write_spm_tokenizer)
    return out_dir, "spm.gguf", model


@pytest.fixture(scope="module")
def hf_tokenizer(spm_gguf):
    from transformers import AutoTokenizer

    directory, name, _ = spm_gguf
    return AutoTokenizer.from_pretrained(directory, gguf_file=name)


@pytest.fixture(scope="module")
def llm(spm_gguf):
    directory, name, _ = spm_gguf
    return LLM(os.path.join(directory, name), dtype=torch.float32, device="cpu", attention_backend="torch",
               op_backend="torch")


@pytest.mark.parametrize("text", TEXTS, ids=[f"text{i}" for i in range(len(TEXTS))])
def test_encode_decode_match_transformers(llm, hf_tokenizer, text):
    tok = llm.tokenizer
    ids = tok.encode(text)
    assert ids == hf_tokenizer(text).input_ids
    assert tok.encode(text, add_special_tokens=False) == hf_tokenizer(text, add_special_tokens=False).input_ids
    assert tok.decode(ids, skip_special_tokens=False) == hf_tokenizer.decode(ids, skip_special_tokens=False)
    assert tok.decode(ids) == hf_tokenizer.decode(ids, skip_special_tokens=True)


def test_vocabulary_conventions(llm):
    """BOS first, "▁" word prefix, byte fallback for characters without a piece, decode inverts encode."""
    tok = llm.tokenizer
    pieces = VOCAB[0]
    ids = tok.encode("the sea")
    assert ids[0] == 1 and pieces[ids[1]].startswith("▁")
    ids = tok.encode("日", add_special_tokens=False)
    assert [pieces[i] for i in ids] == ["▁", "<0xE6>", "<0x97>", "<0xA5>"]
    for text in TEXTS[:7]:  # a leading space merges into the prepended "▁" and is lost, as in transformers
        assert tok.decode(tok.encode(text)) == (text[1:] if text.startswith(" ") else text)
    assert tok.vocab_size == len(pieces) and tok.eos_token_ids == (2,)


def test_chat_template_matches_transformers(llm, hf_tokenizer):
    messages = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "the world"},
                {"role": "user", "content": "and the sea?"}]
    expected = hf_tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    expected = expected["input_ids"] if hasattr(expected, "keys") else expected
    assert llm.tokenizer.apply_chat_template(messages) == list(expected)


def test_greedy_matches_transformers(spm_gguf, llm, hf_tokenizer):
    """The engine on the GGUF file gives transformers' greedy tokens (transformers loads the same file)."""
    from transformers import AutoModelForCausalLM

    directory, name, _ = spm_gguf
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval()
    prompts = [llm.tokenizer.encode(t) for t in ("hello world", "the quick brown fox jumps over the lazy dog")]
    outs = llm.generate(prompts, SamplingParams(max_tokens=8, ignore_eos=True))
    for prompt, out in zip(prompts, outs):
        assert prompt == hf_tokenizer(hf_tokenizer.decode(prompt[1:])).input_ids
        assert out.token_ids == hf_greedy(model, prompt, 8)
