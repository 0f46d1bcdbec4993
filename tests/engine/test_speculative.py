"""Speculative decoding by prompt lookup: the drafts (against a brute-force search), and the engine's tokens with
it on equal to plain greedy decoding's, across stops, the context limit, sampled neighbours, prefix caching,
preemption and a sliding window; the drafts are really taken and accepted."""

import random

import pytest
import torch

from tritium import LLM, LLMEngine, SamplingParams
from tritium.engine.block_manager import BlockManager
from tritium.engine.config import EngineConfig
from tritium.engine.runner import ModelRunner
from tritium.engine.scheduler import Scheduler
from tritium.engine.sequence import Sequence, Status
from tritium.engine import speculative
from tritium.engine.speculative import Acceptance, NgramIndex, accept_sampled
from tritium.runtime import interpreting

from .conftest import PROMPTS, WORDS, continued_text, hf_greedy, make_tiny_model


def _brute(tokens, k, n_min, n_max):
    for n in range(n_max, n_min - 1, -1):
        if n >= len(tokens):
            continue
        suffix = tokens[-n:]
        for end in range(len(tokens) - 1, n - 1, -1):  # latest earlier occurrence first
            if tokens[end - n:end] == suffix:
                return tokens[end:end + k]
    return []


@pytest.mark.parametrize("n_min,n_max", [(1, 1), (2, 4), (1, 3), (3, 3)])
def test_proposals_match_brute_force(n_min, n_max):
    rng = random.Random(n_min * 10 + n_max)
    for trial in range(20):
        vocab = rng.choice([2, 3, 5, 20])
        tokens, index = [], NgramIndex(n_min, n_max)
        for _ in range(rng.randint(1, 80)):
            tokens.append(rng.randrange(vocab))
            k = rng.randint(0, 6)
            assert index.propose(tokens, k) == (_brute(tokens, k, n_min, n_max) if k else []), (tokens, k)


def test_proposal_grows_with_the_sequence():
    index = NgramIndex(2, 3)
    tokens = [9, 1, 2, 3, 4, 5, 1, 2]
    assert index.propose(tokens, 3) == [3, 4, 5]
    tokens += [3, 4]
    assert index.propose(tokens, 8) == [5, 1, 2, 3, 4]  # runs into the suffix itself
    assert index.propose([7], 3) == [] and NgramIndex(2, 2).propose([1, 2, 3], 2) == []


def _seq(tokens, computed, max_tokens=16):
    seq = Sequence(0, list(tokens), SamplingParams(max_tokens=max_tokens), prompt_len=len(tokens))
    seq.num_computed, seq.status = computed, Status.RUNNING
    seq.lookup = NgramIndex(1, 3)
    return seq


def test_scheduler_bounds_drafts():
    """A draft fits the token budget and what the sequence may still sample, and never preempts: with no page
    for it the sequence decodes one token."""
    tokens = [1, 2, 3, 4, 5, 6, 7, 1, 2, 3]  # the suffix 1 2 3 proposes 4 5 6 7 ...
    sched = Scheduler(BlockManager(64, 16), max_num_batched_tokens=64, max_num_seqs=16, num_speculative_tokens=5)
    seq = _seq(tokens, len(tokens) - 1)
    sched.blocks.grow(seq, len(tokens))
    sched.running.append(seq)
    batch = sched.schedule()
    assert seq.draft == [4, 5, 6, 7, 1] and batch.num_new == [6] and not batch.is_decode
    sched.max_num_batched_tokens = 3
    assert sched.schedule().num_new == [3] and seq.draft == [4, 5]
    sched.max_num_batched_tokens = 64
    sched.max_decode_rows = 4  # a step's tokens, drafts included, are rows of a decode graph of at most 4
    assert sched.schedule().num_new == [4] and seq.draft == [4, 5, 6]
    sched.max_decode_rows = 16
    seq.prompt_len = 2  # 8 tokens generated; 3 to go: the step's own + a draft of 2
    seq.params = SamplingParams(max_tokens=len(seq.output_ids) + 3)
    assert sched.schedule().num_new == [3] and seq.draft == [4, 5]
    # one page (16 slots) holds the sequence's 10 tokens; a draft past slot 16 needs a second page there is none of
    tight = Scheduler(BlockManager(1, 16), max_num_batched_tokens=64, max_num_seqs=4, num_speculative_tokens=8)
    long = _seq(tokens + [4, 5, 6, 7], 13)
    tight.blocks.grow(long, 14)
    tight.running.append(long)
    batch = tight.schedule()
    assert batch.num_new == [1] and long.draft == [] and tight.num_preemptions == 0


def test_acceptance_backs_off_probes_and_comes_back():
    """A sequence whose drafts are rejected stops drafting within a few drafts and tries again every
    PROBE_AFTER tokens; one whose drafts are accepted keeps whole ones; a draft ends where its tokens' chance
    falls below TAIL; a larger batch asks more of a draft."""
    acc = Acceptance(100)
    assert acc.rate == speculative.PRIOR_RATE and acc.length(0, 1, 100) == 0
    assert acc.length(8, 1, 100) == 3  # chances 0.5, 0.25, 0.125, then 0.0625 < TAIL
    pos, drafts = 100, 0
    while acc.length(4, 1, pos):
        acc.record(min(4, acc.length(4, 1, pos)), 0, pos)
        pos, drafts = pos + 1, drafts + 1
        assert drafts < 8
    assert 2 <= drafts and not acc.pays(1, 4)
    assert acc.length(4, 1, pos + speculative.PROBE_AFTER - 2) == 0
    assert acc.length(4, 1, pos - 1 + speculative.PROBE_AFTER) == 1  # a probe: what is still likely enough
    for _ in range(6):  # the text turns repetitive: drafts accepted whole
        acc.record(4, 4, pos)
    assert acc.rate > 0.85 and acc.length(4, 1, pos) == 4 and acc.pays(256, 4)
    mid = Acceptance(0)
    mid.hits, mid.trials = 1.0, 4.0  # rate 2 / 6
    assert mid.pays(1, 4) and not mid.pays(64, 4)
    assert [speculative.break_even(n) for n in (1, 4, 5, 16, 17, 256)] == [0.2, 0.2, 0.45, 0.45, 0.7, 0.7]


def test_config_errors():
    for kw, text in [(dict(num_speculative_tokens=-1), "num_speculative_tokens"),
                     (dict(num_speculative_tokens=17), "num_speculative_tokens"),
                     (dict(prompt_lookup_min=3, prompt_lookup_max=2), "prompt_lookup_min"),
                     (dict(prompt_lookup_min=0), "prompt_lookup_min"),
                     (dict(num_speculative_tokens=2, context_parallel_size=2), "context parallel")]:
        with pytest.raises(ValueError, match=text):
            EngineConfig(**kw).validate()
    with pytest.raises(TypeError, match="num_speculative_tokens"):
        EngineConfig(num_speculative_tokens=1.5).validate()


# prompts whose continuations the tiny random models repeat (a short random model falls into loops soon), and
# some with repeats in the prompt itself
LOOPY = PROMPTS + [" ".join(f"w{i % 7}" for i in range(30)), "w3 w4 w5 w3 w4 w5 w3 w4", "w90 w91 w90 w91 w90"]
PARAMS = [SamplingParams(max_tokens=m) for m in (40, 12, 33, 1, 25, 2, 30)]


def _llm(path, **kw):
    kw.setdefault("max_num_seqs", 16)
    kw.setdefault("max_model_len", 96)
    return LLM(path, dtype=torch.float32, **kw)


@pytest.fixture(scope="module")
def plain(tiny_models):
    path, _ = tiny_models["llama"]
    llm = _llm(path, decode_steps=1)
    out = {"batch": llm.generate(LOOPY, PARAMS)}
    stop_word = out["batch"][0].text.split()[6]
    out["stop_params"] = [SamplingParams(max_tokens=40, stop=[stop_word])] + PARAMS[1:]
    out["stop"] = llm.generate(LOOPY, out["stop_params"])
    assert out["stop"][0].finish_reason == "stop"
    out["sampled"] = SamplingParams(max_tokens=20, temperature=0.9, seed=5)
    out["mixed"] = llm.generate(LOOPY[:3], [PARAMS[0], out["sampled"], PARAMS[2]])
    # runs into the context limit
    out["long"] = llm.generate([LOOPY[4]], SamplingParams(max_tokens=200, ignore_eos=True))[0]
    return out


@pytest.fixture
def oracle(monkeypatch, plain):
    """Drafts from plain greedy decoding's own continuation, every third position (of the sequence) wrong:
    drafts accepted whole, in part and not at all."""
    full = [o.prompt_token_ids + o.token_ids for o in plain["batch"] + plain["stop"] + plain["mixed"]]
    full.append(plain["long"].prompt_token_ids + plain["long"].token_ids)

    def propose(self, tokens, k):
        for ref in full:
            if ref[:len(tokens)] == tokens and len(ref) > len(tokens):
                draft = ref[len(tokens):len(tokens) + k]
                return [t if (len(tokens) + i) % 3 else (t + 1) % 250 for i, t in enumerate(draft)]
        return []

    monkeypatch.setattr(NgramIndex, "propose", propose)


@pytest.mark.parametrize("k,steps,drafts", [(1, 1, "lookup"), (4, 8, "lookup"), (7, 1, "lookup"),
                                            (3, 8, "oracle"), (6, 1, "oracle")])
def test_speculative_tokens_equal_greedy(tiny_models, plain, request, k, steps, drafts):
    if drafts == "oracle":
        request.getfixturevalue("oracle")
    path, _ = tiny_models["llama"]
    llm = _llm(path, decode_steps=steps, num_speculative_tokens=k, prompt_lookup_min=1, prompt_lookup_max=3)
    engine = llm.engine
    for key, prompts, params in [("batch", LOOPY, PARAMS), ("stop", LOOPY, plain["stop_params"])]:
        outs = llm.generate(prompts, params)
        assert [o.token_ids for o in outs] == [o.token_ids for o in plain[key]]
        assert [o.text for o in outs] == [o.text for o in plain[key]]
        assert [o.finish_reason for o in outs] == [o.finish_reason for o in plain[key]]
    assert engine.num_drafts > 0 and engine.num_accepted_tokens <= engine.num_draft_tokens <= k * engine.num_drafts
    assert 0 <= llm.stats["accepted_draft_tokens"] <= llm.stats["draft_tokens"] <= engine.num_draft_tokens
    if drafts == "oracle":  # some whole, some cut short
        assert 0 < engine.num_accepted_tokens < engine.num_draft_tokens
    # a sampled neighbour (drafts verified by rejection sampling: its own draws) leaves the greedy ones alone
    mixed = llm.generate(LOOPY[:3], [PARAMS[0], plain["sampled"], PARAMS[2]])
    assert [mixed[i].token_ids for i in (0, 2)] == [plain["mixed"][i].token_ids for i in (0, 2)]
    assert len(mixed[1].token_ids) == plain["sampled"].max_tokens or mixed[1].finish_reason == "stop"
    long = llm.generate([LOOPY[4]], SamplingParams(max_tokens=200, ignore_eos=True))[0]
    assert long.token_ids == plain["long"].token_ids and long.finish_reason == "length"
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_speculative_under_preemption_and_prefix_cache(tiny_models, plain, oracle):
    """A cache of few pages (preemption by recompute, drafts dropped where no page is left) and the prefix
    cache's pages (registered only for accepted tokens) give the same tokens."""
    path, _ = tiny_models["llama"]
    llm = _llm(path, num_speculative_tokens=4, prompt_lookup_min=1, num_blocks=6)
    outs = llm.generate(LOOPY, PARAMS)
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain["batch"]]
    assert llm.engine.scheduler.num_preemptions > 0 and llm.engine.num_accepted_tokens > 0
    again = llm.generate(LOOPY, PARAMS)  # prefixes from the cache, pages published by speculative steps
    assert [o.token_ids for o in again] == [o.token_ids for o in plain["batch"]]
    assert llm.engine.block_manager.hits > 0


@pytest.mark.parametrize("model_type", ["gemma3_text", "mistral"])
def test_speculative_sliding_window_matches_transformers(tmp_path, model_type):
    """Windowed layers in a pool of their own, pages released behind the window as speculative steps advance
    sequences by several tokens: greedy tokens as transformers', every page back at the end."""
    hf = make_tiny_model(str(tmp_path), model_type, **(dict(sliding_window=6) if model_type == "mistral" else {}))
    engine = LLMEngine(str(tmp_path), dtype=torch.float32, num_blocks=64, num_window_blocks=14,
                       max_num_batched_tokens=24, num_speculative_tokens=4, prompt_lookup_min=1, decode_steps=1)
    prompts = [" ".join(f"w{i % 5}" for i in range(30)), " ".join(WORDS[60:91])]
    for i, prompt in enumerate(prompts):
        engine.add_request(str(i), prompt, SamplingParams(max_tokens=24))
    out = {}
    while engine.has_unfinished():
        out.update({o.request_id: o.token_ids for o in engine.step() if o.finished})
    assert engine.num_drafts > 0
    for i, prompt in enumerate(prompts):
        assert out[str(i)] == hf_greedy(hf, engine.tokenizer.encode(prompt), 24), f"{model_type} prompt {i}"
    pool = engine.block_manager.window_pool
    assert pool.num_free_blocks == pool.num_blocks


def test_speculative_streams(tiny_models, plain):
    path, _ = tiny_models["llama"]
    llm = _llm(path, num_speculative_tokens=5, prompt_lookup_min=1)
    engine = llm.engine
    engine.add_request("a", LOOPY[4], PARAMS[0])
    deltas, tokens = [], []
    while engine.has_unfinished():
        for out in engine.step():
            deltas.append(out.text_delta)
            tokens += out.new_token_ids
    assert tokens == plain["batch"][4].token_ids and "".join(deltas) == plain["batch"][4].text


def test_speculative_triton_kernels(tiny_models, monkeypatch):
    """With tritium's kernels (the interpreter on the CPU): a step of decodes and drafts runs as decode rows of
    a token each, the K/V of a draft's earlier tokens written by the same step before its later rows attend
    (graph replays on a GPU); the tokens equal the same engine's without speculation."""
    path, _ = tiny_models["llama"]
    kw = dict(attention_backend="triton", op_backend="triton", max_num_seqs=8, max_model_len=64)
    prompts, params = LOOPY[4:7], [SamplingParams(max_tokens=m) for m in (10, 7, 9)]
    want = LLM(path, dtype=torch.float32, **kw).generate(prompts, params)
    full = [o.prompt_token_ids + o.token_ids for o in want]
    rows = []

    def propose(self, tokens, k):
        ref = next(r for r in full if r[:len(tokens)] == tokens)
        return [t if i != 2 else t + 1 for i, t in enumerate(ref[len(tokens):len(tokens) + k])]

    monkeypatch.setattr(NgramIndex, "propose", propose)
    llm = LLM(path, dtype=torch.float32, num_speculative_tokens=3, **kw)
    run = llm.engine.runner._step
    monkeypatch.setattr(llm.engine.runner, "_step", lambda plan: rows.append(plan) or run(plan))
    outs = llm.generate(prompts, params)
    assert [o.token_ids for o in outs] == [o.token_ids for o in want]
    drafted = [p for p in rows if p.decode and len(p.ids) > 3]
    assert drafted and all(p.q_lens == [1] * len(p.ids) for p in drafted)
    assert 0 < llm.engine.num_accepted_tokens < llm.engine.num_draft_tokens


def _count_calls(monkeypatch, cls, name) -> dict:
    """Counts calls of ``cls.name`` in ``["calls"]`` (the method still runs)."""
    counts, method = {"calls": 0}, getattr(cls, name)

    def counted(self, *a, **kw):
        counts["calls"] += 1
        return method(self, *a, **kw)

    monkeypatch.setattr(cls, name, counted)
    return counts


def test_windows_run_until_a_draft_is_found(tiny_models, plain, monkeypatch):
    """Speculation on, text that never repeats: greedy windows (and their continuations) as without it; once a
    sequence finds a draft, the window in flight is not continued and the next steps verify drafts."""
    path, _ = tiny_models["llama"]
    counts = _count_calls(monkeypatch, ModelRunner, "continue_window")
    found = {"at": None}
    monkeypatch.setattr(NgramIndex, "propose", lambda self, tokens, k: [])
    llm = _llm(path, decode_steps=4, num_speculative_tokens=3)
    outs = llm.generate(LOOPY[:1], PARAMS[:1])
    assert outs[0].token_ids == plain["batch"][0].token_ids
    assert counts["calls"] > 0 and llm.engine.num_drafts == 0
    # drafts from the 20th token on: windows stop being continued there, drafts verified after
    first = len(plain["batch"][0].prompt_token_ids) + 20
    ref = plain["batch"][0].prompt_token_ids + plain["batch"][0].token_ids

    def late(self, tokens, k):
        if len(tokens) < first:
            return []
        found["at"] = found["at"] or len(tokens)
        return ref[len(tokens):len(tokens) + k]

    monkeypatch.setattr(NgramIndex, "propose", late)
    counts["calls"] = 0
    outs = llm.generate(LOOPY[:1], PARAMS[:1])
    assert outs[0].token_ids == plain["batch"][0].token_ids and llm.engine.num_accepted_tokens > 0
    assert counts["calls"] > 0 and found["at"] is not None


def test_drafts_back_off_where_they_are_rejected(tiny_models, monkeypatch):
    """Drafts that are always wrong: the same tokens as plain decoding, a few drafts then one every PROBE_AFTER
    tokens (with greedy windows between), where drafts that do not back off are verified every step; drafts
    that are always right keep coming whole."""
    path, _ = tiny_models["llama"]
    params = SamplingParams(max_tokens=160, ignore_eos=True)
    prompt = LOOPY[4]
    # on a GPU both engines batch-invariant: 160 tokens three times over, a near-tie of fp32 logits that a verify
    # step's row and a decode step's round apart flipped a token once (8 test processes sharing an H200, whose
    # projection kernels `linear_backend="auto"` timed differently); the interpreter's are equal anyway
    same_rows = {} if interpreting() else {"batch_invariant": True}
    plain = _llm(path, decode_steps=1, max_model_len=256, **same_rows)
    want = plain.generate([prompt], params)[0].token_ids
    ref = plain.engine.encode(prompt, "prompt") + want
    wrong = {"on": True}

    def propose(self, tokens, k):
        right = ref[len(tokens):len(tokens) + k]
        return [(t + 1) % 250 for t in right] if wrong["on"] else right

    monkeypatch.setattr(NgramIndex, "propose", propose)
    counts = _count_calls(monkeypatch, ModelRunner, "start_window")
    llm = _llm(path, decode_steps=4, num_speculative_tokens=4, max_model_len=256, **same_rows)
    engine = llm.engine
    assert llm.generate([prompt], params)[0].token_ids == want
    assert 2 <= engine.num_drafts <= 8 + len(want) // speculative.PROBE_AFTER
    assert engine.num_accepted_tokens == 0 and counts["calls"] > 0
    engine.scheduler.adaptive_drafts = False  # every draft verified whole, every step
    n0 = engine.num_drafts
    assert llm.generate([prompt], params)[0].token_ids == want
    assert engine.num_drafts - n0 >= len(want) - 2
    engine.scheduler.adaptive_drafts, wrong["on"] = True, False
    n0, d0, a0 = engine.num_drafts, engine.num_draft_tokens, engine.num_accepted_tokens
    assert llm.generate([prompt], params)[0].token_ids == want
    drafts, drafted = engine.num_drafts - n0, engine.num_draft_tokens - d0
    assert engine.num_accepted_tokens - a0 == drafted and drafts <= len(want) // 4 + 2
    assert drafted >= 3.5 * (drafts - 2)  # whole drafts of 4 (some cut by what is left to sample)


def test_rejection_sampling_keeps_the_distribution():
    """accept_sampled on fixed distributions over 5 tokens: the first token out is distributed as p0 and the
    second, given the first, as the next row (after an accepted draft token) or as p0 again (the first draw
    replaced it); drafts of a likely, an unlikely and an impossible token; 20,000 draws a case."""
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05], [0.1, 0.1, 0.1, 0.6, 0.1], [0.0, 0.3, 0.3, 0.2, 0.2]])
    n = 20000
    for draft in ([0, 3], [4, 1], [0, 0]):  # likely then likely; unlikely then unlikely; likely then unlikely
        probs = p.repeat(n, 1)
        out = accept_sampled(probs, [(3 * i, draft) for i in range(n)], [g] * n)
        first = torch.tensor([draft[0] if j > 0 else t for j, t in out])
        freq = torch.bincount(first, minlength=5).float() / n
        assert torch.allclose(freq, p[0], atol=4 * (0.25 / n) ** 0.5), (draft, freq)  # 4 standard deviations
        # the second token where the first was the draft's: row 1's distribution (accepted or redrawn)
        second = torch.tensor([draft[1] if j > 1 else t for j, t in out if j >= 1])
        freq2 = torch.bincount(second, minlength=5).float() / len(second)
        assert torch.allclose(freq2, p[1], atol=4 * (0.25 / len(second)) ** 0.5), (draft, freq2)
        assert all(0 <= j <= 2 for j, _ in out)
    # a draft token with all the mass is always accepted
    out = accept_sampled(torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), [(0, [1])], [g])
    assert out == [(1, 2)]


def test_sampled_requests_take_drafts(tiny_models, monkeypatch):
    """Sampled requests get drafts and verify them by rejection sampling: tokens of the right count, a seeded
    request draws the same tokens twice with the same engine, and its text is what its tokens decode to."""
    path, _ = tiny_models["llama"]
    monkeypatch.setattr(NgramIndex, "propose", lambda self, tokens, k: tokens[-k:])
    llm = _llm(path, num_speculative_tokens=3)
    params = [SamplingParams(max_tokens=20, temperature=0.8, top_p=0.9, seed=11, ignore_eos=True),
              SamplingParams(max_tokens=15, temperature=1.2, top_k=20, ignore_eos=True)]
    a = llm.generate(LOOPY[:2], params)
    assert llm.engine.num_drafts > 0 and [len(o.token_ids) for o in a] == [20, 15]
    b = llm.generate(LOOPY[:2], params)
    assert a[0].token_ids == b[0].token_ids
    assert a[0].text == continued_text(llm.engine.tokenizer, a[0].prompt_token_ids, a[0].token_ids)
    assert llm.engine.block_manager.num_free_blocks == llm.engine.block_manager.num_blocks


# -- predicted outputs (SamplingParams.prediction) ---------------------------------------------------------------
def test_prediction_drafts_walk_the_prediction():
    """While the answer equals the prediction's start, the prediction's next tokens; after a difference, what
    follows the answer's last n tokens in the prediction at the first place at or after the last draft's (a
    repeated n-gram resumes at its next copy), else the nearest before it; the sequence's own text otherwise."""
    pred = [10, 11, 12, 13, 20, 21, 12, 13, 30, 31]
    tokens = [1, 2, 3]  # the prompt
    index = NgramIndex(2, 3, pred, start=len(tokens))
    assert index.propose(tokens, 4) == [10, 11, 12, 13] and index.from_prediction and index.cursor == 0
    tokens += [10, 11]
    assert index.propose(tokens, 3) == [12, 13, 20] and index.cursor == 2
    tokens += [12, 13, 99, 20, 21]  # a difference at 99: "20 21" ends at 6
    assert index.propose(tokens, 2) == [12, 13] and index.cursor == 6
    tokens += [77, 12, 13]  # "12 13" ends at 4 and at 8: the copy after the cursor
    assert index.propose(tokens, 5) == [30, 31] and index.cursor == 8
    tokens += [30, 31]  # the prediction is used up: nothing follows its last n-gram
    assert index.propose(tokens, 2) == [] and not index.from_prediction
    tokens += [5, 6, 5]  # the sequence's own text: "6 5" has no match, "5" is too short; "5 6" then does
    tokens += [6]
    assert index.propose(tokens, 2) == [5, 6] and not index.from_prediction
    fresh = NgramIndex(2, 3, pred, start=3)
    assert fresh.propose([1, 2, 3, 5, 12, 13], 2) == [20, 21] and fresh.cursor == 4  # nearest after 0
    fresh.cursor = 9  # none after: the nearest before
    assert fresh.propose([1, 2, 3, 5, 12, 13], 2) == [30, 31] and fresh.cursor == 8
    assert NgramIndex(2, 3, [], start=3).propose([1, 2, 3], 2) == []


def test_prediction_drafts_are_what_follows_a_match():
    """Random sequences and predictions: a draft from the prediction follows an occurrence there of the
    sequence's last n tokens (or the answer so far is the prediction's start); one from the sequence's own
    text is the brute-force search's."""
    rng = random.Random(7)
    for trial in range(60):
        vocab = rng.choice([3, 5, 20])
        pred = [rng.randrange(vocab) for _ in range(rng.randint(1, 40))]
        tokens = [rng.randrange(vocab) for _ in range(rng.randint(1, 6))]
        start = len(tokens)
        index = NgramIndex(2, 4, pred, start)
        for _ in range(rng.randint(1, 50)):
            tokens.append(pred[len(tokens) - start] if rng.random() < 0.6 and len(tokens) - start < len(pred)
                          else rng.randrange(vocab))
            k = rng.randint(1, 5)
            draft = index.propose(tokens, k)
            if not index.from_prediction:
                assert draft == _brute(tokens, k, 2, 4), (trial, tokens, pred)
                continue
            c = index.cursor
            assert draft == pred[c:c + k] and draft
            answer = tokens[start:]
            assert answer == pred[:len(answer)] and c == len(answer) or any(
                c >= n and pred[c - n:c] == tokens[-n:] for n in (2, 3, 4)), (trial, tokens, pred, c)


def test_prediction_speeds_up_without_changing_the_answer(tiny_models, plain):
    """A request with a prediction answers as plain greedy decoding, whether the prediction is right, wrong in
    places, text or ids; a right one is taken in drafts (fewer steps), a wrong one's tokens are counted as
    rejected; without speculative decoding a prediction changes nothing; a bad one is refused by name."""
    path, _ = tiny_models["llama"]
    want = plain["batch"][:3]
    llm = _llm(path, num_speculative_tokens=4)
    engine = llm.engine
    right = [SamplingParams(max_tokens=p.max_tokens, prediction=list(w.token_ids)) for p, w in zip(PARAMS, want)]
    n0 = engine.num_drafts
    outs = llm.generate(LOOPY[:3], right)
    assert [o.token_ids for o in outs] == [w.token_ids for w in want]
    assert [o.text for o in outs] == [w.text for w in want]
    accepted = [o.accepted_prediction_tokens for o in outs]
    assert accepted[0] >= len(want[0].token_ids) // 2 and all(o.rejected_prediction_tokens <= 1 for o in outs)
    assert sum(accepted) <= engine.num_accepted_tokens and engine.num_drafts - n0 < len(want[0].token_ids) // 2
    wrong = [list(w.token_ids) for w in want]
    for ids in wrong:
        ids[len(ids) // 2::3] = [(t + 1) % 250 for t in ids[len(ids) // 2::3]]
    outs = llm.generate(LOOPY[:3], [SamplingParams(max_tokens=p.max_tokens, prediction=ids)
                                    for p, ids in zip(PARAMS, wrong)])
    assert [o.token_ids for o in outs] == [w.token_ids for w in want]
    assert outs[0].rejected_prediction_tokens > 0 and outs[0].accepted_prediction_tokens > 0
    text = llm.generate(LOOPY[:1], SamplingParams(max_tokens=PARAMS[0].max_tokens, prediction=want[0].text))[0]
    assert text.token_ids == want[0].token_ids and text.accepted_prediction_tokens > 0
    off = _llm(path).generate(LOOPY[:1], right[:1])[0]
    assert off.token_ids == want[0].token_ids and off.accepted_prediction_tokens == 0
    with pytest.raises(ValueError, match="prediction of request .* token id 99999 outside the vocabulary"):
        engine.add_request("bad", "w1", SamplingParams(prediction=[1, 99999]))
    with pytest.raises(ValueError, match="prediction must be a string or a list of token ids"):
        SamplingParams(prediction=[1, -2])
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_drafts_beside_prompts_without_logits(tiny_models, plain, monkeypatch):
    """Sequences verifying drafts in the steps that end embeddings' prompts and prompts scored alone (max_tokens
    0), one of each queued every step: neither has a logits row, and the drafts' rows stay theirs: the tokens
    equal plain greedy decoding's, the embeddings and the prompts' log-probabilities those computed alone."""
    path, _ = tiny_models["llama"]
    kw = dict(decode_steps=1, max_num_batched_tokens=24)
    llm = _llm(path, num_speculative_tokens=4, prompt_lookup_min=1, prompt_lookup_max=3, **kw)
    alone = _llm(path, **kw)
    short = [PROMPTS[0], PROMPTS[2], PROMPTS[3]]
    scored_params = SamplingParams(max_tokens=0, prompt_logprobs=1)
    want_embedding = alone.embed(short, normalize=False)
    want_scores = [o.prompt_logprobs for o in alone.generate(short, scored_params)]
    engine = llm.engine
    shared = []  # steps that verified drafts and ended a prompt without a logits row
    verify = LLMEngine._verify

    def spy(self, batch, logits):
        if any(seq.num_computed + n == seq.num_tokens and not seq.params.generates
               for seq, n in zip(batch.seqs, batch.num_new)):
            shared.append(self.num_steps)
        return verify(self, batch, logits)

    monkeypatch.setattr(LLMEngine, "_verify", spy)
    for i, (prompt, params) in enumerate(zip(LOOPY, PARAMS)):
        engine.add_request(f"g{i}", prompt, params)
    got, step = {}, 0
    while engine.has_unfinished():
        step += 1
        if step < 30:
            engine.add_request(f"e{step}", short[step % 3], SamplingParams(pooling="last"))
            engine.add_request(f"s{step}", short[step % 3], scored_params)
        got.update({o.request_id: o for o in engine.step() if o.finished})
    assert shared and engine.num_drafts > 0
    assert [got[f"g{i}"].token_ids for i in range(len(LOOPY))] == [o.token_ids for o in plain["batch"]]
    for step in range(1, 30):
        torch.testing.assert_close(got[f"e{step}"].embedding, want_embedding[step % 3], rtol=1e-5, atol=1e-5)
        scored = got[f"s{step}"]
        assert scored.token_ids == [] and scored.finish_reason == "length"
        assert [lp.logprob for lp in scored.prompt_logprobs[1:]] == pytest.approx(
            [lp.logprob for lp in want_scores[step % 3][1:]], abs=1e-5)
