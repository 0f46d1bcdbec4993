"""Speculative decoding with a draft model (``speculative_model``): the engine's tokens equal plain greedy
decoding's whatever the draft model (the model itself, a smaller one, another architecture), across stops, the
context limit, sampled neighbours, windows, prefix caching and preemption; the draft model's cache catches up only
where a sequence drafted nothing, and the drafts are really its own."""

import copy
import os
import shutil

import pytest
import torch

from tritium import LLM, LLMEngine, SamplingParams
from tritium.engine.config import EngineConfig
from tritium.engine import draft, speculative
from tritium.engine.draft import Drafter
from tritium.engine.sequence import Sequence
from tritium.engine.speculative import Acceptance

from .conftest import make_tiny_model
from .test_speculative import LOOPY, PARAMS


def _llm(path, free_drafts=True, **kw):
    """The engine; ``free_drafts``: with a draft model, its tokens priced at nothing (the tiny draft models are
    as large as the model, whose drafts the engine would otherwise leave out: tested below)."""
    kw.setdefault("max_num_seqs", 16)
    kw.setdefault("max_model_len", 96)
    llm = LLM(path, dtype=torch.float32, **kw)
    if free_drafts:
        llm.engine.scheduler.draft_token_cost = 0.0
    return llm


@pytest.fixture(scope="module")
def drafts(tiny_models, tmp_path_factory):
    """Draft models for the tiny llama: itself; itself with noise in its second layer (right at times, wrong at
    others); one layer of the same shape (another model); a qwen2 of the same vocabulary."""
    path, model = tiny_models["llama"]
    noisy = str(tmp_path_factory.mktemp("draft_noisy"))
    shutil.copytree(path, noisy, dirs_exist_ok=True)
    near = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in near.named_parameters():
            if "layers.1." in name:
                p.add_(torch.randn(p.shape, generator=g) * p.std() * 0.05)
    near.save_pretrained(noisy, safe_serialization=True)
    one = str(tmp_path_factory.mktemp("draft_one_layer"))
    make_tiny_model(one, "llama", num_hidden_layers=1)
    return {"self": path, "noisy": noisy, "one_layer": one, "qwen2": tiny_models["qwen2"][0]}


@pytest.fixture(scope="module")
def plain(tiny_models):
    path, _ = tiny_models["llama"]
    llm = _llm(path, decode_steps=1)
    out = {"batch": llm.generate(LOOPY, PARAMS)}
    stop_word = out["batch"][0].text.split()[6]
    out["stop_params"] = [SamplingParams(max_tokens=40, stop=[stop_word])] + PARAMS[1:]
    out["stop"] = llm.generate(LOOPY, out["stop_params"])
    out["sampled"] = SamplingParams(max_tokens=20, temperature=0.9, seed=5)
    out["mixed"] = llm.generate(LOOPY[:3], [PARAMS[0], out["sampled"], PARAMS[2]])
    out["long"] = llm.generate([LOOPY[4]], SamplingParams(max_tokens=200, ignore_eos=True))[0]
    return out


@pytest.mark.parametrize("draft,k,steps", [("self", 4, 8), ("noisy", 3, 1), ("qwen2", 5, 8), ("noisy", 1, 8)])
def test_draft_model_tokens_equal_greedy(tiny_models, drafts, plain, draft, k, steps):
    path, _ = tiny_models["llama"]
    llm = _llm(path, decode_steps=steps, num_speculative_tokens=k, speculative_model=drafts[draft])
    engine = llm.engine
    assert engine.drafter is not None and engine.runner.kv_cache.data_ptr() != engine.drafter.runner.kv_cache.data_ptr()
    for key, params in [("batch", PARAMS), ("stop", plain["stop_params"])]:
        outs = llm.generate(LOOPY, params)
        assert [o.token_ids for o in outs] == [o.token_ids for o in plain[key]]
        assert [o.text for o in outs] == [o.text for o in plain[key]]
        assert [o.finish_reason for o in outs] == [o.finish_reason for o in plain[key]]
    assert engine.num_drafts > 0 and engine.drafter.num_windows > 0
    assert engine.num_accepted_tokens <= engine.num_draft_tokens <= k * engine.num_drafts
    if draft == "self":  # the model drafting for itself: its drafts are its own greedy choices
        assert engine.num_accepted_tokens >= 0.95 * engine.num_draft_tokens
    elif draft == "noisy":
        assert 0 < engine.num_accepted_tokens < engine.num_draft_tokens
    mixed = llm.generate(LOOPY[:3], [PARAMS[0], plain["sampled"], PARAMS[2]])
    assert [mixed[i].token_ids for i in (0, 2)] == [plain["mixed"][i].token_ids for i in (0, 2)]
    assert len(mixed[1].token_ids) == plain["sampled"].max_tokens or mixed[1].finish_reason == "stop"
    long = llm.generate([LOOPY[4]], SamplingParams(max_tokens=200, ignore_eos=True))[0]
    assert long.token_ids == plain["long"].token_ids and long.finish_reason == "length"
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_draft_cache_catches_up_only_after_whole_drafts(tiny_models, drafts):
    """Every decode step drafting (no back-off): the draft model computes each prompt once, when its sequence first
    drafts; later it is one position behind the sequence, or two after a whole draft was accepted (the draft's last
    token), caught up by one decode step."""
    path, _ = tiny_models["llama"]
    llm = _llm(path, decode_steps=1, num_speculative_tokens=3, speculative_model=drafts["noisy"],
               enable_prefix_caching=False)
    engine = llm.engine
    engine.scheduler.adaptive_drafts = False
    prompts, params = LOOPY[:4], [SamplingParams(max_tokens=m, ignore_eos=True) for m in (30, 17, 9, 24)]
    seen, whole = [], []
    propose, verified = engine.drafter.propose, engine.drafter.verified

    def spy(seqs, lengths):
        seen.extend((seq.seq_id, seq.draft_computed, seq.num_tokens) for seq in seqs)
        return propose(seqs, lengths)

    def spy_verified(seq, draft, base):
        whole.append(seq.token_ids[base:base + len(draft)] == draft)
        verified(seq, draft, base)

    engine.drafter.propose, engine.drafter.verified = spy, spy_verified
    outs = llm.generate(prompts, params)
    first = {}
    for seq_id, computed, n in seen:
        if seq_id not in first:
            first[seq_id] = (computed, n)
            assert computed == 0
        else:
            assert computed in (n - 1, n - 2)
    prompt_tokens = sum(len(o.prompt_token_ids) for o in outs)
    assert 0 < sum(whole) < len(whole)  # whole drafts and cut ones
    assert prompt_tokens + 1 <= engine.drafter.num_catch_up_tokens <= prompt_tokens + sum(whole)
    assert engine.num_drafts >= sum(p.max_tokens for p in params) // 4


def test_draft_model_under_preemption_and_prefix_cache(tiny_models, drafts, plain):
    """A cache of few pages (preemption by recompute: the draft model's cache of a preempted sequence is computed
    again) and prefix-cache hits (pages whose draft K/V another sequence wrote) give the same tokens."""
    path, _ = tiny_models["llama"]
    llm = _llm(path, num_speculative_tokens=4, speculative_model=drafts["noisy"], num_blocks=6)
    outs = llm.generate(LOOPY, PARAMS)
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain["batch"]]
    assert llm.engine.scheduler.num_preemptions > 0 and llm.engine.num_accepted_tokens > 0
    again = llm.generate(LOOPY, PARAMS)
    assert [o.token_ids for o in again] == [o.token_ids for o in plain["batch"]]
    assert llm.engine.block_manager.hits > 0


def test_drafts_are_the_draft_models_greedy_tokens(tiny_models, drafts):
    """A draft equals the draft model's own greedy continuation of the sequence (its plain engine's)."""
    path, _ = tiny_models["llama"]
    llm = _llm(path, decode_steps=1, num_speculative_tokens=4, speculative_model=drafts["qwen2"])
    reference = _llm(drafts["qwen2"], decode_steps=1)
    engine = llm.engine
    engine.scheduler.adaptive_drafts = False
    proposed = []
    propose = engine.drafter.propose

    def spy(seqs, lengths):
        out = propose(seqs, lengths)
        proposed.extend((list(seq.token_ids), d) for seq, d in zip(seqs, out))
        return out

    engine.drafter.propose = spy
    llm.generate(LOOPY[:2], [SamplingParams(max_tokens=12, ignore_eos=True)] * 2)
    assert len(proposed) >= 4
    for tokens, draft in proposed[:6]:
        want = reference.generate([tokens], SamplingParams(max_tokens=len(draft), ignore_eos=True))[0].token_ids
        assert draft == want


def test_verified_keeps_the_accepted_drafts_positions():
    """The window wrote the K/V of a draft's tokens but its last: those accepted are kept."""
    seq = Sequence(0, [5, 6, 7], SamplingParams(), prompt_len=2)
    Drafter.verified(seq, [8, 9, 10], base=3)  # nothing accepted yet: the cache one behind
    assert seq.draft_computed == 2
    seq.token_ids += [8, 9, 4]  # two accepted, the third replaced
    Drafter.verified(seq, [8, 9, 10], base=3)
    assert seq.draft_computed == 5
    seq.token_ids += [1, 2]
    Drafter.verified(seq, [4, 1], base=5)  # all accepted: the draft's last token not written, two behind
    assert seq.draft_computed == 6 == seq.num_tokens - 2
    seq.token_ids += [3]
    Drafter.verified(seq, [2], base=7)  # a draft of one token writes nothing past the sequence's last
    assert seq.draft_computed == 7


def test_drafts_priced_at_the_draft_models_steps(tiny_models, drafts):
    """A draft token from a draft model costs its step: drafts are cut where a token's chance falls below that
    cost, and left out where what they gain less what they cost does not reach the break-even; the engine prices
    a token at ``STEP_OVERHEAD`` times the models' weight bytes (the model itself: 1.3 steps, so no drafts)."""
    acc = Acceptance()  # the prior: each token accepted at 0.5
    assert acc.length(4, 1, 0) == 3 and acc.length(4, 1, 0, token_cost=0.3) == 1
    assert acc.length(4, 1, 0, token_cost=0.45) == 0 and acc.length(4, 1, speculative.PROBE_AFTER, 0.45) == 1
    path, _ = tiny_models["llama"]
    llm = _llm(path, free_drafts=False, num_speculative_tokens=3, speculative_model=drafts["self"])
    assert llm.engine.scheduler.draft_token_cost == pytest.approx(draft.STEP_OVERHEAD)
    out = llm.generate(LOOPY[:2], SamplingParams(max_tokens=20, ignore_eos=True))
    assert all(len(o.token_ids) == 20 for o in out)
    assert llm.engine.num_drafts <= 2 * (1 + 20 // speculative.PROBE_AFTER)  # probes only


def test_draft_model_triton_kernels(tiny_models, drafts):
    """tritium's kernels (the interpreter on the CPU) in both models: a draft window of greedy steps and the
    verification rows give the same tokens as the engine without speculation."""
    path, _ = tiny_models["llama"]
    kw = dict(attention_backend="triton", op_backend="triton", max_num_seqs=4, max_model_len=64)
    prompts, params = LOOPY[4:6], [SamplingParams(max_tokens=m, ignore_eos=True) for m in (8, 6)]
    want = LLM(path, dtype=torch.float32, decode_steps=1, **kw).generate(prompts, params)
    llm = LLM(path, dtype=torch.float32, num_speculative_tokens=3, speculative_model=drafts["noisy"], **kw)
    llm.engine.scheduler.draft_token_cost = 0.0
    outs = llm.generate(prompts, params)
    assert [o.token_ids for o in outs] == [o.token_ids for o in want]
    assert llm.engine.drafter.num_windows > 0 and llm.engine.num_draft_tokens > 0


def test_config_errors(tiny_models, tmp_path):
    path, _ = tiny_models["llama"]
    with pytest.raises(ValueError, match="num_speculative_tokens >= 1"):
        EngineConfig(speculative_model=path).validate()
    with pytest.raises(TypeError, match="speculative_model"):
        EngineConfig(speculative_model=3, num_speculative_tokens=2).validate()
    big = str(tmp_path / "big_vocab")
    os.makedirs(big)
    make_tiny_model(big, "llama", vocab_size=600)
    with pytest.raises(ValueError, match="vocabulary of 600 tokens"):
        _llm(path, num_speculative_tokens=2, speculative_model=big)
    gemma = str(tmp_path / "gemma")
    os.makedirs(gemma)
    make_tiny_model(gemma, "gemma3_text")
    with pytest.raises(ValueError, match="sliding window"):
        _llm(path, num_speculative_tokens=2, speculative_model=gemma)
    with pytest.raises(ValueError, match="speculative_model or as draft"):
        LLMEngine.from_weights(None, [], draft=(None, []), speculative_model=path, num_speculative_tokens=1)
