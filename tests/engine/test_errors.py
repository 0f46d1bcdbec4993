"""Bad inputs fail with one clear message (API: exceptions naming the argument; CLI: one line, exit 2)."""

import json
import os
import re
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
    with pytest.raises(ValueError, match=r"^prompt must be a string \(the user's message\), got list$"):
        small_llm.encode_chat([{"role": "user", "content": "w1"}])
    with pytest.raises(ValueError, match=r"^system must be a string or None, got int$"):
        small_llm.encode_chat("w1", system=3)
    # not a prompt nor a list of them: named, not a TypeError, nor a dict's keys or a set's order taken as prompts
    for prompts, name in ((None, "NoneType"), (5, "int"), ({"w1": 1}, "dict"), ({"w1", "w2"}, "set"),
                          (torch.tensor([3, 4]), "Tensor")):
        with pytest.raises(ValueError, match=rf"prompts must be a string, a list of token ids, or a list of them, "
                                             rf"got {name}$"):
            small_llm.generate(prompts)
        with pytest.raises(ValueError, match=rf"prompts must be .* got {name}$"):
            small_llm.embed(prompts)
    assert [o.text for o in small_llm.generate(p for p in ("w1", "w2"))] == \
        [o.text for o in small_llm.generate(["w1", "w2"])]  # any other iterable of prompts is taken in order


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
        (["--model", path, "--temperature", "-1", "hi"], "temperature must be a finite number >= 0, got -1.0"),
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
    ({"dtype": "float64"}, ValueError,
     "dtype must be None or one of torch.float32, torch.float16, torch.bfloat16 or their names"),
    ({"dtype": torch.int8}, TypeError, "dtype must be None or one of"),
    ({"gpu_memory_utilization": "0.5"}, TypeError, "gpu_memory_utilization must be a float"),
    ({"weight_prefetch": "yes"}, TypeError, "weight_prefetch must be True or False or None, got 'yes'"),
    ({"cuda_graphs": 1}, TypeError, "cuda_graphs must be True or False, got 1"),
    ({"warmup_attention": "no"}, TypeError, "warmup_attention must be True or False, got 'no'"),
    ({"decode_steps": 0}, ValueError, r"decode_steps must be in \[1, 64\], got 0"),
    ({"decode_steps": 2.0}, TypeError, "decode_steps must be an int, got 2.0"),
    # (a GPU missing here was torch's AssertionError "Torch not compiled with CUDA enabled" at the first tensor)
    ({"device": "cuda:999"}, ValueError, r"^device 'cuda:999': (no CUDA GPU is available here|this machine has \d+)"),
    ({"device": "tpu"}, ValueError, r"^device must be 'cpu', 'cuda' or 'cuda:N' \(or a torch.device of them\), got "
                                    r"'tpu'$"),
    ({"device": "meta"}, ValueError, r"^device must be 'cpu', 'cuda' or 'cuda:N'"),
], ids=["block_size-str", "max_num_seqs-float", "max_model_len-0", "max_model_len-neg", "kv_cache_memory-float",
        "kv_cache_memory-neg", "dtype-str", "dtype-int8", "gpu_memory_utilization-str", "weight_prefetch-str",
        "cuda_graphs-int", "warmup_attention-str", "decode_steps-0", "decode_steps-float", "device-missing-gpu",
        "device-str", "device-meta"])
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


def _copy_model(src: str, dst, **replace: str) -> str:
    """A copy of model directory ``src`` in ``dst`` (symlinks), with files ``replace`` says written anew."""
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name not in replace:
            os.symlink(os.path.join(src, name), os.path.join(dst, name))
    for name, text in replace.items():
        (dst / name).write_text(text)
    return str(dst)


def test_eos_named_only_in_tokenizer_config_stops_and_stays_out_of_text(small_llm, tiny_models, tmp_path):
    """The tiny models name EOS ("</s>", a plain word of tokenizer.json) only in tokenizer_config.json: generation
    stops there and its text is no part of the answer, as for an EOS that config.json names."""
    engine = small_llm.engine
    assert engine.model_config.eos_token_ids == () and engine.eos_token_ids == {2}
    out = small_llm.generate(["w1 w2"], SamplingParams(max_tokens=5, logit_bias={2: 100.0}))[0]
    assert (out.token_ids, out.text, out.finish_reason) == ([2], "", "stop")
    # ignore_eos: EOS tokens go on, and stay out of the text (a special token, as transformers loads it)
    out = small_llm.generate(["w1 w2"], SamplingParams(max_tokens=3, ignore_eos=True, logit_bias={2: 100.0}))[0]
    assert (out.token_ids, out.text) == ([2, 2, 2], "")
    assert small_llm.tokenizer.decode([5, 2, 6]) == "w2 w3"
    # generation_config.json names another: generation stops at either
    path = _copy_model(tiny_models["llama"][0], tmp_path / "both",
                       **{"generation_config.json": json.dumps({"eos_token_id": 7})})
    llm = LLM(path, dtype=torch.float32, max_model_len=32)
    assert llm.engine.eos_token_ids == {7, 2}
    for eos in (2, 7):
        out = llm.generate(["w1"], SamplingParams(max_tokens=5, logit_bias={eos: 100.0}))[0]
        assert (out.token_ids, out.text, out.finish_reason) == ([eos], "", "stop")


def test_kv_cache_larger_than_memory_is_refused(tiny_models, monkeypatch):
    """num_blocks or kv_cache_memory past the memory there is: a ValueError naming it, the bytes and what is
    available, before the cache is allocated (not torch's allocation error, nor a cache of 2^17 pages)."""
    path, _ = tiny_models["llama"]
    per_page = 2 * 2 * 16 * 2 * 64 * 4  # K and V, 2 layers, 16 tokens, 2 KV heads of 64, fp32
    with pytest.raises(ValueError, match=rf"num_blocks=1000000000 needs {(10**9 + 1) * per_page} bytes .* of KV "
                                         rf"cache \({per_page} bytes a page of 16 tokens\), more than the \d+ bytes "
                                         r".* of (available system memory|free memory of cuda:\d+)"):
        LLM(path, dtype=torch.float32, num_blocks=10**9)
    with pytest.raises(ValueError, match=r"kv_cache_memory=1125899906842624 is more than the \d+ bytes .* of "
                                         r"(available system memory|free memory of cuda:\d+)"):
        LLM(path, dtype=torch.float32, kv_cache_memory=1 << 50)
    from tritium.engine import llm_engine

    # with 1 MiB available: 31 pages (and the scratch page) fit, 32 do not
    monkeypatch.setattr(llm_engine, "available_memory", lambda device: (1 << 20, "available system memory"))
    assert LLM(path, dtype=torch.float32, num_blocks=31, max_model_len=32).engine.config.num_blocks == 31
    with pytest.raises(ValueError, match=rf"num_blocks=32 needs {33 * per_page} bytes \(0.00 GiB\) of KV cache .*"
                                         r"more than the 1048576 bytes \(0.00 GiB\) of available system memory"):
        LLM(path, dtype=torch.float32, num_blocks=32, max_model_len=32)
    with pytest.raises(ValueError, match=r"kv_cache_memory=1048577 is more than the 1048576 bytes"):
        LLM(path, dtype=torch.float32, kv_cache_memory=(1 << 20) + 1)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"kv_cache_memory": 0}, ValueError, "kv_cache_memory must be >= 1 or None, got 0"),
    ({"kv_cache_memory": "1GB"}, TypeError, "kv_cache_memory must be an int, got '1GB'"),
    ({"num_blocks": 0}, ValueError, "num_blocks must be >= 1 or None, got 0"),
], ids=["kv_cache_memory-0", "kv_cache_memory-str", "num_blocks-0"])
def test_kv_cache_settings_name_the_argument(tiny_models, kwargs, error, message):
    with pytest.raises(error, match=message):
        LLM(tiny_models["llama"][0], **kwargs)


def test_window_pool_too_small_is_refused_at_construction(tmp_path):
    """A window pool that a sequence could outgrow (its window and one step's chunk) fails at construction,
    naming num_window_blocks and the minimum, not at the first step; the minimum runs long requests."""
    from .conftest import WORDS, make_tiny_model

    make_tiny_model(str(tmp_path), "gemma3_text")  # a window of 6 tokens on 3 of 4 layers
    kw = dict(dtype=torch.float32, num_blocks=64)
    # ceil((6 + 24) / 16) + 1 pages: the window and a chunk of 24 tokens after it
    with pytest.raises(ValueError, match=r"num_window_blocks=2 is too small for this model: a sequence holds up to 3 "
                                         r"pages of 16 tokens there: its sliding window of 6 tokens and one step's "
                                         r"max_num_batched_tokens=24 tokens.*give num_window_blocks >= 3 \(or 0"):
        LLM(str(tmp_path), num_window_blocks=2, max_num_batched_tokens=24, **kw)
    # the default step of 2048 tokens: the whole context of 256 tokens
    with pytest.raises(ValueError, match=r"num_window_blocks=15 is too small.*max_model_len=256 tokens where that "
                                         r"is less; give num_window_blocks >= 16"):
        LLM(str(tmp_path), num_window_blocks=15, **kw)
    llm = LLM(str(tmp_path), num_window_blocks=3, max_num_batched_tokens=24, **kw)
    out = llm.generate([" ".join(WORDS[3:50])], SamplingParams(max_tokens=30, ignore_eos=True))[0]
    assert len(out.token_ids) == 30


def test_gguf_extension_in_capitals(tiny_models, tmp_path):
    from .test_gguf_loading import write_gguf  # (where gguf is missing, this test skips)

    path, hf = tiny_models["llama"]
    write_gguf(path, hf, str(tmp_path / "MODEL.GGUF"))
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    want = LLM(path, dtype=torch.float32, max_model_len=32).generate([[1, 4, 5]], params)[0].token_ids
    llm = LLM(str(tmp_path / "MODEL.GGUF"), dtype=torch.float32, max_model_len=32)
    assert llm.generate([[1, 4, 5]], params)[0].token_ids == want


def test_broken_chat_template_is_named_at_load(tiny_models, tmp_path, caplog):
    """A chat template that does not parse: a warning naming its file at load (the model still completes
    plain prompts), and chat requests fail with a ValueError naming the file; chat_template= replaces it."""
    path, _ = tiny_models["llama"]
    config = {"bos_token": "<s>", "eos_token": "</s>", "chat_template": "{% for m in messages %}{{ m['content'] }"}
    broken = _copy_model(path, tmp_path / "broken", **{"tokenizer_config.json": json.dumps(config)})
    file = os.path.join(broken, "tokenizer_config.json")
    with caplog.at_level("WARNING", logger="tritium.engine.llm_engine"):
        llm = LLM(broken, dtype=torch.float32, max_model_len=32)
    assert f"{file!r}: chat template: TemplateSyntaxError" in caplog.text and "chat requests will fail" in caplog.text
    assert len(llm.generate(["w1 w2"], SamplingParams(max_tokens=3, ignore_eos=True))[0].token_ids) == 3
    with pytest.raises(ValueError, match=rf"{re.escape(repr(file))}: chat template: TemplateSyntaxError"):
        llm.chat([{"role": "user", "content": "w1"}])
    caplog.clear()
    with caplog.at_level("WARNING", logger="tritium.engine.llm_engine"):
        llm = LLM(broken, dtype=torch.float32, max_model_len=32, chat_template="{{ messages[0]['content'] }}")
    assert "chat template" not in caplog.text
    assert llm.chat([{"role": "user", "content": "w1"}], SamplingParams(max_tokens=2, ignore_eos=True))[0].finished
    # transformers' named templates: the "default" one; anything else names the file
    from tritium.engine.tokenizer import Tokenizer

    named = [{"name": "tool_use", "template": "{% bad"}, {"name": "default", "template": "{{ bos_token }}"}]
    listed = _copy_model(path, tmp_path / "listed", **{"tokenizer_config.json": json.dumps({**config,
                                                                                            "chat_template": named})})
    assert Tokenizer.from_hf_dir(listed).chat_template == "{{ bos_token }}"
    bad = _copy_model(path, tmp_path / "bad", **{"tokenizer_config.json": json.dumps({**config, "chat_template": 3})})
    with pytest.raises(ValueError, match=r"tokenizer_config.json': chat_template must be the Jinja text of a "
                                         r"template or a list of .* got int"):
        LLM(bad, dtype=torch.float32)


def test_head_dim_the_attention_kernels_do_not_take(tmp_path):
    """A model whose head_dim tritium's paged attention does not take (16): attention_backend 'triton' or
    batch_invariant=True are refused at load, naming the head_dim; left to the engine, attention runs in SDPA
    (on a GPU too, with a warning) and the model generates."""
    from .conftest import make_tiny_model

    make_tiny_model(str(tmp_path), "llama", head_dim=16, num_hidden_layers=1)
    with pytest.raises(ValueError, match=r"attention_backend 'triton' \(tritium's paged attention\) takes head_dim "
                                         r"64, 80, .*; this model's head_dim is 16: use attention_backend='torch'"):
        LLM(str(tmp_path), dtype=torch.float32, attention_backend="triton")
    with pytest.raises(ValueError, match="batch_invariant=True runs tritium's paged attention, which takes head_dim "
                                         "64, 80, .*; this model's head_dim is 16"):
        LLM(str(tmp_path), dtype=torch.float32, batch_invariant=True)
    llm = LLM(str(tmp_path), dtype=torch.float32, max_model_len=32)
    assert llm.engine.config.attention_backend == "torch"
    assert len(llm.generate(["w1 w2"], SamplingParams(max_tokens=3, ignore_eos=True))[0].token_ids) == 3
