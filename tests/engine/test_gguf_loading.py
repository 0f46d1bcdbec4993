"""GGUF loading on tiny models: the HF checkpoint written as GGUF the way llama.cpp's converter does
(Q/K permuted for the llama architecture, llama3 rope scaling as a rope_freqs tensor, tied embeddings
without an output tensor) loads to the same model: same greedy tokens as the safetensors directory."""

import os
import re

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tritium import LLM, SamplingParams
from tritium.models.config import UnsupportedModelError
from tritium.models.rope import rope_inv_freq
from tritium.models.weights import unpermute_rope

from .conftest import PROMPTS, make_tiny_model

gguf = pytest.importorskip("gguf")

NAMES = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
         "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
         "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
         "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
         "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
         "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
         "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
         "mlp.gate.weight": "ffn_gate_inp.weight", "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
         "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
         "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
         "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
         "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight"}
# Gemma's norms (llama.cpp's names; its converter stores each norm weight plus 1)
GEMMA_NAMES = dict(NAMES, **{"post_attention_layernorm.weight": "post_attention_norm.weight",
                             "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                             "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
PHI3_NAMES = dict(NAMES, **{"self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"})
EXPERT_NAMES = {"w1": "ffn_gate_exps.weight", "gate_proj": "ffn_gate_exps.weight", "w3": "ffn_up_exps.weight",
                "up_proj": "ffn_up_exps.weight", "w2": "ffn_down_exps.weight", "down_proj": "ffn_down_exps.weight"}


def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf's ``LlamaModel.permute``."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_word_tokenizer(w, vocab_size: int, bos: int = 1, eos: int = 2) -> None:
    """The conftest word vocabulary as a ``gpt2`` GGUF tokenizer (no merges: every word is a token)."""
    vocab = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(vocab_size - 3)]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(vocab)
    w.add_token_types([3, 3, 3] + [1] * (len(vocab) - 3))
    w.add_token_merges([])
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)


def write_gguf(hf_dir: str, hf_model, out: str, write_metadata=None, q8_0=()) -> None:
    """Write the HF checkpoint in ``hf_dir`` as a GGUF file; ``write_metadata(writer, vocab_size)`` writes
    the tokenizer metadata and any other keys a test needs (default: :func:`write_word_tokenizer`). ``q8_0``:
    GGUF names of tensors written quantized to Q8_0."""
    cfg = hf_model.config
    arch = {"mixtral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "gemma3_text": "gemma3"}.get(
        cfg.model_type, cfg.model_type)  # llama.cpp's
    gemma = arch in ("gemma2", "gemma3")
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w = gguf.GGUFWriter(out, arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    experts = getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)
    if experts:
        w.add_expert_count(experts)
        w.add_expert_used_count(cfg.num_experts_per_tok)
        if arch in ("qwen2moe", "qwen3moe"):
            w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
        if arch == "qwen2moe":
            w.add_expert_shared_feed_forward_length(cfg.shared_expert_intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    rope = getattr(cfg, "rope_parameters", None) or {"rope_theta": cfg.rope_theta, **(cfg.rope_scaling or {})}
    rope = rope.get("full_attention", rope)  # Gemma 3: the full layers' (llama.cpp fixes the sliding ones' base)
    w.add_rope_freq_base(rope["rope_theta"])
    if rope.get("rope_type") == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope["factor"])
    if arch == "phi3":
        w.add_rope_dimension_count(head_dim)
        w.add_sliding_window(cfg.sliding_window or 0)  # 0: none (Phi-4), as llama.cpp's converter writes it
    if gemma:
        w.add_sliding_window(cfg.sliding_window)
        if cfg.attn_logit_softcapping:
            w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
        if cfg.final_logit_softcapping:
            w.add_final_logit_softcapping(cfg.final_logit_softcapping)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    (write_metadata or write_word_tokenizer)(w, cfg.vocab_size)
    tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
    if rope.get("rope_type") == "llama3":
        base = rope_inv_freq(head_dim, rope["rope_theta"])
        w.add_tensor("rope_freqs.weight", (base / rope_inv_freq(head_dim, rope["rope_theta"], rope)).numpy())
    stacked = {}  # (layer, GGUF name) -> {expert: array}: llama.cpp stacks every expert's projection
    for name, t in tensors.items():
        a = t.float().numpy()
        m = re.fullmatch(r"model\.layers\.(\d+)\.(?:mlp|block_sparse_moe)\.experts\.(\d+)\.(\w+)\.weight", name)
        if m:
            stacked.setdefault((m.group(1), EXPERT_NAMES[m.group(3)]), {})[int(m.group(2))] = a
            continue
        if name == "model.embed_tokens.weight":
            w.add_tensor("token_embd.weight", a)
        elif name == "model.norm.weight":
            w.add_tensor("output_norm.weight", a + 1 if gemma else a)
        elif name == "lm_head.weight":
            w.add_tensor("output.weight", a)
        else:
            layer, key = name[len("model.layers."):].split(".", 1)
            if arch == "llama" and key.startswith("self_attn.q_proj"):
                a = llama_cpp_permute(a, cfg.num_attention_heads)
            elif arch == "llama" and key.startswith("self_attn.k_proj"):
                a = llama_cpp_permute(a, cfg.num_key_value_heads)
            if key == "mlp.shared_expert_gate.weight":
                a = a.reshape(-1)  # llama.cpp stores the shared expert's gate as a [hidden] vector
            if gemma and key.endswith("norm.weight"):
                a = a + 1
            names = GEMMA_NAMES if gemma else PHI3_NAMES if arch == "phi3" else NAMES
            w.add_tensor(f"blk.{layer}.{names[key]}", a)
    for (layer, key), by_expert in stacked.items():
        a, name = np.stack([by_expert[e] for e in range(len(by_expert))]), f"blk.{layer}.{key}"
        if name in q8_0:
            q8 = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(name, gguf.quants.quantize(a, q8), raw_dtype=q8)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("model_type,overrides", [
    # llama.cpp scales Gemma's scores by head_dim below 27B (the file has no query_pre_attn_scalar)
    ("gemma2", dict(query_pre_attn_scalar=64)),
    # and puts Gemma 3's full layer sixth of every six
    ("gemma3_text", dict(num_hidden_layers=6, layer_types=["sliding_attention"] * 5 + ["full_attention"])),
])
def test_gguf_gemma_equals_safetensors(tmp_path, model_type, overrides):
    """Gemma 2 and 3 as llama.cpp writes them (norms plus 1, its norm names, softcaps and window in the
    metadata, Gemma 3's linear rope scaling of the full layers): the safetensors directory's tokens."""
    path = str(tmp_path / "hf")
    os.makedirs(path)
    hf = make_tiny_model(path, model_type, **overrides)
    gguf_path = str(tmp_path / f"{model_type}.gguf")
    write_gguf(path, hf, gguf_path)
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    from_dir = LLM(path, dtype=torch.float32).generate(PROMPTS, params)
    llm = LLM(gguf_path, dtype=torch.float32)
    cfg = llm.engine.model_config
    assert (cfg.model_type, cfg.layer_types, cfg.norm_weight_offset) == (model_type, tuple(hf.config.layer_types), 0.0)
    assert cfg.attention_scale == 64 ** -0.5 and cfg.final_logit_softcapping == hf.config.final_logit_softcapping
    from_gguf = llm.generate([o.prompt_token_ids for o in from_dir], params)
    assert [o.token_ids for o in from_gguf] == [o.token_ids for o in from_dir]


@pytest.mark.parametrize("window", [6, None], ids=["phi3-window", "phi4-none"])
def test_gguf_phi3_equals_safetensors(tmp_path, window):
    """Phi-3 / Phi-4 as llama.cpp writes them (fused attn_qkv, gate and up in ffn_up, a window of 0 for none):
    the safetensors directory's tokens; rope over part of each head (Phi-4-mini) is refused by name."""
    path = str(tmp_path / "hf")
    os.makedirs(path)
    hf = make_tiny_model(path, "phi3", sliding_window=window)
    gguf_path = str(tmp_path / "phi3.gguf")
    write_gguf(path, hf, gguf_path)
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    from_dir = LLM(path, dtype=torch.float32).generate(PROMPTS, params)
    llm = LLM(gguf_path, dtype=torch.float32)
    assert (llm.engine.model_config.model_type, llm.engine.model_config.sliding_window) == ("phi3", window)
    from_gguf = llm.generate([o.prompt_token_ids for o in from_dir], params)
    assert [o.token_ids for o in from_gguf] == [o.token_ids for o in from_dir]

    def partial(w, vocab):
        write_word_tokenizer(w, vocab)
        w.add_rope_dimension_count(48)  # a second one: the reader keeps the last
    write_gguf(path, hf, str(tmp_path / "partial.gguf"), write_metadata=partial)
    with pytest.raises(UnsupportedModelError, match="rope over 48 of each head's 64 dimensions"):
        LLM(str(tmp_path / "partial.gguf"), dtype=torch.float32)


def test_unpermute_inverts_llama_cpp_permute():
    w = np.arange(6 * 64 * 5, dtype=np.float32).reshape(6 * 64, 5)
    assert np.array_equal(unpermute_rope(llama_cpp_permute(w, 6), 6), w)


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3"])
def test_gguf_equals_safetensors(tiny_models, tmp_path, model_type):
    path, hf = tiny_models[model_type]
    gguf_path = str(tmp_path / f"{model_type}.gguf")
    write_gguf(path, hf, gguf_path)
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    from_dir = LLM(path, dtype=torch.float32).generate([PROMPTS[1], PROMPTS[3]], params)
    llm = LLM(gguf_path, dtype=torch.float32)
    assert llm.engine.model_config.tie_word_embeddings == (model_type != "llama")
    assert llm.engine.model_config.attention_bias == (model_type == "qwen2")
    assert llm.engine.model_config.qk_norm == (model_type == "qwen3")
    assert llm.engine.model_config.head_dim == 64
    from_gguf = llm.generate([o.prompt_token_ids for o in from_dir], params)
    assert [o.token_ids for o in from_gguf] == [o.token_ids for o in from_dir]
    assert llm.tokenizer.vocab_size == hf.config.vocab_size


@pytest.mark.parametrize("model_type", ["mixtral", "qwen3_moe", "qwen2_moe"])
def test_gguf_moe_equals_safetensors(tmp_path, model_type):
    """Mixtures of experts as llama.cpp writes them (Mixtral as the llama architecture with experts, Q/K
    permuted; qwen3moe; qwen2moe with its shared expert, the shared gate a vector; every expert's projection
    stacked into one [E, ...] tensor, one of them quantized to Q8_0 in both files): the same greedy tokens as
    the safetensors directory, the Triton path."""
    hf_dir = str(tmp_path / "hf")
    os.makedirs(hf_dir)
    hf = make_tiny_model(hf_dir, model_type)
    # layer 0's up projections quantized to Q8_0 in the GGUF file and rounded the same way in the directory
    tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
    q8 = gguf.GGMLQuantizationType.Q8_0
    for name in [n for n in tensors if re.fullmatch(r"model\.layers\.0\..*experts\.\d+\.(w3|up_proj)\.weight", n)]:
        rounded = gguf.quants.dequantize(gguf.quants.quantize(tensors[name].numpy(), q8), q8)
        tensors[name] = torch.from_numpy(np.ascontiguousarray(rounded.reshape(tensors[name].shape)))
    save_file(tensors, os.path.join(hf_dir, "model.safetensors"), metadata={"format": "pt"})
    gguf_path = str(tmp_path / f"{model_type}.gguf")
    write_gguf(hf_dir, hf, gguf_path, q8_0={"blk.0.ffn_up_exps.weight"})
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    from_dir = LLM(hf_dir, dtype=torch.float32).generate([PROMPTS[1], PROMPTS[3]], params)
    llm = LLM(gguf_path, dtype=torch.float32)
    cfg = llm.engine.model_config
    experts = getattr(hf.config, "num_local_experts", None) or hf.config.num_experts
    assert (cfg.model_type, cfg.num_experts, cfg.num_experts_per_tok) == (
        model_type, experts, hf.config.num_experts_per_tok)
    assert cfg.shared_expert_intermediate_size == getattr(hf.config, "shared_expert_intermediate_size", 0)
    from_gguf = llm.generate([o.prompt_token_ids for o in from_dir], params)
    assert [o.token_ids for o in from_gguf] == [o.token_ids for o in from_dir]


@pytest.mark.parametrize("kind", ["F64", "I32"])
def test_gguf_tensor_type_not_dequantizable_is_named(tiny_models, tmp_path, monkeypatch, kind):
    """A tensor stored as F64 or an integer type (the gguf package dequantizes neither; Q8_1 and Q8_K neither):
    ValueError naming the tensor and its type before any weight loads (was: gguf's NotImplementedError from
    inside the package, naming no tensor)."""
    path, hf = tiny_models["llama"]
    add_tensor = gguf.GGUFWriter.add_tensor

    def widened(self, name, tensor, *args, **kwargs):
        if name.endswith("ffn_down.weight"):
            tensor = tensor.astype(np.float64 if kind == "F64" else np.int32)
        return add_tensor(self, name, tensor, *args, **kwargs)

    monkeypatch.setattr(gguf.GGUFWriter, "add_tensor", widened)
    write_gguf(path, hf, str(tmp_path / "m.gguf"))
    monkeypatch.undo()
    with pytest.raises(ValueError, match=rf"GGUF tensor 'blk.0.ffn_down.weight' \(and 1 more tensors\) is stored as "
                                         rf"{kind}, which tritium cannot dequantize"):
        LLM(str(tmp_path / "m.gguf"), dtype=torch.float32)


@pytest.mark.parametrize("past", ["bos-eot", "every-stop-id"])
def test_gguf_special_token_ids_outside_the_vocabulary_load(tiny_models, tmp_path, caplog, past):
    """A file whose special token ids lie past its vocabulary, which llama.cpp loads with a warning ("bad special
    token") and ignores them: loads with a warning naming the file, the key, the id and the vocabulary's size (was:
    refused; before that, the GGUF tokenizer's BOS lookup raised an IndexError). The ids kept, end of turn and end
    of message included, are the engine's stop set, as llama.cpp's end-of-generation set (was: the tokenizer's EOS
    alone, though the model config held the end-of-turn id); with none kept a warning says so."""
    path, hf = tiny_models["llama"]
    n = hf.config.vocab_size
    ids = {"bos-eot": dict(bos=n + 3, eos=2, eot=n, eom=7), "every-stop-id": dict(bos=1, eos=n + 1, eot=n, eom=-1)}
    ids = ids[past]

    def metadata(w, vocab_size):
        write_word_tokenizer(w, vocab_size, bos=ids["bos"], eos=ids["eos"])
        w.add_add_bos_token(True)
        w.add_uint32("tokenizer.ggml.eot_token_id", ids["eot"])
        w.add_int32("tokenizer.ggml.eom_token_id", ids["eom"])

    file = str(tmp_path / "m.gguf")
    write_gguf(path, hf, file, metadata)
    with caplog.at_level("WARNING", logger="tritium.models.config"):
        llm = LLM(file, dtype=torch.float32)
    warned = [r.getMessage() for r in caplog.records if r.name == "tritium.models.config"]
    ignored = [k for k in ("eos", "eot", "eom", "bos") if not 0 <= ids[k] < n]
    assert warned[:len(ignored)] == [f"{file!r}: GGUF metadata tokenizer.ggml.{k}_token_id = {ids[k]} is not a token "
                                     f"id of the vocabulary ({n} tokens): ignored, as llama.cpp ignores it"
                                     for k in ignored]
    stop = {ids[k] for k in ("eos", "eot", "eom") if 0 <= ids[k] < n}
    assert llm.engine.eos_token_ids == stop and set(llm.engine.model_config.eos_token_ids) == stop
    assert len(warned) == len(ignored) + (not stop)
    if not stop:
        assert "names no end-of-generation token within the vocabulary" in warned[-1]
    assert llm.engine.model_config.bos_token_id == (None if past == "bos-eot" else 1)
    assert llm.tokenizer.bos_token == (None if past == "bos-eot" else "<s>")
    assert llm.tokenizer.encode("") == ([] if past == "bos-eot" else [1])  # add_bos_token: a BOS the file names
    assert len(llm.generate([[5, 6, 7]], SamplingParams(max_tokens=3, ignore_eos=True))[0].token_ids) == 3
