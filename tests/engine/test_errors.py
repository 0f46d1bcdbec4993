"""Bad inputs fail with one clear message (API: exceptions naming the argument; CLI: one line, exit 2)."""

import json
import os
import shutil

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.cli import main
from tritium.ops.prefetch import bulk_prefetch_supported
from tritium.engine import UnsupportedModelError


def cli(capsys, *args):
    code = main(["generate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LLM(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        LLM(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"has no \*.safetensors weights"):
        LLM(str(tmp_path))
    (tmp_path / "model.bin").write_text("")
    with pytest.raises(FileNotFoundError, match="is not a .gguf file"):
        LLM(str(tmp_path / "model.bin"))


def test_unsupported_architecture(tmp_path, tiny_models):
    path, _ = tiny_models["llama"]
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(architectures=["GPT2LMHeadModel"], model_type="gpt2")
    for name in os.listdir(path):
        if name != "config.json":
            os.symlink(os.path.join(path, name), tmp_path / name)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModelError, match=r"architecture \['GPT2LMHeadModel'\] is not supported"):
        LLM(str(tmp_path))
    cfg.pop("rope_parameters", None)
    cfg.update(architectures=["LlamaForCausalLM"], model_type="llama", rope_scaling={"rope_type": "longrope",
                                                                                    "factor": 2.0})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModelError, match="rope scaling 'longrope' is not supported"):
        LLM(str(tmp_path))


@pytest.fixture(scope="module")
def small_llm(tiny_models):
    return LLM(tiny_models["llama"][0], dtype=torch.float32, max_model_len=32)


def test_bad_prompts(small_llm):
    with pytest.raises(ValueError, match=r"prompts\[1\] has 40 tokens; the context holds 32 \(max_model_len\)"):
        small_llm.generate(["w1", " ".join(["w2"] * 40)])
    with pytest.raises(ValueError, match=r"prompts\[0\] is empty"):
        small_llm.generate([[]])
    with pytest.raises(ValueError, match=r"prompts\[0\] has token id 9999 outside the vocabulary \[0, 253\)"):
        small_llm.generate([[1, 9999]])
    with pytest.raises(ValueError, match="sampling_params has 2 entries, prompts has 1"):
        small_llm.generate(["w1"], [SamplingParams(), SamplingParams()])
    # JSON's lone surrogate escapes make such strings; the Rust tokenizer took them with a bare TypeError
    with pytest.raises(ValueError, match=r"lone UTF-16 surrogate \(U\+D800\) at character 3"):
        small_llm.generate(["w1 \ud800"])
    with pytest.raises(ValueError, match=r"prompts\[0\] must be a string or a list of token ids, got list holding "
                                         r"float 1.5"):
        small_llm.generate([[1.5, 2]])
    # params that fail the engine's checks at prompt 1: named by its index, and prompt 0 is not left queued
    with pytest.raises(ValueError, match=r"stop_token_ids of prompts\[1\] has token id 1000000 outside"):
        small_llm.generate(["w1", "w2"], [SamplingParams(max_tokens=20, ignore_eos=True),
                                          SamplingParams(stop_token_ids=[10**6])])
    assert small_llm.engine.num_unfinished == 0
    for messages in ("w1 w2", {"role": "user", "content": "w1"}):
        with pytest.raises(ValueError, match=r"messages must be a list of message dicts, or a list of such lists"):
            small_llm.chat(messages)


def test_generation_stops_at_the_context_length(small_llm):
    out = small_llm.generate([[5] * 30], SamplingParams(max_tokens=10))[0]
    assert len(out.token_ids) == 2 and out.finish_reason == "length"


def test_engine_settings():
    from tritium.engine import EngineConfig

    with pytest.raises(ValueError, match="block_size must be a positive multiple of 16, got 24"):
        EngineConfig(block_size=24).validate()
    with pytest.raises(ValueError, match="attention_backend must be 'triton', 'torch' or None, got 'cuda'"):
        EngineConfig(attention_backend="cuda").validate()
    with pytest.raises(ValueError, match="linear_backend must be 'auto', 'triton', 'torch' or None, got 'cublas'"):
        EngineConfig(linear_backend="cublas").validate()


def test_cli_errors_are_one_line(capsys, tiny_models, tmp_path):
    path, _ = tiny_models["llama"]
    cases = [
        (["--model", str(tmp_path / "missing"), "hi"], "does not exist"),
        (["--model", path, "--temperature", "-1", "hi"], "temperature must be a number >= 0, got -1.0"),
        (["--model", path, "--max-tokens", "0", "hi"], "--max-tokens must be >= 1, got 0"),
        (["--model", path, "--max-model-len", "8", "--raw", " ".join(["w3"] * 9)],
         r"prompt has 9 tokens; the context holds 8"),
    ]
    for args, message in cases:
        code, out, err = cli(capsys, *args)
        assert code == 2 and out == ""
        assert err.startswith("tritium: error: ") and message in err and err.count("\n") == 1, err


def test_cli_generates(capsys, tiny_models):
    path, _ = tiny_models["qwen2"]
    code, out, err = cli(capsys, "--model", path, "--max-tokens", "5", "w1 w2")
    assert code == 0
    assert len(out.split()) == 5
    assert "tokens/s" in err


@pytest.mark.parametrize("kwargs, error, message", [
    ({"block_size": "16"}, TypeError, "block_size must be an int, got '16'"),
    ({"max_num_seqs": 2.0}, TypeError, "max_num_seqs must be an int, got 2.0"),
    ({"max_model_len": 0}, ValueError, "max_model_len must be >= 1 or None, got 0"),
    ({"max_model_len": -8}, ValueError, "max_model_len must be >= 1 or None, got -8"),
    ({"kv_cache_memory": 1.5e9}, TypeError, "kv_cache_memory must be an int"),
    ({"kv_cache_memory": -1}, ValueError, "kv_cache_memory must be >= 1 or None, got -1"),
    ({"dtype": "float16"}, TypeError, "dtype must be None or one of torch.float32, torch.float16, torch.bfloat16"),
    ({"dtype": torch.int8}, TypeError, "dtype must be None or one of"),
    ({"gpu_memory_utilization": "0.5"}, TypeError, "gpu_memory_utilization must be a float"),
    ({"weight_prefetch": "yes"}, TypeError, "weight_prefetch must be True or False or None, got 'yes'"),
    ({"cuda_graphs": 1}, TypeError, "cuda_graphs must be True or False, got 1"),
    ({"warmup_attention": "no"}, TypeError, "warmup_attention must be True or False, got 'no'"),
    ({"decode_steps": 0}, ValueError, r"decode_steps must be in \[1, 64\], got 0"),
    ({"decode_steps": 2.0}, TypeError, "decode_steps must be an int, got 2.0"),
], ids=["block_size-str", "max_num_seqs-float", "max_model_len-0", "max_model_len-neg", "kv_cache_memory-float",
        "kv_cache_memory-neg", "dtype-str", "dtype-int8", "gpu_memory_utilization-str", "weight_prefetch-str",
        "cuda_graphs-int", "warmup_attention-str", "decode_steps-0", "decode_steps-float"])
def test_engine_settings_name_the_argument(tiny_models, kwargs, error, message):
    """Checked before any weight is loaded, not as a traceback from deep inside the model."""
    with pytest.raises(error, match=message):
        LLM(tiny_models["llama"][0], **kwargs)


def test_model_prefetch_plan_is_checked(tiny_models):
    assert LLM(tiny_models["llama"][0], max_model_len=32).engine.config.weight_prefetch is False  # opt-in
    llm = LLM(tiny_models["llama"][0], max_model_len=32, weight_prefetch=None)
    model = llm.engine.model
    on = bulk_prefetch_supported(model.device)  # False on the CPU: nothing to prefetch into
    assert llm.engine.config.weight_prefetch is on
    assert model.enable_prefetch() is on and (model.prefetcher is not None) is on
    assert model.prefetch_plan == ({"o_proj": None} if on else {})
    with pytest.raises(ValueError, match=r"unknown projections \['q_proj'\]"):
        model.enable_prefetch({"q_proj": None})
    with pytest.raises(ValueError, match=r"prefetch plan\['o_proj'\] must be a byte count >= 0 or None"):
        model.enable_prefetch({"o_proj": -5})


def test_max_model_len_past_the_models_context_is_lowered_with_a_warning(tiny_models, caplog):
    path, _ = tiny_models["llama"]
    with caplog.at_level("WARNING", logger="tritium.engine.llm_engine"):
        llm = LLM(path, dtype=torch.float32, max_model_len=10**7)
    context = llm.engine.model_config.max_position_embeddings
    assert llm.engine.max_model_len == context
    assert f"max_model_len 10000000 is past the model's context of {context} tokens" in caplog.text


def test_corrupt_files_are_named(tiny_models, tmp_path):
    """A checkpoint's files truncated or corrupt: one ValueError naming the file, not a library's internals."""
    path, hf = tiny_models["llama"]

    def copy(name: str, content=None, cut: int | None = None) -> str:
        d = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        shutil.copytree(path, d)
        if content is not None:
            (d / name).write_text(content)
        if cut is not None:
            data = (d / name).read_bytes()
            (d / name).write_bytes(data[:cut if cut >= 0 else len(data) + cut])
        return str(d)

    config = json.loads(open(os.path.join(path, "config.json")).read())
    cases = [
        (copy("model.safetensors", cut=100), r"model.safetensors' is not a readable safetensors file"),
        (copy("config.json", "{"), r"config.json' is not valid JSON"),
        (copy("config.json", "[]"), r"config.json' must hold a JSON object, got list"),
        (copy("config.json", json.dumps({k: v for k, v in config.items() if k != "hidden_size"})),
         r"config.json' has no 'hidden_size'"),
        (copy("config.json", json.dumps({**config, "num_attention_heads": "4"})),
         r"config.json' has a field of an unexpected type"),
        (copy("tokenizer.json", "{1: 2}"), r"tokenizer.json' is not a readable tokenizer"),
        (copy("tokenizer_config.json", "{"), r"tokenizer_config.json' is not valid JSON"),
        (copy("generation_config.json", "{"), r"generation_config.json' is not valid JSON"),
    ]
    for source, message in cases:
        with pytest.raises(ValueError, match=message):
            LLM(source, dtype=torch.float32)
    from .test_gguf_loading import write_gguf  # (here, after the rest: where gguf is missing, this part skips)

    gguf_path = str(tmp_path / "model.gguf")
    write_gguf(path, hf, gguf_path)
    data = open(gguf_path, "rb").read()
    for cut in (len(data) // 2, len(data) - 1):
        short = str(tmp_path / f"short{cut}.gguf")
        open(short, "wb").write(data[:cut])
        with pytest.raises(ValueError, match=r"is truncated or not a valid GGUF file"):
            LLM(short, dtype=torch.float32)
