"""Embeddings (SamplingParams.pooling, LLM.embed): the last token's and the mean final hidden state against
transformers', through chunked prefill, preemption, the prefix cache and a batch shared with generation; how a model
says it pools (sentence-transformers files); normalizing, dimensions and errors."""

import json
import re

import pytest
import torch

from tritium import LLM, LLMEngine, SamplingParams
from tritium.engine.pooling import DEFAULT, UnsupportedDimensions, finish, model_matryoshka, model_pooling
from tritium.engine.scheduler import Scheduler

from .conftest import PROMPTS, with_config


def _hidden(hf, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return hf.model(torch.tensor([ids])).last_hidden_state[0].float()


@pytest.fixture(scope="module")
def llama(tiny_models):
    return tiny_models["llama"]


@pytest.mark.parametrize("chunk", [64, 5])
def test_embeddings_equal_transformers(llama, chunk):
    """Last-token and mean pooling equal transformers' final hidden states (prompts of 1 to 19 tokens, prefilled
    whole or in chunks of 5); normalized by default."""
    path, hf = llama
    llm = LLM(path, dtype=torch.float32, max_model_len=64, max_num_batched_tokens=chunk)
    prompts = PROMPTS[:3] + ["w5"]
    last = llm.embed(prompts, normalize=False)
    mean = llm.embed(prompts, pooling="mean", normalize=False)
    assert last.shape == (4, hf.config.hidden_size) and last.dtype == torch.float32
    for i, prompt in enumerate(prompts):
        h = _hidden(hf, llm.tokenizer.encode(prompt))
        torch.testing.assert_close(last[i], h[-1], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(mean[i], h.mean(0), rtol=1e-4, atol=1e-4)
    unit = llm.embed(prompts)
    torch.testing.assert_close(unit, torch.nn.functional.normalize(last, dim=-1))
    assert llm.engine.block_manager.num_free_blocks == llm.engine.block_manager.num_blocks


def test_embeddings_share_steps_with_generation(llama):
    """Embedding requests queued with generating ones: the answers equal a run without them, every embedding is
    transformers'; a prompt that fills the whole context is embedded (none is left to generate)."""
    path, hf = llama
    engine = LLMEngine(path, dtype=torch.float32, max_model_len=48, max_num_batched_tokens=16)
    want = {}
    for i, p in enumerate(PROMPTS[:3]):
        engine.add_request(f"g{i}", p, SamplingParams(max_tokens=10))
    while engine.has_unfinished():
        want.update({o.request_id: o.token_ids for o in engine.step() if o.finished})
    full = " ".join(f"w{i}" for i in range(48))
    for i, p in enumerate(PROMPTS[:3]):
        engine.add_request(f"g{i}", p, SamplingParams(max_tokens=10))
        engine.add_request(f"e{i}", PROMPTS[3 - i], SamplingParams(pooling="mean" if i % 2 else "last"))
    engine.add_request("full", full, SamplingParams(pooling="last"))
    got = {}
    while engine.has_unfinished():
        got.update({o.request_id: o for o in engine.step() if o.finished})
    assert {k: got[k].token_ids for k in want} == want
    for i in range(3):
        out = got[f"e{i}"]
        h = _hidden(hf, engine.tokenizer.encode(PROMPTS[3 - i]))
        assert out.token_ids == [] and out.finish_reason == "stop"
        torch.testing.assert_close(out.embedding, h.mean(0) if i % 2 else h[-1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got["full"].embedding, _hidden(hf, engine.tokenizer.encode(full))[-1],
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="leaving no room to generate"):
        engine.add_request("too-long", full, SamplingParams(max_tokens=2))


def test_embeddings_under_preemption_and_prefix_cache(llama, monkeypatch):
    """A cache of few pages shared with generating requests (embedding requests preempted mid-prompt and computed
    again: a mean is not counted twice) and the prefix cache (a last-token embedding of a prompt seen before
    starts from its pages; a mean computes it all)."""
    path, hf = llama
    prompts = [" ".join(f"w{(7 * i + j) % 250}" for j in range(56)) for i in range(4)]
    preempted = []
    original = Scheduler._preempt
    monkeypatch.setattr(Scheduler, "_preempt", lambda self, seq: preempted.append(seq.params.pooling)
                        or original(self, seq))
    tight = LLMEngine(path, dtype=torch.float32, max_model_len=64, num_blocks=8, max_num_batched_tokens=8)
    for i, p in enumerate(PROMPTS[:3]):
        tight.add_request(f"g{i}", p, SamplingParams(max_tokens=40, ignore_eos=True))
    for i, p in enumerate(prompts):
        tight.add_request(f"e{i}", p, SamplingParams(pooling="last" if i % 2 else "mean"))
    got = {}
    while tight.has_unfinished():
        got.update({o.request_id: o for o in tight.step() if o.finished})
    for i, p in enumerate(prompts):
        h = _hidden(hf, tight.tokenizer.encode(p))
        torch.testing.assert_close(got[f"e{i}"].embedding, h[-1] if i % 2 else h.mean(0), rtol=1e-4, atol=1e-4)
    assert "mean" in preempted, preempted
    llm = LLM(path, dtype=torch.float32, max_model_len=64)
    first = llm.embed(prompts[0], normalize=False)
    hits = llm.engine.block_manager.hits
    again = llm.embed(prompts[0], normalize=False)
    assert llm.engine.block_manager.hits > hits
    torch.testing.assert_close(again, first, rtol=1e-4, atol=1e-4)
    hits = llm.engine.block_manager.hits
    llm.embed(prompts[0], pooling="mean")
    assert llm.engine.block_manager.hits == hits  # a mean needs every row: no cached page


def test_embeddings_with_triton_kernels(llama):
    """tritium's kernels (the interpreter on the CPU): a one-token prompt (a step that looks like decode) and a
    longer one, as the torch path gives."""
    path, _ = llama
    kw = dict(dtype=torch.float32, max_model_len=32, max_num_seqs=4)
    want = LLM(path, **kw).embed(["w5", PROMPTS[0]], normalize=False)
    got = LLM(path, attention_backend="triton", op_backend="triton", **kw).embed(["w5", PROMPTS[0]], normalize=False)
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


def test_dimensions_need_a_matryoshka_model(llama, tmp_path, monkeypatch):
    """``dimensions`` as the server takes it (vLLM's rule): only for a model whose config.json says it was trained
    for Matryoshka embeddings, one of its matryoshka_dimensions where it lists them (any size up to the hidden size
    with is_matryoshka): the first components of transformers' vector, then normalized. Another model's is a
    ValueError naming dimensions, before any prompt runs (LLM.embed cut any model's vectors, the server refused)."""
    path, hf = llama
    kw = dict(dtype=torch.float32, max_model_len=32)
    listed = with_config(path, tmp_path / "listed", matryoshka_dimensions=[16, 8])
    llm = LLM(listed, **kw)
    last = _hidden(hf, llm.tokenizer.encode("w1 w2"))[-1]
    torch.testing.assert_close(llm.embed("w1 w2", dimensions=8)[0], torch.nn.functional.normalize(last[:8], dim=0),
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=rf'^Model "{re.escape(listed)}" only supports \[8, 16\] matryoshka '
                                         r"dimensions, got 12$"):
        llm.embed("w1 w2", dimensions=12)
    anysize = LLM(with_config(path, tmp_path / "any", is_matryoshka=True), **kw)
    torch.testing.assert_close(anysize.embed("w1 w2", dimensions=12)[0],
                               torch.nn.functional.normalize(last[:12], dim=0), rtol=1e-4, atol=1e-4)
    plain = LLM(path, **kw)
    monkeypatch.setattr(plain, "generate", lambda *a, **k: pytest.fail("the prompts ran before dimensions was checked"))
    with pytest.raises(UnsupportedDimensions, match=rf'^Model "{re.escape(path)}" does not support matryoshka '
                                                    r"representation, changing output dimensions will lead to poor "
                                                    r"results \(its config.json has neither is_matryoshka nor "
                                                    r"matryoshka_dimensions\)$"):
        plain.embed(["w1", "w2 w3"], dimensions=8)


def test_model_matryoshka_from_config(tmp_path):
    """The sizes a model may be cut to, as vLLM reads its config.json: matryoshka_dimensions (sorted), else
    is_matryoshka: true (any); nothing for a GGUF file, in-memory weights or a config without them."""
    for config, sizes in (({"is_matryoshka": True}, True), ({"matryoshka_dimensions": [64, 32]}, [32, 64]),
                          ({"is_matryoshka": False}, False), ({"matryoshka_dimensions": []}, False),
                          ({"matryoshka_dimensions": [True]}, False), ({"is_matryoshka": "yes"}, False), ({}, False)):
        (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", **config}))
        assert model_matryoshka(str(tmp_path)) == sizes, config
    (tmp_path / "config.json").write_text("[1, 2]")
    assert model_matryoshka(str(tmp_path)) is False
    assert model_matryoshka(str(tmp_path / "model.gguf")) is False and model_matryoshka(None) is False


def test_model_pooling_from_sentence_transformers_files(tmp_path):
    assert model_pooling(str(tmp_path)) == DEFAULT == ("last", True) and model_pooling(None) == DEFAULT

    def save(modes: dict, normalize: bool):
        modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
        if normalize:
            modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                            "type": "sentence_transformers.models.Normalize"})
        (tmp_path / "modules.json").write_text(json.dumps(modules))
        (tmp_path / "1_Pooling").mkdir(exist_ok=True)
        config = {"word_embedding_dimension": 1024, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
                  "pooling_mode_max_tokens": False, "pooling_mode_lasttoken": False, **modes}
        (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))

    save({"pooling_mode_lasttoken": True}, True)
    assert model_pooling(str(tmp_path)) == ("last", True)
    save({"pooling_mode_mean_tokens": True}, False)
    assert model_pooling(str(tmp_path)) == ("mean", False)
    save({"pooling_mode_cls_token": True}, True)
    with pytest.raises(ValueError, match="pools its hidden states by cls_token"):
        model_pooling(str(tmp_path))
    # the caller's pooling in its place: the files' Normalize still counts
    assert model_pooling(str(tmp_path), "mean") == ("mean", True)


def test_errors_name_the_argument(llama):
    path, _ = llama
    with pytest.raises(ValueError, match="pooling must be one of"):
        SamplingParams(pooling="cls")
    with pytest.raises(ValueError, match="pooling .* takes no response_format, logprobs or prompt_logprobs"):
        SamplingParams(pooling="last", logprobs=1)
    with pytest.raises(ValueError, match="dimensions must be an int in \\[1, 4\\]"):
        finish(torch.ones(2, 4), True, 5)
    llm = LLM(path, dtype=torch.float32, max_model_len=32)
    with pytest.raises(ValueError, match="prompts is empty"):
        llm.embed([])
    with pytest.raises(ValueError, match="prompts\\[0\\] has 40 tokens; the context holds 32 \\(max_model_len\\)$"):
        llm.embed([" ".join(["w1"] * 40)])
    for normalize in ("yes", 1, 0.0):  # (a truthy string normalized, 0.0 did not, and neither was an error)
        with pytest.raises(ValueError, match=rf"normalize must be True, False or None \(the model's choice\), got "
                                             rf"{normalize!r}$"):
            llm.embed("w1", normalize=normalize)


def test_bad_dimensions_refused_before_any_prompt_runs(llama, monkeypatch):
    """``dimensions`` is checked against the hidden size before the prompts are queued (it was checked after every
    prompt had been embedded: a long batch ran in full to end in the error)."""
    path, hf = llama
    hidden = hf.config.hidden_size
    llm = LLM(path, dtype=torch.float32, max_model_len=32)
    monkeypatch.setattr(llm, "generate", lambda *a, **k: pytest.fail("the prompts ran before dimensions was checked"))
    for dimensions in (0, hidden + 1, "8", 8.0, True):
        with pytest.raises(ValueError, match=rf"dimensions must be an int in \[1, {hidden}\] \(the model's hidden "
                                             rf"size\), got {dimensions!r}$"):
            llm.embed(["w1", "w2 w3"], dimensions=dimensions)
