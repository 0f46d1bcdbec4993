"""LoRA adapters in the engine: each request's tokens equal the base model's with that adapter merged into its
weights (``W + scaling B A``, run by transformers), whatever the batch mixes; adapters wait for slots; the prefix
cache keeps each adapter's pages apart; bad adapters and requests get errors naming what is wrong."""

import json
import os

import pytest
import torch

from tritium import LLM, LoRARequest, SamplingParams
from tritium.models.lora import LoRAAdapter

from .conftest import PEFT_PREFIX, PROMPTS, hf_greedy, make_tiny_model, merged, write_adapter


@pytest.fixture(scope="module")
def adapters(tiny_models, tmp_path_factory):
    path, model = tiny_models["llama"]
    root = tmp_path_factory.mktemp("loras")
    one = write_adapter(str(root / "one"), model, seed=1)
    two = write_adapter(str(root / "two"), model, rank=4, alpha=4, modules=("k_proj", "up_proj", "down_proj"),
                        seed=2, rslora=True)
    return {"one": (str(root / "one"), merged(model, one, 16 / 8)),
            "two": (str(root / "two"), merged(model, two, 4 / 4 ** 0.5))}


@pytest.mark.parametrize("decode_steps,max_loras,backend", [(8, 2, "triton"), (1, 1, "torch")],
                         ids=["triton-windows-2-slots", "torch-steps-1-slot"])
def test_mixed_batch_equals_merged_models(tiny_models, adapters, decode_steps, max_loras, backend):
    """Prompts of the base model and of two adapters (ranks 8 and 4, rsLoRA, different modules) in one call,
    through the Triton kernels (tritium.ops.lora) and the torch reference; with one slot the second adapter's
    requests wait for the first's to finish."""
    path, base = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, enable_lora=True, max_loras=max_loras, max_lora_rank=8,
              decode_steps=decode_steps, max_model_len=64, op_backend=backend, attention_backend=backend)
    tok = llm.tokenizer
    names = [None, "one", "two", "one", None, "two", "one", "two"]
    prompts = (PROMPTS * 2)[:len(names)]
    requests = [None if n is None else LoRARequest(n, adapters[n][0]) for n in names]
    outs = llm.generate(prompts, SamplingParams(max_tokens=10), lora_request=requests)
    differ = 0
    for name, prompt, out in zip(names, prompts, outs):
        reference = base if name is None else adapters[name][1]
        assert out.token_ids == hf_greedy(reference, tok.encode(prompt), 10), (name, prompt)
        differ += name is not None and out.token_ids != hf_greedy(base, tok.encode(prompt), 10)
    assert llm.engine.lora_names() == ["one", "two"]
    assert differ >= 4  # the adapters change the answers: the comparison above could not pass by accident


def test_fused_decode_gemvs_take_the_updates(tiny_models, adapters, monkeypatch):
    """Decode steps of <= 4 rows on the Triton GEMVs: the QKV projection with rope and the KV write in its epilogue
    and gate/up with the SiLU-and-mul in its own take each row's update as an addend there (``LoRAStack.delta``,
    counted); the tokens still equal the merged models'."""
    from tritium.models.lora import LoRAStack

    calls = []
    delta = LoRAStack.delta
    monkeypatch.setattr(LoRAStack, "delta", lambda self, layer, proj, *a: calls.append(proj) or delta(
        self, layer, proj, *a))
    path, base = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, enable_lora=True, max_loras=2, max_lora_rank=8, max_model_len=64,
              op_backend="triton", attention_backend="triton", linear_backend="triton")
    tok = llm.tokenizer
    names = [None, "one", "two"]
    requests = [None if n is None else LoRARequest(n, adapters[n][0]) for n in names]
    outs = llm.generate(PROMPTS[:3], SamplingParams(max_tokens=6), lora_request=requests)
    for name, prompt, out in zip(names, PROMPTS, outs):
        reference = base if name is None else adapters[name][1]
        assert out.token_ids == hf_greedy(reference, tok.encode(prompt), 6), (name, prompt)
    assert {"qkv_proj", "gate_up_proj"} <= set(calls)


def test_prefix_cache_keeps_adapters_apart(tiny_models, adapters):
    """The same prompt under the base model, then an adapter, then the base again: no page crosses over."""
    path, base = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, enable_lora=True, max_loras=2, max_lora_rank=8, max_model_len=64,
              block_size=16)
    prompt = " ".join(f"w{i}" for i in range(100, 140))  # two full pages to share
    ids = llm.tokenizer.encode(prompt)
    params = SamplingParams(max_tokens=6)
    base_out = llm.generate(prompt, params)[0]
    lora_out = llm.generate(prompt, params, lora_request=LoRARequest("one", adapters["one"][0]))[0]
    assert lora_out.token_ids == hf_greedy(adapters["one"][1], ids, 6)
    again = llm.generate(prompt, params, lora_request=LoRARequest("one"))[0]  # by name; its own pages reused
    assert again.token_ids == lora_out.token_ids and llm.stats["prefix_cache_hit_tokens"] > 0
    assert llm.generate(prompt, params)[0].token_ids == base_out.token_ids == hf_greedy(base, ids, 6)
    # the name read again from another adapter's directory: none of the old adapter's pages is matched
    llm.engine.remove_lora("one")
    other = llm.generate(prompt, params, lora_request=LoRARequest("one", adapters["two"][0]))[0]
    assert other.token_ids == hf_greedy(adapters["two"][1], ids, 6) != lora_out.token_ids


def test_phi3_fused_modules(tmp_path):
    """Phi-3's adapters name its fused qkv_proj and gate_up_proj: one A, B's rows split into the parts."""
    path = str(tmp_path / "phi3")
    os.makedirs(path)
    model = make_tiny_model(path, "phi3")
    weights = write_adapter(str(tmp_path / "ad"), model, modules=("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),
                            seed=6)
    reference = merged(model, weights, 16 / 8)
    llm = LLM(path, dtype=torch.float32, enable_lora=True, max_lora_rank=8, max_model_len=64)
    ids = llm.tokenizer.encode(PROMPTS[1])
    out = llm.generate(PROMPTS[1], SamplingParams(max_tokens=8), lora_request=LoRARequest("a", str(tmp_path / "ad")))
    assert out[0].token_ids == hf_greedy(reference, ids, 8) != hf_greedy(model, ids, 8)


def test_following_rank_replays_slot_changes(tiny_models, adapters, tmp_path):
    """What a rank > 0 does with rank 0's slot changes (``LoRAStack.take_ops`` / ``replay``, here on one rank): the
    slots end up holding what a direct load gives, bit for bit; host copies are kept only for adapters in a slot;
    an adapter registered anew (a new read on rank 0) is read again."""
    from tritium.models.lora import LoRAStack

    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, enable_lora=True, max_loras=2, max_lora_rank=8, max_model_len=64)
    model = llm.engine.model
    stack = model.lora
    follower = LoRAStack(model, 2, 8, backend="torch")
    one = LoRAAdapter.load(adapters["one"][0], model.config, name="one")
    two = LoRAAdapter.load(adapters["two"][0], model.config, name="two")
    ops = [(0, "one", one.path, one.serial), (1, "two", two.path, two.serial)]
    follower.replay(ops)
    stack.load(0, one)
    stack.load(1, two)
    for mine, theirs in zip(stack.stacks, follower.stacks):
        for proj in mine:
            assert all(torch.equal(m, t) for m, t in zip(mine[proj][:2], theirs[proj][:2]))
    assert sorted(follower._read) == ["one", "two"]
    follower.replay([(1, None, None, None), (0, "two", two.path, two.serial)])  # "one" left its slot: dropped
    assert sorted(follower._read) == ["two"] and follower._holder == ["two", None]
    held = follower._read["two"][1]
    follower.replay([(1, "two", two.path, two.serial)])
    assert follower._read["two"][1] is held  # the same read: not read again
    again = LoRAAdapter.load(adapters["two"][0], model.config, name="two")
    follower.replay([(1, "two", again.path, again.serial)])
    assert follower._read["two"][1] is not held
    assert stack.take_ops() == []  # one rank: nobody follows it, nothing is logged


def test_stream_and_engine_requests(tiny_models, adapters):
    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, enable_lora=True, max_model_len=64)
    request = LoRARequest("one", adapters["one"][0])
    text = "".join(llm.generate_stream(PROMPTS[1], SamplingParams(max_tokens=8), lora_request=request))
    assert text == llm.generate(PROMPTS[1], SamplingParams(max_tokens=8), lora_request=request)[0].text
    engine = llm.engine
    engine.add_request("a", PROMPTS[0], SamplingParams(max_tokens=4), lora_request=LoRARequest("one"))
    assert engine.lora_requests() == ((), ("one",))  # waiting, then running (the metric's labels)
    engine.step()
    assert engine.lora_requests() == (("one",), ())
    with pytest.raises(ValueError, match="in use"):
        engine.remove_lora("one")
    while engine.has_unfinished():
        engine.step()
    engine.remove_lora("one")
    with pytest.raises(ValueError, match="not loaded"):
        engine.add_request("b", PROMPTS[0], lora_request=LoRARequest("one"))


def test_bad_requests_and_adapters(tiny_models, adapters, tmp_path):
    path, model = tiny_models["llama"]
    plain = LLM(path, dtype=torch.float32, max_model_len=64)
    with pytest.raises(ValueError, match="enable_lora=True"):
        plain.generate(PROMPTS[0], lora_request=LoRARequest("one", adapters["one"][0]))
    llm = LLM(path, dtype=torch.float32, enable_lora=True, max_lora_rank=4, max_model_len=64)
    with pytest.raises(ValueError, match="above max_lora_rank=4"):
        llm.generate(PROMPTS[0], lora_request=LoRARequest("one", adapters["one"][0]))
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        llm.generate(PROMPTS[0], lora_request=LoRARequest("x", str(tmp_path)))
    with pytest.raises(ValueError, match="lora_request has 2 entries"):
        llm.generate(PROMPTS[0], lora_request=[None, None])
    with pytest.raises(ValueError, match="non-empty string"):
        LoRARequest("")
    cfg = llm.engine.model_config
    cases = {
        "embed": dict(extra_tensors={"base_model.model.model.embed_tokens.lora_embedding_A": torch.zeros(4, 8)},
                      match="not a LoRA A/B weight"),
        "dora": dict(extra_config={"use_dora": True}, match="use_dora"),
        "bias": dict(extra_config={"bias": "all"}, match="bias='all'"),
        "shape": dict(extra_tensors={f"{PEFT_PREFIX}.0.self_attn.q_proj.lora_A.weight": torch.zeros(4, 100)},
                      match="has shape"),
    }
    for label, case in cases.items():
        d = str(tmp_path / label)
        write_adapter(d, model, rank=4, modules=("q_proj",), extra_config=case.get("extra_config"),
                      extra_tensors=case.get("extra_tensors"))
        with pytest.raises(ValueError, match=case["match"]):
            LoRAAdapter.load(d, cfg)


def test_refused_combinations(tiny_models):
    path, _ = tiny_models["llama"]
    with pytest.raises(ValueError, match="enable_lora=True runs 16-bit weights without context parallelism"):
        LLM(path, enable_lora=True, quantization="fp8")
    with pytest.raises(ValueError, match="context_parallel_size=2"):
        LLM(path, enable_lora=True, context_parallel_size=2)
    with pytest.raises(ValueError, match="max_loras"):
        LLM(path, enable_lora=True, max_loras=0)


def test_peft_saved_adapter_equals_peft_model(tiny_models, tmp_path):
    """An adapter trained-shaped and saved by PEFT itself (its file names and keys), answered as PEFT's model
    answers (where peft is installed: the GPU image has it, CI does not)."""
    peft = pytest.importorskip("peft")
    import copy

    path, base = tiny_models["llama"]
    model = peft.get_peft_model(copy.deepcopy(base), peft.LoraConfig(
        r=8, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"],
        lora_dropout=0.0, bias="none"))
    torch.manual_seed(5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:  # PEFT starts B at zero: the update would be nothing
                p.normal_(0, 0.5)
    model.save_pretrained(str(tmp_path / "peft"))
    llm = LLM(path, dtype=torch.float32, enable_lora=True, max_lora_rank=8, max_model_len=64)
    ids = llm.tokenizer.encode(PROMPTS[1])
    out = llm.generate(PROMPTS[1], SamplingParams(max_tokens=8), lora_request=LoRARequest("p", str(tmp_path / "peft")))
    want = hf_greedy(model.eval(), ids, 8)
    assert out[0].token_ids == want and want != hf_greedy(base, ids, 8)


def test_preemption_abort_and_drafts_keep_slots_right(tiny_models, adapters):
    """Preempted requests give their slot back and take one again (a KV cache of 4 pages); an abort releases
    its slot; speculative drafts run under their sequence's adapter. Tokens as the merged models give them."""
    path, base = tiny_models["llama"]
    names = ["one", "two", None, "one"]
    requests = [None if n is None else LoRARequest(n, adapters[n][0]) for n in names]
    for kw in (dict(num_blocks=4, max_num_batched_tokens=64), dict(num_speculative_tokens=3)):
        llm = LLM(path, dtype=torch.float32, enable_lora=True, max_loras=2, max_lora_rank=8, max_model_len=64, **kw)
        n = 30 if "num_blocks" in kw else 12  # long enough answers that growing sequences evict others
        want = [hf_greedy(base if name is None else adapters[name][1], llm.tokenizer.encode(prompt), n)
                for name, prompt in zip(names, PROMPTS)]
        # drafts (speculative case) from a prediction, each answer's own: draft rows in the steps, under each adapter
        params = [SamplingParams(max_tokens=n, prediction=None if "num_blocks" in kw else w) for w in want]
        outs = llm.generate(PROMPTS, params, lora_request=requests)
        assert [o.token_ids for o in outs] == want, kw
        if "num_blocks" in kw:
            assert llm.stats["preemptions"] > 0
        else:
            assert llm.stats["draft_tokens"] > 0
        loras = llm.engine.loras
        assert loras.refs == [0, 0] and sorted(n for n in loras.holder if n) == ["one", "two"]
    engine = llm.engine
    engine.add_request("x", PROMPTS[1], SamplingParams(max_tokens=30), lora_request=LoRARequest("two"))
    engine.step()
    assert sum(engine.loras.refs) == 1
    engine.abort("x")
    engine.step()
    assert engine.loras.refs == [0, 0]


def test_adapter_configs_and_files_of_nonsense(tiny_models, tmp_path):
    """A lora_alpha that is not finite (NaN, infinity: every token was 0), a use_rslora that is not a boolean
    ("yes" was taken as true) and a damaged weights file (safetensors' own error escaped, a 500 over HTTP) are
    ValueErrors naming what is wrong; an empty path is refused (it read the current directory). A config without
    lora_alpha scales by PEFT's default alpha, 8 (it took alpha = r)."""
    path, model = tiny_models["llama"]
    cfg = LLM(path, dtype=torch.float32, max_model_len=64).engine.model_config
    for label, extra, match in (("nan", {"lora_alpha": float("nan")}, "lora_alpha must be a finite number, got nan"),
                                ("inf", {"lora_alpha": float("inf")}, "lora_alpha must be a finite number, got inf"),
                                ("rslora", {"use_rslora": "yes"}, "use_rslora must be true or false, got 'yes'")):
        d = str(tmp_path / label)
        write_adapter(d, model, rank=4, modules=("q_proj",), extra_config=extra)
        with pytest.raises(ValueError, match=match):
            LoRAAdapter.load(d, cfg)
    d = tmp_path / "damaged"
    write_adapter(str(d), model, rank=4, modules=("q_proj",))
    weights = d / "adapter_model.safetensors"
    for data in (b"", weights.read_bytes()[:-7], b"not safetensors at all"):
        weights.write_bytes(data)
        with pytest.raises(ValueError, match="adapter_model.safetensors is not a readable safetensors file"):
            LoRAAdapter.load(str(d), cfg)
    d = str(tmp_path / "no-alpha")
    write_adapter(d, model, rank=4, modules=("q_proj",), extra_config={"lora_alpha": None})
    with open(os.path.join(d, "adapter_config.json")) as f:
        config = {k: v for k, v in json.load(f).items() if k != "lora_alpha"}
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(config, f)
    assert LoRAAdapter.load(d, cfg).scaling == 8 / 4
    with pytest.raises(ValueError, match="LoRARequest path must be a non-empty string"):
        LoRARequest("x", "")
